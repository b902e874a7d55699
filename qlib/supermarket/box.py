"""The truncated state space of the exact oracle (:mod:`qlib.supermarket.exact`): the box.

A state is the sorted vector of the n queue lengths; the box holds those with longest queue
<= length_cap and spread (longest - shortest) <= spread_cap, and :class:`Box` indexes them densely
and builds the generator's accepted transitions. Its size is (C - W + 1) C(n - 1 + W, n - 1) +
C(n - 1 + W, n) states (length cap C, spread cap W; :func:`box_states`), about 0.55 kB of memory
each at n = 10: n = 10, d = 2, lam = 0.9 at tol = 1e-7 needs caps (22, 16), 17.6 million states,
where the plain box C(n + 22, n) would have 64 million.
"""

from __future__ import annotations

import math
from itertools import combinations_with_replacement

import numpy as np
import scipy.sparse as sp

from qlib.supermarket.theory import all_sampled_at_least

__all__ = ["box_states"]


def box_states(n: int, length_cap: int, spread_cap: int) -> int:
    """Number of sorted length vectors with max <= length_cap and max - min <= spread_cap.

    For each minimum m there are C(n - 1 + w, n - 1) vectors (w = min(spread_cap, cap - m)), so
    the total is (C - W + 1) C(n - 1 + W, n - 1) + C(n - 1 + W, n) (W = min(spread_cap, C));
    with W = C this is the plain C(n + C, n).
    """
    C = length_cap
    W = min(spread_cap, C) if n > 1 else 0
    if n == 1:
        return C + 1
    return (C - W + 1) * math.comb(n - 1 + W, n - 1) + math.comb(n - 1 + W, n)


def _binom_table(rows: int, n: int) -> np.ndarray:
    return np.array([[math.comb(x, k) for k in range(n + 1)] for x in range(rows)], dtype=np.int64)


def _shapes(n: int, W: int, binom: np.ndarray) -> np.ndarray:
    """All offset vectors 0 = o_0 <= o_1 <= ... <= o_{n-1} <= W in colex order: (P, n).

    Row r is the shape of colex rank r = sum_{i>=1} C(o_i + i - 1, i), so the shapes with
    o_{n-1} <= w are the first C(n - 1 + w, n - 1) rows.
    """
    if n == 1:
        return np.zeros((1, 1), dtype=np.int16)
    P = math.comb(n - 1 + W, n - 1)
    dt = np.int16 if W < 2**15 else np.int32
    flat = np.fromiter((v for c in combinations_with_replacement(range(W + 1), n - 1) for v in c),
                       dtype=dt, count=P * (n - 1))
    o = np.zeros((P, n), dtype=dt)
    o[:, 1:] = flat.reshape(P, n - 1)
    del flat
    out = np.empty_like(o)
    out[_colex_rank(o, binom)] = o
    return out


def _colex_rank(o: np.ndarray, binom: np.ndarray) -> np.ndarray:
    """Colex rank of the offsets o_1 <= ... <= o_{n-1} (rows of o, o_0 = 0): a dense index."""
    r = np.zeros(len(o), dtype=np.int64)
    for i in range(1, o.shape[1]):
        r += binom[o[:, i].astype(np.int64) + (i - 1), i]
    return r


