"""Study: the maximum queue length of the supermarket model concentrates on k (notebook 01).

Claims (Brightwell & Luczak, arXiv:1201.5523; Brightwell, Fairthorne & Luczak 2018;
docs/models.md#maximum-length and #profile): for lam -> 1 and d -> oo the equilibrium maximum
queue length concentrates on k = ceil(log(1/(1-lam))/log d); most queues have length exactly k
(at least 1 - 2(1-lam) d^(k-1) of them); the number at each length i < k is small and
predictable (the fluid fixed point; asymptotically (1-lam) d^i).

Every estimate comes from :func:`qlib.supermarket.estimate_equilibrium`: runs start from all
queues empty (away from the answer), burn in for 20 relaxation times tau of the fluid ODE, and
measure for 10 tau per replica (the finite-n tail: batches of 20 tau until its CI is within
±25%) (docs/models.md#relaxation-time).
Every claim row carries the same criterion on wrong models (JSQ(1) or JSQ(2) in place of JSQ(d),
d off by 25%), measured the same way with fewer replicas (they miss by far more than the CI).

Findings the prose must state (they are numbers of this study, not of the papers): at n = 10^4
the maximum concentrates on k where (1-lam) d^k is large, but *in* the paper's regime
((1-lam) d^(k-1) <= 0.1) it is k + 1 most of the time, because the finite-n tail above k is
hundreds of times the fluid value; along the paper's family the fraction of time max = k grows
only slowly with n. Showing the asymptotic statement in the regime needs n >= 10^5 at tau ~ 10^3,
beyond this machine's budget (the notebook states the cost).

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS` (``parameters``), :data:`CLAIMS`
and :func:`claim_rows` (``claims``), :func:`run` (``compute``), the notebook's prose and
:func:`summary` (``prose``); figures in :mod:`qlib.plots.max_length`.
"""

from qlib.studies.max_length.claims import CLAIMS, claim_rows, max_verdict, profile_verdict
from qlib.studies.max_length.compute import (
    LEVELS,
    Estimates,
    FromEmptyRun,
    InteractiveRun,
    MaxLengthResult,
    ProfileView,
    estimates,
    from_empty_run,
    interactive_run,
    long_cost,
    profile_view,
    run,
    short_fluid_run,
)
from qlib.studies.max_length.parameters import (
    CLAIM_THRESHOLDS,
    INDEPENDENT_BAND,
    INDEPENDENT_TAUS,
    PARAMETERS,
    PointTuple,
    family_sizes,
    finite_n_sizes,
    sweep_points,
)
from qlib.studies.max_length.prose import (
    SUMMARY_COLUMNS,
    findings_markdown,
    finite_n_markdown,
    methods_markdown,
    sci,
    summary,
)

#: helpers the tests call by name
_TESTED = (max_verdict, profile_verdict)

__all__ = ["PARAMETERS", "CLAIMS", "CLAIM_THRESHOLDS", "INDEPENDENT_BAND", "INDEPENDENT_TAUS", "PointTuple",
           "LEVELS", "Estimates", "FromEmptyRun", "InteractiveRun", "MaxLengthResult", "ProfileView",
           "claim_rows", "estimates", "family_sizes", "finite_n_sizes", "sweep_points",
           "from_empty_run", "interactive_run", "long_cost", "profile_view", "run",
           "short_fluid_run",
           "findings_markdown", "finite_n_markdown", "methods_markdown", "sci", "summary", "SUMMARY_COLUMNS"]
