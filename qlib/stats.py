"""Statistics for simulation output: replica means, batch means, confidence intervals.

Every tolerance in the test-suite and every ± in the claims table comes from here, so that
an error bar always means the same thing: a Student-t interval from independent replicas, or
from batch means of one long run when there is a single replica.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st


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
