"""The supermarket model (join the shortest of d sampled queues), Brightwell & Luczak.

n queues, Exp(1) service, arrivals at rate lam*n; each arrival samples d queues and joins a
shortest. Claims (arXiv:1201.5523), for lam -> 1 and d -> oo: the equilibrium maximum queue
length concentrates on k = ceil(log(1/(1-lam))/log d); most queues have length exactly k;
the mixing time is O(k d^(k-1) n log n) steps, with a lower bound Omega(n (lam d)^(k-1)).

Public API:

- :class:`Point` — one validated parameter point (n, d, lam | one_minus_lam, replacement); every
  function below takes plain parameters or a Point, and results carry theirs (``.point``);
- :func:`simulate` — exact count-chain simulation of many replicas at once (JAX);
  :func:`simulate_many` — many parameter points in one kernel, each as its own call;
- :func:`fluid_fixed_point`, :func:`fluid_trajectory`, :func:`predicted_max_length`,
  :func:`asymptotic_profile` — the theory;
- :func:`exact_equilibrium`, :func:`exact_tail_fraction` — exact stationary law for small n,
  the test oracle;
- :func:`direct_simulation` — a plain queue-vector simulation, the reference for tests;
- :func:`estimate_equilibrium` (and ``_many``) — equilibrium estimates with certified burn-in,
  batch means and a sequential stop; :func:`refined_mean_field`, :func:`relaxation_time`;
- :func:`linear_noise` — SD(N), SD(u_i), the autocorrelation of N and tau_int(N), tau_fluid in
  model time and jump steps (the linear-noise view, from the refined mean field's A and W);
- :func:`meeting_times` (and ``_many``), :func:`coupled_paths` — the monotone coupling;
- :func:`perfect_samples` — exact stationary samples of the bounded model (coupling from the past).
"""

from qlib.supermarket.direct import direct_simulation
from qlib.supermarket.exact import ExactEquilibrium, exact_equilibrium, exact_stationary, exact_tail_fraction
from qlib.supermarket.point import Point
from qlib.supermarket.simulation import (
    SupermarketResult,
    counts_all_at,
    counts_from_lengths,
    initial_counts,
    simulate,
    simulate_many,
)
from qlib.supermarket.theory import (
    all_sampled_at_least,
    asymptotic_profile,
    boundary_distance,
    fluid_drift,
    fluid_fixed_point,
    fluid_trajectory,
    predicted_max_length,
)

__all__ = [
    "Point",
    "SupermarketResult",
    "simulate",
    "simulate_many",
    "initial_counts",
    "counts_from_lengths",
    "counts_all_at",
    "ExactEquilibrium",
    "exact_equilibrium",
    "exact_stationary",
    "exact_tail_fraction",
    "direct_simulation",
    "all_sampled_at_least",
    "asymptotic_profile",
    "boundary_distance",
    "fluid_drift",
    "fluid_fixed_point",
    "fluid_trajectory",
    "predicted_max_length",
]

# Mixing time by monotone coupling (notebook 02).
from qlib.supermarket.coupling import (  # noqa: E402
    coupled_paths,
    exact_coupling,
    l1_distance,
    meeting_times,
    meeting_times_many,
    tv_distance,
    tv_noise_floor,
)

__all__ += [
    "meeting_times",
    "meeting_times_many",
    "coupled_paths",
    "exact_coupling",
    "l1_distance",
    "tv_distance",
    "tv_noise_floor",
]

# Equilibrium, maximum queue length, refined mean field (notebook 01).
from qlib.supermarket.equilibrium import (  # noqa: E402
    EquilibriumEstimate,
    estimate_equilibrium,
    estimate_equilibrium_many,
)
from qlib.supermarket.refined import RefinedMeanField, refined_mean_field, relaxation_time  # noqa: E402

__all__ += ["RefinedMeanField", "refined_mean_field", "relaxation_time",
            "EquilibriumEstimate", "estimate_equilibrium", "estimate_equilibrium_many"]

# Fluctuations: SD(N), the autocorrelation of N, tau_int(N), tau_fluid (linear-noise view).
from qlib.supermarket.linear_noise import LinearNoise, linear_noise  # noqa: E402

__all__ += ["LinearNoise", "linear_noise"]


# The mixing time predicted: T_pred = tau_fluid (ln SD(N) + C), C = 0 (issue 42).
from qlib.supermarket.mixing_law import MeetingTimePrediction, predicted_meeting_time  # noqa: E402

__all__ += ["MeetingTimePrediction", "predicted_meeting_time"]

# Exact stationary samples of the bounded model (coupling from the past; notebook 04).
from qlib.supermarket.perfect import PerfectSamples, capacity_for, perfect_samples  # noqa: E402

__all__ += ["PerfectSamples", "perfect_samples", "capacity_for"]
