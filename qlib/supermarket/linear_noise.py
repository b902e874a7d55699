"""The linear-noise view of the supermarket model: SD(N), SD(u_i) and the autocorrelation of N.

Built on the refined mean field (:mod:`qlib.supermarket.refined`), which already solves for what
the linear-noise (van Kampen) approximation needs: A, the Jacobian of the fluid drift at its
fixed point; Q, the noise matrix; W, the Lyapunov solution A W + W A^T + Q = 0, so that
n Cov(u/n) -> W; and, at order 2, ``covariance2``, the 1/n term of n Cov(u/n). Nothing is solved
twice here; this module only reads those matrices off and adds what the fluctuations of
N = sum_{i>=1} u_i (the number of customers) need:

- Var(N) = n^2 Var(sum_i x_i) = n 1^T W 1 + 1^T covariance2 1 + o(1) (x = u/n, 1 the ones vector on
  levels 1..L), so SD_LNA(N) = sqrt(n 1^T W 1) and the refined SD(N) adds the 1/n term;
  SD(u_i) = sqrt(n W_ii) likewise;
- in the linear-noise limit the fluctuation y = sqrt(n)(x - x*) is an Ornstein-Uhlenbeck process
  dy = A y dt + Q^(1/2) dB, so Cov(y(t), y(0)) = e^(A t) W for t >= 0 and the autocovariance of N
  is n 1^T e^(A t) W 1 (t in model time);
- its autocorrelation rho(t) = 1^T e^(A t) W 1 / 1^T W 1 integrates to
  int_0^oo rho = 1^T (-A)^(-1) W 1 / 1^T W 1 (the resolvent; A is Hurwitz);
- tau_int(N) = 2 int_0^oo rho(t) dt in model time, i.e. 2 n (1 + lam) 1^T (-A)^(-1) W 1 / 1^T W 1
  jump steps. **Convention**: this is Sokal's tau_int = 1 + 2 sum_{m>=1} rho(m) of a series sampled
  every jump step (the one :func:`qlib.stats.integrated_autocorrelation_time` estimates, in
  samples): for a series sampled every h model-time units, 1 + 2 sum_m rho(m h) = (2/h) int rho
  + O(h rho'(0)), so with h = 1/(n (1 + lam)) (one step) the two agree to O(1) step. It is twice
  the exponential time for an exponential rho, and the variance of a time average over T steps is
  Var(N) tau_int / T.
- The fluid relaxation time tau_fluid = 1/min|Re eig A| (model time; the same number as
  :attr:`RefinedMeanField.relaxation_time`), and n (1 + lam) tau_fluid in jump steps: the count
  chain is uniformised at total rate n (1 + lam) (:func:`qlib.supermarket.theory.steps_per_time`).

What it assumes: n large at fixed (d, lam) (a diffusion approximation around the fluid fixed point),
i.e. excursions small against the buffer of the regime; docs/models.md#linear-noise says where
it holds and by how much the measured SD(N) departs from it outside H0-H3. With d = 1 the drift
is linear and the count chain is n independent M/M/1 queues, so the view is exact at every n:
Var(N) = n lam/(1 - lam)^2 and int rho = (1 + lam)/(1 - lam)^2 (the tests use both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import expm

from qlib import _validate as V
from qlib.supermarket.point import Point
from qlib.supermarket.refined import RefinedMeanField, refined_mean_field


@dataclass(frozen=True)
class LinearNoise:
    """The linear-noise view at one point (n, d, lam), levels 1..L of the count chain.

    Fields:

    - ``point``: the validated :class:`~qlib.supermarket.point.Point`;
    - ``jacobian`` A (L, L), the fluid Jacobian at the fixed point, and ``covariance`` W (L, L), the
      Lyapunov solution n Cov(u/n) -> W (levels 1..L);
    - ``refined``: the :class:`~qlib.supermarket.refined.RefinedMeanField` it was read from (order 2,
      or 1 when asked; None when built by :func:`from_matrices` alone);
    - ``steps_per_time``: n (1 + lam), jump steps per unit of model time;
    - ``tau_fluid``: 1/min|Re eig A|, the fluid relaxation time (model time);
      ``tau_fluid_steps`` the same in jump steps;
    - ``var_N_lna`` = n 1^T W 1 and ``var_N`` = n 1^T W 1 + 1^T covariance2 1 (with the 1/n term);
      ``sd_N_lna``, ``sd_N`` their square roots;
    - ``sd_u_lna`` (L+1,) sqrt(n W_ii) and ``sd_u`` (L+1,) with the 1/n term (index 0: u_0 = n,
      SD 0); a negative refined variance (the expansion failing) gives nan;
    - ``tau_int`` = 2 1^T (-A)^(-1) W 1 / 1^T W 1 (model time) and ``tau_int_steps`` in jump steps:
      Sokal's 1 + 2 sum rho (module docstring);
    - ``order2_ratio`` = |1^T covariance2 1| / (n 1^T W 1): the size of the 1/n term of Var(N)
      relative to the leading one, the expansion's own convergence check (small: trust it).

    Methods: :meth:`autocovariance` n 1^T e^(A t) W 1, :meth:`autocorrelation` its ratio to
    n 1^T W 1, :meth:`autocorrelation_steps` the same at lags in jump steps.
    """

    point: Point
    jacobian: np.ndarray
    covariance: np.ndarray
    steps_per_time: float
    tau_fluid: float
    tau_fluid_steps: float
    var_N_lna: float
    var_N: float
    sd_u_lna: np.ndarray
    sd_u: np.ndarray
    tau_int: float
    tau_int_steps: float
    order2_ratio: float
    refined: RefinedMeanField | None = None

    @property
    def n(self) -> int:
        return self.point.n

    @property
    def sd_N_lna(self) -> float:
        """sqrt(n 1^T W 1): SD(N) in the linear-noise approximation."""
        return math.sqrt(self.var_N_lna)

    @property
    def sd_N(self) -> float:
        """SD(N) with the 1/n term of the covariance (nan if that makes the variance negative)."""
        return math.sqrt(self.var_N) if self.var_N > 0 else math.nan

    def autocovariance(self, t: Any) -> np.ndarray:
        """Cov(N(0), N(t)) = n 1^T e^(A t) W 1 in the linear-noise approximation.

        Args:
            t: lag(s) in model time, finite and >= 0 (any shape).

        Returns:
            An array of the shape of ``t``.

        Raises:
            ValueError: if ``t`` is not an array of finite lags >= 0.
        """
        t = _lags("t", t)
        A, w1 = self.jacobian, self.covariance.sum(axis=1)
        one = np.ones(A.shape[0])
        # expm per lag, not an eigendecomposition: A is non-normal and its eigenvectors can be
        # ill-conditioned at large d, where a modal sum loses the digits the tests compare.
        flat = np.array([one @ expm(A * float(s)) @ w1 for s in t.reshape(-1)])
        return self.n * flat.reshape(t.shape)

    def autocorrelation(self, t: Any) -> np.ndarray:
        """rho_N(t) = 1^T e^(A t) W 1 / 1^T W 1, lags ``t`` in model time (>= 0, any shape)."""
        return self.autocovariance(t) / self.var_N_lna

    def autocorrelation_steps(self, lag: Any) -> np.ndarray:
        """rho_N at lags in jump steps (>= 0, any shape): :meth:`autocorrelation` at lag/(n(1+lam))."""
        return self.autocorrelation(_lags("lag", lag) / self.steps_per_time)


def _lags(name: str, t: Any) -> np.ndarray:
    try:
        a = np.asarray(t, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be finite lags >= 0; got {t!r}") from None
    if np.any(~np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name} must be finite lags >= 0; got {t!r}")
    return a


def linear_noise(n: int, d: int, lam: float, *, with_replacement: bool = True, order: int = 2) -> LinearNoise:
    """The linear-noise view of the count chain at (n, d, lam): SD(N), SD(u_i), the autocorrelation
    of N and its integrated time, and the fluid relaxation time, in model time and in jump steps.

    Reads A, W and the 1/n covariance term off :func:`~qlib.supermarket.refined.refined_mean_field`
    (order 2) and adds 1^T (-A)^(-1) W 1 (module docstring; docs/models.md#linear-noise).

    Args:
        n: number of queues, an integer >= 1 (>= d without replacement).
        d: choices per arrival, an integer >= 1.
        lam: arrival rate per queue, in (0, 1).
        with_replacement: sample the d queues with replacement (default) or without (then the
            1/n terms carry the without-replacement drift; the leading W is the same).
        order: 2 (default) adds the 1/n term of the covariance (``var_N``, ``sd_u``); 1 skips it
            (then ``var_N`` = ``var_N_lna`` and ``order2_ratio`` is nan): order 2 compiles once per d
            (about 1.5 s), order 1 once per number of levels (then about 1 ms), what an explorer needs.

    Returns:
        A :class:`LinearNoise`.

    Raises:
        ValueError: naming the parameter and its range, before anything is compiled.
    """
    if n is None:
        raise ValueError("n must be an integer >= 1; got None")
    if not isinstance(with_replacement, (bool, np.bool_)):
        raise ValueError(f"with_replacement must be True or False; got {with_replacement!r}")
    p = Point(n, d, lam, replacement=with_replacement)
    order = V.integer("order", order, low=1, high=2)
    r = refined_mean_field(p.d, p.lam, replacement=p.replacement, order=order)
    W = r.covariance[1:, 1:]
    B = r.covariance2[1:, 1:] if order == 2 else None
    return from_matrices(p, r.jacobian, W, B, refined=r)


def from_matrices(point: Point, A: np.ndarray, W: np.ndarray, covariance2: np.ndarray | None = None, *,
                  refined: RefinedMeanField | None = None) -> LinearNoise:
    """The :class:`LinearNoise` of a point from its matrices (levels 1..L): the fluid Jacobian ``A``,
    the Lyapunov covariance ``W`` and, if given, the 1/n term ``covariance2`` of n Cov(u/n) (None:
    order 1). :func:`linear_noise` reads them off the refined mean field; the notebooks' sliders
    (:func:`qlib.supermarket.regime.fluctuation_view`) from closed-form derivatives in NumPy.

    Args:
        point: a :class:`~qlib.supermarket.point.Point` with n.
        A: (L, L), Hurwitz.
        W: (L, L), symmetric.
        covariance2: (L, L) or None.
        refined: the refined mean field they came from, kept on the result.

    Returns:
        A :class:`LinearNoise`.
    """
    one = np.ones(A.shape[0])
    w1 = W @ one
    var1 = float(one @ w1)                      # 1^T W 1
    var_lna = point.n * var1
    B = np.zeros_like(W) if covariance2 is None else covariance2
    var = var_lna + float(one @ B @ one)
    diag_lna = point.n * np.concatenate([[0.0], np.diag(W)])
    diag = diag_lna + np.concatenate([[0.0], np.diag(B)])
    sd_u = np.where(diag >= 0, np.sqrt(np.maximum(diag, 0.0)), np.nan)
    resolvent = float(one @ np.linalg.solve(-A, w1))   # int_0^oo 1^T e^(At) W 1 dt
    tau_int = 2.0 * resolvent / var1
    spt = point.steps_per_time
    tau_fluid = float(1.0 / np.min(np.abs(np.linalg.eigvals(A).real)))
    return LinearNoise(
        point=point, jacobian=A, covariance=W, steps_per_time=spt, tau_fluid=tau_fluid,
        tau_fluid_steps=tau_fluid * spt, var_N_lna=var_lna, var_N=var,
        sd_u_lna=np.sqrt(np.maximum(diag_lna, 0.0)), sd_u=sd_u, tau_int=tau_int, tau_int_steps=tau_int * spt,
        order2_ratio=abs(var - var_lna) / var_lna if covariance2 is not None else math.nan, refined=refined,
    )


__all__ = ["LinearNoise", "linear_noise", "from_matrices"]
