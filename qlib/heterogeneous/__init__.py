"""M/M/n with heterogeneous servers and uninformed customers (Cabral, arXiv:0706.0560).

The model (docs/models.md, "Heterogeneous servers"): arrivals at rate lam join a uniformly
random idle server (else one FIFO queue); server j works at rate mu_j. Who works the most? For
mu_l > mu_m: P_l < P_m (the fast server is busy less often), yet mu_l P_l > mu_m P_m (it
completes more); in fact (mu_m/mu_l) P_m < P_l < P_m.

- exact product-form solution: :func:`busy_probabilities` and friends (O(n^2), log-space), and
  :func:`pair_margins`, the three claims' margins with the right sign even for near-equal rates;
- test oracles: :func:`stationary_distribution`, :func:`generator_solve`; the wrong-on-purpose
  routings' exact P_j: :func:`fastest_busy_probabilities` (informed customers) and
  :func:`slowest_busy_probabilities` (a counterfactual that breaks claim 2);
- :func:`relaxation_time`: 1/(spectral gap) of the chain, exactly, for n <= 12 (how many
  relaxation times a run covers); :func:`queue_gap`, the queue's part of the spectrum;
- :func:`simulate`: uniformised JAX simulation of many replicas ("random", "longest_idle",
  "fastest", "slowest"), with exact event probabilities (:func:`step_probabilities`) and runs
  that continue exactly (``initial=result``).
"""

from qlib.heterogeneous.exact import (
    POLICIES,
    JointProbabilities,
    PairMargins,
    busy_count_distribution,
    busy_probabilities,
    check_rates,
    effective_rates,
    idle_probabilities,
    joint_probabilities,
    mean_number_in_system,
    mean_queue_length,
    pair_margins,
    service_rates,
    wait_probability,
)
from qlib.heterogeneous.oracles import (
    fastest_busy_probabilities,
    generator_solve,
    marginals_from_sets,
    slowest_busy_probabilities,
    stationary_distribution,
)
from qlib.heterogeneous.relaxation import RELAXATION_MAX_N, queue_gap, relaxation_time
from qlib.heterogeneous.result import ChainState, SimulationResult
from qlib.heterogeneous.simulate import MIN_SHARE, simulate, step_probabilities

__all__ = [
    "MIN_SHARE", "POLICIES", "RELAXATION_MAX_N", "ChainState", "JointProbabilities", "PairMargins",
    "SimulationResult", "busy_count_distribution", "busy_probabilities", "check_rates", "effective_rates",
    "fastest_busy_probabilities", "generator_solve",
    "idle_probabilities", "joint_probabilities", "marginals_from_sets", "mean_number_in_system",
    "mean_queue_length", "pair_margins", "queue_gap", "relaxation_time", "service_rates", "simulate",
    "slowest_busy_probabilities",
    "stationary_distribution", "step_probabilities", "wait_probability",
]
