"""The natural peer: the supermarket count chain as a researcher would write it by hand (numba).

Not a port of qlib's arithmetic (that is :mod:`numba_supermarket`, the bit-identical correctness
reference): its own fast generator and the obvious event maps, with the same time sums qlib keeps.

- generator: xoshiro256** per replica (Blackman & Vigna), seeded by SplitMix64 from (seed, r);
- event: an arrival iff a 53-bit uniform < lam/(1+lam);
- arrival: one 53-bit uniform U against a precomputed table g[u] = (u/n)^d, u = 0..n (float64),
  joining the largest i with U < g[u_i] (a scan from the bottom that stops at the first miss);
- departure: the rank r in [0, n) of one bounded draw (Lemire's multiply-shift on 64 bits), the
  queue length #{i >= 1: u_i > r} by the same scan, u_len -= 1 if it is >= 1;
- time sums every step: sum u_i and sum 1[u_i > 0] over i = 0..levels (what qlib's tail fraction
  and law of the maximum come from);
- a fixed level cap (k + 3), an arrival at the cap dropped (qlib grows its cap instead; at the
  benchmark point the cap is never reached).

Its event probabilities are those of the model to float64 resolution (2^-53), not qlib's 2^-64,
and its streams are its own, so it agrees with qlib statistically, not bit for bit
(:func:`check_agreement`).
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba is a benchmark dependency (pyproject's "bench" extra)
    import numba
    from numba import njit, prange
except ImportError:  # pragma: no cover
    numba = None


def _splitmix(z: int) -> tuple[int, int]:
    z = (z + 0x9E3779B97F4A7C15) & (2**64 - 1)
    x = z
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z, x ^ (x >> 31)


def xoshiro_states(seed: int, replicas: int) -> np.ndarray:
    """(replicas, 4) uint64 xoshiro256** states from SplitMix64 of (seed, replica)."""
    out = np.zeros((replicas, 4), np.uint64)
    for r in range(replicas):
        z = (seed * 0x9E3779B97F4A7C15 + r * 0xD1B54A32D192ED03) & (2**64 - 1)
        for k in range(4):
            z, w = _splitmix(z)
            out[r, k] = w
    return out


if numba is not None:
    @njit(inline="always")
    def _rotl(x, k):
        return (x << np.uint64(k)) | (x >> np.uint64(64 - k))

    @njit(inline="always")
    def _next(s):
        result = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
        t = s[1] << np.uint64(17)
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    @njit(inline="always")
    def _uniform(s):
        return float(_next(s) >> np.uint64(11)) * (1.0 / 9007199254740992.0)

    @njit(inline="always")
    def _bounded(s, n):
        # Lemire: the high 64 bits of a 64 x 64 product, from 32-bit halves
        x = _next(s)
        n64 = np.uint64(n)
        lo = (x & np.uint64(0xFFFFFFFF)) * n64
        hi = (x >> np.uint64(32)) * n64
        return np.int64((hi + (lo >> np.uint64(32))) >> np.uint64(32))

    @njit(cache=False)
    def _one_replica(s, u, g, p_arr, n, steps, sum_u, sum_busy):
        L = u.size - 1
        for _ in range(steps):
            if _uniform(s) < p_arr:
                U = _uniform(s)
                i = 0
                while i < L and U < g[u[i + 1]]:
                    i += 1
                if i < L:
                    u[i + 1] += 1
            else:
                r = _bounded(s, n)
                i = 0
                while i < L and u[i + 1] > r:
                    i += 1
                if i > 0:
                    u[i] -= 1
            for j in range(L + 1):
                sum_u[j] += u[j]
                sum_busy[j] += 1 if u[j] > 0 else 0

    @njit(parallel=True, cache=False)
    def _many(states, U, g, p_arr, n, steps, SU, SB):
        for r in prange(states.shape[0]):
            _one_replica(states[r], U[r], g, p_arr, n, steps, SU[r], SB[r])

    @njit(cache=False)
    def _serial(states, U, g, p_arr, n, steps, SU, SB):
        for r in range(states.shape[0]):
            _one_replica(states[r], U[r], g, p_arr, n, steps, SU[r], SB[r])


def natural_chain(n: int, d: int, lam: float, *, steps: int, replicas: int, seed: int, levels: int,
                  threads: int = 1) -> dict:
    """Run ``replicas`` chains from empty for ``steps`` steps; return tail_fraction (R, L+1),
    busy (R, L+1) (fraction of steps with u_i > 0) and the final counts."""
    if numba is None:
        raise RuntimeError("numba is not installed (pip install -e '.[bench]')")
    g = (np.arange(n + 1, dtype=np.float64) / n) ** d
    states = xoshiro_states(seed, replicas)
    u = np.zeros((replicas, levels + 1), np.int64)
    u[:, 0] = n
    su = np.zeros((replicas, levels + 1), np.int64)
    sb = np.zeros((replicas, levels + 1), np.int64)
    p = lam / (1.0 + lam)
    if threads > 1:
        numba.set_num_threads(threads)
        _many(states, u, g, p, n, steps, su, sb)
    else:
        _serial(states, u, g, p, n, steps, su, sb)
    return {"tail_fraction": su / (steps * n), "busy": sb / steps, "counts": u}


def check_agreement(n: int = 1000, d: int = 10, lam: float = 0.95, *, steps: int = 2_000_000, replicas: int = 16,
                    burn: int = 500_000) -> float:
    """The largest |z| of the natural loop's tail fractions against qlib's (both from empty, the
    first ``burn`` steps discarded by differencing two runs), levels 1..k+1: small when both
    simulate the same chain."""
    import qlib.supermarket as sm
    from qlib import stats

    k = int(sm.predicted_max_length(d, lam))
    a = natural_chain(n, d, lam, steps=steps + burn, replicas=replicas, seed=3, levels=k + 3)
    b = natural_chain(n, d, lam, steps=burn, replicas=replicas, seed=3, levels=k + 3)
    tail = (a["tail_fraction"] * (steps + burn) - b["tail_fraction"] * burn) / steps
    q = sm.simulate(n, d, lam, steps=steps, burn_in=burn, replicas=replicas, seed=3)
    x, y = stats.replica_mean(tail[:, 1: k + 2]), stats.replica_mean(q.tail_fraction[:, 1: k + 2])
    return float(np.max(np.abs(x.mean - y.mean) / np.sqrt(x.stderr**2 + y.stderr**2)))


def levels_for(d: int, lam: float) -> int:
    """k + 3 (k = ceil(log(1/(1-lam))/log d)), the natural loop's fixed cap."""
    return int(math.ceil(math.log(1 / (1 - lam)) / math.log(d) - 1e-9)) + 3
