"""Exact stationary law of the supermarket model for small n: the test oracle.

Model (``docs/models.md``, section "oracles"): n queues with Exp(1) service; customers arrive at
rate lam*n, each samples d queues (with or without replacement) and joins a shortest. The state
is the multiset of the n queue lengths, stored as the sorted vector a_0 <= ... <= a_{n-1}. With
u_l = #{queues with length >= l}, an arrival joins a queue of length l with probability
g(u_l) - g(u_{l+1}), g(u) = (u/n)^d with replacement and C(u, d)/C(n, d) without
(:func:`qlib.supermarket.theory.all_sampled_at_least`); each busy queue serves at rate 1.

Truncation. The chain is kept on the box of states with

    longest queue a_{n-1} <= length_cap   and   spread a_{n-1} - a_0 <= spread_cap,

and a transition that would leave the box is dropped (a self-loop), so the truncated chain is
again a CTMC. Its *boundary* is the set of states with a dropped transition (at the length cap,
or at the spread cap); ``truncation_mass`` is their stationary probability. The caps grow
until ``truncation_mass < tol``: each round extrapolates the decay of the stationary laws of the
maximum and of the spread past the caps (slope and curvature of their logarithms) to where they
fall below tol/3, growing each cap by at least one level and at most 4x, and each box by at most
64x the last (a cap doubles while its law does not decay yet); a box beyond ``max_states``
raises ValueError before it is built, and so does a round whose extrapolated final box exceeds
4 max_states. Checks of the truncation, reported with the result: the change of the tail fractions from the previous caps (``cap_change``), and the
identity E[u_1] = lam*n, exact for the untruncated chain; in the truncated chain the flux balance
of the total number of customers gives E[u_1]/n - lam = delta/n - lam*a, where a is the
probability that an arrival is dropped and delta the rate of dropped departures, both carried by
the boundary, so |E[u_1]/n - lam| <= truncation_mass (``identity_error``).

Solve. pi Q = 0 on the truncated box, by a sparse LU with the balance equation of the empty
state replaced by pi_empty = 1 (``solver="direct"``, small boxes), or iteratively
(``solver="iterative"``): iterative aggregation-disaggregation (Koury, McAllister & Stewart
1984) with the states aggregated by (total customers, longest queue) -- the total is a
birth-death process, which carries the slowest mode of the chain -- and a forward plus backward
Gauss-Seidel sweep over the levels of the total (no transition keeps the total, so each level's
block is diagonal and the sweep is exact per level), the fixed point accelerated by Anderson
mixing over the last 5 steps; each box starts from the solution on the previous one. The
reported ``residual`` is the normalised balance residual ||pi Q||_1 / sum_s pi(s) q(s) (pi
summing to 1, q(s) the total rate out of s): the unbalanced probability flux as a fraction of
all flux; each solve runs to residual <= max(1e-13, min(1e-10, 1e-3 tol)).

Size. The box has (C - W + 1) C(n - 1 + W, n - 1) + C(n - 1 + W, n) states (length cap C,
spread cap W; :func:`box_states`), about 0.55 kB of memory each at n = 10. JSQ(d) does not keep
the queues close at small n and d = 2: n = 10, d = 2, lam = 0.9 has P(spread >= 10) ~ 5e-4, so
tol = 1e-7 needs caps (22, 16), 17.6 million states (9.6 GB, about 100 s on one core), where
the plain box C(n + 22, n) would have 64 million.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations_with_replacement

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from qlib import _validate as V
from qlib.supermarket.point import Point
from qlib.supermarket.theory import all_sampled_at_least

#: Largest n accepted by the exact solve: the box grows like C(n + cap, n), so larger n only
#: fit at light load, where simulation is cheap anyway.
MAX_N = 24
#: Default bound on the states of one truncated box, about 0.55 kB of memory each (the issue's
#: n = 10, lam = 0.9, tol = 1e-7 case needs 17.6 million states, 9.6 GB); the memory actually
#: available is checked before each box is built.
MAX_STATES = 20_000_000
#: Default bound on the iterations of one iterative solve.
MAX_ITER = 3_000
#: ``solver="auto"`` uses the sparse LU up to this many states (or for n <= 2, where the
#: aggregation of the iterative solver is already the whole chain), the iterative solve above.
DIRECT_MAX_STATES = 5_000
#: ``solver="direct"`` is refused beyond this many states for n >= 3: the LU fills in
#: (n = 10: 2e8 nonzeros and 70 s already at 78,000 states).
DIRECT_LIMIT = 50_000
#: ``tol`` must lie in [TOL_MIN, TOL_MAX]: below TOL_MIN the boundary mass is at the level of
#: float64 round-off in the solve, above TOL_MAX the result is no oracle.
TOL_MIN, TOL_MAX = 1e-15, 1e-2
_BYTES_PER_STATE = 460  # + 8n: measured peak memory per state, 544 B at n = 10 (17.6M states)
_INITIAL_STATES = 50_000  # the first box is at most this big (its spread cap is lowered to fit)
_ANDERSON = 5  # history of the Anderson acceleration of the iterative solve (0: none)
_TRACE: list | None = None  # benchmarks may set a list: one dict per box solved


@dataclass(frozen=True)
class ExactEquilibrium:
    """Stationary law of the supermarket model for small n, from :func:`exact_equilibrium`.

    Arrays: ``tail_fraction[i]`` = E[u_i]/n, i = 0..L (L = ``levels``, or ``length_cap``);
    ``queue_length_distribution[l]`` = P(a given queue has length l) and
    ``max_length_distribution[l]`` = P(longest queue = l), both for l = 0..length_cap.
    """

    n: int
    d: int
    lam: float
    replacement: bool
    tail_fraction: np.ndarray
    queue_length_distribution: np.ndarray
    max_length_distribution: np.ndarray
    residual: float          # ||pi Q||_1 / sum pi q of the final solve (see the module docstring)
    truncation_mass: float   # stationary probability of the states with a dropped transition
    length_cap: int          # longest queue allowed
    spread_cap: int          # longest minus shortest queue allowed (= length_cap: no spread cap)
    states: int              # states of the final box
    solver: str              # "direct" (sparse LU) or "iterative" (aggregation + Gauss-Seidel)
    iterations: int          # iterations of the final solve (1 for the LU)
    identity_error: float    # E[u_1]/n - lam in the truncated chain; |.| <= truncation_mass
    cap_change: float        # max_i |tail_fraction change| from the previous caps (nan: none)
    rounds: int              # boxes solved
    capacity: int | None = None   # the bounded model's capacity L (None: the unbounded model)
    loss_probability: float = 0.0  # bounded model: stationary P(an arrival is lost)


# --------------------------------------------------------------------------- state space

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


class _Box:
    """The truncated state space, a dense index of its states, and the generator's transitions.

    States are numbered by (minimum m, colex rank of the offsets a_j - m), which is a bijection
    onto 0..S-1, and then reordered by (total customers T, longest queue M) so that the levels
    of T (and the groups (T, M) of the aggregation) are contiguous ranges.
    """

    def __init__(self, n, d, lam, replacement, C, W):
        self.n, self.C = n, C
        self.W = W = min(W, C) if n > 1 else C
        self._binom = binom = _binom_table(W + n + 2, n)
        shapes = _shapes(n, W if n > 1 else 0, binom)
        w = np.minimum(C - np.arange(C + 1), W) if n > 1 else np.zeros(C + 1, dtype=np.int64)
        count = np.array([math.comb(n - 1 + int(x), n - 1) for x in w], dtype=np.int64)
        self._base = np.r_[0, np.cumsum(count)[:-1]]
        dtype = np.int16 if C + 1 < 2**15 else np.int32
        A = np.concatenate([shapes[:count[m]].astype(dtype) + dtype(m) for m in range(C + 1)])
        del shapes
        S = len(A)
        idx = np.int32 if S < 2**31 else np.int64
        T = A.sum(axis=1, dtype=np.int64).astype(np.int32)
        M = A[:, -1].astype(np.int32)
        order = np.lexsort((M, T))  # stable: levels of the total, then of the maximum
        A, T, M = np.asfortranarray(A[order]), T[order], M[order]
        self._final = np.empty(S, dtype=idx)  # enumeration index -> final index
        self._final[order] = np.arange(S, dtype=idx)
        del order
        self.A, self.T, self.M, self.S = A, T, M, S
        mn = A[:, 0].astype(np.int64)
        R = self._enum_index_of(A)  # enumeration index of each state, from its lengths
        if not np.array_equal(self._final[R], np.arange(S, dtype=idx)):
            raise AssertionError("exact: the state index is not a bijection")  # a bug, not input

        # transitions, position by position: an arrival joins the *last* queue of its block of
        # equal lengths and a departure leaves the *first*, so the vector stays sorted
        small = np.int8 if n < 127 else np.int16
        first = np.zeros((S, n), dtype=small, order="F")
        last = np.full((S, n), n - 1, dtype=small, order="F")
        for j in range(1, n):
            first[:, j] = np.where(A[:, j] == A[:, j - 1], first[:, j - 1], j)
        for j in range(n - 2, -1, -1):
            last[:, j] = np.where(A[:, j] == A[:, j + 1], last[:, j + 1], j)
        gt = all_sampled_at_least(np.arange(n + 1) / n, d, replacement=replacement, n=n)
        src, tgt, rate = [], [], []
        self.a_same, self.a_up = np.zeros(S), np.zeros(S)    # accepted arrival rates keeping /
        self.d_same, self.d_down = np.zeros(S), np.zeros(S)  # raising the max; departures keeping /
        at_len = np.zeros(S, dtype=bool)     # lowering it; a dropped arrival at the length cap,
        at_spread = np.zeros(S, dtype=bool)  # a dropped arrival or departure at the spread cap
        # rates are stored as small codes (departure: block size - 1; arrival at position j of a
        # block starting at f: n + f n + j) and expanded after the sparse matrix is built
        table = np.zeros(n + n * n)
        table[:n] = np.arange(1, n + 1)
        for f0 in range(n):
            for j0 in range(f0, n):
                table[n + f0 * n + j0] = lam * n * (gt[n - f0] - gt[n - j0 - 1])
        cdt = np.uint8 if len(table) <= 256 else np.uint16
        for j in range(n):
            col = A[:, j].astype(np.int64)
            # arrival at position j (j last of its block): rate lam n (g(u_l) - g(u_{l+1}))
            sel = np.flatnonzero(last[:, j] == j)
            code = (n + first[sel, j].astype(np.int64) * n + j).astype(cdt)
            r = table[code]
            new = col[sel] + 1
            nmax = np.maximum(M[sel], new)
            if j == 0:  # a lone shortest queue: the minimum rises
                nmin = np.minimum(A[sel, 1], new) if n > 1 else new
            else:
                nmin = mn[sel]
            over_len = nmax > C
            over_spread = ~over_len & (nmax - nmin > W)
            at_len[sel[over_len & (r > 0)]] = True
            at_spread[sel[over_spread & (r > 0)]] = True
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
            src.append(sel.astype(idx)); tgt.append(self._final[e]); rate.append(code)
            up = nmax > M[sel]
            self.a_up[sel[up]] += r[up]
            self.a_same[sel[~up]] += r[~up]
            # departure at position j (j first of its block, length >= 1): rate = block size
            sel = np.flatnonzero((first[:, j] == j) & (col >= 1))
            code = (last[sel, j].astype(np.int64) - j).astype(cdt)
            r = table[code]
            nmin = mn[sel] - 1 if j == 0 else mn[sel]
            nmax = M[sel] - 1 if j == n - 1 else M[sel]  # a lone longest queue shrinks
            over = nmax - nmin > W
            at_spread[sel[over]] = True
            sel, r, code = sel[~over], r[~over], code[~over]
            if j == 0:
                B = A[sel]
                B[:, 0] -= 1
                e = self._enum_index_of(B)
                del B
            else:  # o_j -> o_j - 1
                c = col[sel] - mn[sel] + (j - 1)
                e = R[sel] + binom[c - 1, j] - binom[c, j]
            src.append(sel.astype(idx)); tgt.append(self._final[e]); rate.append(code)
            if j == n - 1:
                self.d_down[sel] += r
            else:
                self.d_same[sel] += r
        del first, last, R, col
        # one list at a time, so that the pieces and the whole coexist for one array only
        src = np.concatenate(src)
        tgt = np.concatenate(tgt)
        rate = np.concatenate(rate)
        # inflow matrix: (In @ x)[t] = sum_s x[s] Q[s, t] over accepted transitions s -> t
        In = sp.csr_matrix((rate, (tgt, src)), shape=(S, S))
        del src, tgt, rate
        data = np.empty(In.nnz)
        for a in range(0, In.nnz, 1 << 22):  # expand the codes in pieces: no big temporaries
            data[a:a + (1 << 22)] = table[In.data[a:a + (1 << 22)]]
        self.In = sp.csr_matrix((data, In.indices, In.indptr), shape=(S, S))
        del In, data
        self.q = np.bincount(self.In.indices, weights=self.In.data, minlength=S)  # rate out of s
        self.at_len, self.at_spread = at_len, at_spread
        self.boundary = at_len | at_spread

    def _enum_index_of(self, B: np.ndarray) -> np.ndarray:
        m = B[:, 0].astype(np.int64)
        r = np.zeros(len(B), dtype=np.int64)
        for i in range(1, B.shape[1]):
            r += self._binom[B[:, i].astype(np.int64) - m + (i - 1), i]
        return self._base[m] + r

    def index(self, B: np.ndarray) -> np.ndarray:
        """State indices of sorted length vectors (rows of B, which must lie in the box)."""
        return self._final[self._enum_index_of(B)]


# --------------------------------------------------------------------------- solvers

def _residual(box: _Box, x: np.ndarray) -> float:
    r = box.In @ x - box.q * x
    return float(np.abs(r).sum() / (box.q * x).sum())


def _solve_direct(box: _Box) -> tuple[np.ndarray, float, int]:
    """Sparse LU of pi Q = 0 with the empty state's equation replaced by pi_empty = 1."""
    S = box.S
    Mx = (box.In - sp.diags(box.q)).tocsr()
    # row 0 is the empty state (total 0 comes first); a unit row keeps the LU sparse
    e0 = sp.csr_matrix((np.array([1.0]), (np.array([0]), np.array([0]))), shape=(1, S))
    Mx = sp.vstack([e0, Mx[1:]]).tocsc()
    b = np.zeros(S)
    b[0] = 1.0
    x = spla.splu(Mx).solve(b)
    x = np.maximum(x, 0.0)  # round-off on transient states (zero mass without replacement)
    x /= x.sum()
    return x, _residual(box, x), 1


