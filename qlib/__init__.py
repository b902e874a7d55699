"""qlib: fast, checked JAX simulation of two queueing models.

- :mod:`qlib.supermarket` — the supermarket model (join the shortest of d), Brightwell & Luczak.
- :mod:`qlib.heterogeneous` — M/M/n with heterogeneous servers and uninformed customers, Cabral.
- :mod:`qlib.stats` — replica means, batch means, confidence intervals.
- :mod:`qlib.claims` — the claims table; ``python -m qlib reproduce`` prints it.

On CPU, qlib asks XLA for one host device per core (unless ``XLA_FLAGS`` already sets a count,
or ``QLIB_HOST_DEVICES`` says otherwise), so replicas are sharded over all cores. This only
takes effect if qlib is imported before JAX first runs anything.
"""

import os as _os

__version__ = "0.1.0"


def _request_host_devices() -> None:
    flags = _os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return
    want = _os.environ.get("QLIB_HOST_DEVICES", "auto")
    try:
        count = len(_os.sched_getaffinity(0)) if want == "auto" else int(want)
    except (AttributeError, ValueError):
        count = _os.cpu_count() or 1
    if count > 1:
        _os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


_request_host_devices()
