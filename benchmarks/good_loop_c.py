"""Build and call benchmarks/good_loop.c (the good loop in C, -O3 -march=native -fopenmp) via ctypes.

The C loop takes the same arrays as :func:`good_loop.advance` and gives the same bits (same
xoshiro256** states, power table and arrival threshold); ``compiler()`` is None when no C
compiler is found (the bench then leaves the C rows out and says so).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).resolve().parent / "good_loop.c"
#: -march: the machine's own ISA, or ``GOOD_LOOP_MARCH`` (bench_good_loop.py's AVX2 rows set haswell)
FLAGS = ["-O3", f"-march={os.environ.get('GOOD_LOOP_MARCH', 'native')}", "-fopenmp", "-shared", "-fPIC"]
_LIB = None


def compiler() -> str | None:
    """The C compiler to use: $CC, else cc, gcc or clang on the PATH; None if there is none."""
    for name in [os.environ.get("CC"), "cc", "gcc", "clang"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compiler_version() -> str | None:
    cc = compiler()
    if cc is None:
        return None
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0] if out else cc


def load() -> ctypes.CDLL:
    """Compile good_loop.c into a temporary directory (once per process) and load it."""
    global _LIB
    if _LIB is not None:
        return _LIB
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set CC, or install gcc)")
    tmp = Path(tempfile.mkdtemp(prefix="qlib_good_loop_"))
    so = tmp / "good_loop.so"
    subprocess.run([cc, *FLAGS, str(SOURCE), "-o", str(so)], check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(so))
    p = ctypes.c_void_p
    i64, u64 = ctypes.c_int64, ctypes.c_uint64
    lib.good_loop_advance.argtypes = [i64, i64, u64, p, u64, i64, p, p, p, p, p, ctypes.c_int, ctypes.c_int]
    lib.good_loop_advance.restype = ctypes.c_int
    _LIB = lib
    return lib


def advance(states: np.ndarray, u: np.ndarray, pw: np.ndarray, p64: int, n: int, steps: int, *,
            sums: bool = True, threads: int = 2) -> tuple[np.ndarray, np.ndarray] | None:
    """As :func:`good_loop.advance`, in C: advance in place; (sum_u, sum_busy) when ``sums``."""
    if not 1 <= n < 2**32:
        raise ValueError(f"n must be in [1, 2^32 - 1]; got {n}")
    lib = load()
    for name, a, dt in (("states", states, np.uint64), ("u", u, np.int64), ("pw", pw, np.float64)):
        if a.dtype != dt or not a.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous {np.dtype(dt).name} array")
    R, L = states.shape[0], u.shape[1] - 2
    su, sb, lost = np.zeros_like(u), np.zeros_like(u), np.zeros(R, np.int64)
    rc = lib.good_loop_advance(R, L, n, pw.ctypes.data, int(p64), steps, states.ctypes.data, u.ctypes.data,
                               su.ctypes.data, sb.ctypes.data, lost.ctypes.data, int(bool(sums)),
                               int(threads))
    if rc != 0:
        raise ValueError(f"levels must be in [1, 62]; got {L}")
    if lost.any():
        raise RuntimeError(f"{int(lost.sum())} arrivals reached the level cap {L}: raise levels")
    return (su, sb) if sums else None
