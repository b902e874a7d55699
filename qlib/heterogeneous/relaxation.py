"""Relaxation time of the heterogeneous M/M/n chain: 1/(spectral gap), exactly, for small n.

How many relaxation times a run covers; the generator per routing policy comes from
:mod:`qlib.heterogeneous.oracles`, and :func:`queue_gap` is the queue's part of the spectrum.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse
from scipy.sparse import linalg as splinalg
from scipy.special import gammaln

from qlib import _validate
from qlib.heterogeneous.exact import POLICIES, check_rates
from qlib.heterogeneous.oracles import all_sets, set_generator

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
            rows.append(i)
            cols.append(index[t[1:]])
            vals.append(lam_f)
        elif queue_cap > 0:
            rows.append(i)
            cols.append(nL)
            vals.append(lam_f)
        idle = set(t)
        for j in range(n):
            if j not in idle:  # a completion at j appends j to the list
                rows.append(i)
                cols.append(index[t + (j,)])
                vals.append(m[j])
    full = index[()]
    for q in range(1, queue_cap + 1):
        i = nL + q - 1
        if q < queue_cap:
            rows.append(i)
            cols.append(i + 1)
            vals.append(lam_f)
        rows.append(i)
        cols.append(full if q == 1 else i - 1)
        vals.append(m.sum())
    Qm = sparse.coo_matrix((vals, (rows, cols)), shape=(N, N)).tocsr()
    return Qm - sparse.diags(np.asarray(Qm.sum(axis=1)).ravel())


def _generator(lam_f: float, m: np.ndarray, policy: str, queue_cap: int) -> tuple[sparse.csr_matrix, int]:
    """(generator truncated at ``queue_cap``, index of the all-busy state with no queue); the
    states with q >= 1 waiting are the last ``queue_cap`` indices, q = 1, 2, ..."""
    if policy == "longest_idle":
        return _ordered_generator(lam_f, m, queue_cap), 0  # the empty idle list comes first
    return set_generator(lam_f, m, policy, queue_cap), (1 << m.size) - 1


def _log_stationary_q0(lam_f: float, m: np.ndarray, policy: str, *, solve: bool = False) -> np.ndarray:
    """log pi on the states with no queue, unnormalised (the first states of :func:`_generator`).

    "random": the product form, log((n-k)! prod_{j in S} lam/mu_j) (unless ``solve``). Else a
    solve of the chain at queue cap 0, which is the chain censored to q = 0 (an arrival's
    excursion into the queue returns where it began), so its stationary law is pi on q = 0."""
    if policy == "random" and not solve:
        sets = all_sets(m.size)
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
    :func:`relaxation_time` for every n (it is not an upper bound: slow servers relax slower).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.

    Returns:
        The gap, a float.

    Raises:
        ValueError: naming ``lam`` or ``mus`` when out of range.
    """
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

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.
        policy: one of :data:`POLICIES`.

    Returns:
        The relaxation time, in model time units.

    Raises:
        ValueError: naming the parameter out of its range, or ``mus`` when n exceeds
            :data:`RELAXATION_MAX_N` [policy].
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
