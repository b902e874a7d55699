"""Exact stationary law of M/M/n with heterogeneous servers and uninformed customers.

Model (docs/models.md, "Heterogeneous servers"; Cabral, arXiv:0706.0560): Poisson arrivals at rate ``lam``; server j serves at rate
``mus[j]``; an arrival that finds idle servers joins one chosen uniformly at random among them,
otherwise it waits in one FIFO queue taken by the first server to finish. Stable iff
``lam < sum(mus)``.

Product form (the chain is reversible): for a busy set S with |S| = k < n and no queue,
pi(S) ∝ (n-k)!/n! · prod_{j in S} x_j with x_j = lam/mu_j, and with all n busy and q waiting,
pi(all, q) ∝ 1/n! · prod_j x_j · rho^q, rho = lam/sum(mu). Summing over S of a given size
gives the elementary symmetric polynomials e_k(x), so every marginal costs O(n^2).

Claims (for mu_l > mu_m): P_l < P_m (the fast server is busy less often), yet
mu_l P_l > mu_m P_m (it does more work); indeed (mu_m/mu_l) P_m < P_l < P_m. They follow from
mu_l P_l - mu_m P_m = (mu_l - mu_m) P(l and m busy) and P_m - P_l = (1 - mu_m/mu_l) P(m busy, l idle).

Numerics: e_k(x) overflows for a few hundred servers, so the e_k are kept as logarithms and
every quantity is a ratio e_k^{(-j)}/e_k in [0, 1]. Removing one x_j from a polynomial
("deflation") is done forward for small k and backward for large k, switching where j's
conditional inclusion probability crosses 1/2: each direction then damps rounding errors
(Peters & Wilkinson's composite deflation), so the result keeps full relative accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import linalg as splinalg
from numpy.typing import ArrayLike
from scipy.special import gammaln

from qlib import _validate

#: Routing of an arrival that finds idle servers: uniformly random (Cabral), the longest idle
#: (same stationary law), the fastest idle (informed customers) or the slowest idle (a
#: deliberately wrong rule, for counterfactuals).
POLICIES = ("random", "longest_idle", "fastest", "slowest")


# --------------------------------------------------------------------------- input checks
def service_rates(mus: object) -> np.ndarray:
    """Validated ``mus``: a non-empty 1-D sequence or array of finite real rates > 0, as float64 (n,).

    Only real numbers are accepted: booleans and strings are rejected (NumPy would turn
    ``[True, True]`` or ``['1', '2']`` into numbers silently).
    """
    msg = "mus must be a non-empty 1-D sequence of real service rates > 0"
    if isinstance(mus, (str, bytes, bool, np.bool_)):
        raise ValueError(f"{msg}; got {mus!r}")
    try:
        arr = np.asarray(mus)
    except (TypeError, ValueError):
        raise ValueError(f"{msg}; got {mus!r}") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{msg}; got {mus!r} (dtype {arr.dtype})")
    if arr.ndim != 1:
        raise ValueError(f"{msg}; got shape {arr.shape}")
    if not isinstance(mus, np.ndarray) and any(isinstance(x, (bool, np.bool_)) for x in mus):
        raise ValueError(f"{msg}; got booleans in {mus!r}")
    if arr.size == 0:
        raise ValueError(f"{msg}; got an empty sequence")
    m = arr.astype(float)
    if not np.all(np.isfinite(m)):
        raise ValueError(f"mus must be finite service rates > 0; got {m.tolist()!r}")
    if np.any(m <= 0):
        raise ValueError(f"mus must all be > 0; got minimum {m.min()!r}")
    return m


def check_rates(lam: object, mus: object) -> tuple[float, np.ndarray]:
    """Validated (lam, mus): mus as in :func:`service_rates` (n,), lam a real in (0, sum(mus))."""
    m = service_rates(mus)
    total = math.fsum(m)
    lam_f = _validate.real("lam", lam, low=0.0, high=total)  # stability: 0 < lam < sum(mu)
    return lam_f, m


def _check_solvable(n: int) -> None:
    """The O(n^2) solve holds about 8 float64 arrays of n x (n + 1): refuse what cannot fit."""
    _validate.memory("mus", 64.0 * n * (n + 1), f"{n} servers: about 8 float64 arrays of n x (n + 1)")


# --------------------------------------------------------------------------- log-ESP machinery
def _log_esp(log_x: np.ndarray) -> np.ndarray:
    """log e_k(x) for k = 0..n (all terms positive, so the DP is stable; logs avoid overflow)."""
    n = log_x.size
    le = np.full(n + 1, -np.inf)
    le[0] = 0.0
    for i, lx in enumerate(log_x):
        le[1 : i + 2] = np.logaddexp(le[1 : i + 2], lx + le[0 : i + 1])
    return le


def _deflate(le: np.ndarray, log_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out ratios for a polynomial prod_i (1 + x_i t) with log-coefficients ``le``.

    For every root x_j in ``log_x`` (J,) (which must be among the polynomial's) returns
    f[j, k] = e_k^{(-j)} / e_k and p[j, k] = x_j e_{k-1}^{(-j)} / e_k for k = 0..m, so
    f + p = 1; p[j, k] is the probability that j is in a size-k set drawn with weights prod x.
    ``le`` is (m + 1,), one polynomial for every root, or (J, m + 1), one polynomial per root.
    """
    le = np.atleast_2d(le)
    m = le.shape[1] - 1
    J = log_x.size
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        # xr[:, k] = x_j e_{k-1}/e_k, finite for k = 1..m
        xr = np.exp(log_x[:, None] + (le[:, :-1] - le[:, 1:]))
        # the recursions run along k: keep k first so each step touches contiguous memory
        xt = np.ascontiguousarray(xr.T)
        fwd = np.empty((m + 1, J))
        fwd[0] = 1.0
        for k in range(1, m + 1):  # stable while p < 1/2 (errors damped by the odds p/(1-p))
            fwd[k] = 1.0 - xt[k - 1] * fwd[k - 1]
        bwd = np.empty((m + 1, J))
        bwd[m] = 0.0
        for k in range(m, 0, -1):  # stable while p > 1/2
            bwd[k - 1] = (1.0 - bwd[k]) / xt[k - 1]
        # forward on the prefix where it says f >= 1/2, backward after
        use_fwd = np.logical_and.accumulate(fwd >= 0.5, axis=0)
        f = np.where(use_fwd, fwd, bwd).T
        f = np.clip(f, 0.0, 1.0)
        p = np.zeros_like(f)
        p[:, 1:] = xr * f[:, :-1]  # a product: keeps relative accuracy where p is tiny
        # where p is close to 1 use 1 - f instead (f is the accurate small number there)
        p = np.where(f < 0.5, 1.0 - f, p)
    return f, p


