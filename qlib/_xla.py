"""XLA flags qlib runs best with, set only on request (:func:`configure_xla`): never on import.

- one host device per core (``--xla_force_host_platform_device_count``), so the replicas of a
  run are sharded over every core;
- XLA:CPU's small-while-loop threshold raised to 64 kB
  (``xla_cpu_small_while_loop_byte_threshold``): a loop whose body touches fewer bytes is
  compiled into one kernel instead of dispatching each fused op, which makes the chain's
  sequential loop faster at few replicas (measured in benchmarks/README.md, "XLA flags");
- on a CPU with AVX-512, 512-bit vectors (``--xla_cpu_prefer_vector_width=512``; XLA's default
  is 256): the event map's float64 arithmetic (log U, U^(1/d)) and the step loop's compares and
  sums run twice as wide, 1.5-1.8x the chain's rate (benchmarks/README.md, "The good loop").
  Every operation is still an IEEE float64 or integer operation on each element, so the numbers
  do not change: the stored results verify bit for bit under either width (tested). Not when
  ``XLA_FLAGS`` caps the instruction set below AVX-512 (``--xla_cpu_max_isa=AVX2``, as
  benchmarks/bench_good_loop.py does to measure a CPU without it): XLA then has no 512-bit vectors.

Both are read by XLA once, when JAX starts its CPU backend, so :func:`configure_xla` must run
before anything is computed. Flags already in ``XLA_FLAGS`` are kept; ``QLIB_HOST_DEVICES=N``
overrides the device count. This module does not import JAX.

A script that never calls it still gets them where that is safe: the chain's driver calls
:func:`auto_configure` when it is first used, which applies them only if JAX has not started a
backend yet (nothing has been computed, so no array or device is affected), silently, once.
``QLIB_AUTO_XLA=0`` turns that off. Importing qlib changes nothing.
"""

from __future__ import annotations

import os
import sys
import warnings

SMALL_LOOP_BYTES = 65536


def _device_count() -> int:
    want = os.environ.get("QLIB_HOST_DEVICES", "auto")
    try:
        return len(os.sched_getaffinity(0)) if want == "auto" else int(want)
    except (AttributeError, ValueError):
        return os.cpu_count() or 1


def isa_capped(current: str | None = None) -> bool:
    """True if ``XLA_FLAGS`` (or ``current``) caps XLA:CPU's instruction set below AVX-512
    (``--xla_cpu_max_isa=AVX2`` etc.): XLA then emits no 512-bit vectors whatever the CPU has."""
    import re

    f = os.environ.get("XLA_FLAGS", "") if current is None else current
    m = re.search(r"--xla_cpu_max_isa=(\S+)", f)
    return bool(m) and not m.group(1).upper().startswith("AVX512")


def wide_vectors_supported() -> bool:
    """True on an x86 CPU whose kernel reports AVX-512 Foundation (``avx512f`` in /proc/cpuinfo),
    unless ``XLA_FLAGS`` caps the instruction set below it (:func:`isa_capped`)."""
    if isa_capped():
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


def flags(current: str | None = None, *, host_devices: bool = True, small_loops: bool = True,
          wide_vectors: bool | None = None) -> str:
    """``current`` (default: ``$XLA_FLAGS``) with qlib's flags added where it does not set them.

    ``wide_vectors`` (default: :func:`wide_vectors_supported`) adds 512-bit vectors."""
    f = os.environ.get("XLA_FLAGS", "") if current is None else current
    if wide_vectors is None:
        wide_vectors = wide_vectors_supported()
    if wide_vectors and "xla_cpu_prefer_vector_width" not in f:
        f = f"{f} --xla_cpu_prefer_vector_width=512".strip()
    if host_devices and "xla_force_host_platform_device_count" not in f:
        count = _device_count()
        if count > 1:
            f = f"{f} --xla_force_host_platform_device_count={count}".strip()
    if small_loops and "xla_cpu_small_while_loop_byte_threshold" not in f:
        opt = f"xla_cpu_small_while_loop_byte_threshold={SMALL_LOOP_BYTES}"
        if "--xla_backend_extra_options=" in f:  # one comma-separated list of key=value
            f = f.replace("--xla_backend_extra_options=", f"--xla_backend_extra_options={opt},", 1)
        else:
            f = f"{f} --xla_backend_extra_options={opt}".strip()
    return f


def small_loop_bytes() -> int:
    """XLA:CPU's byte threshold below which a while loop compiles to one kernel (1024 by default),
    as ``XLA_FLAGS`` sets it."""
    import re

    m = re.search(r"xla_cpu_small_while_loop_byte_threshold=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(m.group(1)) if m else 1024


def _jax_started() -> bool:
    """True if JAX has already created a backend (then new XLA flags are ignored)."""
    xb = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(xb, "_backends", None))


def configure_xla(*, host_devices: bool = True, small_loops: bool = True,
                  wide_vectors: bool | None = None) -> str:
    """Add qlib's XLA flags to ``XLA_FLAGS`` (see the module docstring) and return the result.

    Call it first, before JAX computes anything: the CLI, the test-suite, the notebook runner
    and the benchmarks do. Without it qlib gives the same numbers, on one host device, with
    XLA's default loop threshold. Warns (and changes nothing) if JAX has already started.
    """
    new = flags(host_devices=host_devices, small_loops=small_loops, wide_vectors=wide_vectors)
    if new == os.environ.get("XLA_FLAGS", ""):
        return new
    if _jax_started():
        warnings.warn("qlib.configure_xla(): JAX has already started, so the XLA flags cannot change now; "
                      "call it before the first computation", RuntimeWarning, stacklevel=2)
        return os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = new
    return new


def auto_configure() -> bool:
    """Apply :func:`configure_xla` if JAX has not started yet and ``QLIB_AUTO_XLA`` is not "0"
    (qlib's first computation, in a script that did not call it): True if the flags were set."""
    if os.environ.get("QLIB_AUTO_XLA", "1") == "0" or _jax_started():
        return False
    before = os.environ.get("XLA_FLAGS", "")
    return configure_xla() != before