def _solve_iterative(box: _Box, x0: np.ndarray | None, target: float, max_iter: int
                     ) -> tuple[np.ndarray, float, int]:
    """Aggregation by (total, max) + forward/backward block Gauss-Seidel over the totals."""
    S, T, M = box.S, box.T, box.M
    # groups (T, M) and levels T are contiguous ranges of the state order
    code = T.astype(np.int64) * (box.C + 2) + M
    gstart = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    G = len(gstart)
    gid = np.repeat(np.arange(G, dtype=np.int32), np.diff(np.r_[gstart, S]))
    gcode = code[gstart]
    gsize = np.diff(np.r_[gstart, S]).astype(float)

    def group_of(c):
        p = np.searchsorted(gcode, c)
        p = np.minimum(p, G - 1)
        return np.where(gcode[p] == c, p, -1)

    stride = box.C + 2
    nbrs = [(group_of(gcode + stride), box.a_same), (group_of(gcode + stride + 1), box.a_up),
            (group_of(gcode - stride), box.d_same), (group_of(gcode - stride - 1), box.d_down)]
    lstart = np.flatnonzero(np.r_[True, T[1:] != T[:-1]])
    lend = np.r_[lstart[1:], S]
    In, q = box.In, box.q
    ip, ind, dat = In.indptr, In.indices, In.data
    # row blocks of the inflow matrix per level of the total, as views (no copy)
    blocks = [(a, b, sp.csr_matrix((dat[ip[a]:ip[b]], ind[ip[a]:ip[b]], ip[a:b + 1] - ip[a]),
                                   shape=(b - a, S), copy=False)) for a, b in zip(lstart, lend)]
    qb = [q[a:b] for a, b in zip(lstart, lend)]
    e0 = np.zeros(G)
    e0[0] = 1.0

    del code
    uniform = [np.add.reduceat(rk, gstart) / gsize for _, rk in nbrs]  # group rates, uniform law

    def sweep(x):
        # aggregation: the chain of the groups under the conditional law of x within each group
        # (uniform where a group has no mass yet), solved exactly
        X = np.add.reduceat(x, gstart)
        has = X > 0
        Xs = np.where(has, X, 1.0)
        rows, cols, vals = [], [], []
        for (nb, rk), un in zip(nbrs, uniform):
            rk_g = np.where(has, np.add.reduceat(x * rk, gstart) / Xs, un)
            ok = (nb >= 0) & (rk_g > 0)
            rows.append(np.flatnonzero(ok)); cols.append(nb[ok]); vals.append(rk_g[ok])
        rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        out = np.bincount(rows, weights=vals, minlength=G)
        Qa = sp.csr_matrix((vals, (cols, rows)), shape=(G, G)) - sp.diags(out)
        Qa = sp.vstack([sp.csr_matrix(e0[None, :]), Qa.tocsr()[1:]]).tocsc()
        pa = np.maximum(spla.splu(Qa).solve(e0), 0.0)
        pa /= pa.sum()
        # disaggregation: rescale each group to its aggregate probability
        x = x * np.where(has, pa / Xs, 0.0)[gid]
        if not has.all():
            empty = ~has[gid]
            x[empty] = (pa / gsize)[gid[empty]]
            del empty
        # smoothing: block Gauss-Seidel over the levels of the total, up then down
        for (a, b, Ib), qq in zip(blocks, qb):
            x[a:b] = (Ib @ x) / qq
        for (a, b, Ib), qq in zip(reversed(blocks), reversed(qb)):
            x[a:b] = (Ib @ x) / qq
        x /= x.sum()
        return x

    x = np.zeros(S) if x0 is None else x0.copy()
    r = math.inf
    # Anderson acceleration (type II) of the fixed point x = sweep(x) over the last `depth`
    # steps. The step change ||sweep(x) - x||_1 is the cheap convergence proxy and safeguard
    # (history reset when it grows); the true residual is computed when the proxy is small.
    depth = _ANDERSON
    dF = np.zeros((depth, S)) if depth else None
    dG = np.zeros((depth, S)) if depth else None
    k, f_old, g_old, fn_old = 0, None, None, math.inf
    proxy = 4.0 * target
    for it in range(1, max_iter + 1):
        g = sweep(x)
        f = g - x
        fn = float(np.abs(f).sum())
        if fn <= proxy:
            r = _residual(box, g)
            if r <= target:
                return g, r, it
            proxy = fn * 0.5 * target / r  # the proxy was too lax by r / target
        if not depth:
            x = g
            continue
        if fn > 2.0 * fn_old:  # the extrapolation went astray: restart from the plain step
            k, f_old, fn_old, x = 0, None, math.inf, g
            continue
        if f_old is not None:
            np.subtract(f, f_old, out=dF[k % depth])
            np.subtract(g, g_old, out=dG[k % depth])
            k += 1
        f_old, g_old, fn_old = f, g, fn
        kk = min(k, depth)
        x = g
        if kk:
            F = dF[:kk]
            # small dense products by einsum, not BLAS: a threaded BLAS on busy cores costs
            # more than the products (measured 2x on the whole solve)
            H = np.einsum("ik,jk->ij", F, F, optimize=False)
            H += 1e-14 * np.trace(H) * np.eye(kk)
            try:
                gam = np.linalg.solve(H, np.einsum("ik,k->i", F, f, optimize=False))
            except np.linalg.LinAlgError:
                continue
            xa = g.copy()
            for i in range(kk):
                xa -= gam[i] * dG[i]
            np.maximum(xa, 0.0, out=xa)
            x = xa / xa.sum()
    if r == math.inf:
        r = _residual(box, x)
    raise ValueError(f"max_iter: the iterative solve did not reach the residual {target:.1e} within "
                     f"max_iter = {max_iter} iterations (residual {r:.2e}, {S} states); raise max_iter")


