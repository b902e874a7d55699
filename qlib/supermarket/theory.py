"""Mean-field theory of the supermarket model: fluid limit, its fixed point, the predicted k.

Fluid limit (Vvedenskaya, Dobrushin & Karpelevich 1996; Mitzenmacher 2001): the fraction
s_i of queues with length >= i obeys

    ds_i/dt = lam (g(s_{i-1}) - g(s_i)) - (s_i - s_{i+1}),   s_0 = 1,

where g(s) = s^d is the chance that all d sampled queues have length >= i. Its fixed point is
s_i = lam g(s_{i-1}), i.e. s_i = lam^((d^i - 1)/(d - 1)) with replacement. Sampling without
replacement at finite n uses g(s) = C(ns, d)/C(n, d) instead (the same limit as n -> oo).

Brightwell & Luczak (arXiv:1201.5523) show that for lam -> 1, d -> oo the equilibrium maximum
queue length concentrates on k = ceil(log(1/(1-lam)) / log d) and most queues have length k.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import gammaln

from qlib import _validate as V


def check_parameters(n: int | None, d: int, lam: float, replacement: bool = True
                     ) -> tuple[int | None, int, float, bool]:
    """The one check of the supermarket model's parameters (n, d, lam, replacement).

    ``n`` >= 1 queues (None for the n -> oo theory, allowed only with replacement), ``d`` >= 1
    choices, arrival rate ``lam`` in (0, 1), ``replacement`` a bool, and d <= n when sampling
    without replacement. Raises ValueError naming the parameter and its allowed range.
    """
    if n is not None:
        n = V.integer("n", n, low=1)
    d = V.integer("d", d, low=1)
    lam = V.real("lam", lam, low=0.0, high=1.0)
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement must be True or False; got {replacement!r}")
    if not replacement:
        if n is None:
            raise ValueError("n is required when replacement=False (the law depends on n); got None")
        if d > n:
            raise ValueError(f"d must be an integer in [1, n] = [1, {n}] when sampling without "
                             f"replacement; got {d}")
    return n, d, lam, bool(replacement)


def steps_per_time(n: int, lam: float) -> float:
    """Uniformised steps of the count chain per unit of model time (one mean service time).

    The chain is uniformised at total rate n(1 + lam), so t units of time are (1 + lam) n t steps.
    """
    return (1.0 + lam) * n


def all_sampled_at_least(s, d: int, *, replacement: bool = True, n: int | None = None):
    """g(s): probability that all d sampled queues have length >= i when a fraction s has.

    With replacement s^d; without replacement C(ns, d)/C(n, d) (zero when ns < d).
    """
    s = np.asarray(s, dtype=float)
    if replacement:
        return s**d
    u = np.rint(s * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        logg = gammaln(u + 1) - gammaln(u - d + 1) - gammaln(n + 1) + gammaln(n - d + 1)
    return np.where(u >= d, np.exp(np.where(u >= d, logg, 0.0)), 0.0)


def _g_cont(s, d, replacement, n):
    """Smooth version of g for the ODE (falling factorial with real ns)."""
    if replacement:
        return np.clip(s, 0.0, 1.0) ** d
    x = np.clip(s, 0.0, 1.0) * n
    m = np.arange(d)
    return np.prod(np.clip((x[..., None] - m) / (n - m), 0.0, None), axis=-1)


def predicted_max_length(d: int, lam: float) -> float:
    """k = ceil(log(1/(1-lam)) / log d), the concentration point of the maximum queue length.

    Ratios within 1e-9 of an integer are taken as that integer, so floating point cannot push
    lam = 0.99, d = 10 (ratio exactly 2) up to 3. Returns inf for d = 1 (no concentration).
    The formula is the same with or without replacement.
    """
    d = V.integer("d", d, low=1)
    lam = V.real("lam", lam, low=0.0, high=1.0)
    if d == 1:
        return math.inf
    x = -math.log1p(-lam) / math.log(d)
    r = round(x)
    if abs(x - r) <= 1e-9 * max(1.0, abs(x)):
        return int(r)
    return int(math.ceil(x))


def boundary_distance(d: int, lam: float) -> float:
    """Distance of log(1/(1-lam))/log d from the nearest integer: 0 on a boundary, 1/2 at most.

    The asymptotic profile is sharp only when this is not small; on a boundary, (1-lam)d^j ~ 1
    and two levels share the mass.
    """
    d = V.integer("d", d, low=2)
    lam = V.real("lam", lam, low=0.0, high=1.0)
    x = -math.log1p(-lam) / math.log(d)
    return abs(x - round(x))


def fluid_fixed_point(d: int, lam: float, levels: int, *, replacement: bool = True,
                      n: int | None = None) -> np.ndarray:
    """Fixed point s_0..s_levels of the fluid limit: s_0 = 1, s_i = lam g(s_{i-1}).

    With replacement this is lam^((d^i - 1)/(d - 1)) (lam^i for d = 1); without replacement the
    finite-n g(s) = C(ns, d)/C(n, d) is used, so ``n`` is required.
    """
    n, d, lam, replacement = check_parameters(n, d, lam, replacement)
    levels = V.integer("levels", levels, low=0)
    s = np.empty(levels + 1)
    s[0] = 1.0
    for i in range(1, levels + 1):
        s[i] = lam * (s[i - 1] ** d if replacement else _g_cont(s[i - 1], d, False, n))
    return s


def fluid_drift(s: np.ndarray, d: int, lam: float, *, replacement: bool = True,
                n: int | None = None) -> np.ndarray:
    """Right-hand side of the fluid ODE for s_1..s_L (s_0 = 1 and s_{L+1} = 0 implied)."""
    full = np.concatenate([[1.0], np.asarray(s, float), [0.0]])
    g = _g_cont(full, d, replacement, n)
    return lam * (g[:-2] - g[1:-1]) - (full[1:-1] - full[2:])


def fluid_trajectory(d: int, lam: float, times, initial, *, replacement: bool = True,
                     n: int | None = None, rtol: float = 1e-9, atol: float = 1e-12) -> np.ndarray:
    """Solve the fluid ODE with scipy's stiff solver (LSODA) from ``initial``.

    ``initial`` is the vector s_0..s_L (s_0 = 1, non-increasing, in [0, 1]); the returned array
    has shape (len(times), L+1) with s_0 = 1 in column 0. Time is in the model's units
    (one unit = mean service time).
    """
    n, d, lam, replacement = check_parameters(n, d, lam, replacement)
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size == 0 or np.any(~np.isfinite(times)) or np.any(times < 0) \
            or np.any(np.diff(times) < 0):
        raise ValueError("times must be a non-empty 1-D array of finite, non-negative, non-decreasing times")
    s0 = np.asarray(initial, dtype=float)
    if s0.ndim != 1 or s0.size < 2 or not np.all(np.isfinite(s0)):
        raise ValueError(f"initial must be a 1-D vector s_0..s_L with L >= 1; got shape {s0.shape}")
    if abs(s0[0] - 1.0) > 1e-12 or np.any(s0 < 0) or np.any(s0 > 1) or np.any(np.diff(s0) > 1e-12):
        raise ValueError("initial must have s_0 = 1 and be non-increasing in [0, 1]")
    sol = solve_ivp(lambda t, y: fluid_drift(y, d, lam, replacement=replacement, n=n),
                    (0.0, float(times[-1])), s0[1:], t_eval=times, method="LSODA",
                    rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"fluid ODE solver failed: {sol.message}")
    return np.concatenate([np.ones((times.size, 1)), sol.y.T], axis=1)


def asymptotic_profile(d: int, lam: float, levels: int | None = None) -> np.ndarray:
    """Brightwell–Luczak asymptotics for the fraction of queues with length exactly i.

    1 - lam at i = 0; (1 - lam) d^i for 0 < i < k; 1 - (1 - lam) d^(k-1) at k;
    exp(-(1 - lam) d^k) above k (a tail estimate for length k+1).
    Valid when (1-lam) d^(k-1) -> 0 and (1-lam) d^k -> oo, i.e. away from a boundary.
    """
    k = predicted_max_length(d, lam)
    if not math.isfinite(k):
        raise ValueError("d must be an integer >= 2 for the asymptotic profile; got 1")
    L = k + 1 if levels is None else V.integer("levels", levels, low=k + 1)
    eps = 1.0 - lam
    p = np.zeros(L + 1)
    p[0] = eps
    for i in range(1, k):
        p[i] = eps * float(d) ** i
    p[k] = 1.0 - eps * float(d) ** (k - 1)
    p[k + 1] = math.exp(-eps * float(d) ** k)
    return p
