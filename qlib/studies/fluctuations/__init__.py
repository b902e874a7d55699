"""Study: fluctuations predicted (issue 40): SD(N) and the autocorrelation of N in equilibrium against
the linear-noise view (:func:`qlib.supermarket.linear_noise`), at every point inside H0-H3 (families
A-C, the in-regime sweep of notebook 02; the mixing family is family A), and outside it (D, E, K3) as
findings.

The runs are sized in units of the predicted tau_int(N), not of n d^(k-1) (parameters.py says why):
an SD design (800 predicted tau_int per point) at every point, a tau design (12800) where it is
affordable. Full mode is the long tier: ``python -m qlib results-long --only fluctuations`` computes
it into ``results/long/`` (resumable, point by point, cheapest first); everything else reads it from
there. Smoke mode computes tiny points.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from qlib.studies.fluctuations.claims import CLAIMS, claim_rows
from qlib.studies.fluctuations.compute import (
    LONG_COMMAND,
    FluctPoint,
    FluctuationsResult,
    cost,
    long_cost,
    predictions,
    run,
)
from qlib.studies.fluctuations.parameters import PARAMETERS


def summary(result: FluctuationsResult) -> pd.DataFrame:
    """One row per point: where, n, d, lam, k, inside, predicted SD(N) (with and without the 1/n term)
    and tau_int(N) (steps), the measured means (nan where results/long lacks them) and their ratios."""
    rows = []
    for p in result.points:
        sd = float(np.mean(p.sd)) if p.sd is not None else np.nan
        tau = float(np.mean(p.tau)) if p.tau is not None else (
            float(np.mean(p.tau_sd)) if p.tau_sd is not None else np.nan)
        rows.append(dict(where=p.where, n=p.n, d=p.d, lam=p.lam, k=p.k, inside=p.inside,
                         sd_pred=p.pred["sd"], sd_lna=p.pred["sd_lna"], sd=sd, sd_ratio=sd / p.pred["sd"],
                         tau_pred=p.pred["tau"], tau=tau, tau_ratio=tau / p.pred["tau"],
                         tau_design="tau" if p.tau is not None else "sd", missing=p.missing))
    return pd.DataFrame(rows)


__all__ = ["PARAMETERS", "CLAIMS", "LONG_COMMAND", "FluctPoint", "FluctuationsResult", "run", "claim_rows",
           "summary", "cost", "long_cost", "predictions"]
