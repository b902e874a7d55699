"""Input checks shared by every public function.

Each check raises ``ValueError`` naming the parameter and its allowed range, and runs on
plain Python/NumPy values, so bad input fails before anything is traced or compiled.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


def _is_number(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def real(name: str, value: object, *, low: float | None = None, high: float | None = None,
         low_open: bool = True, high_open: bool = True) -> float:
    """A finite real in the interval given by ``low``/``high`` (open ends by default)."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    try:
        v = float(value) if _is_number(value) else math.nan
    except OverflowError:  # an int beyond float64
        v = math.inf
    if math.isnan(v) or math.isinf(v):
        raise ValueError(
            f"{name} must be a finite real number{_range(low, high, low_open, high_open)}; got {value!r}"
        )
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be{_range(low, high, low_open, high_open)}; got {v!r}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be{_range(low, high, low_open, high_open)}; got {v!r}")
    return v


#: The implicit bound on |value| of :func:`integer`.
HUGE_INT = 10**50


def integer(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """An integer in [low, high] (closed). Floats that are whole numbers are accepted.

    Whatever ``high``, |value| <= HUGE_INT (1e50): far beyond any run (the memory and work
    checks reject what is merely large, saying why), and small enough that their float
    arithmetic cannot overflow."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok and _is_number(value) and math.isfinite(float(value)) and float(value).is_integer():
        value, ok = int(value), True
    bounds = _int_range(low, high)
    if not ok:
        raise ValueError(f"{name} must be an integer{bounds}; got {value!r}")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer{bounds}; got {v!r}")
    if abs(v) > HUGE_INT:
        raise ValueError(f"{name} must be an integer{bounds}, of magnitude at most 1e50; got {v!r}")
    return v


#: A conservative rate for run-time estimates (replica-steps per second on one CPU core); a GPU
#: is faster, which only makes the estimate an upper bound on the time.
STEPS_PER_SECOND = 2e7
YEAR_SECONDS = 3.15e7


def work(name: str, replica_steps: float, *, rate: float = STEPS_PER_SECOND) -> None:
    """Reject a run that could not finish within a year at ``rate`` replica-steps per second.

    ``name`` is the parameter to blame (e.g. "steps"); the message gives the estimate.
    """
    seconds = float(replica_steps) / rate
    if seconds > YEAR_SECONDS:
        raise ValueError(f"{name}: {float(replica_steps):.3g} replica-steps would take about "
                         f"{seconds / YEAR_SECONDS:.3g} years at {rate:.0e} replica-steps/s; at most "
                         f"{rate * YEAR_SECONDS:.3g} replica-steps (one year) are accepted")


def available_memory() -> int:
    """Bytes of memory available to this process (MemAvailable, else physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import os

        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 2**62


def memory(name: str, nbytes: float, what: str) -> None:
    """Reject, before anything is allocated, a run whose arrays would not fit in memory.

    ``what`` says what the bytes are (e.g. "levels x replicas x 8 bytes x 4 buffers").
    """
    have = available_memory()
    if nbytes > have:
        raise ValueError(f"{name}: the run needs about {nbytes / 2**30:.3g} GiB ({what}), more than the "
                         f"{have / 2**30:.3g} GiB of memory available; lower {name}")


def choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    """One of the strings ``allowed`` (anything else, arrays included, is rejected by name)."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return value  # type: ignore[return-value]


def _range(low, high, low_open, high_open) -> str:
    if low is None and high is None:
        return ""
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low:g}"
    return f" {'<' if high_open else '<='} {high:g}"


def _int_range(low, high) -> str:
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""


def array(name: str, x: Any) -> np.ndarray:
    """np.asarray(x), or ValueError naming ``name`` (ragged nests and the like)."""
    try:
        return np.asarray(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of integers; got {type(x).__name__}") from None


def int_array(name: str, x: Any) -> np.ndarray:
    """x as int64, or ValueError naming ``name`` unless it holds finite integers (|x| <= 2^62)."""
    a = array(name, x)
    # |u| <= 2^62 keeps the int64 cast exact (counts are at most n < 2^32 anyway)
    if a.dtype.kind not in "iuf" or np.any(~np.isfinite(a)) or np.any(a != np.floor(a)) \
            or np.any(np.abs(a) > 2.0**62):
        raise ValueError(f"{name} must hold finite integers")
    return a.astype(np.int64)