# --------------------------------------------------------------------------- the oracle

def _check(n, d, lam, replacement, tol, max_states, max_iter, solver):
    n = V.integer("n", n, low=1, high=MAX_N)
    p = Point(n, d, lam, replacement=replacement)
    n, d, lam, replacement = p.n, p.d, p.lam, p.replacement
    tol = V.real("tol", tol, low=TOL_MIN, high=TOL_MAX, low_open=False, high_open=False)
    max_states = V.integer("max_states", max_states, low=1, high=10**9)
    max_iter = V.integer("max_iter", max_iter, low=1, high=10**6)
    solver = V.choice("solver", solver, ("auto", "direct", "iterative"))
    return n, d, lam, replacement, tol, max_states, max_iter, solver


def _fit(name: str, n: int, C: int, W: int, max_states: int, why: str) -> None:
    s = box_states(n, C, W)
    if s > max_states:
        raise ValueError(f"{name}: {why} needs length cap {C} and spread cap {min(W, C)}, a box of {s} "
                         f"states, more than max_states = {max_states}; raise max_states (about "
                         f"{_BYTES_PER_STATE + 8 * n} bytes a state) or tol")
    V.memory("max_states", s * (_BYTES_PER_STATE + 8 * n), f"{s} states x ~{_BYTES_PER_STATE + 8 * n} bytes")