class Box:
    """The truncated state space, a dense index of its states, and the generator's transitions.

    States are numbered by (minimum m, colex rank of the offsets a_j - m), which is a bijection
    onto 0..S-1, and then reordered by (total customers T, longest queue M) so that the levels
    of T (and the groups (T, M) of the aggregation) are contiguous ranges.
    """

    def __init__(self, n, d, lam, replacement, C, W):
        self.n, self.C = n, C
        self.W = min(W, C) if n > 1 else C
        self._binom = _binom_table(self.W + n + 2, n)
        self._transitions(d, lam, replacement, self._enumerate())

    def _enumerate(self) -> np.ndarray:
        """Enumerate the states (A, T, M, S and the index maps); the enumeration index of each."""
        n, C, W, binom = self.n, self.C, self.W, self._binom
        shapes = _shapes(n, W if n > 1 else 0, binom)
        w = np.minimum(C - np.arange(C + 1), W) if n > 1 else np.zeros(C + 1, dtype=np.int64)
        count = np.array([math.comb(n - 1 + int(x), n - 1) for x in w], dtype=np.int64)
        self._base = np.r_[0, np.cumsum(count)[:-1]]
        dtype = np.int16 if C + 1 < 2**15 else np.int32
        A = np.concatenate([shapes[:count[m]].astype(dtype) + dtype(m) for m in range(C + 1)])
        del shapes
        S = len(A)
        self._idx = idx = np.int32 if S < 2**31 else np.int64
        T = A.sum(axis=1, dtype=np.int64).astype(np.int32)
        M = A[:, -1].astype(np.int32)
        order = np.lexsort((M, T))  # stable: levels of the total, then of the maximum
        A, T, M = np.asfortranarray(A[order]), T[order], M[order]
        self._final = np.empty(S, dtype=idx)  # enumeration index -> final index
        self._final[order] = np.arange(S, dtype=idx)
        del order
        self.A, self.T, self.M, self.S = A, T, M, S
        R = self._enum_index_of(A)  # enumeration index of each state, from its lengths
        if not np.array_equal(self._final[R], np.arange(S, dtype=idx)):
            raise AssertionError("exact: the state index is not a bijection")  # a bug, not input
        return R

    def _transitions(self, d, lam, replacement, R: np.ndarray) -> None:
        """The accepted transitions (the inflow matrix ``In``, rates out ``q``), the aggregated
        rates (``a_same``, ``a_up``, ``d_same``, ``d_down``) and the boundary of the box."""
        n, S = self.n, self.S
        first, last = _blocks(self.A)
        table = _rate_table(n, d, lam, replacement)
        cdt = np.uint8 if len(table) <= 256 else np.uint16
        self.a_same, self.a_up = np.zeros(S), np.zeros(S)    # accepted arrival rates keeping /
        self.d_same, self.d_down = np.zeros(S), np.zeros(S)  # raising the max; departures keeping /
        self.at_len = np.zeros(S, dtype=bool)     # lowering it; a dropped arrival at the length cap,
        self.at_spread = np.zeros(S, dtype=bool)  # a dropped arrival or departure at the spread cap
        mn = self.A[:, 0].astype(np.int64)
        src, tgt, rate = [], [], []
        for j in range(n):
            col = self.A[:, j].astype(np.int64)
            for s, t, c in (self._arrivals(j, col, mn, R, first, last, table, cdt),
                            self._departures(j, col, mn, R, first, last, table, cdt)):
                src.append(s)
                tgt.append(t)
                rate.append(c)
        del first, last, R, col
        self._inflow(src, tgt, rate, table)
        self.boundary = self.at_len | self.at_spread

    def _arrivals(self, j, col, mn, R, first, last, table, cdt):
        """(sources, targets, rate codes) of the arrivals at position j (j last of its block):
        rate lam n (g(u_l) - g(u_{l+1})); those leaving the box mark the boundary."""
        n, A, M, binom = self.n, self.A, self.M, self._binom
        sel = np.flatnonzero(last[:, j] == j)
        code = (n + first[sel, j].astype(np.int64) * n + j).astype(cdt)
        r = table[code]
        new = col[sel] + 1
        nmax = np.maximum(M[sel], new)
        if j == 0:  # a lone shortest queue: the minimum rises
            nmin = np.minimum(A[sel, 1], new) if n > 1 else new
        else:
            nmin = mn[sel]
        over_len = nmax > self.C
        over_spread = ~over_len & (nmax - nmin > self.W)
        self.at_len[sel[over_len & (r > 0)]] = True
        self.at_spread[sel[over_spread & (r > 0)]] = True
        ok = ~(over_len | over_spread) & (r > 0)
        sel, r, nmax, code = sel[ok], r[ok], nmax[ok], code[ok]
        if j == 0:
            B = A[sel]
            B[:, 0] += 1
            e = self._enum_index_of(B)
            del B
        else:  # o_j -> o_j + 1: one term of the colex rank changes
            c = col[sel] - mn[sel] + (j - 1)
            e = R[sel] + binom[c + 1, j] - binom[c, j]
        up = nmax > M[sel]
        self.a_up[sel[up]] += r[up]
        self.a_same[sel[~up]] += r[~up]
        return sel.astype(self._idx), self._final[e], code

    def _departures(self, j, col, mn, R, first, last, table, cdt):
        """(sources, targets, rate codes) of the departures at position j (j first of its block,
        length >= 1): rate = block size; those leaving the box mark the spread boundary."""
        n, A, M, binom = self.n, self.A, self.M, self._binom
        sel = np.flatnonzero((first[:, j] == j) & (col >= 1))
        code = (last[sel, j].astype(np.int64) - j).astype(cdt)
        r = table[code]
        nmin = mn[sel] - 1 if j == 0 else mn[sel]
        nmax = M[sel] - 1 if j == n - 1 else M[sel]  # a lone longest queue shrinks
        over = nmax - nmin > self.W
        self.at_spread[sel[over]] = True
        sel, r, code = sel[~over], r[~over], code[~over]
        if j == 0:
            B = A[sel]
            B[:, 0] -= 1
            e = self._enum_index_of(B)
            del B
        else:  # o_j -> o_j - 1
            c = col[sel] - mn[sel] + (j - 1)
            e = R[sel] + binom[c - 1, j] - binom[c, j]
        if j == n - 1:
            self.d_down[sel] += r
        else:
            self.d_same[sel] += r
        return sel.astype(self._idx), self._final[e], code

    def _inflow(self, src: list, tgt: list, rate: list, table: np.ndarray) -> None:
        """The inflow matrix In, (In @ x)[t] = sum_s x[s] Q[s, t] over accepted transitions s -> t,
        and the total rate q[s] out of each state, from the transitions' rate codes."""
        S = self.S
        # one list at a time, so that the pieces and the whole coexist for one array only
        src = np.concatenate(src)
        tgt = np.concatenate(tgt)
        rate = np.concatenate(rate)
        In = sp.csr_matrix((rate, (tgt, src)), shape=(S, S))
        del src, tgt, rate
        data = np.empty(In.nnz)
        for a in range(0, In.nnz, 1 << 22):  # expand the codes in pieces: no big temporaries
            data[a:a + (1 << 22)] = table[In.data[a:a + (1 << 22)]]
        self.In = sp.csr_matrix((data, In.indices, In.indptr), shape=(S, S))
        del In, data
        self.q = np.bincount(self.In.indices, weights=self.In.data, minlength=S)  # rate out of s

    def _enum_index_of(self, B: np.ndarray) -> np.ndarray:
        m = B[:, 0].astype(np.int64)
        r = np.zeros(len(B), dtype=np.int64)
        for i in range(1, B.shape[1]):
            r += self._binom[B[:, i].astype(np.int64) - m + (i - 1), i]
        return self._base[m] + r

    def index(self, B: np.ndarray) -> np.ndarray:
        """State indices of sorted length vectors (rows of B, which must lie in the box)."""
        return self._final[self._enum_index_of(B)]


