"""The good loop: the supermarket count chain as a researcher writes it well in numba (issue 29).

The peer qlib's kernel is measured against (``benchmarks/bench_good_loop.py``); its C twin is
``benchmarks/good_loop.c``, which gives the same bits from the same states and tables.

The chain (docs/models.md, "the chain"): u_i = number of queues of length >= i, u_0 = n. A step
is an arrival with probability lam/(1 + lam), which joins a queue of length i, the largest i with
U < g(u_i), g(u) = (u/n)^d with replacement, C(u, d)/C(n, d) without; otherwise a departure from
the queue of uniform rank r in [0, n) (queues sorted longest first), whose length is
#{i >= 1: u_i > r}.

What makes it fast, and nothing more:

- xoshiro256** (Blackman & Vigna), per-replica state kept in four local words, seeded from
  SplitMix64 of (seed, replica);
- the event: word 1 < floor(p 2^64), one integer compare;
- the arrival level: a power table pw[u] = g(u) for u = 0..n, built once per point, and a walk up
  the levels while pw[u_{i+1}] > U (early exit; U = (w >> 11) 2^-53);
- the departure rank: Lemire's multiply-shift r = (w n) >> 64 from 32-bit halves (exact for
  n < 2^32), then the same walk on the counts;
- optionally the time sums of u_i and [u_i > 0] over levels 1..L every step (L = 8 by default);
- replicas over ``prange`` (threads set with ``numba.set_num_threads``), each replica running all
  its steps with its counts in cache.

A fixed level cap L: an arrival that would make a queue longer than L is dropped and counted in
``lost`` (the wrappers raise if any was); at the benchmark point (k = 2) level 8 is never reached.
Event resolution is 2^-64 for the event and 2^-53 for U, so the loop agrees with qlib in law, not
bit for bit (tests/test_good_loop.py checks it against the exact stationary law).
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba is a benchmark dependency (pyproject's "bench" extra)
    import numba
    from numba import njit, prange
except ImportError:  # pragma: no cover
    numba = None

LEVELS = 8  # levels carried and summed (1..LEVELS); the benchmark point reaches k + 1 = 3
MASK64 = 2**64 - 1


# --------------------------------------------------------------------------- set-up (NumPy / Python)

def power_table(n: int, d: int, replacement: bool = True) -> np.ndarray:
    """pw[u] = g(u) for u = 0..n: (u/n)^d, or C(u, d)/C(n, d) = prod_j (u - j)/(n - j) without replacement."""
    u = np.arange(n + 1, dtype=np.float64)
    if replacement:
        return (u / n) ** d
    if d > n:
        raise ValueError(f"d must be <= n without replacement; got d = {d}, n = {n}")
    pw = np.ones(n + 1)
    for j in range(d):
        pw *= np.maximum(u - j, 0.0) / (n - j)
    return pw


def arrival_threshold(lam: float) -> int:
    """floor(2^64 lam/(1 + lam)): an arrival iff word 1 is below it."""
    return min(int(lam / (1.0 + lam) * 2.0**64), MASK64)


def _splitmix(z: int) -> tuple[int, int]:
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    x = z
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return z, x ^ (x >> 31)


def xoshiro_states(seed: int, replicas: int) -> np.ndarray:
    """(replicas, 4) uint64 xoshiro256** states: four SplitMix64 outputs from (seed, replica)."""
    out = np.zeros((replicas, 4), np.uint64)
    for r in range(replicas):
        z = (seed * 0x9E3779B97F4A7C15 + r * 0xD1B54A32D192ED03 + 1) & MASK64
        for k in range(4):
            z, w = _splitmix(z)
            out[r, k] = w
    return out


def empty_counts(n: int, replicas: int, levels: int = LEVELS) -> np.ndarray:
    """(replicas, levels + 2) int64 counts of the empty system: u_0 = n, a zero sentinel at levels + 1."""
    u = np.zeros((replicas, levels + 2), np.int64)
    u[:, 0] = n
    return u


# --------------------------------------------------------------------------- the loop (numba)

if numba is not None:
    _U64 = numba.uint64

    @njit(inline="always")
    def _rotl(x, k):
        return (x << _U64(k)) | (x >> _U64(64 - k))

    @njit(inline="always")
    def _replica(st, u, pw, p64, n, steps, su, sb, sums):
        s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
        nn = _U64(n)
        L = u.size - 2
        lost = 0
        for _ in range(steps):
            # word 1: the event (xoshiro256** written out so the state stays in registers)
            w = _rotl(s1 * _U64(5), 7) * _U64(9)
            t = s1 << _U64(17)
            s2 ^= s0
            s3 ^= s1
            s1 ^= s2
            s0 ^= s3
            s2 ^= t
            s3 = _rotl(s3, 45)
            # word 2: U or the rank
            x = _rotl(s1 * _U64(5), 7) * _U64(9)
            t = s1 << _U64(17)
            s2 ^= s0
            s3 ^= s1
            s1 ^= s2
            s0 ^= s3
            s2 ^= t
            s3 = _rotl(s3, 45)
            if w < p64:
                U = numba.int64(x >> _U64(11)) * 1.1102230246251565e-16  # 2^-53
                i = 0
                while pw[u[i + 1]] > U:  # the sentinel u[L+1] = 0 has pw[0] = 0: the walk stops
                    i += 1
                if i < L:
                    u[i + 1] += 1
                else:
                    lost += 1
            else:
                r = numba.int64(((x >> _U64(32)) * nn + (((x & _U64(0xFFFFFFFF)) * nn) >> _U64(32)))
                                >> _U64(32))
                j = 0
                while u[j + 1] > r:  # u_0 = n > r; the sentinel stops the walk
                    j += 1
                if j > 0:
                    u[j] -= 1
            if sums:  # a literal in each driver below: the branch is compiled away
                for i in range(1, L + 1):
                    su[i] += u[i]
                    sb[i] += 1 if u[i] > 0 else 0
        st[0], st[1], st[2], st[3] = s0, s1, s2, s3
        return lost

    @njit(parallel=True, cache=True)
    def _par_sums(states, u, pw, p64, n, steps, su, sb, lost):
        for r in prange(states.shape[0]):
            lost[r] += _replica(states[r], u[r], pw, p64, n, steps, su[r], sb[r], True)

    @njit(parallel=True, cache=True)
    def _par_bare(states, u, pw, p64, n, steps, su, sb, lost):
        for r in prange(states.shape[0]):
            lost[r] += _replica(states[r], u[r], pw, p64, n, steps, su[r], sb[r], False)

    @njit(cache=True)
    def _ser_sums(states, u, pw, p64, n, steps, su, sb, lost):
        for r in range(states.shape[0]):
            lost[r] += _replica(states[r], u[r], pw, p64, n, steps, su[r], sb[r], True)

    @njit(cache=True)
    def _ser_bare(states, u, pw, p64, n, steps, su, sb, lost):
        for r in range(states.shape[0]):
            lost[r] += _replica(states[r], u[r], pw, p64, n, steps, su[r], sb[r], False)

    _DRIVERS = {(True, True): _par_sums, (False, True): _par_bare, (True, False): _ser_sums,
                (False, False): _ser_bare}

    def _driver(sums: bool, parallel: bool):
        return _DRIVERS[(bool(sums), bool(parallel))]


def advance(states: np.ndarray, u: np.ndarray, pw: np.ndarray, p64: int, n: int, steps: int, *,
            sums: bool = True, threads: int = 2) -> tuple[np.ndarray, np.ndarray] | None:
    """Advance every replica ``steps`` steps in place (``states`` (R, 4) uint64, ``u`` (R, L + 2) int64).

    Returns the time sums (sum_u, sum_busy), each (R, L + 2) int64 with levels 1..L filled, when
    ``sums``; else None. ``threads`` > 1 runs replicas over ``prange`` on that many threads.
    Raises RuntimeError if an arrival was dropped at the level cap.
    """
    if numba is None:
        raise RuntimeError("numba is not installed (pip install -e '.[bench]')")
    if not 1 <= n < 2**32:
        raise ValueError(f"n must be in [1, 2^32 - 1]; got {n}")
    R = states.shape[0]
    su = np.zeros_like(u)
    sb = np.zeros_like(u)
    lost = np.zeros(R, np.int64)
    parallel = threads > 1
    if parallel:
        numba.set_num_threads(threads)
    _driver(sums, parallel)(states, u, pw, np.uint64(p64), n, steps, su, sb, lost)
    if lost.any():
        raise RuntimeError(f"{int(lost.sum())} arrivals reached the level cap {u.shape[1] - 2}: raise levels")
    return (su, sb) if sums else None


def simulate(n: int, d: int, lam: float, *, steps: int, replicas: int, seed: int = 0, burn_in: int = 0,
             replacement: bool = True, sums: bool = True, threads: int = 2, levels: int = LEVELS) -> dict:
    """Run ``replicas`` chains from empty: ``burn_in`` steps without sums, then ``steps`` measured.

    Returns a dict with ``counts`` (R, levels + 2), ``states`` (R, 4) and, with ``sums``,
    ``tail_fraction`` and ``busy`` (R, levels + 1): time averages of u_i / n and [u_i > 0],
    i = 0..levels (level 0: 1 by definition).
    """
    pw, p64 = power_table(n, d, replacement), arrival_threshold(lam)
    states, u = xoshiro_states(seed, replicas), empty_counts(n, replicas, levels)
    if burn_in:
        advance(states, u, pw, p64, n, burn_in, sums=False, threads=threads)
    out = advance(states, u, pw, p64, n, steps, sums=sums, threads=threads)
    res = {"counts": u, "states": states}
    if out is not None:
        su, sb = out
        tail, busy = su[:, :-1] / (steps * n), sb[:, :-1] / steps
        tail[:, 0], busy[:, 0] = 1.0, 1.0
        res.update(tail_fraction=tail, busy=busy)
    return res


def levels_needed(d: int, lam: float) -> int:
    """k + 1 (k = ceil(log(1/(1 - lam))/log d)): the levels the chain visits at all often."""
    return int(math.ceil(math.log(1 / (1 - lam)) / math.log(d) - 1e-9)) + 1
