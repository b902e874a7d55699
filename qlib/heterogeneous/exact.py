"""Exact stationary law of M/M/n with heterogeneous servers and uninformed customers.

Model (docs/models.md, "Heterogeneous servers"; Cabral, arXiv:0706.0560): Poisson arrivals at
rate ``lam``; server j serves at rate ``mus[j]``; an arrival that finds idle servers joins one
chosen uniformly at random among them, otherwise it waits in one FIFO queue taken by the first
server to finish. Stable iff ``lam < sum(mus)``.

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
from numpy.typing import ArrayLike
from scipy.special import gammaln

from qlib import _validate

#: Routing of an arrival that finds idle servers: uniformly random (Cabral), the longest idle
#: (same stationary law), the fastest idle (informed customers) or the slowest idle (a
#: deliberately wrong rule, for counterfactuals).
POLICIES = ("random", "longest_idle", "fastest", "slowest")


# --------------------------------------------------------------------------- input checks
def service_rates(mus: object) -> np.ndarray:
    """Validated ``mus``: a non-empty 1-D sequence or array of finite real rates > 0.

    Only real numbers are accepted: booleans and strings are rejected (NumPy would turn
    ``[True, True]`` or ``['1', '2']`` into numbers silently).

    Args:
        mus: the service rates.

    Returns:
        float64 (n,) rates.

    Raises:
        ValueError: naming ``mus`` when it is not such a sequence.
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
    """Validated (lam, mus).

    Args:
        lam: arrival rate, a real in (0, sum(mus)) (stability).
        mus: service rates, as in :func:`service_rates`.

    Returns:
        (lam as a float, mus as float64 (n,)).

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
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
    """P_j = P(server j busy) in stationarity; O(n^2), stable for n in the 1000s.

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        (n,) P_j in input order.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
    s = _solve(lam, mus)
    return s.p @ s.c


def idle_probabilities(lam: float, mus: ArrayLike) -> np.ndarray:
    """1 - P_j, computed directly (keeps relative accuracy when servers are almost always busy).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        (n,) 1 - P_j in input order.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
    s = _solve(lam, mus)
    return s.f @ s.c


def effective_rates(lam: float, mus: ArrayLike) -> np.ndarray:
    """mu_j P_j: the effective rate of service (work done) of server j; they sum to lam.

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        (n,) mu_j P_j in input order.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
    _, m = check_rates(lam, mus)
    return m * busy_probabilities(lam, m)


def busy_count_distribution(lam: float, mus: ArrayLike) -> np.ndarray:
    """P(exactly k servers busy), k = 0..n (k = n includes every queue length).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        (n + 1,) probabilities.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
    return _solve(lam, mus).c.copy()


def wait_probability(lam: float, mus: ArrayLike) -> float:
    """Probability that an arrival waits = P(all servers busy) (PASTA).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        The probability, a float.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
    return float(_solve(lam, mus).c[-1])


def mean_queue_length(lam: float, mus: ArrayLike) -> float:
    """E[number waiting] = P(all busy) rho/(1 - rho): the queue is geometric given all busy.

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        The mean, a float.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
    s = _solve(lam, mus)
    return float(s.c[-1] * s.rho / s.one_minus_rho)


def mean_number_in_system(lam: float, mus: ArrayLike) -> float:
    """E[busy servers] + E[queue].

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        The mean, a float.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
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
    """P(l and m busy), P(m busy, l idle), P(both idle) for all pairs, in O(n^3).

    Computed directly, not from the identities (which the tests check against it).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        A :class:`JointProbabilities` of (n, n) arrays.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
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

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.
        pairs: "adjacent" or "all".

    Returns:
        A :class:`PairMargins`.

    Raises:
        ValueError: naming the parameter out of its range.
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
