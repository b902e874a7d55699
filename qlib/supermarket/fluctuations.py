"""SD(N) and tau_int(N) measured from stationary runs, on a design sized by the linear-noise view.

The design is set in units of the *predicted* tau_int(N) (:func:`qlib.supermarket.linear_noise`),
not of n d^(k-1): each replica runs ``tau_per_replica`` predicted tau_int after a burn-in of
``burn_tau`` fluid relaxation times from the fluid point, recorded every tau_int /
``frames_per_tau`` steps. Why: Sokal's windowed estimator with each replica's own mean subtracted
returns about a quarter of the truth on a series about three tau_int long (issue 40; the study's
old design of 10 n d^(k-1) steps), and its output is capped near a tenth of the run length; at
>= 100 tau_int per replica its bias is a few percent (tests/test_supermarket_fluctuations.py
measures both on an AR(1) series of known tau).

The estimates are replica means with Student-t intervals: SD(N) of each replica's series about
its own mean, and tau_int(N) by :func:`qlib.stats.integrated_autocorrelation_time` per replica
(tau = 1 + 2 sum rho in samples, times the frame spacing: jump steps, the convention of
:class:`~qlib.supermarket.linear_noise.LinearNoise`). The series are returned so that the
numbers can be recomputed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qlib import _validate as V
from qlib.stats import Estimate, integrated_autocorrelation_time, replica_mean
from qlib.supermarket.linear_noise import LinearNoise, linear_noise
from qlib.supermarket.simulation import simulate


@dataclass(frozen=True)
class MeasuredFluctuations:
    """SD(N) and tau_int(N) from stationary runs at one point.

    Fields: ``theory`` (the :class:`LinearNoise` that sized the design), ``every`` (frame spacing,
    jump steps), ``burn_in`` (steps), ``steps`` (recorded steps per replica), ``N`` (replicas,
    frames) the number of customers at each frame, ``sd_N`` and ``tau_int_steps`` (Estimates over
    replicas; tau in jump steps), ``replica_steps`` (the cost, burn-in included).
    """

    theory: LinearNoise
    every: int
    burn_in: int
    steps: int
    N: np.ndarray
    sd_N: Estimate
    tau_int_steps: Estimate
    replica_steps: int


def design_cost(theory: LinearNoise, *, replicas: int, tau_per_replica: float,
                burn_tau: float = 20.0) -> float:
    """Replica-steps of :func:`measure_fluctuations` on this design (burn-in included)."""
    return replicas * (tau_per_replica * theory.tau_int_steps + burn_tau * theory.tau_fluid_steps)


def estimate_from_series(N, every: int) -> tuple[Estimate, Estimate]:
    """(SD(N), tau_int(N) in steps) as replica means from ``N`` (replicas, frames), frames
    ``every`` steps apart: each replica's SD about its own mean, and Sokal's tau_int (window 5)."""
    N = np.asarray(N, dtype=float)
    sd = N.std(axis=1, ddof=1)
    tau = integrated_autocorrelation_time(N) * float(every)
    return replica_mean(sd), replica_mean(tau)


def measure_fluctuations(n: int, d: int, lam: float, *, replicas: int, tau_per_replica: float,
                         seed: int, frames_per_tau: int = 50, burn_tau: float = 20.0,
                         with_replacement: bool = True) -> MeasuredFluctuations:
    """Stationary SD(N) and tau_int(N) at (n, d, lam), on a design in units of the predicted tau_int.

    Args:
        n, d, lam: the point (validated by :func:`linear_noise`).
        replicas: independent replicas, >= 2 (the intervals are over replicas).
        tau_per_replica: recorded length of each replica, in predicted tau_int(N), > 0.
        seed: the simulation's seed.
        frames_per_tau: frames per predicted tau_int, >= 4.
        burn_tau: burn-in from the fluid point, in fluid relaxation times, >= 0.
        with_replacement: the sampling rule.

    Returns:
        A :class:`MeasuredFluctuations`.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    replicas = V.integer("replicas", replicas, low=2)
    tau_per_replica = V.real("tau_per_replica", tau_per_replica, low=0.0)
    frames_per_tau = V.integer("frames_per_tau", frames_per_tau, low=4)
    burn_tau = V.real("burn_tau", burn_tau, low=0.0, low_open=False)
    th = linear_noise(n, d, lam, with_replacement=with_replacement)
    every = max(1, int(th.tau_int_steps / frames_per_tau))
    frames = max(8, math.ceil(tau_per_replica * th.tau_int_steps / every))
    burn = int(math.ceil(burn_tau * th.tau_fluid_steps))
    r = simulate(th.point, steps=every * frames, burn_in=burn, replicas=replicas, seed=seed,
                 initial="fluid", record_every=every, progress=False)
    N = r.trajectory[:, :, 1:].astype(float).sum(axis=2)
    sd, tau = estimate_from_series(N, every)
    return MeasuredFluctuations(theory=th, every=every, burn_in=burn, steps=every * frames, N=N,
                                sd_N=sd, tau_int_steps=tau, replica_steps=replicas * (every * frames + burn))


__all__ = ["MeasuredFluctuations", "measure_fluctuations", "estimate_from_series", "design_cost"]
