"""The refined mean field of the supermarket model: the 1/n and 1/n^2 corrections to the fluid.

Model: the count chain of :mod:`qlib.supermarket.simulation`, x_i = u_i/n = fraction of queues with
length >= i (i = 1..L). It is a density-dependent population process: each event moves one
coordinate by +-1/n, at rate n beta_l(x) with

- x_i -> x_i + 1/n (an arrival joins a queue of length i-1) at rate n lam (g(x_{i-1}) - g(x_i)),
- x_i -> x_i - 1/n (a departure from a queue of length i) at rate n (x_i - x_{i+1}),

g(x) = x^d (sampling with replacement), x_0 = 1, x_{L+1} = 0. The drift is the fluid ODE
f(x) = sum_l l beta_l(x) of :func:`qlib.supermarket.theory.fluid_drift`.

Order 1 (Gast & Van Houdt, "A refined mean field approximation", Proc. ACM Meas. Anal. Comput.
Syst. 1(2), 2017, Thm. 3.1): with x* the fixed point, A = Df(x*) (Jacobian),
B_{i,jk} = d^2 f_i / dx_j dx_k (x*) (Hessian), and Q = sum_l l l^T beta_l(x*) (here diagonal),

    A W + W A^T + Q = 0                       (Lyapunov: n Cov(x) -> W)
    V = -A^{-1} (1/2) sum_{jk} B_{.,jk} W_jk   (then E[x] = x* + V/n + o(1/n)).

Order 2 (Gast, Bortolussi & Tribastone, "Size expansions of mean field approximation: transient
and steady-state analysis", Performance Evaluation, 2019 (IFIP Performance 2018; preprint
hal-01891636); the same equations as ``computePiVA`` in ``refinedRefined_fixedPoint.py`` of the
authors' ``rmf_tool``): E[x] = x* + V/n + A2/n^2.
Derivation (a moment expansion, repeated here because the without-replacement terms below are
ours). Write eps = 1/n, y = x - x*, and M_k = E[y^{(x)k}] (k-th moment tensor about x*). The
generator is L h(x) = sum_l n beta_l(x) (h(x + eps l) - h(x)); stationarity gives E[L h] = 0.
For h = y, y^2, y^3, y^4 (symmetrised tensor powers) the increments are exact polynomials:

    L y     = f(x)
    L y^2   = 2 sym(f (x) y) + eps Q(x)
    L y^3   = 3 sym(f (x) y^2) + 3 eps sym(Q(x) (x) y) + eps^2 R(x)
    L y^4   = 4 sym(f (x) y^3) + 6 eps sym(Q(x) (x) y^2) + O(eps^2 y) ,

with R = sum_l l^3 beta_l (here R_iii = up - down = f_i, so R(x*) = 0). Taylor-expand f, Q, R
at x* (F_k = k-th derivative tensor of f, Q' and Q'' those of Q) and use the scaling
M_1 = eps V + eps^2 A2, M_2 = eps W + eps^2 B, M_3 = eps^2 C, M_4 = eps^2 D, M_5, M_6 = O(eps^3),
which the equations reproduce order by order. Collecting powers of eps:

    eps   , h = y^2 :  A W + W A^T + Q = 0
    eps   , h = y   :  A V + F_2:W/2 = 0
    eps^2 , h = y^4 :  (A (+) A (+) A (+) A) D + 6 sym(Q (x) W) = 0,  so D = 3 sym(W (x) W)
                       (D_ijkl = W_ij W_kl + W_ik W_jl + W_il W_jk: Isserlis)
    eps^2 , h = y^3 :  (A (+) A (+) A) C + 3/2 sym(F_2:D) + 3 sym(Q (x) V) + 3 sym(Q'.W) + R = 0
    eps^2 , h = y^2 :  A B + B A^T + sym(F_2:C) + sym(F_3:D)/3 + Q'.V + Q'':W/2 = 0
    eps^2 , h = y   :  A A2 + F_2:B/2 + F_3:C/6 + F_4:D/24 = 0

where (A (+) A (+) A) C is A applied to each index of C in turn, ':' contracts the derivative
indices of F_k with the leading indices of the moment, and sym averages over index orders.
So B is the 1/n^2 term of the second moment about x* (n Cov(x) = W + (B - V V^T)/n + ...)
and C the leading third central moment (n^2 E[(x - x*)^3] -> C).

Structure used for speed: f_i and Q_ii depend on x_{i-1}, x_i, x_{i+1} separately (no mixed
partials), so each F_k is an L x L matrix of pure derivatives d^k f_i/dx_j^k, taken by JAX
autodiff (nested forward mode along each coordinate); D is never formed (its contractions
follow from Isserlis); the three-index equation for C is solved exactly by a complex Schur
form of A and one triangular Sylvester solve per slice (O(L^4) work, L^3 memory); W and B by
Bartels-Stewart (SciPy). A test compares the structured derivatives with full autodiff tensors.

Sampling *without* replacement has an n-dependent drift, g_n(x) = prod_{m<d} (x - m/n)/(1 - m/n)
= x^d + eps h_1(x) + eps^2 h_2(x) + O(eps^3); only arrivals depend on n, so f = f_0 + eps f_1 +
eps^2 f_2 and Q = Q_0 + eps Q_1 with Q_1 = diag(f_1). Carrying these through the same
expansion adds, at order 1, f_1 to the V equation (the fixed point moves) and, at order 2,

    y^3 : + 3 sym(f_1 (x) W)
    y^2 : + f_1 (x) V + V (x) f_1 + Df_1 W + W Df_1^T + Q_1
    y   : + Df_1 V + D^2 f_1:W/2 + f_2 ,

all by autodiff in eps at eps = 0.

Why it matters here: at lam = 0.999, d = 100 the simulated tail at length 3 is many times the
fluid value at n = 10^5 (docs/models.md); see the notebook 01, figure (d). There s_3 = 4.1e-5,
V_3 = 22.5 and A_3 = 5.9e6: at n = 10^5 the 1/n^2 term (5.9e-4) is 2.6 times the 1/n term
(2.2e-4), so the expansion has not converged there (it has by n = 10^6, ratio 0.26). The ratio
|A_i|/(n |V_i|) is the expansion's own convergence check; at d = 2 the tests find order 2 inside
a simulation's 99% CI where that ratio is below 0.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.linalg import schur, solve_continuous_lyapunov
from scipy.linalg.lapack import ztrsyl

from qlib import _validate as V
from qlib.supermarket.point import Point
from qlib.supermarket.theory import fluid_fixed_point

#: levels are added until the fluid fixed point falls below this (it then stays ~0: the
#: tail decays doubly exponentially, so higher levels carry nothing at order 1/n either).
NEGLIGIBLE = 1e-30
MAX_LEVELS = 400


@dataclass(frozen=True)
class RefinedMeanField:
    """Fluid fixed point and its 1/n (and, at ``order=2``, 1/n^2) correction, for levels 0..L.

    - ``fixed_point[i]`` = s_i, the fluid fraction of queues with length >= i (s_0 = 1);
    - ``correction[i]`` = V_i: E[u_i]/n = s_i + V_i/n + o(1/n) (V_0 = 0, and V_1 = 0 exactly
      since E[u_1] = lam n for every n);
    - ``covariance[i, j]`` = W_ij (levels 1..L in rows 1..L, row/column 0 zero):
      n Cov(u_i/n, u_j/n) -> W_ij;
    - ``jacobian`` (A, levels 1..L) of the drift at the fixed point;
    - ``order``: 1 or 2, the number of terms in 1/n that :meth:`tail_fraction` uses;
    - ``correction2[i]`` = A_i (``order=2`` only, else None): E[u_i]/n = s_i + V_i/n + A_i/n^2
      + o(1/n^2) (A_0 = A_1 = 0);
    - ``covariance2[i, j]`` (``order=2`` only, else None), same layout as ``covariance``:
      n Cov(u_i/n, u_j/n) = W_ij + covariance2_ij/n + o(1/n); it is B - V V^T, B being the 1/n^2
      term of the second moment about the fixed point (module docstring);
    - ``third_moment[i, j, k]`` = C_ijk (``order=2`` only; None where it is not needed, i.e.
      d = 1, where g is linear), levels 1..L in 1..L: n^2 E[(x_i - s_i)(x_j - s_j)(x_k - s_k)]
      -> C_ijk.
    """

    d: int
    lam: float
    replacement: bool
    fixed_point: np.ndarray
    correction: np.ndarray
    covariance: np.ndarray
    jacobian: np.ndarray
    order: int = 1
    correction2: np.ndarray | None = None
    covariance2: np.ndarray | None = None
    third_moment: np.ndarray | None = None

    @property
    def levels(self) -> int:
        return self.fixed_point.size - 1

    @property
    def relaxation_time(self) -> float:
        """tau = 1/min|Re eig A| (model time): the slowest linear mode of the fluid ODE."""
        return float(1.0 / np.min(np.abs(np.linalg.eigvals(self.jacobian).real)))

    def tail_fraction(self, n: int) -> np.ndarray:
        """Refined E[u_i]/n = s_i + V_i/n (+ A_i/n^2 at order 2), clipped to [0, 1] (i = 0..L)."""
        n = V.integer("n", n, low=1)
        if self.order == 1:
            return np.clip(self.fixed_point + self.correction / n, 0.0, 1.0)
        return np.clip(self.fixed_point + self.correction / n + self.correction2 / n**2, 0.0, 1.0)

    def queue_length_distribution(self, n: int) -> np.ndarray:
        """Refined fraction of queues with length exactly i: t_i - t_{i+1}, i = 0..L."""
        t = self.tail_fraction(n)
        return t - np.append(t[1:], 0.0)


def _drift(x, d: int, lam: float, eps):
    """Fluid drift for levels 1..L with g = falling-factorial ratio at eps = 1/n (eps = 0: x^d)."""
    full = jnp.concatenate([jnp.ones(1, x.dtype), x, jnp.zeros(1, x.dtype)])
    m = jnp.arange(d, dtype=x.dtype)
    # prod_m (x - m eps)/(1 - m eps); at eps = 0 this is x^d, with exact derivatives at x = 0.
    g = jnp.prod((full[:, None] - m * eps) / (1.0 - m * eps), axis=-1) if d > 1 else full
    return lam * (g[:-2] - g[1:-1]) - (full[1:-1] - full[2:])


@jax.jit
def _derivatives_replacement(x, lam, d):
    """Jacobian A and Hessian B (B[i, j, k] = d^2 f_i/dx_j dx_k) of the drift with g = x^d.

    ``d`` is traced (a float), so every d shares one compile per number of levels.
    """
    def f(y):
        full = jnp.concatenate([jnp.ones(1, y.dtype), y, jnp.zeros(1, y.dtype)])
        g = full**d
        return lam * (g[:-2] - g[1:-1]) - (full[1:-1] - full[2:])

    return jax.jacfwd(f)(x), jax.hessian(f)(x)


@partial(jax.jit, static_argnames=("d",))
def _drift_eps_derivative(x, lam, *, d: int):
    """h = d f / d eps at eps = 0: the 1/n term of the without-replacement drift."""
    return jax.jacfwd(lambda e: _drift(x, d, lam, e))(jnp.zeros((), x.dtype))


def _noise(x, d: int, lam: float):
    """Diagonal of Q = sum_l l l^T beta_l: every event moves one coordinate by one unit."""
    full = np.concatenate([[1.0], x, [0.0]])
    g = full**d
    return lam * (g[:-2] - g[1:-1]) + (full[1:-1] - full[2:])


# --------------------------------------------------------------------------- order 2


@partial(jax.jit, static_argnames=("d", "replacement"))
def _order2_derivatives(x, lam, *, d: int, replacement: bool):
    """The derivatives that the 1/n^2 term needs, at the fixed point ``x`` (levels 1..L).

    Every returned matrix M has M[i, j] = a pure derivative in x_j of component i: the drift
    f_i and the noise Q_ii depend on each coordinate separately, so mixed partials vanish.
    Returns a dict: F2, F3, F4 (d^k f/dx_j^k, eps = 0), Q1x, Q2x (d^k Q_ii/dx_j^k), q (diag Q),
    r (diag R, up - down), and the eps = 1/n terms f1, Df1, D2f1, f2 (= d^2 f/deps^2 / 2), q1.
    ``d`` is static so that x^d is an integer power: exact derivatives at x = 0 as well.
    """
    L = x.shape[0]

    def rates(y, eps=None):
        """(arrival, departure) rates; eps = None: g = x^d, else the without-replacement g_eps."""
        full = jnp.concatenate([jnp.ones(1, y.dtype), y, jnp.zeros(1, y.dtype)])
        if eps is None:
            g = full**d  # integer_pow: the eps = 0 value of both forms, with a small graph
        else:  # prod_{m<d} (x - m eps)/(1 - m eps), as a loop: its derivatives stay small graphs
            g = jax.lax.fori_loop(0, d, lambda m, a: a * (full - m * eps) / (1.0 - m * eps),
                                  jnp.ones_like(full))
        up = lam * (g[:-2] - g[1:-1])
        down = full[1:-1] - full[2:]
        return up, down

    def drift(y, eps=None):
        up, down = rates(y, eps)
        return up - down

    def noise(y, eps=None):
        up, down = rates(y, eps)
        return up + down

    def pure(fun, ks):
        """{k: matrix of d^k fun_i / dx_j^k} for k in ks, by nested forward mode along e_j."""
        def along(e):
            h, out = (lambda t: fun(x + t * e)), {}
            for k in range(1, max(ks) + 1):
                h = jax.jacfwd(h)
                if k in ks:
                    out[k] = h(jnp.zeros((), x.dtype))
            return out
        return jax.vmap(along, out_axes=1)(jnp.eye(L, dtype=x.dtype))

    zero = jnp.zeros((), x.dtype)
    F = pure(drift, (2, 3, 4))
    Qx = pure(noise, (1, 2))
    out = dict(F2=F[2], F3=F[3], F4=F[4], Q1x=Qx[1], Q2x=Qx[2], q=noise(x), r=drift(x))
    if replacement or d == 1:
        z = jnp.zeros(L, x.dtype)
        out.update(f1=z, Df1=jnp.zeros((L, L), x.dtype), D2f1=jnp.zeros((L, L), x.dtype), f2=z, q1=z)
    else:
        def f1(y):
            return jax.jacfwd(lambda e: drift(y, e))(zero)
        F1 = pure(f1, (1, 2))
        out.update(f1=f1(x), Df1=F1[1], D2f1=F1[2],
                   f2=0.5 * jax.jacfwd(jax.jacfwd(lambda e: drift(x, e)))(zero),
                   q1=jax.jacfwd(lambda e: noise(x, e))(zero))
    return out


def _sym3(T: np.ndarray) -> np.ndarray:
    """Average of a three-index tensor over the 6 orders of its indices."""
    return (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0)
            + T.transpose(2, 0, 1) + T.transpose(2, 1, 0)) / 6.0


def _solve_sylvester3(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C with sum_a A_ia C_ajk + A_ja C_iak + A_ka C_ija = b_ijk (A (+) A (+) A) C = b.

    Complex Schur A = U T U^H turns it into the same equation with T (upper triangular) for
    C~ = C x U^H on each index; slice i of C~ then solves the triangular Sylvester equation
    (T + T_ii) X + X T^T = b~_i - sum_{a>i} T_ia C~_a, from the last slice back (LAPACK trsyl).
    Exact up to rounding; needs the eigenvalue sums of A nonzero (A Hurwitz).
    """
    T, U = schur(A, output="complex")
    Uh = U.conj().T
    bt = np.einsum("ai,bj,ck,ijk->abc", Uh, Uh, Uh, b.astype(complex), optimize=True)
    L = A.shape[0]
    Ct = np.zeros_like(bt)
    Tc = np.ascontiguousarray(T.conj())  # X T^T = X conj(T)^H: trsyl's 'C' form with B = conj(T)
    for i in range(L - 1, -1, -1):
        rhs = bt[i] - np.tensordot(T[i, i + 1:], Ct[i + 1:], axes=(0, 0))
        X, scale, info = ztrsyl(T + T[i, i] * np.eye(L), Tc, rhs, trana="N", tranb="C", isgn=1)
        if info < 0:
            raise RuntimeError(f"ztrsyl failed (info = {info})")
        Ct[i] = X / scale
    C = np.einsum("ia,jb,kc,abc->ijk", U, U, U, Ct, optimize=True)
    return C.real


