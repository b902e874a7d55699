"""Reference loops for the supermarket count chain, with exactly the semantics of qlib's chain kernel

Both loops use the same per-replica SplitMix64 streams (seeded from (seed, replica) by
:func:`qlib._rng.replica_states`), the same event/level rule on one 64-bit word per step and
the same bookkeeping every measured step (sum of u_i and of 1[u_i > 0] over time), so their
``tail_fraction`` and ``max_length_distribution`` equal qlib's to the last bit whenever the
float threshold n U^(1/d) rounds the same way (libm's exp vs XLA's may differ in the last ulp,
which changes a step about once in 1e15 draws).

- :func:`numba_chain`: what a researcher would write by hand: a compiled loop, replicas in
  parallel over threads (``numba.prange``), an early-exit scan for the level.
- :func:`python_chain`: the same loop in plain Python integers.
"""

from __future__ import annotations

import math

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
MASK64 = (1 << 64) - 1


def replica_seeds(seed: int, replicas: int) -> np.ndarray:
    """The engine's per-replica SplitMix64 states, as uint64."""
    import jax
    import jax.numpy as jnp

    from qlib import _rng

    with jax.enable_x64(True):
        return np.asarray(_rng.replica_states(seed, jnp.arange(replicas))).astype(np.uint64)


def lam_threshold(lam: float) -> int:
    return int(4294967296.0 * lam / (1.0 + lam))


def _summarise(n, steps, u, sum_u, sum_busy):
    tail = sum_u / (steps * n)
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
    import numba
    from numba import njit, prange

    u64 = np.uint64

    @njit(inline="always")
    def mix64(z):
        z = (z ^ (z >> u64(30))) * u64(M1)
        z = (z ^ (z >> u64(27))) * u64(M2)
        return z ^ (z >> u64(31))

    @njit(parallel=True, fastmath=False, cache=False)
    def chain(states, u0, n, d, lam_thr, steps, burn_in):
        R, width = u0.shape
        L = width - 1
        u_out = np.empty_like(u0)
        sum_u = np.zeros((R, width), np.int64)
        sum_busy = np.zeros((R, width), np.int64)
        overflow = np.zeros(R, np.bool_)
        nu = u64(n)
        for rep in prange(R):
            s = states[rep]
            uu = u0[rep].copy()
            su = np.zeros(width, np.int64)
            sb = np.zeros(width, np.int64)
            for t in range(burn_in + steps):
                s = s + u64(GOLDEN)
                w = mix64(s)
                hi = w >> u64(32)
                lo = w & u64(0xFFFFFFFF)
                if hi < lam_thr:  # arrival: join the largest i with U < (u_i/n)^d
                    U = (float(lo) + 0.5) * (1.0 / 4294967296.0)
                    thr = np.int64(math.floor(n * math.exp(math.log(U) / d)))
                    lvl = 0
                    while lvl < L and uu[lvl + 1] > thr:
                        lvl += 1
                    if lvl < L:
                        uu[lvl + 1] += 1
                    else:
                        overflow[rep] = True
                else:  # departure from the queue of rank floor(lo n / 2^32)
                    r = np.int64((lo * nu) >> u64(32))
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

def python_chain(n: int, d: int, lam: float, *, steps: int, replicas: int, seed: int = 0,
                 levels: int = 8, burn_in: int = 0) -> dict:
    """The same chain, one replica after another, in plain Python integers."""
    states = [int(s) for s in replica_seeds(seed, replicas)]
    lam_thr = lam_threshold(lam)
    W = levels + 1
    U_out, SU, SB = [], [], []
    for s in states:
        uu = [n] + [0] * levels
        su = [0] * W
        sb = [0] * W
        for t in range(burn_in + steps):
            s = (s + GOLDEN) & MASK64
            z = s
            z = ((z ^ (z >> 30)) * M1) & MASK64
            z = ((z ^ (z >> 27)) * M2) & MASK64
            z ^= z >> 31
            hi, lo = z >> 32, z & 0xFFFFFFFF
            if hi < lam_thr:
                thr = math.floor(n * math.exp(math.log((lo + 0.5) / 4294967296.0) / d))
                lvl = 0
                while lvl < levels and uu[lvl + 1] > thr:
                    lvl += 1
                if lvl == levels:
                    raise RuntimeError("python reference: a queue passed the top level; raise levels")
                uu[lvl + 1] += 1
            else:
                r = (lo * n) >> 32
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
