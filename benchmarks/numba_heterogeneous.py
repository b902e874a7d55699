"""A plain-loop numba reference for :func:`qlib.heterogeneous.simulate` (benchmark baseline and oracle).

It runs the same uniformised chain with the same per-replica SplitMix64 streams and the same
integer rules, written independently of the JAX kernels: the cut points come from the floats'
integer ratios (not :mod:`fractions`), the idle rank from a table of rank boundaries
ceil(i 2^64 / k) (not a split product), the random states from a NumPy SplitMix64, and the
loop is the textbook one (busy array, counters every step, longest idle by global step stamps).
For equal inputs it reproduces the JAX simulator's counters exactly: two implementations that
must agree bit for bit. Replicas run in parallel with ``numba.prange``.

Per step: w1 = next word, w2 = next word; w1 < C_0 is an arrival, else the server j with
C_j <= w1 < C_{j+1} (C_n = 2^64) has a potential completion; an arrival that finds k idle
servers takes the r-th of them with r = floor(w2 k / 2^64) ("random"), the one idle the longest
("longest_idle"), the fastest ("fastest", servers sorted fastest first) or the slowest
("slowest", servers sorted slowest first; ties in input order for both); else it waits.

Needs the optional ``bench`` extra (numba).
"""

from __future__ import annotations

import numba
import numpy as np

from qlib.heterogeneous import check_rates

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix64_np(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def replica_states(seed: int, replicas: int) -> np.ndarray:
    """SplitMix64 start states of replicas 0..replicas-1 of ``seed`` (as :mod:`qlib._rng`)."""
    with np.errstate(over="ignore"):
        s = _mix64_np(np.uint64(seed % 2**64) * _GOLDEN + np.uint64(0))
        r = np.arange(replicas, dtype=np.uint64)
        return _mix64_np(_mix64_np(s ^ _mix64_np(r + np.uint64(1))) + _GOLDEN)


def cut_points(lam: float, mus: np.ndarray) -> np.ndarray:
    """C_j = round(2^64 (lam + mus[0] + ... + mus[j-1]) / Lambda), halves up, j = 0..n-1 (uint64).

    Exact: every float is an integer ratio a / 2^b; all sums are taken over a common power of two."""
    parts = [float(lam).as_integer_ratio()] + [float(m).as_integer_ratio() for m in mus]
    den = max(d for _, d in parts)  # powers of two: every denominator divides the largest
    nums = [a * (den // d) for a, d in parts]
    total = sum(nums)
    out, cum = [], 0
    for a in nums[:-1]:
        cum += a
        out.append((2 * cum * 2**64 + total) // (2 * total))  # floor(2^64 cum / total + 1/2)
    return np.array(out, dtype=np.uint64)


def rank_boundaries(n: int) -> np.ndarray:
    """B[k, i] = ceil(i 2^64 / k) for 1 <= i < k <= n: rank r = #{i >= 1 : w2 >= B[k, i]}."""
    B = np.zeros((n + 1, max(n, 1)), dtype=np.uint64)
    for k in range(1, n + 1):
        for i in range(1, k):
            B[k, i] = -(-(i << 64) // k)
    return B


@numba.njit(inline="always")
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(parallel=True, cache=True)
def _kernel(states, cuts, bounds, policy, burn_in, steps, busy_acc, done_acc, q_acc, arr_acc, wait_acc):
    R = states.shape[0]
    n = cuts.shape[0]
    for r in numba.prange(R):
        s = states[r]
        busy = np.zeros(n, np.bool_)
        stamp = np.empty(n, np.int64)
        for j in range(n):
            stamp[j] = j - n  # server 0 idle the longest
        q = 0
        for i in range(burn_in + steps):
            s = s + _GOLDEN
            w1 = _mix64(s)
            s = s + _GOLDEN
            w2 = _mix64(s)
            rec = i >= burn_in
            if w1 < cuts[0]:
                k = 0
                for j in range(n):
                    if not busy[j]:
                        k += 1
                if k == 0:
                    q += 1
                    if rec:
                        wait_acc[r] += 1
                else:
                    if policy == 0:  # random: the want-th idle server
                        want = 0
                        for t in range(1, k):
                            if w2 >= bounds[k, t]:
                                want += 1
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
                    else:  # fastest / slowest: the first idle server (sorted by rate)
                        for j in range(n):
                            if not busy[j]:
                                busy[j] = True
                                break
                if rec:
                    arr_acc[r] += 1
            else:
                j = 0
                while j + 1 < n and w1 >= cuts[j + 1]:
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


def simulate_reference(lam: float, mus, *, steps: int, replicas: int = 1, seed: int = 0,
                       burn_in: int = 0, policy: str = "random") -> dict[str, np.ndarray]:
    """Same chain and streams as :func:`qlib.heterogeneous.simulate` from empty; returns the raw
    counters in input order: "busy" (R, n) steps busy, "done" (R, n) completions, "q" (R,) sum
    of the queue length after each step, "arrivals" (R,), "waits" (R,)."""
    lam_f, m = check_rates(lam, mus)
    if policy == "fastest":
        perm = np.argsort(-m, kind="stable")
    elif policy == "slowest":
        perm = np.argsort(m, kind="stable")
    else:
        perm = np.arange(m.size)
    cuts = cut_points(lam_f, m[perm])
    n = m.size
    busy_acc = np.zeros((replicas, n), np.int64)
    done_acc = np.zeros((replicas, n), np.int64)
    q_acc = np.zeros(replicas, np.int64)
    arr_acc = np.zeros(replicas, np.int64)
    wait_acc = np.zeros(replicas, np.int64)
    code = {"random": 0, "longest_idle": 1, "fastest": 2, "slowest": 2}[policy]
    _kernel(replica_states(seed, replicas), cuts, rank_boundaries(n), code, burn_in, steps,
            busy_acc, done_acc, q_acc, arr_acc, wait_acc)
    inv = np.argsort(perm)
    return {"busy": busy_acc[:, inv], "done": done_acc[:, inv], "q": q_acc,
            "arrivals": arr_acc, "waits": wait_acc}