def _log_weights(n: int, log_one_minus_rho: float) -> np.ndarray:
    """log of (n-k)! for k < n and 1/(1-rho) for k = n (the common 1/n! dropped)."""
    k = np.arange(n + 1)
    lw = gammaln(n - k + 1.0)
    lw[n] = -log_one_minus_rho
    return lw


@dataclass(frozen=True)
class _Solved:
    lam: float
    mus: np.ndarray
    rho: float
    one_minus_rho: float
    log_x: np.ndarray
    le: np.ndarray
    c: np.ndarray  # c_k ∝ probability that exactly k servers are busy (k = n: all busy, any queue)
    f: np.ndarray
    p: np.ndarray


def _solve(lam: object, mus: object) -> _Solved:
    lam_f, m = check_rates(lam, mus)
    _check_solvable(m.size)
    total = math.fsum(m)
    rho = lam_f / total
    # 1 - rho from the difference, which is exact near rho = 1 (lam and total within a factor 2)
    log_x = math.log(lam_f) - np.log(m)
    le = _log_esp(log_x)
    lc = _log_weights(m.size, math.log((total - lam_f) / total)) + le
    c = np.exp(lc - lc.max())
    c /= c.sum()
    f, p = _deflate(le, log_x)
    return _Solved(lam_f, m, rho, (total - lam_f) / total, log_x, le, c, f, p)