def second_order(A: np.ndarray, W: np.ndarray, Vc: np.ndarray, der: dict, *,
                  third_moment: bool | None = None) -> dict:
    """The 1/n^2 terms (see the module docstring), levels 1..L.

    ``A`` Jacobian, ``W`` covariance, ``Vc`` the 1/n mean term, ``der`` from
    :func:`_order2_derivatives`. Returns dict(C, B, A2): the third central moment
    (n^2 E[(x - x*)^3] -> C; None when skipped), the 1/n term B of n Cov and the 1/n^2 mean
    term A2. ``third_moment=None`` solves for C only when it enters B and A2 (F_2 or F_3
    nonzero; for d = 1 both vanish).
    """
    F2, F3, F4 = der["F2"], der["F3"], der["F4"]
    Q1x, Q2x, q, r = der["Q1x"], der["Q2x"], der["q"], der["r"]
    f1, Df1, D2f1, f2, q1 = der["f1"], der["Df1"], der["D2f1"], der["f2"], der["q1"]
    L = A.shape[0]
    w = np.diag(W).copy()
    need = bool(np.any(F2) or np.any(F3)) if third_moment is None else third_moment
    C = None
    if need:
        eye = np.eye(L)
        # F_2:D with D = Isserlis(W): sum_j F2_ij (W_jj W_lm + 2 W_jl W_jm)
        F2D = np.einsum("i,lm->ilm", F2 @ w, W) + 2.0 * np.einsum("ij,jl,jm->ilm", F2, W, W)
        QV = np.einsum("ij,k->ijk", np.diag(q), Vc)               # Q (x) V, Q diagonal
        QpW = np.einsum("ij,il->ijl", eye, Q1x @ W)                # Q'.W: Q'_{ii,k} W_kl
        R = np.einsum("ij,jk,i->ijk", eye, eye, r)                 # R diagonal: R_iii = r_i
        f1W = np.einsum("i,jk->ijk", f1, W)
        b3 = 1.5 * _sym3(F2D) + 3.0 * _sym3(QV) + 3.0 * _sym3(QpW) + R + 3.0 * _sym3(f1W)
        C = _solve_sylvester3(A, -b3)
        C = _sym3(C)  # exact solution is symmetric; remove rounding asymmetry
        Cjjl = np.einsum("jjl->jl", C)
        Cjjj = np.einsum("jjj->j", C)
    else:
        Cjjl = np.zeros((L, L))
        Cjjj = np.zeros(L)
    FC = F2 @ Cjjl                                  # F_2:C
    FD = 3.0 * F3 @ (w[:, None] * W)                # F_3:D = sum_j F3_ij 3 W_jj W_jl
    b2 = (0.5 * (FC + FC.T) + (FD + FD.T) / 6.0 + np.diag(Q1x @ Vc) + 0.5 * np.diag(Q2x @ w)
          + np.outer(f1, Vc) + np.outer(Vc, f1) + Df1 @ W + W @ Df1.T + np.diag(q1))
    B = solve_continuous_lyapunov(A, -b2)
    B = (B + B.T) / 2
    b1 = (0.5 * F2 @ np.diag(B) + F3 @ Cjjj / 6.0 + F4 @ (3.0 * w**2) / 24.0
          + Df1 @ Vc + 0.5 * D2f1 @ w + f2)
    A2 = -np.linalg.solve(A, b1)
    return dict(C=C, B=B, A2=A2)


