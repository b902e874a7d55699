"""Reference loops for the supermarket count chain, with exactly the semantics of qlib's chain kernel.

Both loops use the same per-replica SplitMix64 streams (seeded from (seed, replica) by
:func:`qlib._rng.replica_states`), the same two 64-bit words per step and the same event and
level rules as :mod:`qlib.supermarket.chain` (with replacement):

- arrival iff word 1 < A = round(2^64 lam/(1+lam)) (:func:`qlib.supermarket.chain.arrival_threshold`);
- arrival: join the largest i with u_i > x, x = floor(n U^(1/d)) in [0, n-1], U =
  (word 2 + 1/2)/2^64, from log U (frexp and the atanh series; the series in 1 - U near 1)
  and one exp, operation by operation as :func:`qlib.supermarket.chain.uniform_log` and
  :func:`qlib.supermarket.chain.join_threshold`;
- departure: the queue of rank floor(word 2 * n / 2^64) (exact 64 x 32-bit high product);

and the same bookkeeping every measured step (sum of u_i and of 1[u_i > 0] over time), so their
``tail_fraction``, ``counts`` and ``max_length_distribution`` equal qlib's to the last bit
whenever libm's exp rounds like XLA's and both compile the basic operations alike (an ulp
apart moves x only when n U^(1/d) lies within about 1e-16 n of an integer: about once in 10^13
arrivals at n = 1000).

- :func:`numba_chain`: what a researcher would write by hand: a compiled loop, replicas in
  parallel over threads (``numba.prange``), an early-exit scan for the level.
- :func:`python_chain`: the same loop in plain Python integers and floats.

The streams changed with issue 13 (two words per step; they were one word, 32 bits each for
event, uniform and rank), so these loops changed with them.
"""

from __future__ import annotations

import math

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
LN2 = math.log(2.0)
SQRT_HALF = math.sqrt(0.5)
NEAR_ONE = 2**64 - 2**44
ATANH = tuple(1.0 / (2 * k + 1) for k in range(11))


def _log_uniform_py(w: int) -> float:
    """qlib.supermarket.chain.uniform_log for one word, in plain Python floats."""
    if w >= NEAR_ONE:
        x = ((MASK64 - w) + 0.5) * 2.0**-64
        return -x * (1.0 + x * (0.5 + x * (1.0 / 3.0)))
    m, e = math.frexp((w + 0.5) * 2.0**-64)
    e = float(e)
    if m < SQRT_HALF:
        m, e = 2.0 * m, e - 1.0
    t = (m - 1.0) / (m + 1.0)
    z = t * t
    q = ATANH[-1]
    for c in ATANH[-2::-1]:
        q = c + z * q
    return e * LN2 + (2.0 * t) * q


def _join_threshold_py(lu: float, nf: float, d: float) -> int:
    z = lu / d
    ez = math.exp(z)
    if z < -LN2:
        x = math.floor(nf * ez)
    else:
        em1 = z * (1.0 + 0.5 * z) if z > -(2.0**-26) else ez - 1.0
        x = nf + math.floor(nf * em1)
    return int(min(max(x, 0.0), nf - 1.0))


def replica_seeds(seed: int, replicas: int) -> np.ndarray:
    """The kernel's per-replica SplitMix64 states, as uint64."""
    from qlib import _rng

    return _rng.replica_states_np(seed, np.arange(replicas))


def lam_threshold(lam: float) -> int:
    """The kernel's 64-bit arrival threshold A for a float lam."""
    from qlib.supermarket.chain import arrival_threshold

    return arrival_threshold(lam)


def _summarise(n, steps, u, sum_u, sum_busy):
    tail = sum_u / float(steps * n)
    busy = sum_busy / steps
    busy[:, 0] = 1.0
    return {"tail_fraction": tail, "counts": u,
            "max_length_distribution": busy - np.concatenate([busy[:, 1:], np.zeros((busy.shape[0], 1))], 1)}


# --------------------------------------------------------------------------- numba

_KERNEL = None


