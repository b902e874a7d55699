"""Study: the mixing time of the supermarket model where the theorem holds (notebook 02, the long tier).

Claims (Brightwell & Luczak, arXiv:1201.5523, as summarised; docs/models.md#mixing-time): from a
good start the mixing time is O(k d^(k-1) n log n) steps and Omega(n (lam d)^(k-1)): at fixed n
and 1 - lam it scales with d^(k-1), and it sits between the two bounds up to constants.

Measured only inside the hypotheses H0-H3 (docs/models.md#hypotheses), checked per point, and
from certified stationary starts: at each point the chains from all-empty and from all queues at
k + 1 are run until they meet, and the samples are the chain from the fluid point after 3x the
largest of those meeting times (:func:`certified_samples`). T_meet is the meeting time of the
chain from the fluid point with a chain from such a sample (d_TV from the fluid start <= P(T > t)).
From the same stationary chains, continued for 10 n d^(k-1) steps: the integrated autocorrelation
times of N and u_k, the relaxation the lower bound rests on.

Full mode is the long tier: ``make results-long ONLY=regime`` computes it (about an hour here) into
``results/long/``; everything else reads it from there and computes nothing (a point it lacks is
reported on its row). Smoke mode computes tiny points.
"""

from __future__ import annotations

from qlib.studies.mixing_regime.claims import CLAIMS, claim_rows
from qlib.studies.mixing_regime.compute import (
    LONG_COMMAND,
    RegimePoints,
    RegimeResult,
    certified_samples,
    costs,
    good_start_times,
    measure_point,
    run,
)
from qlib.studies.mixing_regime.parameters import (
    CLAIM_THRESHOLDS,
    PARAMETERS,
    design_holds,
    relaxation_scale,
)
from qlib.studies.mixing_regime.prose import findings_markdown, predicted_markdown, summary

__all__ = [
    "CLAIMS",
    "CLAIM_THRESHOLDS",
    "LONG_COMMAND",
    "PARAMETERS",
    "RegimePoints",
    "RegimeResult",
    "certified_samples",
    "claim_rows",
    "findings_markdown",
    "costs",
    "design_holds",
    "good_start_times",
    "measure_point",
    "predicted_markdown",
    "relaxation_scale",
    "run",
    "summary",
]
