"""Mean-field theory of the supermarket model: fluid limit, its fixed point, the predicted k.

Fluid limit (Vvedenskaya, Dobrushin & Karpelevich 1996; Mitzenmacher 2001): the fraction
s_i of queues with length >= i obeys

    ds_i/dt = lam (g(s_{i-1}) - g(s_i)) - (s_i - s_{i+1}),   s_0 = 1,

where g(s) = s^d is the chance that all d sampled queues have length >= i. Its fixed point is
s_i = lam g(s_{i-1}), i.e. s_i = lam^((d^i - 1)/(d - 1)) with replacement. Sampling without
replacement at finite n uses g(s) = C(ns, d)/C(n, d) instead (the same limit as n -> oo).

Brightwell & Luczak (arXiv:1201.5523) show that for lam -> 1, d -> oo the equilibrium maximum
queue length concentrates on k = ceil(log(1/(1-lam)) / log d) and most queues have length k.

Every function takes the arrival rate as ``lam`` or, exclusively, as ``one_minus_lam`` = 1 - lam:
a float64 lam near 1 has already lost the digits of 1 - lam that the paper's regime
lam = 1 - n^(-alpha) needs (1 - 10^-12 holds 1 - lam to about 10^-4 relative), so 1 - lam is
then used as given. ``d`` is an integer in [1, 2^63 - 1] (docs/models.md, "count chain": for
d >= 45 n the chain equals the d = oo limit to the 2^-64 resolution of the simulation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import gammaln

from qlib import _validate as V
from qlib.supermarket.point import MAX_D, Point


def _point(d: Any, lam: Any, one_minus_lam: Any, replacement: Any = True, n: Any = None) -> Point:
    """The theory functions' point: ``d`` may be a :class:`Point` (then lam, one_minus_lam, n
    and replacement come from it and must be left at their defaults)."""
    if isinstance(d, Point):
        if lam is not None or one_minus_lam is not None or n is not None or replacement is not True:
            raise ValueError("a Point was given: leave lam, one_minus_lam, n and replacement out")
        return d
    return Point(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement)


def steps_per_time(n: int, lam: float) -> float:
    """Uniformised steps of the count chain per unit of model time (one mean service time).

    The chain is uniformised at total rate n(1 + lam), so t units of time are (1 + lam) n t steps.
    """
    return (1.0 + lam) * n


def _fractions(name: str, s) -> np.ndarray:
    try:
        a = np.asarray(s, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be an array of fractions in [0, 1]; got {s!r}") from None
    if np.any(~np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise ValueError(f"{name} must hold finite fractions in [0, 1]; got {s!r}")
    return a


def all_sampled_at_least(s, d: int, *, replacement: bool = True, n: int | None = None):
    """g(s): probability that all d sampled queues have length >= i when a fraction s has.

    With replacement s^d; without replacement C(ns, d)/C(n, d) (zero when ns < d).

    Args:
        s: any array of fractions in [0, 1].
        d: choices per arrival (or a Point).
        replacement: sample with replacement (default) or without.
        n: number of queues, required without replacement.

    Returns:
        g(s), with the shape of ``s``.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    pt = (
        _point(d, None, None, replacement, n)
        if isinstance(d, Point)
        else Point(n, d, 0.5, replacement=replacement)
    )
    n, d, replacement = pt.n, pt.d, pt.replacement
    s = _fractions("s", s)
    if replacement:
        return s**d
    u = np.rint(s * n)
    # falling factorials in Stirling differences: plain lgamma differences lose all digits at n ~ 1e12
    logg = _log_falling(np.where(u >= d, u, d), d) - _log_falling(n, d)
    return np.where(u >= d, np.exp(np.minimum(logg, 0.0)), 0.0)


#: Beyond this d the falling factorial of :func:`_g_cont` is summed in logs (O(1), not O(d) memory).
_PRODUCT_MAX_D = 4096


