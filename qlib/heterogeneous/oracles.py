"""Test oracles of the heterogeneous M/M/n: brute-force product form and generator solves.

Independent of the elementary symmetric polynomials of :mod:`qlib.heterogeneous.exact`: the
product form summed over all 2^n busy sets, and the stationary law of the CTMC generator for
every routing policy, including the wrong-on-purpose "fastest" and "slowest".
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse
from scipy.sparse import linalg as splinalg

from qlib import _validate
from qlib.heterogeneous.exact import check_rates


def stationary_distribution(lam: float, mus: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force product form over all 2^n busy sets (n <= 12).

    The all-busy set carries the whole queue (every q). A test oracle, independent of the ESPs.

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        (sets, probs): sets (2^n, n) bool, probs (2^n,).

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range or n > 12.
    """
    lam_f, m = check_rates(lam, mus)
    n = m.size
    if n > 12:
        raise ValueError(f"mus must have at most 12 servers for stationary_distribution; got {n}")
    rho = lam_f / m.sum()
    sets = all_sets(n)
    x = lam_f / m
    k = sets.sum(axis=1)
    w = np.array([math.factorial(n - kk) / math.factorial(n) for kk in k])
    w *= np.prod(np.where(sets, x[None, :], 1.0), axis=1)
    w[k == n] /= 1.0 - rho
    return sets, w / w.sum()


def _first_idle_order(m: np.ndarray, policy: str) -> np.ndarray:
    """Servers in the order a "fastest" / "slowest" arrival tries them (ties: lowest index first)."""
    return np.argsort(-m if policy == "fastest" else m, kind="stable")


def set_generator(lam_f: float, m: np.ndarray, policy: str, queue_cap: int) -> sparse.csr_matrix:
    """The CTMC generator on (busy set, q), q <= queue_cap, (N, N) with N = 2^n + queue_cap.

    Index s < 2^n: busy set with bitmask s and no queue; 2^n + q - 1: all busy, q >= 1 waiting.
    The queue is truncated by dropping arrivals at q = queue_cap (a reflecting boundary)."""
    n = m.size
    full = (1 << n) - 1
    nS = 1 << n
    N = nS + queue_cap
    order = _first_idle_order(m, policy) if policy in ("fastest", "slowest") else None
    rows, cols, vals = [], [], []

    def add(a, b, r):
        rows.append(a)
        cols.append(b)
        vals.append(r)

    for s in range(nS):
        idle = [j for j in range(n) if not (s >> j) & 1]
        if idle:
            if policy == "random":
                for j in idle:
                    add(s, s | (1 << j), lam_f / len(idle))
            else:
                j = next(j for j in order if not (s >> j) & 1)
                add(s, s | (1 << j), lam_f)
        elif queue_cap > 0:
            add(s, nS, lam_f)
        for j in range(n):
            if (s >> j) & 1:
                add(s, s & ~(1 << j), m[j])
    for q in range(1, queue_cap + 1):
        i = nS + q - 1
        if q < queue_cap:
            add(i, i + 1, lam_f)
        add(i, full if q == 1 else i - 1, m.sum())
    Qm = sparse.coo_matrix((vals, (rows, cols)), shape=(N, N)).tocsr()
    return Qm - sparse.diags(np.asarray(Qm.sum(axis=1)).ravel())


def _aggregated_solve(lam_f: float, m: np.ndarray, policy: str, rho: float):
    """:func:`generator_solve` without truncation: the all-busy block aggregated (see there)."""
    n = m.size
    nS, full = 1 << n, (1 << n) - 1
    Qm = set_generator(lam_f, m, policy, 0).tolil()
    for j in range(n):  # leave the all-busy block only when its queue is empty: P = 1 - rho
        Qm[full, full & ~(1 << j)] = m[j] * (1.0 - rho)
    Qm[full, full] = 0.0
    Qm = Qm.tocsr()
    Qm = Qm - sparse.diags(np.asarray(Qm.sum(axis=1)).ravel())
    A = Qm.T.tolil()
    A[0, :] = 1.0
    b = np.zeros(nS)
    b[0] = 1.0
    ps = splinalg.spsolve(A.tocsc(), b)
    cap = int(min(20000, max(10, math.ceil(math.log(1e-16) / math.log(rho)))))
    q = np.arange(1, cap + 1)
    qd = np.concatenate([[1.0 - ps[full] * rho], ps[full] * (1.0 - rho) * rho**q])
    return all_sets(n), ps, qd


