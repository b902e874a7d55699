"""Study: k = 3 inside the regime, decided (issue 46; notebooks 01 and 02, the long tier).

Claims (Brightwell & Luczak, arXiv:1201.5523, as summarised; docs/models.md#k3-design): at k = 3, the
first k where d^(k-1) differs from d, the maximum queue length concentrates on k, most queues have
length exactly k (at the refined mean field's fractions), and the mixing time is the predicted
T_pred = tau_fluid ln SD(N) with a relaxation time growing as d^2, not d.

Every point is inside H0-H3 at the point itself; the design (:mod:`qlib.studies.k3.parameters`)
was committed before its runs, on its own named stream ("k3"). Full mode is the long tier: ``make
results-long ONLY=k3`` computes it into ``results/long/`` piece by piece (a kill loses one piece);
everything else reads it from there. Smoke mode computes tiny points (outside the regime).
"""

from __future__ import annotations

from qlib.studies.k3.claims import CLAIMS, claim_rows, exponent_in_d
from qlib.studies.k3.compute import LONG_COMMAND, K3Result, PointRuns, long_cost, run
from qlib.studies.k3.parameters import CLAIM_THRESHOLDS, PARAMETERS, DesignPoint, design_table, design_text
from qlib.studies.k3.prose import findings_markdown, summary

__all__ = [
    "CLAIMS",
    "CLAIM_THRESHOLDS",
    "DesignPoint",
    "K3Result",
    "LONG_COMMAND",
    "PARAMETERS",
    "PointRuns",
    "claim_rows",
    "design_table",
    "design_text",
    "exponent_in_d",
    "findings_markdown",
    "long_cost",
    "run",
    "summary",
]
