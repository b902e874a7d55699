"""Study: the mixing time of the supermarket model, by monotone coupling (notebook 02).

Claims (Brightwell & Luczak, arXiv:1201.5523, as summarised; docs/models.md#mixing-time): from a
good initial state the mixing time is O(k d^(k-1) n log n) jump-chain steps and at least
Omega(n (lam d)^(k-1)); past it the total-variation distance decays exponentially; the bound
holds up to constants from bad starts too; the process stays in the good set for a long time.
One unit of model time is (1 + lam) n steps.

How each is measured (docs/models.md#monotone-coupling):

- **upper bounds** through the coupling inequality d_TV(t) <= P(T_meet > t): from a good start,
  the meeting time of the chain from the fluid point with a chain from a stationary sample
  (an unordered coupling, meeting detected by equality); from a bad start, the meeting time of
  the chains from all-empty and from all queues at k+1 (ordered: it bounds d_TV from every
  start between them);
- **in the paper's regime, separating d^(k-1) from 1/(1-lam)**: along the paper's family
  lam = 1 - n^(-alpha), d = floor(n^beta) (alpha = 0.75, beta = 0.5: k = 2, 1/(1-lam) = n^0.75
  while k d^(k-1) = 2 n^0.5), and at fixed 1 - lam with d varied within one k-window;
- **the lower bound** from a good start: the first time the law of u_k(t) over replicas is
  within 1/4 of its stationary law in (binned) total variation, a lower bound on the mixing time
  from that start, against n (lam d)^(k-1);
- **exponential decay**: the survival P(T_meet > t) beyond its median against the
  submultiplicative bound P(T > s + t) <= P(T > s) P(T > t);
- **staying near equilibrium**: the first exit time from the good set
  N^eps = {max_i |u_i/n - s*_i| <= eps} from the fluid point, as n grows.

Every claim row carries the same criterion on wrong models: JSQ(2) in place of JSQ(d),
uncoupled chains (independent randomness), d held fixed, a start drawn from the stationary law.

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS` (``parameters``), :data:`CLAIMS`
and :func:`claim_rows` (``claims``), :func:`run` and the sliders' :func:`explore` (``compute``), the
notebook's prose and :func:`summary` (``prose``); figures in :mod:`qlib.plots.mixing`.
"""

from qlib.studies.mixing.claims import (
    CLAIMS,
    claim_rows,
    claim_rows_by_key,
    d_exponent,
    exit_verdict,
    tail_verdict,
    tau_d_exponent,
)
from qlib.studies.mixing.compute import (
    Exploration,
    LowerBound,
    MeetingTimes,
    MixingResult,
    event_crossing,
    explore,
    good_set_exits,
    good_start_times,
    run,
    sample_seed,
    stationary_samples,
    top_start_times,
    uncoupled_times,
)
from qlib.studies.mixing.parameters import CLAIM_THRESHOLDS, PARAMETERS
from qlib.studies.mixing.prose import SUMMARY_COLUMNS, findings_markdown, summary
from qlib.supermarket.point import PointTuple  # noqa: F401  (the notebook and tests read them here)
from qlib.supermarket.refined import relaxation_time  # noqa: F401
from qlib.supermarket.theory import steps_per_time  # noqa: F401

#: helpers the tests call by name
_TESTED = (d_exponent, exit_verdict, tail_verdict)

__all__ = ["PARAMETERS", "CLAIMS", "CLAIM_THRESHOLDS", "PointTuple", "claim_rows", "claim_rows_by_key",
           "tau_d_exponent", "Exploration", "LowerBound", "MeetingTimes", "MixingResult", "event_crossing",
           "explore", "good_set_exits", "good_start_times",
           "run", "sample_seed", "stationary_samples", "top_start_times", "uncoupled_times",
           "findings_markdown", "summary", "SUMMARY_COLUMNS"]