def _kernel():
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    from numba import njit, prange

    u64 = np.uint64

    @njit(inline="always")
    def mix64(z):
        z = (z ^ (z >> u64(30))) * u64(M1)
        z = (z ^ (z >> u64(27))) * u64(M2)
        return z ^ (z >> u64(31))

    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 = ATANH

    @njit(inline="always")
    def log_uniform(w):
        if w >= u64(NEAR_ONE):
            x = (float(~w) + 0.5) * 2.0**-64
            return -x * (1.0 + x * (0.5 + x * (1.0 / 3.0)))
        m, e = math.frexp((float(w) + 0.5) * 2.0**-64)
        ef = float(e)
        if m < SQRT_HALF:
            m = 2.0 * m
            ef = ef - 1.0
        t = (m - 1.0) / (m + 1.0)
        z = t * t
        q = c9 + z * c10
        q = c8 + z * q
        q = c7 + z * q
        q = c6 + z * q
        q = c5 + z * q
        q = c4 + z * q
        q = c3 + z * q
        q = c2 + z * q
        q = c1 + z * q
        q = c0 + z * q
        return ef * LN2 + (2.0 * t) * q

    @njit(inline="always")
    def join_threshold(lu, nf, d):
        z = lu / d
        ez = math.exp(z)
        if z < -LN2:
            x = math.floor(nf * ez)
        else:
            if z > -(2.0**-26):
                em1 = z * (1.0 + 0.5 * z)
            else:
                em1 = ez - 1.0
            x = nf + math.floor(nf * em1)
        return np.int64(min(max(x, 0.0), nf - 1.0))

    @njit(parallel=True, fastmath=False, cache=False)
    def chain(states, u0, n, d, lam_thr, steps, burn_in):
        R, width = u0.shape
        L = width - 1
        u_out = np.empty_like(u0)
        sum_u = np.zeros((R, width), np.int64)
        sum_busy = np.zeros((R, width), np.int64)
        overflow = np.zeros(R, np.bool_)
        nu = u64(n)
        nf = float(n)
        for rep in prange(R):
            s = states[rep]
            uu = u0[rep].copy()
            su = np.zeros(width, np.int64)
            sb = np.zeros(width, np.int64)
            for t in range(burn_in + steps):
                s = s + u64(GOLDEN)
                w1 = mix64(s)
                s = s + u64(GOLDEN)
                w2 = mix64(s)
                if w1 < lam_thr:  # arrival: join the largest i with u_i > floor(n U^(1/d))
                    thr = join_threshold(log_uniform(w2), nf, d)
                    lvl = 0
                    while lvl < L and uu[lvl + 1] > thr:
                        lvl += 1
                    if lvl < L:
                        uu[lvl + 1] += 1
                    else:
                        overflow[rep] = True
                else:  # departure from the queue of rank floor(w2 n / 2^64)
                    r = np.int64((((w2 >> u64(32)) * nu) + (((w2 & u64(MASK32)) * nu) >> u64(32))) >> u64(32))
                    lvl = 0
                    while lvl < L and uu[lvl + 1] > r:
                        lvl += 1
                    if lvl > 0:
                        uu[lvl] -= 1
                if t >= burn_in:
                    for j in range(width):
                        su[j] += uu[j]
                        sb[j] += uu[j] > 0
            u_out[rep] = uu
            sum_u[rep] = su
            sum_busy[rep] = sb
        return u_out, sum_u, sum_busy, overflow

    _KERNEL = chain
    return chain


def numba_chain(n: int, d: int, lam: float, *, steps: int, replicas: int, seed: int = 0,
                levels: int = 8, burn_in: int = 0, threads: int | None = None) -> dict:
    """The count chain from all-empty, in numba, replicas spread over ``threads`` threads."""
    import numba

    if threads is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    u0 = np.zeros((replicas, levels + 1), np.int64)
    u0[:, 0] = n
    u, su, sb, ovf = _kernel()(replica_seeds(seed, replicas), u0, n, float(d),
                               np.uint64(lam_threshold(lam)), steps, burn_in)
    if ovf.any():
        raise RuntimeError("numba reference: a queue passed the top level; raise levels")
    return _summarise(n, steps, u, su.astype(float), sb.astype(float))


# --------------------------------------------------------------------------- plain Python

def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * M1) & MASK64
    z = ((z ^ (z >> 27)) * M2) & MASK64
    return z ^ (z >> 31)


def python_chain(n: int, d: int, lam: float, *, steps: int, replicas: int, seed: int = 0,
                 levels: int = 8, burn_in: int = 0) -> dict:
    """The same chain, one replica after another, in plain Python integers and floats."""
    states = [int(s) for s in replica_seeds(seed, replicas)]
    lam_thr = lam_threshold(lam)
    W = levels + 1
    nf = float(n)
    U_out, SU, SB = [], [], []
    for s in states:
        uu = [n] + [0] * levels
        su = [0] * W
        sb = [0] * W
        for t in range(burn_in + steps):
            s = (s + GOLDEN) & MASK64
            w1 = _mix(s)
            s = (s + GOLDEN) & MASK64
            w2 = _mix(s)
            if w1 < lam_thr:
                thr = _join_threshold_py(_log_uniform_py(w2), nf, d)
                lvl = 0
                while lvl < levels and uu[lvl + 1] > thr:
                    lvl += 1
                if lvl == levels:
                    raise RuntimeError("python reference: a queue passed the top level; raise levels")
                uu[lvl + 1] += 1
            else:
                r = (w2 * n) >> 64
                lvl = 0
                while lvl < levels and uu[lvl + 1] > r:
                    lvl += 1
                if lvl:
                    uu[lvl] -= 1
            if t >= burn_in:
                for j in range(W):
                    su[j] += uu[j]
                    sb[j] += uu[j] > 0
        U_out.append(uu)
        SU.append(su)
        SB.append(sb)
    return _summarise(n, steps, np.array(U_out), np.array(SU, float), np.array(SB, float))