def _log_falling(a, d: int):
    """log(a (a-1) ... (a-d+1)) for real a >= d - 1 (the NumPy twin of the chain's ``log_falling``:
    Stirling differences where both lgammas are large and nearly cancel)."""
    a = np.asarray(a, dtype=float)
    x = a - d + 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = gammaln(a + 1.0) - gammaln(x)
        xs = np.maximum(x, 64.0)
        y = xs + d
        series = (1 / (12 * y) - 1 / (12 * xs)) - (1 / (360 * y**3) - 1 / (360 * xs**3)) \
            + (1 / (1260 * y**5) - 1 / (1260 * xs**5))
        stirling = (xs - 0.5) * np.log1p(d / xs) + d * np.log(y) - d + series
    return np.where(x >= 64.0, stirling, direct)


def _power(x, d):
    """x**d elementwise; for an integer d by repeated squaring (multiplications only: the same bits
    on every CPU, where numpy's power may take a vendor's vector routine with other last bits)."""
    if float(d) != int(d) or d < 1:
        return x**d
    d, out, base = int(d), None, x
    while d:
        if d & 1:
            out = base if out is None else out * base
        d >>= 1
        if d:
            base = base * base
    return out


def _g_cont(s, d, replacement, n):
    """Smooth version of g for the ODE (falling factorial with real ns)."""
    if replacement:
        return _power(np.clip(s, 0.0, 1.0), d)
    x = np.clip(s, 0.0, 1.0) * n
    if d > _PRODUCT_MAX_D:  # g = exp(F(x) - F(n)) for x >= d - 1, where no factor is negative
        ok = x >= d - 1
        return np.where(ok, np.exp(_log_falling(np.where(ok, x, d), d) - _log_falling(n, d)), 0.0)
    m = np.arange(d)
    return np.prod(np.clip((x[..., None] - m) / (n - m), 0.0, None), axis=-1)


def _log_inverse_gap(p: Point) -> float:
    """log(1/(1 - lam)), from 1 - lam itself when it is given."""
    return -math.log(p.one_minus_lam) if p.given == "one_minus_lam" else -math.log1p(-p.lam)


def predicted_max_length(d: int, lam: float | None = None, *, one_minus_lam: float | None = None) -> float:
    """k = ceil(log(1/(1-lam)) / log d), the concentration point of the maximum queue length.

    Ratios within 1e-9 of an integer are taken as that integer, so floating point cannot push
    lam = 0.99, d = 10 (ratio exactly 2) up to 3. The formula is the same with or without
    replacement.

    Args:
        d: choices per arrival (or a :class:`~qlib.supermarket.point.Point`, carrying the rest).
        lam: arrival rate per queue, in (0, 1).
        one_minus_lam: 1 - lam in place of ``lam`` (kept as given: the paper's regime).

    Returns:
        k as a float; inf for d = 1 (no concentration).

    Raises:
        ValueError: naming the parameter out of its range.
    """
    p = _point(d, lam, one_minus_lam)
    d, g = p.d, _log_inverse_gap(p)
    if d == 1:
        return math.inf
    x = g / math.log(d)
    r = round(x)
    if abs(x - r) <= 1e-9 * max(1.0, abs(x)):
        return int(r)
    return int(math.ceil(x))


def boundary_distance(d: int, lam: float | None = None, *, one_minus_lam: float | None = None) -> float:
    """Distance of log(1/(1-lam))/log d from the nearest integer: 0 on a boundary, 1/2 at most.

    The asymptotic profile is sharp only when this is not small; on a boundary, (1-lam)d^j ~ 1
    and two levels share the mass.

    Args:
        d: choices per arrival (or a :class:`~qlib.supermarket.point.Point`, carrying the rest).
        lam: arrival rate per queue, in (0, 1).
        one_minus_lam: 1 - lam in place of ``lam`` (kept as given: the paper's regime).

    Returns:
        The distance, in [0, 1/2].

    Raises:
        ValueError: naming the parameter out of its range.
    """
    p = _point(d, lam, one_minus_lam)
    d = V.integer("d", p.d, low=2, high=MAX_D)
    x = _log_inverse_gap(p) / math.log(d)
    return abs(x - round(x))


