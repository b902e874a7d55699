"""qlib: fast, checked JAX simulation of two queueing models.

- :mod:`qlib.supermarket` — the supermarket model (join the shortest of d), Brightwell & Luczak.
- :mod:`qlib.heterogeneous` — M/M/n with heterogeneous servers and uninformed customers, Cabral.
- :mod:`qlib.stats` — replica means, batch means, confidence intervals.
- :mod:`qlib.claims` — the claims table; ``python -m qlib reproduce`` prints it.

On CPU, qlib asks XLA for one host device per core (unless ``XLA_FLAGS`` already sets a count,
or ``QLIB_HOST_DEVICES`` says otherwise), so replicas are sharded over all cores, and raises
XLA:CPU's small-while-loop threshold to 64 kB (unless ``XLA_FLAGS`` sets it): a loop whose
body touches fewer bytes is compiled into one kernel instead of dispatching each fused op,
which makes the chain's sequential loop 1.5-2x faster at few replicas (benchmarks/README.md).
Both only take effect if qlib is imported before JAX first runs anything.
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


def _request_small_loops(threshold: int = 65536) -> None:
    flags = _os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_small_while_loop_byte_threshold" in flags:
        return
    opt = f"xla_cpu_small_while_loop_byte_threshold={threshold}"
    if "--xla_backend_extra_options=" in flags:  # one comma-separated list of key=value
        flags = flags.replace("--xla_backend_extra_options=", f"--xla_backend_extra_options={opt},", 1)
    else:
        flags = f"{flags} --xla_backend_extra_options={opt}".strip()
    _os.environ["XLA_FLAGS"] = flags


_request_host_devices()
_request_small_loops()