# --------------------------------------------------------------------------- public exact API
def busy_probabilities(lam: float, mus: ArrayLike) -> np.ndarray:
    """P_j = P(server j busy) in stationarity, (n,) in input order. O(n^2), stable for n in the 1000s."""
    s = _solve(lam, mus)
    return s.p @ s.c


def idle_probabilities(lam: float, mus: ArrayLike) -> np.ndarray:
    """1 - P_j, (n,), computed directly (keeps relative accuracy when servers are almost always busy)."""
    s = _solve(lam, mus)
    return s.f @ s.c


def effective_rates(lam: float, mus: ArrayLike) -> np.ndarray:
    """mu_j P_j, (n,): the effective rate of service (work done) of server j; they sum to lam."""
    _, m = check_rates(lam, mus)
    return m * busy_probabilities(lam, m)


def busy_count_distribution(lam: float, mus: ArrayLike) -> np.ndarray:
    """P(exactly k servers busy), (n + 1,) for k = 0..n (k = n includes every queue length)."""
    return _solve(lam, mus).c.copy()


def wait_probability(lam: float, mus: ArrayLike) -> float:
    """Probability that an arrival waits = P(all servers busy) (PASTA)."""
    return float(_solve(lam, mus).c[-1])


def mean_queue_length(lam: float, mus: ArrayLike) -> float:
    """E[number waiting] = P(all busy) · rho/(1 - rho): the queue is geometric given all busy."""
    s = _solve(lam, mus)
    return float(s.c[-1] * s.rho / s.one_minus_rho)


def mean_number_in_system(lam: float, mus: ArrayLike) -> float:
    """E[busy servers] + E[queue]."""
    s = _solve(lam, mus)
    return float(np.arange(s.c.size) @ s.c + s.c[-1] * s.rho / s.one_minus_rho)


@dataclass(frozen=True)
class JointProbabilities:
    """Pairwise stationary probabilities, (n, n) arrays; entry [i, j] refers to servers i and j.

    ``both_busy[i, j]`` = P(i and j busy) (diagonal: P_i); ``busy_idle[i, j]`` = P(i busy, j idle)
    (diagonal: 0); ``both_idle[i, j]`` = P(i and j idle) (diagonal: 1 - P_i).
    """

    both_busy: np.ndarray
    busy_idle: np.ndarray
    both_idle: np.ndarray


def joint_probabilities(lam: float, mus: ArrayLike) -> JointProbabilities:
    """P(l and m busy), P(m busy, l idle), P(both idle) for all pairs. O(n^3), computed directly
    (not from the identities, which the tests check against it)."""
    s = _solve(lam, mus)
    n = s.mus.size
    bb, bi, ii = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    P, Q = s.p @ s.c, s.f @ s.c
    for l in range(n):
        # polynomial without l: log e_k^{(-l)} = le_k + log f[l, k], k = 0..n-1
        with np.errstate(divide="ignore"):
            le_l = s.le[:n] + np.log(s.f[l, :n])
        others = np.delete(np.arange(n), l)
        f2, p2 = _deflate(le_l, s.log_x[others])
        cl = s.c
        # P(m busy, l idle) = sum_k c_k f[l,k] p2[m,k];  P(both idle) = sum_k c_k f[l,k] f2[m,k]
        bi[others, l] = p2 @ (cl[:n] * s.f[l, :n])
        ii[others, l] = f2 @ (cl[:n] * s.f[l, :n])
        # P(l busy, m busy) = sum_{k>=2} c_k p[l,k] p2[m,k-1]
        bb[others, l] = p2[:, : n] @ (cl[1:] * s.p[l, 1:])
    bb[np.diag_indices(n)] = P
    ii[np.diag_indices(n)] = Q
    return JointProbabilities(bb, bi, ii)


