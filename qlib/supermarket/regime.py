"""The regime of Brightwell & Luczak's theorems, in one place: k, c, the hypotheses H0-H3, the
paper's families of points, the mixing-time scales, and the fluid views the sliders draw.

- k = ceil(log(1/(1-lam)) / log d) (:func:`qlib.supermarket.predicted_max_length`) and
  c = (1-lam) d^(k-1), how deep in its k-window a point sits (in :func:`hypotheses`, H1);
- the family lam = 1 - n^(-alpha), d = floor(n^beta) (:func:`family_point`) and its exponent
  gamma (:func:`gamma`);
- the fluid maximum at n queues (:func:`fluid_max_length`);
- the working hypotheses H0-H3 (docs/models.md#hypotheses), at one point (:func:`hypotheses`)
  and along a family (:func:`family_hypotheses`), and :func:`inside`;
- the mixing-time scales: the upper bound's k d^(k-1) n ln n (:func:`reference_time`), the lower
  bound's n (lam d)^(k-1) (:func:`lower_time`), in jump-chain steps;
- in NumPy, for the sliders (no JAX compile per slider value): the refined mean field's 1/n and
  1/n^2 terms from closed-form derivatives and the relaxation time (:func:`refined_profile`),
  the profile view of notebook 01 (:func:`profile_view`) and the scales of notebook 02
  (:func:`mixing_scales`). tests/test_explorers.py checks them against
  :func:`qlib.supermarket.refined_mean_field` and the max-length study's own view;
  :mod:`qlib.explorers` wires them to widgets.

The studies take this theory from here, never from each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from qlib import _validate as V
from qlib.supermarket.linear_noise import from_matrices
from qlib.supermarket.mixing_law import meeting_time_law
from qlib.supermarket.point import Point, PointTuple, as_point
from qlib.supermarket.refined import levels_for, second_order
from qlib.supermarket.theory import (
    asymptotic_profile,
    boundary_distance,
    fluid_fixed_point,
    predicted_max_length,
)

#: The working hypotheses of the theorems (docs/models.md#hypotheses), in order: the keys of
#: :func:`hypotheses` and :func:`family_hypotheses` that are booleans.
HYPOTHESES = ("H0", "H1", "H2", "H3")

# --------------------------------------------------------------------------- k, c and the families


def family_point(n: int, alpha: float, beta: float) -> PointTuple:
    """The paper's family: lam = 1 - n^(-alpha), d = floor(n^beta) (at least 2); k = ceil(alpha/beta)
    for large n."""
    n = V.integer("n", n, low=2)
    return n, max(2, int(math.floor(n**beta + 1e-9))), 1.0 - n ** (-alpha)


def gamma(alpha: float, beta: float) -> float:
    """gamma = 1 - 2 alpha + (k-1) beta: the exponent of n (1-lam)^2 d^(k-1) = (buffer/excursion)^2
    along the family, so buffer/excursion = n^(gamma/2)."""
    k = math.ceil(alpha / beta - 1e-12)
    return 1.0 - 2.0 * alpha + (k - 1) * beta


def fluid_max_length(n: int, d: int, lam: float) -> int:
    """The largest i with n s_i >= 1/2: the maximum queue length that the fluid fixed point
    predicts for n queues (the level where the expected count of longer queues drops below 1/2)."""
    n, d, lam = as_point(n, d, lam).as_tuple()
    if d == 1:
        return int(math.floor(math.log(0.5 / n) / math.log(lam)))
    L = 4
    while True:
        s = fluid_fixed_point(d, lam, L)
        if n * s[-1] < 0.5:
            return int(np.nonzero(n * s >= 0.5)[0][-1])
        L *= 2


# --------------------------------------------------------------------------- the hypotheses H0-H3


def hypotheses(n: int, d: int, lam: float, *, c_max: float, buffer_min: float) -> dict[str, Any]:
    """H0-H3 at one point (docs/models.md#hypotheses), each a boolean, with the numbers compared.

    H0: k = ceil(log(1/(1-lam))/log d) >= 2 and d >= 2 (k - 1 >= 1: a d-dependence to see);
    H1: c = (1-lam) d^(k-1) <= c_max; H2: the fluid maximum at this n is k; H3: the buffer
    n (1-lam) d^(k-1) over the excursion scale sqrt(n d^(k-1)) is at least sqrt(buffer_min).
    """
    k = int(predicted_max_length(d, lam)) if d > 1 else 0
    c = (1.0 - lam) * float(d) ** (k - 1)
    buf = n * (1.0 - lam) ** 2 * float(d) ** (k - 1)
    return {
        "H0": bool(d >= 2 and k >= 2),
        "H1": bool(c <= c_max),
        "H2": bool(d >= 2 and fluid_max_length(n, d, lam) == k),
        "H3": bool(buf >= buffer_min),
        "k": k,
        "c": c,
        "eps_dk": (1.0 - lam) * float(d) ** k,
        "log_n": math.log(n),
        "buffer_over_excursion": math.sqrt(buf),
    }


def family_hypotheses(n: int, d: int, lam: float, alpha: float, beta: float, *, c_max: float,
                      gamma_min: float) -> dict[str, Any]:
    """H0-H3 at (n, d, lam) on the family (alpha, beta), each a boolean, with the numbers compared
    (docs/models.md#hypotheses): H1 and H2 as at a point (:func:`hypotheses`); H0 also asks that
    alpha/beta is not an integer (the family stays off a boundary) and that k is the family's
    ceil(alpha/beta); H3 is its asymptotic form, the exponent gamma of (buffer/excursion)^2 above
    ``gamma_min`` (the buffer outgrows the excursions along the family)."""
    k_fam = math.ceil(alpha / beta - 1e-12)
    k = int(predicted_max_length(d, lam))
    eps = 1.0 - lam
    c = eps * d ** (k - 1)
    fm = fluid_max_length(n, d, lam)
    g = gamma(alpha, beta)
    return {"H0": bool(0 < alpha <= 1 and 0 < beta <= 1 and abs(alpha / beta - round(alpha / beta)) > 1e-9
                       and k == k_fam),
            "H1": bool(c <= c_max), "H2": bool(fm == k), "H3": bool(g > gamma_min),
            "k": k, "c": c, "eps_dk": eps * d**k, "log_n": math.log(n), "fluid_max": fm, "gamma": g,
            "buffer_over_excursion": math.sqrt(n * eps**2 * d ** (k - 1))}


def inside(h: dict) -> bool:
    """Whether a point is inside H0-H3 (``h`` from :func:`hypotheses` or :func:`family_hypotheses`)."""
    return all(h[x] for x in HYPOTHESES)


def failing(h: dict) -> list[str]:
    """The hypotheses of :data:`HYPOTHESES` that ``h`` (from :func:`hypotheses` or
    :func:`family_hypotheses`) says fail, in order."""
    return [x for x in HYPOTHESES if not h[x]]


# --------------------------------------------------------------------------- the mixing-time scales


def reference_time(n: int, d: int, lam: float) -> float:
    """The upper bound's scale k d^(k-1) n ln n (jump-chain steps)."""
    k = int(predicted_max_length(d, lam))
    return k * float(d) ** (k - 1) * n * math.log(n)


def lower_time(n: int, d: int, lam: float) -> float:
    """The lower bound's scale n (lam d)^(k-1) (jump-chain steps)."""
    k = int(predicted_max_length(d, lam))
    return n * (lam * d) ** (k - 1)


# --------------------------------------------------------------------------- the sliders' theory (NumPy)


def falling_factorial(d: int, k: int) -> float:
    """d (d-1) ... (d-k+1): the k-th derivative of x^d is this times x^(d-k)."""
    return float(math.prod(range(d - k + 1, d + 1))) if k <= d else 0.0


def power_derivative(x: np.ndarray, d: int, k: int) -> np.ndarray:
    """d^k/dx^k x^d, exact at x = 0 (zero beyond the d-th derivative)."""
    c = falling_factorial(d, k)
    return np.zeros_like(x) if c == 0.0 else c * x ** (d - k)


def pure_derivatives(x: np.ndarray, lam: float, d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """k-th pure derivatives of the fluid drift and of the noise at ``x`` (levels 1..L).

    f_i = lam (x_{i-1}^d - x_i^d) - (x_i - x_{i+1}) and Q_ii = lam (x_{i-1}^d - x_i^d) + (x_i -
    x_{i+1}), x_0 = 1, x_{L+1} = 0 (sampling with replacement): each depends on x_{i-1}, x_i,
    x_{i+1} separately, so M[i, j] = d^k (.)_i / dx_j^k holds every derivative of order k.
    Returns (F_k, Q_k), each (L, L).
    """
    L = x.size
    gk = lam * power_derivative(np.asarray(x, float), d, k)
    lin = 1.0 if k == 1 else 0.0
    F, Q = np.zeros((L, L)), np.zeros((L, L))
    i = np.arange(L)
    F[i, i] = -gk - lin
    Q[i, i] = -gk + lin
    F[i[1:], i[:-1]] = gk[:-1]  # f_i depends on x_{i-1} through the arrivals at length i-1
    Q[i[1:], i[:-1]] = gk[:-1]
    F[i[:-1], i[1:]] = lin
    Q[i[:-1], i[1:]] = -lin
    return F, Q


@dataclass(frozen=True)
class RefinedProfile:
    """Fluid fixed point ``s`` (levels 0..L, s_0 = 1), its 1/n and 1/n^2 terms ``v`` and ``a``
    (E[u_i]/n = s_i + v_i/n + a_i/n^2 + ...) and the relaxation time ``tau`` (model time)."""

    d: int
    lam: float
    s: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: float

    def tail_fraction(self, n: int) -> np.ndarray:
        """The refined E[u_i]/n at n queues, clipped to [0, 1] (i = 0..L)."""
        return np.clip(self.s + self.v / n + self.a / n**2, 0.0, 1.0)


def refined_profile(d: int, lam: float, levels: int | None = None) -> RefinedProfile:
    """The order-2 refined mean field (sampling with replacement) in NumPy: the numbers of
    ``qlib.supermarket.refined_mean_field(d, lam, levels, order=2)`` without a compile per d.

    Args:
        d: choices per arrival, an integer >= 2.
        lam: arrival rate per queue, in (0, 1).
        levels: the truncation L (default: where the fluid fixed point falls below 1e-30).
    Returns:
        A :class:`RefinedProfile`.
    """
    d = V.integer("d", d, low=2)
    lam = V.real("lam", lam, low=0.0, high=1.0)
    if not 0.0 < lam < 1.0:
        raise ValueError(f"lam must be in (0, 1); got {lam}")
    L = levels_for(d, lam) if levels is None else V.integer("levels", levels, low=1)
    s = fluid_fixed_point(d, lam, L)
    x = s[1:]
    der = {}
    for k in (1, 2, 3, 4):
        der[f"F{k}"], Qk = pure_derivatives(x, lam, d, k)
        if k <= 2:
            der[f"Q{k}x"] = Qk
    A = der["F1"]
    full = np.concatenate([[1.0], x, [0.0]])
    g = full**d
    up, down = lam * (g[:-2] - g[1:-1]), full[1:-1] - full[2:]
    q = up + down
    W = solve_continuous_lyapunov(A, -np.diag(q))
    W = (W + W.T) / 2
    Vc = -np.linalg.solve(A, 0.5 * der["F2"] @ np.diag(W))
    zL, zLL = np.zeros(L), np.zeros((L, L))
    der.update(q=q, r=up - down, f1=zL, Df1=zLL, D2f1=zLL, f2=zL, q1=zL)
    A2 = second_order(A, W, Vc, der)["A2"]
    tau = float(1.0 / np.min(np.abs(np.linalg.eigvals(A).real)))
    return RefinedProfile(
        d=d, lam=lam, s=s, v=np.concatenate([[0.0], Vc]), a=np.concatenate([[0.0], A2]), tau=tau
    )


@dataclass(frozen=True)
class ProfileView:
    """What notebook 01's sliders show for (1-lam, d, n) (the fields of
    ``qlib.studies.max_length.ProfileView``): arrays over ``levels`` (L+1,) of the fraction of
    queues with length exactly i, ``fluid``, ``refined`` (1/n and 1/n^2 terms at this n) and
    ``asymptotic`` (NaN beyond the formulas)."""

    lam: float
    d: int
    n: int
    k: int
    boundary_distance: float
    fluid_max: int
    tau: float
    levels: np.ndarray
    fluid: np.ndarray
    refined: np.ndarray
    asymptotic: np.ndarray


def exact_lengths(tail: np.ndarray) -> np.ndarray:
    """The fraction of queues of length exactly i from the tail fractions s_i (length >= i)."""
    return tail - np.append(tail[1:], 0.0)


def profile_view(one_minus_lam: float, d: int, n: int) -> ProfileView:
    """The slider panel's theory for (1-lam, d, n), the values of
    ``qlib.studies.max_length.profile_view`` in NumPy (a few ms, no compile)."""
    eps = V.real("one_minus_lam", one_minus_lam, low=0.0, high=1.0)
    d = V.integer("d", d, low=2)
    n = V.integer("n", n, low=1)
    lam = 1.0 - eps
    r = refined_profile(d, lam)
    k = int(predicted_max_length(d, lam))
    L = max(k + 2, int(np.nonzero(r.s > 1e-12)[0][-1]) + 2)
    L = min(L, r.s.size - 1)
    asym = np.full(L + 1, np.nan)
    a = asymptotic_profile(d, lam)
    m = min(a.size, L + 1)
    asym[:m] = a[:m]
    return ProfileView(
        lam=lam,
        d=d,
        n=n,
        k=k,
        boundary_distance=boundary_distance(d, lam),
        fluid_max=fluid_max_length(n, d, lam),
        tau=r.tau,
        levels=np.arange(L + 1),
        fluid=exact_lengths(r.s)[: L + 1],
        refined=exact_lengths(r.tail_fraction(n))[: L + 1],
        asymptotic=asym,
    )


def fluctuation_view(n: int, d: int, lam: float):
    """The linear-noise view of :func:`qlib.supermarket.linear_noise` (with the 1/n covariance term,
    sampling with replacement) from closed-form derivatives in NumPy: no compile per d, a few ms, what
    the sliders of notebooks 01 and 02 draw (predicted SD(N), tau_int(N), tau_fluid, the ACF of N).

    Args:
        n: number of queues, an integer >= 1.
        d: choices per arrival, an integer >= 2.
        lam: arrival rate per queue, in (0, 1).

    Returns:
        A :class:`qlib.supermarket.linear_noise.LinearNoise` (``refined`` None).
    """
    p = Point(n, d, lam)
    d = V.integer("d", p.d, low=2)
    L = levels_for(d, p.lam)
    x = fluid_fixed_point(d, p.lam, L)[1:]
    der = {}
    for k in (1, 2, 3, 4):
        der[f"F{k}"], Qk = pure_derivatives(x, p.lam, d, k)
        if k <= 2:
            der[f"Q{k}x"] = Qk
    A = der["F1"]
    full = np.concatenate([[1.0], x, [0.0]])
    g = full**d
    up, down = p.lam * (g[:-2] - g[1:-1]), full[1:-1] - full[2:]
    W = solve_continuous_lyapunov(A, -np.diag(up + down))
    W = (W + W.T) / 2
    Vc = -np.linalg.solve(A, 0.5 * der["F2"] @ np.diag(W))
    zL, zLL = np.zeros(L), np.zeros((L, L))
    der.update(q=up + down, r=up - down, f1=zL, Df1=zLL, D2f1=zLL, f2=zL, q1=zL)
    B = second_order(A, W, Vc, der)["B"]
    return from_matrices(p, A, W, B - np.outer(Vc, Vc))


def mixing_scales(n: int, d: int, lam: float) -> dict[str, float]:
    """Notebook 02's theory lines, in steps of the jump chain ((1+lam) n steps per unit time):
    the lower bound's scale n (lam d)^(k-1), the upper bound's k d^(k-1) n ln n, the drain
    time (1+lam) n/(1-lam) of a start with the wrong number of customers, and (d >= 2) the
    linear-noise tau_int(N) and tau_fluid with the predicted SD(N) (:func:`fluctuation_view`), and
    the predicted good-start meeting time tau_fluid ln SD(N) (docs/models.md#mixing-time-predicted)."""
    out = {
        "k": int(predicted_max_length(d, lam)),
        "lower": lower_time(n, d, lam),
        "upper": reference_time(n, d, lam),
        "drain": (1 + lam) * n / (1 - lam),
    }
    if d >= 2:
        v = fluctuation_view(n, d, lam)
        out.update(tau_int=v.tau_int_steps, tau_fluid=v.tau_fluid_steps, sd_N=v.sd_N,
                   predicted=meeting_time_law(v.tau_fluid_steps, v.sd_N_lna))
    return out
