"""The refined mean field of the supermarket model: the 1/n correction to the fluid fixed point.

Model: the count chain of :mod:`qlib.supermarket.engine`, x_i = u_i/n = fraction of queues with
length >= i (i = 1..L). It is a density-dependent population process: each event moves one
coordinate by +-1/n, at rate n beta_l(x) with

- x_i -> x_i + 1/n (an arrival joins a queue of length i-1) at rate n lam (g(x_{i-1}) - g(x_i)),
- x_i -> x_i - 1/n (a departure from a queue of length i) at rate n (x_i - x_{i+1}),

g(x) = x^d (sampling with replacement), x_0 = 1. The drift is the fluid ODE
f(x) = sum_l l beta_l(x) of :func:`qlib.supermarket.theory.fluid_drift`.

Refined mean field (Gast & Van Houdt, "A refined mean field approximation", Proc. ACM Meas.
Anal. Comput. Syst. 1(2), 2017, Thm. 3.1): with x* the fixed point, A = Df(x*) (Jacobian),
B_{i,jk} = d^2 f_i / dx_j dx_k (x*) (Hessian), and Q = sum_l l l^T beta_l(x*) (here diagonal),

    A W + W A^T + Q = 0                       (Lyapunov: n Cov(x) -> W)
    V = -A^{-1} (1/2) sum_{jk} B_{.,jk} W_jk   (then E[x] = x* + V/n + o(1/n)).

Jacobian and Hessian come from JAX autodiff of the drift; the Lyapunov equation is solved
with SciPy (Bartels-Stewart). Sampling *without* replacement has an n-dependent drift,
g_n(x) = prod_{m<d} (x - m/n)/(1 - m/n) = x^d + h(x)/n + O(1/n^2); its 1/n term adds
-A^{-1} h-part to V (the fixed point moves), also by autodiff (in eps = 1/n at eps = 0).

Why it matters here: at lam = 0.999, d = 100 the simulated tail at length 3 is many times the
fluid value at n = 10^5 (MODELS.md). The correction V_3/n is of the same order, which is the
finite-n effect's explanation at the level of one term in 1/n; see the notebook 01, figure (d).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from qlib import _validate as V
from qlib.supermarket.theory import check_parameters, fluid_fixed_point

#: levels are added until the fluid fixed point falls below this (it then stays ~0: the
#: tail decays doubly exponentially, so higher levels carry nothing at order 1/n either).
NEGLIGIBLE = 1e-30
MAX_LEVELS = 400


@dataclass(frozen=True)
class RefinedMeanField:
    """Fluid fixed point and its 1/n correction, for levels 0..L.

    - ``fixed_point[i]`` = s_i, the fluid fraction of queues with length >= i (s_0 = 1);
    - ``correction[i]`` = V_i: E[u_i]/n = s_i + V_i/n + o(1/n) (V_0 = 0, and V_1 = 0 exactly
      since E[u_1] = lam n for every n);
    - ``covariance[i, j]`` = W_ij (levels 1..L in rows 1..L, row/column 0 zero):
      n Cov(u_i/n, u_j/n) -> W_ij;
    - ``jacobian`` (A, levels 1..L) of the drift at the fixed point.
    """

    d: int
    lam: float
    replacement: bool
    fixed_point: np.ndarray
    correction: np.ndarray
    covariance: np.ndarray
    jacobian: np.ndarray

    @property
    def levels(self) -> int:
        return self.fixed_point.size - 1

    @property
    def relaxation_time(self) -> float:
        """tau = 1/min|Re eig A| (model time): the slowest linear mode of the fluid ODE."""
        return float(1.0 / np.min(np.abs(np.linalg.eigvals(self.jacobian).real)))

    def tail_fraction(self, n: int) -> np.ndarray:
        """Refined E[u_i]/n = s_i + V_i/n, clipped to [0, 1] (i = 0..L)."""
        n = V.integer("n", n, low=1)
        return np.clip(self.fixed_point + self.correction / n, 0.0, 1.0)

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


def _levels_for(d: int, lam: float) -> int:
    if d == 1:  # geometric tail lam^i
        return int(min(MAX_LEVELS, max(4, math.ceil(math.log(NEGLIGIBLE) / math.log(lam)))))
    L = 2
    while L < MAX_LEVELS and fluid_fixed_point(d, lam, L)[-1] > NEGLIGIBLE:
        L += 1
    return L + 1


def relaxation_time(d: int, lam: float) -> float:
    """tau = 1/min|Re eig A|, A the Jacobian of the fluid drift at its fixed point (model time).

    The slowest linear mode of the fluid ODE: a perturbation of the fixed point decays like
    exp(-t/tau). It grows like 1/(1-lam) as lam -> 1. Run lengths are measured in units of tau.
    """
    return refined_mean_field(d, lam).relaxation_time


def refined_mean_field(d: int, lam: float, levels: int | None = None, *,
                       replacement: bool = True) -> RefinedMeanField:
    """The refined mean field (Gast & Van Houdt 2017) of the supermarket model's count chain.

    ``d`` choices (integer >= 1), arrival rate ``lam`` in (0, 1). ``levels``: the truncation L
    (default: until the fluid fixed point is below 1e-30, where it and its correction vanish).
    ``replacement=False`` adds the 1/n term of the without-replacement drift. Returns a
    :class:`RefinedMeanField`; ``.tail_fraction(n)`` is the refined E[u_i]/n.
    """
    _, d, lam, _ = check_parameters(None, d, lam)
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement must be True or False; got {replacement!r}")
    L = _levels_for(d, lam) if levels is None else V.integer("levels", levels, low=1, high=MAX_LEVELS)
    s = fluid_fixed_point(d, lam, L)
    with jax.enable_x64(True):
        x = jnp.asarray(s[1:])
        A, B = (np.asarray(a) for a in _derivatives_replacement(x, jnp.float64(lam), jnp.float64(d)))
        h = np.zeros(L) if replacement else np.asarray(_drift_eps_derivative(x, jnp.float64(lam), d=d))
    Q = np.diag(_noise(s[1:], d, lam))
    W = solve_continuous_lyapunov(A, -Q)  # A W + W A^T = -Q
    W = (W + W.T) / 2
    b = 0.5 * np.einsum("ijk,jk->i", B, W) + h
    Vc = -np.linalg.solve(A, b)
    corr = np.concatenate([[0.0], Vc])
    cov = np.zeros((L + 1, L + 1))
    cov[1:, 1:] = W
    return RefinedMeanField(d=d, lam=lam, replacement=bool(replacement), fixed_point=s,
                            correction=corr, covariance=cov, jacobian=A)