@dataclass(frozen=True)
class PairMargins:
    """Cabral's three claims as margins, for pairs (l, m) of servers with mu_l > mu_m; arrays (K,).

    ``fast[i]``, ``slow[i]``: input indices of l and m in pair i (pairs in rate order, fastest first).
    - ``busy_margin`` = P_m - P_l: claim 1, the faster server is busy less often;
    - ``effective_rate_margin`` = mu_l P_l - mu_m P_m: claim 2, yet its effective rate of service
      (the work it does) is larger;
    - ``band_margin`` = P_l - (mu_m/mu_l) P_m: the lower end of claim 3 (its upper end is claim 1).
    ``both_busy`` = P(l and m busy) and ``busy_idle`` = P(m busy, l idle) are the joint
    probabilities the margins are computed from. A claim holds for pair i iff its margin is > 0.
    """

    fast: np.ndarray
    slow: np.ndarray
    busy_margin: np.ndarray
    effective_rate_margin: np.ndarray
    band_margin: np.ndarray
    both_busy: np.ndarray
    busy_idle: np.ndarray

    @property
    def pairs(self) -> int:
        return int(self.fast.size)

    def holds(self) -> np.ndarray:
        """(K,) bool: all three claims hold (every margin > 0) for pair i."""
        return (self.busy_margin > 0) & (self.effective_rate_margin > 0) & (self.band_margin > 0)