def fluid_fixed_point(d: int, lam: float | None = None, levels: int | None = None, *,
                      one_minus_lam: float | None = None, replacement: bool = True,
                      n: int | None = None) -> np.ndarray:
    """Fixed point s_0..s_levels of the fluid limit: s_0 = 1, s_i = lam g(s_{i-1}).

    With replacement this is lam^((d^i - 1)/(d - 1)) (lam^i for d = 1); without replacement the
    finite-n g(s) = C(ns, d)/C(n, d) is used. Given ``one_minus_lam``, log s_i =
    log1p(-(1-lam)) + d log s_{i-1} is summed in logs, keeping the digits of 1 - lam.

    Args:
        d: choices per arrival (or a :class:`~qlib.supermarket.point.Point`, carrying the rest).
        lam: arrival rate per queue, in (0, 1).
        one_minus_lam: 1 - lam in place of ``lam`` (kept as given: the paper's regime).
        levels: the last level L, >= 0 (required).
        replacement: sample with replacement (default) or without.
        n: number of queues, required without replacement.

    Returns:
        (levels + 1,) s_i.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    p = _point(d, lam, one_minus_lam, replacement, n)
    n, d, lam, replacement = p.n, p.d, p.lam, p.replacement
    one_minus_lam = p.one_minus_lam_given
    if levels is None:
        raise ValueError("levels must be an integer >= 0; got None")
    levels = V.integer("levels", levels, low=0)
    V.memory("levels", 8.0 * (levels + 1), f"{levels + 1} levels x 8 bytes")
    s = np.zeros(levels + 1)
    s[0] = 1.0
    if d == 1:  # g(s) = s with or without replacement: s_i = lam^i, as a running product
        if one_minus_lam is not None:
            log_s = np.cumsum(np.full(levels, math.log1p(-float(one_minus_lam))))
            s[1:] = np.where(log_s > -800, np.exp(np.maximum(log_s, -800.0)), 0.0)
        else:
            s[1:] = np.cumprod(np.full(levels, lam))
        return s
    # d >= 2: once s_i is 0 it stays 0 (the loop stops there, so huge levels cost nothing)
    if one_minus_lam is not None and replacement:
        log_lam, log_s = math.log1p(-float(one_minus_lam)), 0.0
        for i in range(1, levels + 1):
            log_s = log_lam + d * log_s
            if log_s <= -800:
                break
            s[i] = math.exp(log_s)
        return s
    for i in range(1, levels + 1):
        s[i] = lam * (s[i - 1] ** d if replacement else _g_cont(s[i - 1], d, False, n))
        if s[i] == 0.0:
            break
    return s


def _drift(s, d, lam, replacement, n):
    full = np.concatenate([[1.0], np.asarray(s, float), [0.0]])
    g = _g_cont(full, d, replacement, n)
    return lam * (g[:-2] - g[1:-1]) - (full[1:-1] - full[2:])


def fluid_drift(s: np.ndarray, d: int, lam: float | None = None, *, one_minus_lam: float | None = None,
                replacement: bool = True, n: int | None = None) -> np.ndarray:
    """Right-hand side of the fluid ODE for s_1..s_L (s_0 = 1 and s_{L+1} = 0 implied).

    Args:
        s: 1-D vector of finite reals (g clips it to [0, 1], so the drift is defined, and
            differentiable numerically, around the boundary too).
        d: choices per arrival (or a :class:`~qlib.supermarket.point.Point`, carrying the rest).
        lam: arrival rate per queue, in (0, 1).
        one_minus_lam: 1 - lam in place of ``lam`` (kept as given: the paper's regime).
        replacement: sample with replacement (default) or without.
        n: number of queues, required without replacement.

    Returns:
        (L,) ds_i/dt.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    p = _point(d, lam, one_minus_lam, replacement, n)
    n, d, lam, replacement = p.n, p.d, p.lam, p.replacement
    try:
        a = np.asarray(s, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"s must be a 1-D vector of finite reals s_1..s_L; got {s!r}") from None
    if a.ndim != 1 or np.any(~np.isfinite(a)):
        raise ValueError(f"s must be a 1-D vector of finite reals s_1..s_L; got {s!r}")
    return _drift(a, d, lam, replacement, n)


#: Spans up to this are one Euler step in :func:`fluid_trajectory` (LSODA hangs below ~1e-160).
_TINY_SPAN = 1e-100

# Dormand-Prince 5(4): nodes, stages, the 5th-order weights and the error weights (b - b*, FSAL)
_DP_A = ((), (1 / 5,), (3 / 40, 9 / 40), (44 / 45, -56 / 15, 32 / 9),
         (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
         (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656))
_DP_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_DP_E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)
#: explicit steps before a stiff problem is handed to LSODA
_DP_MAX_STEPS = 5_000


def _combine(y, h, weights, ks):
    """y + sum_j (h w_j) k_j, term by term in a fixed order (no BLAS: the same bits on every CPU)."""
    out = y
    for w, k in zip(weights, ks):
        if w:
            out = out + (h * w) * k
    return out


def _dormand_prince(f, y0, t_eval, rtol: float, atol: float, max_steps: int = _DP_MAX_STEPS):
    """y(t) at the increasing times ``t_eval`` (> 0) of y' = f(y), y(0) = y0, by Dormand-Prince 5(4)
    with the step controlled in the max norm and landing on every time asked: elementwise
    arithmetic and Python floats only, so the result is bit for bit the same on every machine
    (LSODA's linear algebra calls BLAS, whose kernels round differently on different CPUs).
    None if the problem needs more than ``max_steps`` steps (it is stiff)."""
    t, y = 0.0, np.asarray(y0, dtype=float)
    k1, h, steps, out = f(y), 1e-3, 0, []
    for te in t_eval:
        te = float(te)
        while t < te:
            steps += 1
            if steps > max_steps:
                return None
            last = h >= te - t
            h = te - t if last else h
            ks = [k1]
            for a in _DP_A[1:]:
                ks.append(f(_combine(y, h, a, ks)))
            yn = _combine(y, h, _DP_B, ks)
            ks.append(f(yn))
            err = _combine(np.zeros_like(y), h, _DP_E, ks)
            en = float(np.max(np.abs(err) / (atol + rtol * np.maximum(np.abs(y), np.abs(yn)))))
            if en <= 1.0:
                t = te if last else t + h
                y, k1 = yn, ks[-1]
            h *= 5.0 if en == 0.0 else min(5.0, max(0.2, 0.9 * en**-0.2))
        out.append(y)
    return np.array(out)


def fluid_trajectory(d: int, lam: float | None = None, times=None, initial=None, *,
                     one_minus_lam: float | None = None, replacement: bool = True,
                     n: int | None = None, rtol: float = 1e-9, atol: float = 1e-12) -> np.ndarray:
    """Solve the fluid ODE from ``initial``.

    Time is in the model's units (one unit = mean service time). The solver is an explicit
    Dormand-Prince 5(4) written in elementwise arithmetic, so the trajectory is the same to the
    last bit on every machine; a stiff problem (more than 5000 steps: d in the thousands near
    lam = 1) goes to scipy's LSODA instead, whose last digits depend on the CPU's BLAS. When the
    last time is at most 1e-100 (0 included) one Euler step replaces the solver: its error, of
    order t^2, is far below any tolerance.

    Args:
        d: choices per arrival (or a :class:`~qlib.supermarket.point.Point`, carrying the rest).
        lam: arrival rate per queue, in (0, 1).
        one_minus_lam: 1 - lam in place of ``lam`` (kept as given: the paper's regime).
        times: the times to report, non-decreasing, >= 0.
        initial: the vector s_0..s_L (s_0 = 1, non-increasing, in [0, 1]).
        replacement: sample with replacement (default) or without.
        n: number of queues, required without replacement.
        rtol: the solver's relative tolerance, in [1e-13, 1) (scipy raises one below about
            2.2e-14 with a warning).
        atol: the solver's absolute tolerance, > 0.

    Returns:
        (len(times), L + 1) s_i(t), with s_0 = 1 in column 0.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    p = _point(d, lam, one_minus_lam, replacement, n)
    n, d, lam, replacement = p.n, p.d, p.lam, p.replacement
    rtol = V.real("rtol", rtol, low=1e-13, high=1.0, low_open=False)
    atol = V.real("atol", atol, low=0.0)
    if times is None or initial is None:
        raise ValueError("times and initial are required: a 1-D array of times and a vector s_0..s_L")
    try:
        times = np.asarray(times, dtype=float)
        s0 = np.asarray(initial, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("times and initial must be real arrays: a 1-D array of times and a vector s_0..s_L; "
                         f"got times={times!r}, initial={initial!r}") from None
    if times.ndim != 1 or times.size == 0 or np.any(~np.isfinite(times)) or np.any(times < 0) \
            or np.any(np.diff(times) < 0):
        raise ValueError("times must be a non-empty 1-D array of finite, non-negative, non-decreasing times")
    if s0.ndim != 1 or s0.size < 2 or not np.all(np.isfinite(s0)):
        raise ValueError(f"initial must be a 1-D vector s_0..s_L with L >= 1; got shape {s0.shape}")
    if abs(s0[0] - 1.0) > 1e-12 or np.any(s0 < 0) or np.any(s0 > 1) or np.any(np.diff(s0) > 1e-12):
        raise ValueError("initial must have s_0 = 1 and be non-increasing in [0, 1]")
    if times[-1] <= _TINY_SPAN:  # LSODA returns nothing for an empty span and hangs on a tiny one
        s = s0[1:] + times[:, None] * _drift(s0[1:], d, lam, replacement, n)[None, :]
        return np.concatenate([np.ones((times.size, 1)), np.clip(s, 0.0, 1.0)], axis=1)
    t_eval, where = np.unique(times, return_inverse=True)  # solve_ivp wants increasing times
    start = t_eval[0] <= 0.0  # t = 0 is the start itself
    y = _dormand_prince(lambda y: _drift(y, d, lam, replacement, n), s0[1:], t_eval[1:] if start else t_eval,
                        rtol, atol)
    if y is not None:
        y = np.concatenate([s0[None, 1:], y]) if start else y
        return np.concatenate([np.ones((times.size, 1)), y[where.reshape(-1)]], axis=1)
    sol = solve_ivp(lambda t, y: _drift(y, d, lam, replacement, n),
                    (0.0, float(times[-1])), s0[1:], t_eval=t_eval, method="LSODA",
                    rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"fluid ODE solver failed: {sol.message}")
    return np.concatenate([np.ones((times.size, 1)), sol.y.T[where.reshape(-1)]], axis=1)


def asymptotic_profile(d: int, lam: float | None = None, levels: int | None = None, *,
                       one_minus_lam: float | None = None) -> np.ndarray:
    """Brightwell–Luczak asymptotics for the fraction of queues with length exactly i.

    1 - lam at i = 0; (1 - lam) d^i for 0 < i < k; 1 - (1 - lam) d^(k-1) at k;
    exp(-(1 - lam) d^k) above k (a tail estimate for length k+1). Valid when
    (1-lam) d^(k-1) -> 0 and (1-lam) d^k -> oo, i.e. away from a boundary.

    Args:
        d: choices per arrival (or a :class:`~qlib.supermarket.point.Point`, carrying the rest).
        lam: arrival rate per queue, in (0, 1).
        one_minus_lam: 1 - lam in place of ``lam`` (kept as given: the paper's regime).
        levels: the last level L, >= k + 1 (default k + 1).

    Returns:
        (L + 1,) fractions.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    pt = _point(d, lam, one_minus_lam)
    k = predicted_max_length(pt)
    d = pt.d
    if not math.isfinite(k):
        raise ValueError("d must be an integer >= 2 for the asymptotic profile; got 1")
    L = k + 1 if levels is None else V.integer("levels", levels, low=k + 1)
    V.memory("levels", 8.0 * (L + 1), f"{L + 1} levels x 8 bytes")
    one_minus_lam = pt.one_minus_lam
    p = np.zeros(L + 1)
    p[0] = one_minus_lam
    for i in range(1, k):
        p[i] = one_minus_lam * float(d) ** i
    p[k] = 1.0 - one_minus_lam * float(d) ** (k - 1)
    p[k + 1] = math.exp(-one_minus_lam * float(d) ** k)
    return p