def _grow(cap: int, law: np.ndarray, goal: float) -> tuple[int, bool]:
    """Next cap: where the law (of the maximum, or of the spread) extrapolated past ``cap``
    falls below ``goal``, within cap + 1 .. 4 cap; and whether that is an extrapolation.

    log law is extrapolated from its last two steps, with their slope and (non-positive)
    curvature: the laws of the maximum and of the spread decay geometrically or faster. Where
    the law does not decay yet at the cap (the box is far too small), the cap doubles.
    """
    lo, hi = cap + 1, 4 * max(cap, 1)
    if cap < 2 or not np.all(law[cap - 2: cap + 1] > 0):
        return min(hi, max(lo, 2 * cap)), False
    d1 = math.log(law[cap] / law[cap - 1])
    d0 = math.log(law[cap - 1] / law[cap - 2])
    if d1 > -1e-4:
        return min(hi, max(lo, 2 * cap)), False
    c = min(d1 - d0, 0.0)
    need, drop, k = math.log(goal / law[cap]), 0.0, 0
    while drop > need and k < 1000 * cap:
        k += 1
        drop += d1 + c * k
    return cap + k, True


def exact_equilibrium(n: int, d: int, lam: float, *, levels: int | None = None,
                      replacement: bool = True, tol: float = 1e-10, max_states: int = MAX_STATES,
                      max_iter: int = MAX_ITER, solver: str = "auto",
                      capacity: int | None = None) -> ExactEquilibrium:
    """Exact stationary law of the supermarket model with n queues (``docs/models.md``, "oracles").

    Solves the CTMC on sorted queue-length vectors, truncated to longest queue <= length_cap and
    spread (longest - shortest) <= spread_cap, with transitions out of the box dropped; the caps
    grow until the stationary mass of the states with a dropped transition is below ``tol`` (see
    the module docstring for the model, the truncation, the solvers and the residual).

    Parameters: ``n`` in [1, MAX_N]; ``d``, ``lam``, ``replacement`` as everywhere
    (:class:`qlib.supermarket.point.Point`); ``levels`` >= 0 (the first length cap is
    levels + 2; ``tail_fraction`` has levels + 1 entries, or length_cap + 1 when None); ``tol``
    in [1e-15, 1e-2]; ``max_states`` bounds each box and ``max_iter`` each iterative solve: both
    raise ValueError naming themselves, the box size *before* it is built. ``solver``: "auto"
    (sparse LU up to DIRECT_MAX_STATES states or for n <= 2, else iterative), "direct",
    "iterative".

    ``capacity`` = L: the bounded model instead (docs/models.md#bounded-model), whose queues hold
    at most L customers, an arrival at a full queue being lost: its chain lives on the box of
    lengths <= L, solved once with no truncation (``truncation_mass`` 0; ``loss_probability``
    the stationary probability that an arrival is lost; ``identity_error`` is then
    E[u_1]/n - lam (1 - loss_probability), zero up to the solve's residual).
    """
    n, d, lam, replacement, tol, max_states, max_iter, solver = _check(
        n, d, lam, replacement, tol, max_states, max_iter, solver)
    if levels is not None:
        levels = V.integer("levels", levels, low=0, high=10**9)
    if capacity is not None:
        return _bounded_equilibrium(n, d, lam, replacement, V.integer("capacity", capacity, low=1, high=10**9),
                                    levels, max_states, max_iter, solver)
    C = max((levels if levels is not None else 0) + 2, 2)
    _fit("levels" if levels is not None else "n", n, C, 1, max_states, f"levels = {levels}")
    lo, hi = 1, C  # the first spread cap: the largest that keeps the first box small
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if box_states(n, C, mid) <= min(max_states, _INITIAL_STATES) else (lo, mid - 1)
    W = lo
    goal = tol / 3  # aim below tol, so that one more round is rarely needed
    target = max(1e-13, min(1e-10, 1e-3 * tol))  # residual of each solve
    prev_tail = prev_A = prev_x = None
    rounds = 0
    while True:
        box = _Box(n, d, lam, replacement, C, W)
        W = box.W
        rounds += 1
        use = solver if solver != "auto" else (
            "direct" if box.S <= DIRECT_MAX_STATES or n <= 2 else "iterative")
        if use == "direct" and n > 2 and box.S > DIRECT_LIMIT:
            raise ValueError(f"solver: the direct solve is limited to {DIRECT_LIMIT} states for n >= 3 "
                             f"(the LU fills in); this box has {box.S}: use solver='iterative' or 'auto'")
        if use == "direct":
            x, res, its = _solve_direct(box)
        else:
            x0 = None
            if prev_A is not None:  # warm start: the previous box lies inside this one
                x0 = np.zeros(box.S)
                x0[box.index(prev_A)] = prev_x
            prev_A = prev_x = None  # free them before the solve
            x, res, its = _solve_iterative(box, x0, target, max_iter)
            del x0
        occ = np.zeros(C + 2)  # E[#queues with length l], l = 0..C
        for j in range(n):
            occ += np.bincount(box.A[:, j], weights=x, minlength=C + 2)[: C + 2]
        tail = np.minimum(np.cumsum(occ[::-1])[::-1] / n, 1.0)  # E[u_l]/n, l = 0..C+1
        tail[0] = 1.0  # u_0 = n in every state (x sums to 1 only to round-off)
        max_law = np.bincount(box.M, weights=x, minlength=C + 1)[: C + 1]
        spread_law = np.bincount(box.M - box.A[:, 0], weights=x, minlength=C + 1)[: C + 1]
        mass = float(x[box.boundary].sum())
        mass_len = float(x[box.at_len].sum())
        mass_spread = float(x[box.at_spread].sum())
        change = math.nan
        if prev_tail is not None:
            k = min(len(prev_tail), len(tail))
            change = float(np.abs(tail[:k] - prev_tail[:k]).max())
        if _TRACE is not None:
            _TRACE.append(dict(C=C, W=W, S=box.S, mass=mass, mass_len=mass_len,
                               mass_spread=mass_spread, solver=use, iterations=its, residual=res,
                               change=change, max_law=max_law, spread_law=spread_law))
        if mass < tol:
            break
        # without a spread cap yet (W = C), the spread law at W says whether one must be set
        at_w = mass_spread if W < C else float(spread_law[W])
        grow_w = at_w >= tol / 2
        # the law of the maximum is distorted while the spread cap dominates the boundary:
        # then the spread cap grows first
        grow_c = mass_len >= tol / 2 and not (grow_w and mass_spread > 10 * mass_len)
        (Ce, sure_c), (We, sure_w) = _grow(C, max_law, goal), _grow(W, spread_law, goal)
        Ce = Ce if grow_c else C
        We = min(We if grow_w else W, Ce)
        sure = (sure_c or not grow_c) and (sure_w or not grow_w)
        if sure and box_states(n, Ce, We) > 4 * max_states:
            # the decay of the laws at the caps says where they must go: stop now, not after
            # ever larger boxes (the factor 4 allows for an extrapolation that overshoots)
            raise ValueError(
                f"max_states: truncation mass {mass:.2e} >= tol = {tol:g} at length cap {C}, spread "
                f"cap {W} ({box.S} states); the laws of the maximum and of the spread extrapolate to "
                f"caps about ({Ce}, {We}) for tol: {box_states(n, Ce, We)} states, more than "
                f"max_states = {max_states} (~{_BYTES_PER_STATE + 8 * n} bytes a state); raise "
                f"max_states or tol")
        C2 = min(Ce, 4 * C)
        W2 = min(We, 4 * W, C2)
        # a box beyond max_states, or 64 times the last one (an extrapolation from a box far
        # too small), falls back to the largest box that fits, down to one more level of each
        # cap that must grow
        limit = min(max_states, 64 * box.S)
        while box_states(n, C2, W2) > limit and (C2 > C + grow_c or W2 > W + grow_w):
            if (C2 - C) * W >= (W2 - W) * C and C2 > C + grow_c:
                C2 -= 1
                W2 = min(W2, C2)
            else:
                W2 -= 1
        if box_states(n, C2, W2) > max_states:
            raise ValueError(
                f"max_states: truncation mass {mass:.2e} >= tol = {tol:g} at length cap {C}, spread "
                f"cap {W} ({box.S} states); the next box (caps {C2}, {W2}) has "
                f"{box_states(n, C2, W2)} states, more than max_states = {max_states}, and the caps "
                f"extrapolated for tol are about ({Ce}, {We}): {box_states(n, Ce, We)} states "
                f"(~{_BYTES_PER_STATE + 8 * n} bytes each); raise max_states or tol")
        _fit("max_states", n, C2, W2, max_states, f"tol = {tol:g}")
        prev_tail, prev_A, prev_x = tail, box.A, x
        C, W = C2, W2
        del box
    L = levels if levels is not None else C
    out = np.zeros(L + 1)
    m = min(L, C) + 1
    out[:m] = tail[:m]
    return ExactEquilibrium(
        n=n, d=d, lam=lam, replacement=replacement, tail_fraction=out,
        queue_length_distribution=occ[: C + 1] / n, max_length_distribution=max_law,
        residual=res, truncation_mass=mass, length_cap=C, spread_cap=W, states=box.S,
        solver=use, iterations=its, identity_error=float(tail[1] - lam), cap_change=change,
        rounds=rounds)