def pair_margins(lam: float, mus: ArrayLike, *, pairs: str = "adjacent") -> PairMargins:
    """The margins of Cabral's claims, exact to rounding and with the right sign, for pairs l, m.

    ``pairs="adjacent"``: the servers sorted fastest first, each with the next strictly slower
    one (n - 1 pairs when the rates are distinct; equal rates have margins exactly 0 and are
    skipped). ``pairs="all"``: every pair with mu_l > mu_m (n(n - 1)/2 when distinct).

    The margins are never differences of rounded P's, which lose their sign when rates are
    nearly equal. They come from the identities (docs/models.md, "Heterogeneous servers")
    mu_l P_l - mu_m P_m = (mu_l - mu_m) P(l and m busy),
    P_m - P_l = (1 - mu_m/mu_l) P(m busy, l idle),
    P_l - (mu_m/mu_l) P_m = (1 - mu_m/mu_l) P(l and m busy),
    with mu_l - mu_m a floating-point subtraction (exact when the rates are within a factor 2)
    and each joint probability computed directly as a positive sum: the polynomial of the
    other servers' x = lam/mu is deflated by x_l and then by x_m (composite deflation, see the
    module docstring). So every margin has the sign of mu_l - mu_m, with full relative accuracy.
    Cost O(n^2) for the solve plus O(n) per pair.
    """
    pairs = _validate.choice("pairs", pairs, ("adjacent", "all"))
    s = _solve(lam, mus)
    m, n = s.mus, s.mus.size
    order = np.argsort(-m, kind="stable")
    if pairs == "adjacent":
        L, M = order[:-1], order[1:]
    else:
        i, j = np.triu_indices(n, 1)
        L, M = order[i], order[j]
    keep = m[L] > m[M]
    L, M = L[keep], M[keep]
    both, busy_idle = np.empty(L.size), np.empty(L.size)
    block = max(1, (1 << 22) // (n + 1))  # pairs per pass: a few arrays of block x n floats
    for a in range(0, L.size, block):
        l, mm = L[a : a + block], M[a : a + block]
        with np.errstate(divide="ignore"):
            le_l = s.le[None, :n] + np.log(s.f[l, :n])  # log e_k without l, k = 0..n-1 (B, n)
        _, p2 = _deflate(le_l, s.log_x[mm])  # p2[b, k] = P(m in a k-set of the others)
        # P(l and m busy) = sum_{k>=1} c_k p[l,k] p2[k-1]; P(m busy, l idle) = sum_{k<n} c_k f[l,k] p2[k]
        both[a : a + block] = np.einsum("bk,bk->b", p2, s.c[None, 1:] * s.p[l, 1:])
        busy_idle[a : a + block] = np.einsum("bk,bk->b", p2, s.c[None, :n] * s.f[l, :n])
    diff = m[L] - m[M]
    rel = diff / m[L]  # 1 - mu_m/mu_l without cancellation
    return PairMargins(fast=L, slow=M, busy_margin=rel * busy_idle, effective_rate_margin=diff * both,
                       band_margin=rel * both, both_busy=both, busy_idle=busy_idle)


# --------------------------------------------------------------------------- oracles
def stationary_distribution(lam: float, mus: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force product form over all 2^n busy sets (n <= 12): (sets (2^n, n) bool, probs (2^n,)).

    The all-busy set carries the whole queue (every q). A test oracle, independent of the ESPs.
    """
    lam_f, m = check_rates(lam, mus)
    n = m.size
    if n > 12:
        raise ValueError(f"mus must have at most 12 servers for stationary_distribution; got {n}")
    rho = lam_f / m.sum()
    sets = _all_sets(n)
    x = lam_f / m
    k = sets.sum(axis=1)
    w = np.array([math.factorial(n - kk) / math.factorial(n) for kk in k])
    w *= np.prod(np.where(sets, x[None, :], 1.0), axis=1)
    w[k == n] /= 1.0 - rho
    return sets, w / w.sum()


def _first_idle_order(m: np.ndarray, policy: str) -> np.ndarray:
    """Servers in the order a "fastest" / "slowest" arrival tries them (ties: lowest index first)."""
    return np.argsort(-m if policy == "fastest" else m, kind="stable")


def _set_generator(lam_f: float, m: np.ndarray, policy: str, queue_cap: int) -> sparse.csr_matrix:
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
        rows.append(a); cols.append(b); vals.append(r)

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
    Qm = _set_generator(lam_f, m, policy, 0).tolil()
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
    return _all_sets(n), ps, qd


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
    Qm = _set_generator(lam_f, m, policy, queue_cap)
    # pi Q = 0 with sum(pi) = 1: replace one balance equation by the normalisation
    A = Qm.T.tolil()
    A[0, :] = 1.0
    b = np.zeros(N)
    b[0] = 1.0
    pi = splinalg.spsolve(A.tocsc(), b)
    sets = _all_sets(n)
    ps = pi[:nS].copy()
    ps[full] += pi[nS:].sum()
    qd = np.concatenate([[1.0 - pi[nS:].sum()], pi[nS:]])
    return sets, ps, qd


def _all_sets(n: int) -> np.ndarray:
    """Row s is the busy set with bitmask s (server j busy iff bit j of s is set)."""
    s = np.arange(1 << n)[:, None]
    return ((s >> np.arange(n)[None, :]) & 1).astype(bool)


def marginals_from_sets(sets: ArrayLike, probs: ArrayLike) -> np.ndarray:
    """P_j, (n,), from a distribution over busy sets: ``sets`` (S, n) bool, ``probs`` (S,)."""
    sets, probs = np.asarray(sets), np.asarray(probs)
    if sets.ndim != 2 or sets.dtype != bool:
        raise ValueError(f"sets must be an (S, n) bool array; got {sets.dtype} of shape {sets.shape}")
    if probs.shape != (sets.shape[0],) or probs.dtype.kind not in "iuf" or not np.all(np.isfinite(probs)):
        raise ValueError(f"probs must be ({sets.shape[0]},) finite real probabilities; got shape {probs.shape}")
    return probs @ sets.astype(float)


def fastest_busy_probabilities(lam: float, mus: ArrayLike) -> np.ndarray:
    """Exact P_j, (n,), when informed customers join the fastest idle server (generator solve, n <= 12)."""
    sets, ps, _ = generator_solve(lam, mus, policy="fastest")
    return marginals_from_sets(sets, ps)


def slowest_busy_probabilities(lam: float, mus: ArrayLike) -> np.ndarray:
    """Exact P_j, (n,), when arrivals join the slowest idle server (generator solve, n <= 12).

    A deliberately wrong routing rule (a counterfactual for Cabral's claims): it loads the slow
    servers first, so a fast server can do less work than a slower one. At lam = 3,
    mus = (3, 2, 1): P = (53/148, 211/370, 581/740) = (0.3581, 0.5703, 0.7851) and
    mu P = (1.0743, 1.1405, 0.7851), so claim 1 (P_l < P_m) holds there, while claim 2
    (mu_1 P_1 > mu_2 P_2) and the lower end of claim 3 ((mu_2/mu_1) P_2 < P_1) fail."""
    sets, ps, _ = generator_solve(lam, mus, policy="slowest")
    return marginals_from_sets(sets, ps)


# --------------------------------------------------------------------------- relaxation time
#: Largest n for :func:`relaxation_time`: 2^n busy sets ("random", "fastest", "slowest"), or
#: sum_k n!/k! ordered idle lists ("longest_idle": 13,700 at n = 7).
RELAXATION_MAX_N = {"random": 12, "fastest": 12, "slowest": 12, "longest_idle": 7}
_DENSE_MAX = 500  # up to this many states: every eigenvalue, dense (else a sparse shift-invert solve)


def _ordered_generator(lam_f: float, m: np.ndarray, queue_cap: int) -> sparse.csr_matrix:
    """The "longest_idle" CTMC generator: state (idle servers in the order they became idle, q).

    The busy set alone is not Markov under this policy: the next server taken is the head of
    the idle list. Index of the state with idle list L (a tuple, longest idle first) and no
    queue: its position in the enumeration below; all busy with q >= 1 waiting: after them."""
    import itertools

    n = m.size
    lists = [t for k in range(n + 1) for t in itertools.permutations(range(n), k)]
    index = {t: i for i, t in enumerate(lists)}
    nL = len(lists)
    N = nL + queue_cap
    rows, cols, vals = [], [], []
    for t, i in index.items():
        if t:  # an arrival takes the head of the list
            rows.append(i); cols.append(index[t[1:]]); vals.append(lam_f)
        elif queue_cap > 0:
            rows.append(i); cols.append(nL); vals.append(lam_f)
        idle = set(t)
        for j in range(n):
            if j not in idle:  # a completion at j appends j to the list
                rows.append(i); cols.append(index[t + (j,)]); vals.append(m[j])
    full = index[()]
    for q in range(1, queue_cap + 1):
        i = nL + q - 1
        if q < queue_cap:
            rows.append(i); cols.append(i + 1); vals.append(lam_f)
        rows.append(i); cols.append(full if q == 1 else i - 1); vals.append(m.sum())
    Qm = sparse.coo_matrix((vals, (rows, cols)), shape=(N, N)).tocsr()
    return Qm - sparse.diags(np.asarray(Qm.sum(axis=1)).ravel())


def _generator(lam_f: float, m: np.ndarray, policy: str, queue_cap: int) -> tuple[sparse.csr_matrix, int]:
    """(generator truncated at ``queue_cap``, index of the all-busy state with no queue); the
    states with q >= 1 waiting are the last ``queue_cap`` indices, q = 1, 2, ..."""
    if policy == "longest_idle":
        return _ordered_generator(lam_f, m, queue_cap), 0  # the empty idle list comes first
    return _set_generator(lam_f, m, policy, queue_cap), (1 << m.size) - 1


def _log_stationary_q0(lam_f: float, m: np.ndarray, policy: str, *, solve: bool = False) -> np.ndarray:
    """log pi on the states with no queue, unnormalised (the first states of :func:`_generator`).

    "random": the product form, log((n-k)! prod_{j in S} lam/mu_j) (unless ``solve``). Else a
    solve of the chain at queue cap 0, which is the chain censored to q = 0 (an arrival's
    excursion into the queue returns where it began), so its stationary law is pi on q = 0."""
    if policy == "random" and not solve:
        sets = _all_sets(m.size)
        return gammaln(m.size - sets.sum(axis=1) + 1.0) + sets @ (math.log(lam_f) - np.log(m))
    Q0, _ = _generator(lam_f, m, policy, 0)
    N0 = Q0.shape[0]
    A = Q0.T.tolil()
    A[0, :] = 1.0
    b = np.zeros(N0)
    b[0] = 1.0
    p0 = np.abs(splinalg.spsolve(A.tocsc(), b))
    return np.log(np.maximum(p0, 1e-300))


def _truncated_gap(lam_f: float, m: np.ndarray, policy: str, queue_cap: int, *, lp0: np.ndarray | None = None,
                   dense: bool | None = None) -> float:
    """Smallest nonzero Re(eigenvalue) of minus the generator truncated at ``queue_cap``.

    Solved on B = D^(1/2) (-Q) D^(-1/2), D = diag(pi): the same eigenvalues, but without the
    exponentially large non-normality of the queue's drift (raw -Q has spurious complex
    eigenvalues past caps of ~200 in float64). Truncation keeps pi's ratios (the queue is a
    birth-death chain hung on the all-busy state), so D is ``lp0`` (log pi on q = 0, default
    :func:`_log_stationary_q0`) and pi(all busy, q) = pi(all busy, 0) rho^q, kept in logs; the
    queue's part of B is symmetric, off-diagonal sqrt(lam sum(mu)). "random" is reversible, so B
    is symmetric: a symmetric solve (eigvalsh, or shift-invert Lanczos beyond _DENSE_MAX states).
    The other policies are not: the whole spectrum (eigvals) up to _DENSE_MAX states, else the
    24 eigenvalues nearest 0 (shift-invert Arnoldi), and the smallest real part among them."""
    Q, full = _generator(lam_f, m, policy, queue_cap)
    N = Q.shape[0]
    lp0 = _log_stationary_q0(lam_f, m, policy) if lp0 is None else lp0
    q = np.arange(1, queue_cap + 1)
    h = 0.5 * np.concatenate([lp0, lp0[full] + q * math.log(lam_f / math.fsum(m))])
    Qc = Q.tocoo()
    B = sparse.coo_matrix((-Qc.data * np.exp(h[Qc.row] - h[Qc.col]), (Qc.row, Qc.col)), shape=(N, N)).tocsc()
    use_dense = (N <= _DENSE_MAX) if dense is None else dense
    shift = -1e-9 * (lam_f + math.fsum(m))  # B - shift is nonsingular, and 0 and the gap lie nearest
    if policy == "random":
        B = 0.5 * (B + B.T)  # symmetric up to rounding
        if use_dense:
            ev = np.linalg.eigvalsh(B.toarray())
        else:
            ev = splinalg.eigsh(B, k=2, sigma=shift, which="LM", return_eigenvectors=False)
        return float(np.sort(ev)[1])
    if use_dense:
        ev = np.linalg.eigvals(B.toarray())
    else:
        ev = splinalg.eigs(B, k=min(24, N - 2), sigma=shift, which="LM", return_eigenvectors=False)
    ev = np.delete(ev, np.argmin(np.abs(ev)))  # the stationary eigenvalue 0 (simple: irreducible)
    return float(np.min(ev.real))


def queue_gap(lam: float, mus: ArrayLike) -> float:
    """(sqrt(sum mu) - sqrt(lam))^2: the spectral gap of the M/M/1 queue with rates (lam, sum(mus)).

    The chain's q >= 1 part (all servers busy) is that birth-death chain, so its spectrum
    reaches down to this value whatever the routing: 1/queue_gap is a lower bound on
    :func:`relaxation_time` for every n (it is not an upper bound: slow servers relax slower)."""
    lam_f, m = check_rates(lam, mus)
    total = math.fsum(m)
    return (total - lam_f) ** 2 / (math.sqrt(total) + math.sqrt(lam_f)) ** 2  # no cancellation


def relaxation_time(lam: float, mus: ArrayLike, *, policy: str = "random") -> float:
    """1/(spectral gap) of the continuous-time chain (busy set, queue length), in model time units.

    The chain of docs/models.md, "Heterogeneous servers", with routing ``policy`` (see
    :data:`POLICIES`; for "longest_idle" the state is the ordered list of idle servers, since
    the busy set alone is not Markov there). The gap is the smallest nonzero real part of the
    eigenvalues of minus the generator. A run of ``steps`` uniformised steps of
    :func:`qlib.heterogeneous.simulate` covers steps / (Lambda * relaxation_time) relaxation
    times, Lambda = lam + sum(mus).

    How it is computed (exact up to the eigen-solver's rounding and a 1e-9 convergence test):
    the queue is unbounded, and its part q >= 1 (all servers busy) is the M/M/1 queue with rates
    (lam, sum(mus)), whose spectrum is the interval [g_Q, (sqrt(sum mu) + sqrt(lam))^2],
    g_Q = :func:`queue_gap`. So the gap is g_Q or an isolated eigenvalue below it, whose
    eigenvector decays geometrically in q. The generator is truncated at a queue cap K (first
    K >= 8 with rho^K < 1e-12, the stationary mass beyond), its gap g_K computed on the
    generator symmetrised with the stationary law (:func:`_truncated_gap`), and the answer is
    1/min(g_K, g_Q), K doubled until that changes by < 1e-9 relatively (the truncated chain's
    eigenvalues approach g_Q from above only like 1/K^2, so g_K alone would be off by a few
    percent at rho = 0.9 even with the 1e-12 cap; isolated eigenvalues converge geometrically).

    "random" is reversible, and solved as a symmetric problem; there min(g_K, g_Q) is an upper
    bound on the true gap at every K (the truncated chain's eigenfunction, extended constant
    beyond K, is a test function for the infinite chain; g_Q is the bottom of the queue's
    continuum), so the returned time never exceeds the true one. "fastest", "slowest" and
    "longest_idle" are not reversible (under "longest_idle" a server freed goes to the back of
    the idle list, but is taken from the front), so their real parts come from a non-symmetric
    solve, and the min with g_Q is justified by the same queue structure, not by a variational
    bound. Under "longest_idle" at light load the order of the idle servers mixes slowly (a
    change other than a rotation needs two customers in service at once): the relaxation time
    grows like 1/lam^2 as lam -> 0, though the stationary busy-set law is that of "random".

    In the notebook's regime (n = 6, rates geometric 10..1, "random") the gap is g_Q from
    rho ~ 0.42 up (the queue is the slowest part); below, an isolated eigenvalue set by the
    slow servers (tau -> 1/min(mus) as lam -> 0). So tau is not monotone in rho.

    Limits: n <= :data:`RELAXATION_MAX_N` [policy] (12, or 7 for "longest_idle"; n = 12 takes
    seconds to a minute, dominated by sparse LU factors of the 2^n-state hypercube); larger n
    raises ValueError. For any n, 1/g_Q is a lower bound (the queue alone), not the value.
    """
    lam_f, m = check_rates(lam, mus)
    policy = _validate.choice("policy", policy, POLICIES)
    n = m.size
    if n > RELAXATION_MAX_N[policy]:
        raise ValueError(
            f"mus must have at most {RELAXATION_MAX_N[policy]} servers for relaxation_time with policy "
            f"{policy!r} (an eigen-solve over every busy state); got n = {n}. For any n, "
            f"1/queue_gap(lam, mus) = {1.0 / queue_gap(lam_f, m):.6g} is a lower bound (the queue alone)")
    rho = lam_f / math.fsum(m)
    g_q = queue_gap(lam_f, m)
    cap = max(8, math.ceil(math.log(1e-12) / math.log(rho)))
    lp0 = _log_stationary_q0(lam_f, m, policy)  # the same at every cap
    prev = None
    for _ in range(8):
        _validate.memory("lam", 400.0 * (cap + (1 << n) * (n + 2)),
                         f"the truncated generator at queue cap {cap}")
        g = min(_truncated_gap(lam_f, m, policy, cap, lp0=lp0), g_q)
        if prev is not None and abs(g - prev) <= 1e-9 * g:
            return 1.0 / g
        prev, cap = g, 2 * cap
    raise RuntimeError(f"relaxation_time: the gap did not settle as the queue cap grew to {cap // 2} "
                       f"(last {g!r}); please report lam, mus and policy")