def _blocks(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """first[s, j], last[s, j]: the first and last position of j's block of equal lengths. An
    arrival joins the *last* queue of its block and a departure leaves the *first*, so the vector
    stays sorted."""
    S, n = A.shape
    small = np.int8 if n < 127 else np.int16
    first = np.zeros((S, n), dtype=small, order="F")
    last = np.full((S, n), n - 1, dtype=small, order="F")
    for j in range(1, n):
        first[:, j] = np.where(A[:, j] == A[:, j - 1], first[:, j - 1], j)
    for j in range(n - 2, -1, -1):
        last[:, j] = np.where(A[:, j] == A[:, j + 1], last[:, j + 1], j)
    return first, last


def _rate_table(n: int, d: int, lam: float, replacement: bool) -> np.ndarray:
    """The rates behind the small codes the transitions store: a departure's code is its block
    size - 1, an arrival's at position j of a block starting at f is n + f n + j."""
    gt = all_sampled_at_least(np.arange(n + 1) / n, d, replacement=replacement, n=n)
    table = np.zeros(n + n * n)
    table[:n] = np.arange(1, n + 1)
    for f0 in range(n):
        for j0 in range(f0, n):
            table[n + f0 * n + j0] = lam * n * (gt[n - f0] - gt[n - j0 - 1])
    return table