def _bounded_equilibrium(n, d, lam, replacement, L, levels, max_states, max_iter, solver) -> ExactEquilibrium:
    """The exact stationary law of the bounded model (capacity L): one solve on the box of lengths <= L."""
    _fit("capacity", n, L, L, max_states, f"capacity = {L}")
    box = _Box(n, d, lam, replacement, L, L)
    use = solver if solver != "auto" else ("direct" if box.S <= DIRECT_MAX_STATES or n <= 2 else "iterative")
    x, res, its = _solve_direct(box) if use == "direct" else _solve_iterative(box, None, 1e-13, max_iter)
    occ = np.zeros(L + 1)
    for j in range(n):
        occ += np.bincount(box.A[:, j], weights=x, minlength=L + 1)[: L + 1]
    tail = np.minimum(np.cumsum(occ[::-1])[::-1] / n, 1.0)
    tail[0] = 1.0
    full = (box.A == L).sum(axis=1)  # u_L of each state
    g = all_sampled_at_least(np.arange(n + 1) / n, d, replacement=replacement, n=n)
    loss = float(np.dot(x, g[full]))
    out = np.zeros((levels if levels is not None else L) + 1)
    m = min(out.size, L + 1)
    out[:m] = tail[:m]
    return ExactEquilibrium(
        n=n, d=d, lam=lam, replacement=replacement, tail_fraction=out, queue_length_distribution=occ / n,
        max_length_distribution=np.bincount(box.M, weights=x, minlength=L + 1)[: L + 1], residual=res,
        truncation_mass=0.0, length_cap=L, spread_cap=L, states=box.S, solver=use, iterations=its,
        identity_error=float(tail[1] - lam * (1 - loss)), cap_change=math.nan, rounds=1,
        capacity=L, loss_probability=loss)


