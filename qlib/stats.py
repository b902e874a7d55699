"""Statistics for simulation output: replica means, batch means, confidence intervals.

Every tolerance in the test-suite and every ± in the claims table comes from here, so that
an error bar always means the same thing: a Student-t interval from independent replicas, or
from batch means of one long run when there is a single replica.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _st

from qlib import _validate as V


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its standard error and degrees of freedom."""

    mean: np.ndarray
    stderr: np.ndarray
    dof: int

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Two-sided Student-t confidence interval at ``level``."""
        return confidence_interval(self, level)

    def halfwidth(self, level: float = 0.95) -> np.ndarray:
        lo, hi = self.interval(level)
        return (hi - lo) / 2


def replica_mean(samples: np.ndarray, axis: int = 0) -> Estimate:
    """Mean and standard error over independent replicas along ``axis``."""
    x = np.asarray(samples, dtype=float)
    r = x.shape[axis]
    if r < 2:
        raise ValueError(f"replica_mean needs at least 2 replicas along axis {axis}; got {r}")
    return Estimate(x.mean(axis=axis), x.std(axis=axis, ddof=1) / np.sqrt(r), r - 1)


def batch_means(series: np.ndarray, batches: int = 20, axis: int = 0) -> Estimate:
    """Batch-means estimate of a time average from one long (stationary) series.

    The series is cut into ``batches`` contiguous batches along ``axis``; their means are
    treated as independent, which holds when each batch is much longer than the
    autocorrelation time.
    """
    x = np.moveaxis(np.asarray(series, dtype=float), axis, 0)
    if batches < 2:
        raise ValueError(f"batches must be an integer >= 2; got {batches}")
    m = x.shape[0] // batches
    if m < 1:
        raise ValueError(f"series of length {x.shape[0]} is too short for {batches} batches")
    b = x[: m * batches].reshape((batches, m) + x.shape[1:]).mean(axis=1)
    return replica_mean(b, axis=0)


def t_quantile(dof: int, level: float = 0.95) -> float:
    """The two-sided Student-t factor: mean ± t_quantile(dof, level) · stderr covers ``level``."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    if dof < 1:
        raise ValueError(f"dof must be an integer >= 1; got {dof}")
    return float(_st.t.ppf(0.5 + level / 2, dof))


