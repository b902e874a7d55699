"""Exact stationary law of the supermarket model for small n: the test oracle.

The CTMC lives on multisets of n queue lengths (states sorted in decreasing order), with
lengths capped at ``cap``: an arrival that would make a queue longer than ``cap`` is lost.
The cap is raised until the stationary mass at the cap is below ``tol``, so the truncation
error is negligible against any simulation error bar. The chain is built as a sparse
generator and solved with one sparse LU (scipy).
"""

from __future__ import annotations

import math
from itertools import combinations_with_replacement

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from qlib.supermarket.simulation import check_parameters
from qlib.supermarket.theory import all_sampled_at_least
from qlib import _validate as V

MAX_STATES = 400_000


def _states(n: int, cap: int) -> list[tuple[int, ...]]:
    return [tuple(sorted(c, reverse=True)) for c in combinations_with_replacement(range(cap + 1), n)]


def exact_stationary(n: int, d: int, lam: float, cap: int, *, replacement: bool = True):
    """Stationary distribution over multisets of queue lengths (capped at ``cap``).

    Returns (counts, pi): counts[s, i] = u_i in state s for i = 0..cap, and pi[s].
    """
    n, d, lam, replacement = check_parameters(n, d, lam, replacement)
    cap = V.integer("cap", cap, low=1)
    nstates = math.comb(n + cap, n)
    if nstates > MAX_STATES:
        raise ValueError(f"n = {n} with cap = {cap} has {nstates} states; the exact solve allows at most {MAX_STATES}")
    states = _states(n, cap)
    index = {s: j for j, s in enumerate(states)}
    lengths = np.array(states, dtype=np.int64)  # (S, n)
    counts = np.stack([(lengths >= i).sum(axis=1) for i in range(cap + 2)], axis=1)  # u_0..u_{cap+1}
    g = all_sampled_at_least(counts / n, d, replacement=replacement, n=n)
    rows, cols, vals = [], [], []
    for j, s in enumerate(states):
        distinct = sorted(set(s))
        for length in distinct:
            mult = s.count(length)
            # arrival joins a queue of this length
            if length < cap:
                p = g[j, length] - g[j, length + 1]
                if p > 0:
                    t = list(s)
                    t[s.index(length)] = length + 1
                    rows.append(j); cols.append(index[tuple(sorted(t, reverse=True))]); vals.append(lam * n * p)
            # departure from one of the `mult` queues of this length
            if length >= 1:
                t = list(s)
                t[s.index(length)] = length - 1
                rows.append(j); cols.append(index[tuple(sorted(t, reverse=True))]); vals.append(float(mult))
    S = len(states)
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(S, S))
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    # pi Q = 0: replace the balance equation of state 0 by pi_0 = 1 (a unit row keeps the LU
    # sparse, where a row of ones would fill it in), then normalise.
    A = Q.T.tolil()
    A[0, :] = 0.0
    A[0, 0] = 1.0
    b = np.zeros(S)
    b[0] = 1.0
    pi = spla.spsolve(A.tocsc(), b)
    return counts[:, : cap + 1], pi / pi.sum()


def exact_tail_fraction(n: int, d: int, lam: float, levels: int, *, replacement: bool = True,
                        tol: float = 1e-10) -> np.ndarray:
    """Exact stationary E[u_i]/n for i = 0..levels, for small n (the test oracle).

    The length cap starts at levels + 2 and grows by 2 until the stationary probability that
    some queue sits at the cap is below ``tol`` (1e-10: far below any simulation error bar).
    """
    n, d, lam, replacement = check_parameters(n, d, lam, replacement)
    levels = V.integer("levels", levels, low=0)
    cap = levels + 2
    while True:
        counts, pi = exact_stationary(n, d, lam, cap, replacement=replacement)
        if pi[counts[:, cap] > 0].sum() < tol:
            break
        cap += 2
    tail = (pi[:, None] * counts).sum(axis=0) / n
    out = np.zeros(levels + 1)
    m = min(levels, cap) + 1
    out[:m] = tail[:m]
    return out
