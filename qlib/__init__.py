"""qlib: fast, checked JAX simulation of two queueing models.

- :mod:`qlib.supermarket` — the supermarket model (join the shortest of d), Brightwell & Luczak.
- :mod:`qlib.heterogeneous` — M/M/n with heterogeneous servers and uninformed customers, Cabral.
- :mod:`qlib.stats` — replica means, batch means, confidence intervals.
- :mod:`qlib.claims` — the claims table; ``python -m qlib reproduce`` prints it.
- :mod:`qlib.runner` — runs the studies (the claims table's rows, the long tier), above them.

Importing qlib changes no global state. :func:`configure_xla` (call it first, before JAX runs
anything) asks XLA for one host device per core, a larger small-while-loop threshold and, on a
CPU with AVX-512, 512-bit vectors, which the CLI, the test-suite, the notebook runner and the
benchmarks do (see :mod:`qlib._xla`); the chain's first use applies them if JAX has not started.
"""

from qlib._xla import configure_xla

__version__ = "0.1.0"

__all__ = ["configure_xla", "__version__"]