def confidence_interval(est: Estimate, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Student-t interval mean ± t_{dof} · stderr."""
    t = t_quantile(est.dof, level)
    return est.mean - t * est.stderr, est.mean + t * est.stderr


def z_score(est: Estimate, exact: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """|mean − exact| / stderr, with ``floor`` added to the stderr (guards a zero-variance level)."""
    return np.abs(est.mean - np.asarray(exact)) / (est.stderr + floor)


@dataclass(frozen=True)
class PowerFit:
    """E[T] ~ prefactor * x^exponent, fitted by least squares on log mean against log x.

    ``ci`` is a 95% bootstrap interval (replicas resampled within each x); ``stderr`` is the
    bootstrap standard deviation of the exponent.
    """

    exponent: float
    stderr: float
    ci: tuple[float, float]
    prefactor: float

    def __str__(self) -> str:
        return f"{self.exponent:.3f} (95% CI {self.ci[0]:.3f} to {self.ci[1]:.3f})"


def fit_power_law(x: Any, samples: Any, *, boot: int = 2000, seed: int = 0) -> PowerFit:
    """Fit the exponent b in E[T(x)] = a x^b from replicas ``samples[j, r]`` at each ``x[j]``.

    The point estimate regresses log(mean_r samples[j]) on log x[j]; the CI resamples the
    replicas at every x (bootstrap, ``boot`` times, fixed ``seed``) and refits. All samples
    must be finite and positive (an unmet replica, T = inf, is an error: raise max_steps).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(samples, dtype=float)
    if x.ndim != 1 or x.size < 2 or np.any(x <= 0) or len(set(x.tolist())) < 2:
        raise ValueError("x must hold at least 2 distinct positive values")
    if y.ndim != 2 or y.shape[0] != x.size or y.shape[1] < 2:
        raise ValueError(f"samples must have shape (len(x), replicas >= 2) = ({x.size}, R); got {y.shape}")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError(
            "samples must be finite and positive (inf = a replica that never met: raise max_steps)"
        )
    boot = V.integer("boot", boot, low=10)
    lx = np.log(x)

    def slope(means):
        b, a = np.polyfit(lx, np.log(means), 1)
        return b, a

    b, a = slope(y.mean(axis=1))
    rng = np.random.default_rng(seed)
    R = y.shape[1]
    idx = rng.integers(0, R, size=(boot, y.shape[0], R))
    means = np.take_along_axis(y[None], idx, axis=2).mean(axis=2)  # (boot, points)
    bs = np.polyfit(lx, np.log(means).T, 1)[0]
    lo, hi = np.quantile(bs, [0.025, 0.975])
    return PowerFit(exponent=float(b), stderr=float(bs.std(ddof=1)), ci=(float(lo), float(hi)),
                    prefactor=float(math.exp(a)))


@dataclass(frozen=True)
class GTest:
    """A likelihood-ratio (G) goodness-of-fit test: ``G`` = 2 sum O log(O/E) on ``dof`` degrees
    of freedom, its chi-square ``p_value``, and ``cells`` (after pooling)."""

    G: float
    dof: int
    p_value: float
    cells: int


def g_test(observed: Any, probabilities: Any, *, min_expected: float = 5.0) -> GTest:
    """G-test of observed cell counts against exact cell probabilities.

    Cells whose expected count is below ``min_expected`` are pooled into one (so the chi-square
    approximation holds); ``probabilities`` must sum to 1 (to 1e-9).
    """
    O = np.asarray(observed, dtype=float)
    p = np.asarray(probabilities, dtype=float)
    if O.shape != p.shape or O.ndim != 1:
        raise ValueError(f"observed and probabilities must be 1-D of one shape; got {O.shape} and {p.shape}")
    if np.any(O < 0) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError("observed must be >= 0 and probabilities a probability vector (sum 1)")
    E = p * O.sum()
    keep = E >= min_expected
    o, e = O[keep], E[keep]
    if np.any(~keep) and E[~keep].sum() > 0:
        o, e = np.r_[o, O[~keep].sum()], np.r_[e, E[~keep].sum()]
    m = o > 0
    G = 2.0 * float(np.sum(o[m] * np.log(o[m] / e[m])))
    dof = max(len(o) - 1, 1)
    return GTest(G=G, dof=dof, p_value=float(_st.chi2.sf(G, dof)), cells=len(o))


def wilson_interval(successes: Any, trials: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for binomial proportions (iid trials, e.g. exact samples)."""
    k = np.asarray(successes, dtype=float)
    n = float(V.integer("trials", trials, low=1))
    z = float(_st.norm.ppf(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def integrated_autocorrelation_time(series: Any, *, window: float = 5.0) -> np.ndarray:
    """The integrated autocorrelation time tau = 1 + 2 sum_t rho(t) of each row of ``series``
    (replicas, samples), in samples, by Sokal's automatic window: the sum runs to the first lag M
    with M >= ``window`` x tau(M). Each row's autocovariance is taken about its own mean (FFT).

    Args:
        series: (replicas, samples), each row a stationary series.
        window: Sokal's c (5 is the usual choice for a roughly exponential decay).

    Returns:
        (replicas,) tau in samples (1 for an uncorrelated row; nan for a constant one).

    Raises:
        ValueError: if ``series`` is not 2-d with at least 8 samples, or ``window`` <= 0.
    """
    x = np.asarray(series, dtype=float)
    if x.ndim != 2 or x.shape[1] < 8:
        raise ValueError(f"series must be (replicas, samples) with samples >= 8; got shape {x.shape}")
    if not window > 0:
        raise ValueError(f"window must be > 0; got {window}")
    m = x.shape[1]
    y = x - x.mean(axis=1, keepdims=True)
    f = np.fft.rfft(y, n=2 * m, axis=1)
    acov = np.fft.irfft(f * np.conj(f), axis=1)[:, :m] / m
    out = np.full(x.shape[0], np.nan)
    for r in range(x.shape[0]):
        if acov[r, 0] <= 0:
            continue
        tau = 2.0 * np.cumsum(acov[r] / acov[r, 0]) - 1.0  # tau(M) for M = 0, 1, ...
        ok = np.nonzero(np.arange(m) >= window * tau)[0]
        out[r] = tau[ok[0]] if ok.size else tau[-1]
    return out
