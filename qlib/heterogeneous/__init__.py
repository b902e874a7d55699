"""M/M/n with heterogeneous servers and uninformed customers (Cabral, arXiv:0706.0560).

Arrivals at rate lam join a uniformly random idle server (else one FIFO queue); server j works
at rate mu_j. Who works the most? For mu_l > mu_m: P_l < P_m (the fast server is busy less
often), yet mu_l P_l > mu_m P_m (it completes more); in fact (mu_m/mu_l) P_m < P_l < P_m.

- exact product-form solution: :func:`busy_probabilities` and friends (O(n^2), log-space);
- test oracles: :func:`stationary_distribution`, :func:`generator_solve`;
- :func:`simulate`: uniformised JAX simulation of many replicas ("random", "longest_idle", "fastest").
"""

from qlib.heterogeneous.exact import (
    POLICIES,
    JointProbabilities,
    busy_count_distribution,
    busy_probabilities,
    effective_rates,
    fastest_busy_probabilities,
    generator_solve,
    idle_probabilities,
    joint_probabilities,
    marginals_from_sets,
    mean_number_in_system,
    mean_queue_length,
    stationary_distribution,
    wait_probability,
)
from qlib.heterogeneous.simulate import SimulationResult, simulate

__all__ = [
    "POLICIES", "JointProbabilities", "SimulationResult", "busy_count_distribution",
    "busy_probabilities", "effective_rates", "fastest_busy_probabilities", "generator_solve",
    "idle_probabilities", "joint_probabilities", "marginals_from_sets",
    "mean_number_in_system", "mean_queue_length", "simulate", "stationary_distribution",
    "wait_probability",
]
