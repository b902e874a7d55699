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

import numpy as np
import pandas as pd

from qlib import stats
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
from qlib.studies.mixing_regime.prose import findings_markdown
from qlib.supermarket.regime import hypotheses, inside, lower_time, reference_time


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if np.all(np.isfinite(x)) else np.nan


def summary(result: RegimeResult) -> pd.DataFrame:
    """One line per point of the d-sweep, its d-fixed control and the family: the hypotheses, how
    the start was certified, T_meet, its ratios to both bounds and the autocorrelation times.

    Args:
        result: what :func:`run` returned.

    Returns:
        A DataFrame (empty columns where the long tier lacks a point).
    """
    rows = []
    for label, m, hyp in (
        ("d-sweep", result.sweep, result.hyp_sweep),
        ("d fixed", result.fixed, None),
        ("family", result.family, result.hyp_family),
    ):
        for j in range(m.n.size):
            n, d, lam = int(m.n[j]), int(m.d[j]), float(m.lam[j])
            h = hyp[j] if hyp else hypotheses(n, d, lam, **result.parameters["claims"]["hypotheses"])
            T = m.T[j]
            ok = np.isfinite(T).all() and not m.missing[j]
            est = stats.replica_mean(T, axis=0) if ok else None
            rows.append(
                {
                    "set": label,
                    "n": n,
                    "d": d,
                    "1-lam": 1 - lam,
                    "n(1-lam)^2 d^(k-1)": h["buffer_over_excursion"] ** 2,
                    "inside H0-H3": inside(h),
                    "start": (
                        "missing"
                        if m.missing[j]
                        else f"burn-in {m.burn[j]:.3g} = 3 x max T_bt"
                        + ("" if m.certified[j] else " (NOT all pairs met)")
                    ),
                    "T_meet": float(est.mean) if est else np.nan,
                    "T_meet ±": float(est.halfwidth()) if est else np.nan,
                    "T/lower": float(est.mean) / lower_time(n, d, lam) if est else np.nan,
                    "T/upper": float(est.mean) / reference_time(n, d, lam) if est else np.nan,
                    "tau_N/(n d^(k-1))": _mean(m.iact_N[j]) / relaxation_scale(n, d, lam),
                    "tau_uk/(n d^(k-1))": _mean(m.iact_uk[j]) / relaxation_scale(n, d, lam),
                }
            )
    return pd.DataFrame(rows)


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
    "relaxation_scale",
    "run",
    "summary",
]