def exact_tail_fraction(n: int, d: int, lam: float, levels: int, *, replacement: bool = True,
                        tol: float = 1e-10) -> np.ndarray:
    """Exact stationary E[u_i]/n for i = 0..levels, for small n (the test oracle).

    The caps grow until the stationary mass of the truncation boundary is below ``tol``
    (1e-10: far below any simulation error bar); see :func:`exact_equilibrium`.
    """
    levels = V.integer("levels", levels, low=0, high=10**9)
    return exact_equilibrium(n, d, lam, levels=levels, replacement=replacement, tol=tol).tail_fraction


def exact_stationary(n: int, d: int, lam: float, cap: int, *, replacement: bool = True):
    """Stationary distribution on the box of lengths <= ``cap`` (no spread cap, no cap growth).

    Arrivals that would make a queue longer than ``cap`` are lost. Returns (counts, pi):
    counts[s, i] = u_i in state s for i = 0..cap (shape (S, cap + 1)) and pi[s] (shape (S,)).
    """
    n, d, lam, replacement, *_ = _check(n, d, lam, replacement, 1e-10, MAX_STATES, MAX_ITER, "auto")
    cap = V.integer("cap", cap, low=1, high=10**9)
    _fit("cap", n, cap, cap, MAX_STATES, f"cap = {cap}")
    box = _Box(n, d, lam, replacement, cap, cap)
    if box.S <= DIRECT_MAX_STATES or n <= 2:
        x, _, _ = _solve_direct(box)
    else:
        x, _, _ = _solve_iterative(box, None, 1e-13, MAX_ITER)
    counts = np.stack([(box.A >= i).sum(axis=1) for i in range(cap + 1)], axis=1)
    return counts, x
