"""The balance equations pi Q = 0 of the exact oracle's truncated box, solved two ways.

``direct``: a sparse LU with the balance equation of the empty state replaced by pi_empty = 1.
``iterative``: iterative aggregation-disaggregation (Koury, McAllister & Stewart 1984) with the
states aggregated by (total customers, longest queue) -- the total is a birth-death process, which
carries the slowest mode of the chain -- and a forward plus backward Gauss-Seidel sweep over the
levels of the total (no transition keeps the total, so each level's block is diagonal and the
sweep is exact per level), the fixed point accelerated by Anderson mixing over the last 5 steps.
The residual is the normalised balance residual ||pi Q||_1 / sum_s pi(s) q(s) (pi summing to 1,
q(s) the total rate out of s): the unbalanced probability flux as a fraction of all flux.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from qlib.supermarket.box import Box

_ANDERSON = 5  # history of the Anderson acceleration of the iterative solve (0: none)


def balance_residual(box: Box, x: np.ndarray) -> float:
    r = box.In @ x - box.q * x
    return float(np.abs(r).sum() / (box.q * x).sum())


def solve_direct(box: Box) -> tuple[np.ndarray, float, int]:
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
    return x, balance_residual(box, x), 1


class _Sweep:
    """One step x -> sweep(x) of the iterative solve: aggregation by (total, max), then a
    forward/backward block Gauss-Seidel over the levels of the total."""

    def __init__(self, box: Box):
        S, T, M = box.S, box.T, box.M
        # groups (T, M) and levels T are contiguous ranges of the state order
        code = T.astype(np.int64) * (box.C + 2) + M
        self.gstart = gstart = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        self.G = G = len(gstart)
        self.gid = np.repeat(np.arange(G, dtype=np.int32), np.diff(np.r_[gstart, S]))
        gcode = code[gstart]
        self.gsize = np.diff(np.r_[gstart, S]).astype(float)

        def group_of(c):
            p = np.searchsorted(gcode, c)
            p = np.minimum(p, G - 1)
            return np.where(gcode[p] == c, p, -1)

        stride = box.C + 2
        self.nbrs = [(group_of(gcode + stride), box.a_same), (group_of(gcode + stride + 1), box.a_up),
                     (group_of(gcode - stride), box.d_same), (group_of(gcode - stride - 1), box.d_down)]
        lstart = np.flatnonzero(np.r_[True, T[1:] != T[:-1]])
        lend = np.r_[lstart[1:], S]
        In, q = box.In, box.q
        ip, ind, dat = In.indptr, In.indices, In.data
        # row blocks of the inflow matrix per level of the total, as views (no copy)
        self.blocks = [(a, b, sp.csr_matrix((dat[ip[a]:ip[b]], ind[ip[a]:ip[b]], ip[a:b + 1] - ip[a]),
                                            shape=(b - a, S), copy=False)) for a, b in zip(lstart, lend)]
        self.qb = [q[a:b] for a, b in zip(lstart, lend)]
        self.e0 = np.zeros(G)
        self.e0[0] = 1.0
        del code
        self.uniform = [np.add.reduceat(rk, gstart) / self.gsize for _, rk in self.nbrs]  # uniform law

    def _aggregate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The chain of the groups under the conditional law of x within each group (uniform where
        a group has no mass yet), solved exactly: (its law, x's group masses, which have mass)."""
        gstart, G, e0 = self.gstart, self.G, self.e0
        X = np.add.reduceat(x, gstart)
        has = X > 0
        Xs = np.where(has, X, 1.0)
        rows, cols, vals = [], [], []
        for (nb, rk), un in zip(self.nbrs, self.uniform):
            rk_g = np.where(has, np.add.reduceat(x * rk, gstart) / Xs, un)
            ok = (nb >= 0) & (rk_g > 0)
            rows.append(np.flatnonzero(ok))
            cols.append(nb[ok])
            vals.append(rk_g[ok])
        rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        out = np.bincount(rows, weights=vals, minlength=G)
        Qa = sp.csr_matrix((vals, (cols, rows)), shape=(G, G)) - sp.diags(out)
        Qa = sp.vstack([sp.csr_matrix(e0[None, :]), Qa.tocsr()[1:]]).tocsc()
        pa = np.maximum(spla.splu(Qa).solve(e0), 0.0)
        pa /= pa.sum()
        return pa, Xs, has

    def __call__(self, x: np.ndarray) -> np.ndarray:
        pa, Xs, has = self._aggregate(x)
        gid = self.gid
        # disaggregation: rescale each group to its aggregate probability
        x = x * np.where(has, pa / Xs, 0.0)[gid]
        if not has.all():
            empty = ~has[gid]
            x[empty] = (pa / self.gsize)[gid[empty]]
            del empty
        # smoothing: block Gauss-Seidel over the levels of the total, up then down
        for (a, b, Ib), qq in zip(self.blocks, self.qb):
            x[a:b] = (Ib @ x) / qq
        for (a, b, Ib), qq in zip(reversed(self.blocks), reversed(self.qb)):
            x[a:b] = (Ib @ x) / qq
        x /= x.sum()
        return x


def _anderson_step(g: np.ndarray, f: np.ndarray, dF: np.ndarray, dG: np.ndarray, kk: int
                   ) -> np.ndarray | None:
    """The Anderson (type II) extrapolation of the fixed point from the last kk differences
    (None: the least-squares system is singular; the plain step then stands)."""
    F = dF[:kk]
    # small dense products by einsum, not BLAS: a threaded BLAS on busy cores costs
    # more than the products (measured 2x on the whole solve)
    H = np.einsum("ik,jk->ij", F, F, optimize=False)
    H += 1e-14 * np.trace(H) * np.eye(kk)
    try:
        gam = np.linalg.solve(H, np.einsum("ik,k->i", F, f, optimize=False))
    except np.linalg.LinAlgError:
        return None
    xa = g.copy()
    for i in range(kk):
        xa -= gam[i] * dG[i]
    np.maximum(xa, 0.0, out=xa)
    return xa / xa.sum()


def solve_iterative(box: Box, x0: np.ndarray | None, target: float, max_iter: int
                     ) -> tuple[np.ndarray, float, int]:
    """Aggregation by (total, max) + forward/backward block Gauss-Seidel over the totals, to the
    residual ``target``; ValueError naming max_iter when it is not reached."""
    S = box.S
    sweep = _Sweep(box)
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
            r = balance_residual(box, g)
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
            xa = _anderson_step(g, f, dF, dG, kk)
            if xa is not None:
                x = xa
    if r == math.inf:
        r = balance_residual(box, x)
    raise ValueError(f"max_iter: the iterative solve did not reach the residual {target:.1e} within "
                     f"max_iter = {max_iter} iterations (residual {r:.2e}, {S} states); raise max_iter")
