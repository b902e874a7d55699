"""A plain-loop numba reference for :func:`qlib.heterogeneous.simulate` (benchmark baseline and oracle).

It runs the same uniformised chain with the same per-replica SplitMix64 streams and the same
integer rules for choosing the event and the idle server, so for equal inputs it reproduces the
JAX simulator's counters exactly: two independent implementations that must agree bit for bit.
Replicas run in parallel with ``numba.prange``.
"""

from __future__ import annotations

import numba
import numpy as np

from qlib.heterogeneous.simulate import _check, _thresholds

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(inline="always")
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(parallel=True, cache=True)
def _kernel(states, th, policy, burn_in, events, busy_acc, done_acc, q_acc, arr_acc, wait_acc):
    R = states.shape[0]
    n = th.shape[0] - 1
    for r in numba.prange(R):
        s = states[r]
        busy = np.zeros(n, np.bool_)
        stamp = np.empty(n, np.int64)
        for j in range(n):
            stamp[j] = -1 - j
        q = 0
        for i in range(burn_in + events):
            s = s + _GOLDEN
            bits = _mix64(s)
            hi = bits >> np.uint64(32)
            lo = bits & np.uint64(0xFFFFFFFF)
            rec = i >= burn_in
            if hi < th[0]:
                k = 0
                for j in range(n):
                    if not busy[j]:
                        k += 1
                if k == 0:
                    q += 1
                    if rec:
                        wait_acc[r] += 1
                else:
                    if policy == 0:  # random: the r-th idle server
                        want = np.int64((lo * np.uint64(k)) >> np.uint64(32))
                        c = -1
                        for j in range(n):
                            if not busy[j]:
                                c += 1
                                if c == want:
                                    busy[j] = True
                                    break
                    elif policy == 1:  # longest idle
                        best = -1
                        for j in range(n):
                            if not busy[j] and (best < 0 or stamp[j] < stamp[best]):
                                best = j
                        busy[best] = True
                    else:  # fastest (servers sorted fastest first)
                        for j in range(n):
                            if not busy[j]:
                                busy[j] = True
                                break
                if rec:
                    arr_acc[r] += 1
            else:
                j = 0
                while hi >= th[j + 1]:
                    j += 1
                if busy[j]:
                    if rec:
                        done_acc[r, j] += 1
                    if q > 0:
                        q -= 1
                    else:
                        busy[j] = False
                        stamp[j] = i
            if rec:
                for j in range(n):
                    if busy[j]:
                        busy_acc[r, j] += 1
                q_acc[r] += q


def simulate_reference(lam: float, mus, *, events: int, replicas: int = 1, seed: int = 0,
                       burn_in: int = 0, policy: str = "random") -> dict[str, np.ndarray]:
    """Same chain and streams as :func:`simulate`; returns the raw counters (input order)."""
    from qlib import _rng
    import jax
    import jax.numpy as jnp

    lam_f, m, events, replicas, seed, burn_in, policy, _ = _check(
        lam, mus, events, replicas, seed, burn_in, policy, 1)
    perm = np.argsort(-m, kind="stable") if policy == "fastest" else np.arange(m.size)
    th = _thresholds(lam_f, m[perm])
    with jax.enable_x64(True):
        states = np.asarray(_rng.replica_states(seed, jnp.arange(replicas, dtype=jnp.uint64)))
    n = m.size
    busy_acc = np.zeros((replicas, n), np.int64)
    done_acc = np.zeros((replicas, n), np.int64)
    q_acc = np.zeros(replicas, np.int64)
    arr_acc = np.zeros(replicas, np.int64)
    wait_acc = np.zeros(replicas, np.int64)
    code = {"random": 0, "longest_idle": 1, "fastest": 2}[policy]
    _kernel(states.astype(np.uint64), th.astype(np.uint64), code, burn_in, events,
            busy_acc, done_acc, q_acc, arr_acc, wait_acc)
    inv = np.argsort(perm)
    return {"busy": busy_acc[:, inv], "done": done_acc[:, inv], "q": q_acc,
            "arrivals": arr_acc, "waits": wait_acc}