def levels_for(d: int, lam: float) -> int:
    if d == 1:  # geometric tail lam^i
        return int(min(MAX_LEVELS, max(4, math.ceil(math.log(NEGLIGIBLE) / math.log(lam)))))
    L = 2
    while L < MAX_LEVELS and fluid_fixed_point(d, lam, L)[-1] > NEGLIGIBLE:
        L += 1
    return L + 1


def relaxation_time(d: int, lam: float) -> float:
    """tau = 1/min|Re eig A|, A the Jacobian of the fluid drift at its fixed point (model time).

    The slowest linear mode of the fluid ODE: a perturbation of the fixed point decays like
    exp(-t/tau). In the regime it is about d^(k-1) (docs/models.md#relaxation-time); it approaches
    1/(1-lam) only near a boundary (1-lam) d^j = 1. Run lengths are measured in units of tau.

    Args:
        d: choices per arrival.
        lam: arrival rate per queue, in (0, 1).

    Returns:
        tau, in model time units.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    return refined_mean_field(d, lam).relaxation_time


def refined_mean_field(d: int, lam: float, levels: int | None = None, *,
                       replacement: bool = True, order: int = 1) -> RefinedMeanField:
    """The refined mean field of the supermarket model's count chain, to order 1/n or 1/n^2.

    ``d`` choices (integer >= 1), arrival rate ``lam`` in (0, 1). ``levels``: the truncation L
    (default: until the fluid fixed point is below 1e-30, where it and its corrections vanish).
    ``replacement=False`` adds the 1/n (and at order 2 the 1/n^2) terms of the without-
    replacement drift. ``order``: 1 (Gast & Van Houdt 2017: V) or 2 (Gast, Bortolussi &
    Tribastone 2019: also A and B, see the module docstring). Returns a
    :class:`RefinedMeanField`; ``.tail_fraction(n)`` is the refined E[u_i]/n.

    Args:
        d: choices per arrival, >= 1.
        lam: arrival rate per queue, in (0, 1).
        levels: the truncation L (default: until the fluid fixed point is below 1e-30).
        replacement: sample with replacement (default) or without.
        order: 1 or 2.

    Returns:
        A :class:`RefinedMeanField`.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    p = Point(None, d, lam)
    d, lam = p.d, p.lam
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement must be True or False; got {replacement!r}")
    order = V.integer("order", order, low=1, high=2)
    L = levels_for(d, lam) if levels is None else V.integer("levels", levels, low=1, high=MAX_LEVELS)
    s = fluid_fixed_point(d, lam, L)
    with jax.enable_x64(True):
        x = jnp.asarray(s[1:])
        A, B = (np.asarray(a) for a in _derivatives_replacement(x, jnp.float64(lam), jnp.float64(d)))
        h = np.zeros(L) if replacement else np.asarray(_drift_eps_derivative(x, jnp.float64(lam), d=d))
        if order == 2:
            der = {k: np.asarray(v) for k, v in
                   _order2_derivatives(x, jnp.float64(lam), d=d, replacement=bool(replacement)).items()}
    Q = np.diag(_noise(s[1:], d, lam))
    W = solve_continuous_lyapunov(A, -Q)  # A W + W A^T = -Q
    W = (W + W.T) / 2
    b = 0.5 * np.einsum("ijk,jk->i", B, W) + h
    Vc = -np.linalg.solve(A, b)
    corr = np.concatenate([[0.0], Vc])
    cov = np.zeros((L + 1, L + 1))
    cov[1:, 1:] = W
    extra = {}
    if order == 2:
        so = second_order(A, W, Vc, der)
        cov2 = np.zeros((L + 1, L + 1))
        cov2[1:, 1:] = so["B"] - np.outer(Vc, Vc)  # Cov = M_2 - M_1 M_1^T
        third = None
        if so["C"] is not None:
            third = np.zeros((L + 1,) * 3)
            third[1:, 1:, 1:] = so["C"]
        extra = dict(correction2=np.concatenate([[0.0], so["A2"]]), covariance2=cov2,
                     third_moment=third)
    return RefinedMeanField(d=d, lam=lam, replacement=bool(replacement), fixed_point=s,
                            correction=corr, covariance=cov, jacobian=A, order=order, **extra)