def generator_solve(lam: float, mus: ArrayLike, *, queue_cap: int | None = None,
                    policy: str = "random") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stationary law from the CTMC generator itself (no product form).

    States are (busy set, q) with q > 0 only when all n are busy. ``policy``: "random",
    "fastest" (informed customers join the fastest idle server) or "slowest" (the slowest idle
    one); ties in rate go to the lowest input index. Returns (sets (2^n, n) bool, P(busy set)
    summed over q, P(q = 0..cap | any set)). n <= 12.

    ``queue_cap=None`` (default): exact, with no truncation. While all servers are busy the
    queue is a birth-death chain (lam up, sum mu down) entered and left only at q = 0, so
    pi(all busy, q) = pi(all busy, 0) rho^q for every routing rule; the chain on busy sets with
    the all-busy block aggregated (its departures at rate mu_j (1 - rho), the chance the queue is
    empty) has the same law. The returned queue law is cut at the cap where rho^q < 1e-16.
    ``queue_cap=K``: the generator truncated at K waiting customers (arrivals dropped there),
    solved directly; its error is about rho^K (kept as an independent check).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.
        queue_cap: None (exact) or K, the truncation of the queue.
        policy: "random", "fastest" or "slowest".

    Returns:
        (sets (2^n, n) bool, P(busy set) summed over q, P(q = 0..cap | any set)).

    Raises:
        ValueError: naming the parameter out of its range (n <= 12).
    """
    lam_f, m = check_rates(lam, mus)
    _validate.choice("policy", policy, ("random", "fastest", "slowest"))
    n = m.size
    if n > 12:
        raise ValueError(f"mus must have at most 12 servers for generator_solve; got {n}")
    rho = lam_f / m.sum()
    if queue_cap is None:
        return _aggregated_solve(lam_f, m, policy, rho)
    queue_cap = _validate.integer("queue_cap", queue_cap, low=0)
    _validate.memory("queue_cap", 200.0 * ((1 << n) * (n + 2) + 2 * queue_cap),
                     "the sparse generator: about 200 bytes per transition")
    full = (1 << n) - 1
    nS = 1 << n
    N = nS + queue_cap
    Qm = set_generator(lam_f, m, policy, queue_cap)
    # pi Q = 0 with sum(pi) = 1: replace one balance equation by the normalisation
    A = Qm.T.tolil()
    A[0, :] = 1.0
    b = np.zeros(N)
    b[0] = 1.0
    pi = splinalg.spsolve(A.tocsc(), b)
    sets = all_sets(n)
    ps = pi[:nS].copy()
    ps[full] += pi[nS:].sum()
    qd = np.concatenate([[1.0 - pi[nS:].sum()], pi[nS:]])
    return sets, ps, qd


def all_sets(n: int) -> np.ndarray:
    """Row s is the busy set with bitmask s (server j busy iff bit j of s is set)."""
    s = np.arange(1 << n)[:, None]
    return ((s >> np.arange(n)[None, :]) & 1).astype(bool)


def marginals_from_sets(sets: ArrayLike, probs: ArrayLike) -> np.ndarray:
    """P_j from a distribution over busy sets.

    Args:
        sets: (S, n) bool busy sets.
        probs: (S,) their probabilities.

    Returns:
        (n,) P_j.

    Raises:
        ValueError: naming ``sets`` or ``probs`` when malformed.
    """
    sets, probs = np.asarray(sets), np.asarray(probs)
    if sets.ndim != 2 or sets.dtype != bool:
        raise ValueError(f"sets must be an (S, n) bool array; got {sets.dtype} of shape {sets.shape}")
    if probs.shape != (sets.shape[0],) or probs.dtype.kind not in "iuf" or not np.all(np.isfinite(probs)):
        raise ValueError(
            f"probs must be ({sets.shape[0]},) finite real probabilities; got shape {probs.shape}"
        )
    return probs @ sets.astype(float)


def fastest_busy_probabilities(lam: float, mus: ArrayLike) -> np.ndarray:
    """Exact P_j when informed customers join the fastest idle server (generator solve, n <= 12).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        (n,) P_j in input order.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range or n > 12.
    """
    sets, ps, _ = generator_solve(lam, mus, policy="fastest")
    return marginals_from_sets(sets, ps)


def slowest_busy_probabilities(lam: float, mus: ArrayLike) -> np.ndarray:
    """Exact P_j when arrivals join the slowest idle server (generator solve, n <= 12).

    A deliberately wrong routing rule (a counterfactual for Cabral's claims): it loads the slow
    servers first, so a fast server can do less work than a slower one. At lam = 3,
    mus = (3, 2, 1): P = (53/148, 211/370, 581/740) = (0.3581, 0.5703, 0.7851) and
    mu P = (1.0743, 1.1405, 0.7851), so claim 1 (P_l < P_m) holds there, while claim 2
    (mu_1 P_1 > mu_2 P_2) and the lower end of claim 3 ((mu_2/mu_1) P_2 < P_1) fail.

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        (n,) P_j in input order.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range or n > 12.
    """
    sets, ps, _ = generator_solve(lam, mus, policy="slowest")
    return marginals_from_sets(sets, ps)
