"""The notebook's words on the in-regime study, rendered from the result (no number typed by hand)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qlib import stats
from qlib.studies.mixing_regime.claims import claim_rows
from qlib.studies.mixing_regime.compute import LONG_COMMAND, RegimeResult
from qlib.studies.mixing_regime.parameters import relaxation_scale
from qlib.supermarket.regime import hypotheses, inside, lower_time, reference_time


def findings_markdown(result: RegimeResult) -> str:
    """What the in-regime runs show: one line per row (verdict, claim, what was measured), or what
    the long tier lacks."""
    missing = int(result.sweep.missing.sum() + result.family.missing.sum())
    lines = []
    if result.mode == "full" and missing:
        lines.append(f"*The long tier (`results/long/`) lacks {missing} of the "
                     f"{result.sweep.n.size + result.family.n.size} points: `{LONG_COMMAND}` computes them.*")
        lines.append("")
    for r in claim_rows(result):
        lines.append(f"- **{r.verdict}** ({r.kind}) — {r.claim}: {r.measured}")
    return "\n".join(lines)


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


def predicted_markdown(result: RegimeResult) -> str:
    """What section (g) concludes (issue 42): per predicted row its verdict and R, then what the wrong
    models gave, or what the long tier lacks; every number from the rows."""
    lines = []
    for r in claim_rows(result):
        if "T_meet = tau_fluid ln SD(N)" not in r.claim and "T_pred" not in r.theory:
            continue
        lines.append(f"- **{r.verdict}** — {r.claim}: {r.measured.split('; T_pred')[0]}")
        for c in r.counterfactuals:
            verdict = c.measured.rsplit("[", 1)[-1].rstrip("]") if "[" in c.measured else ""
            lines.append(f"  - {'near' if c.near else 'wrong'}: {c.model} → {verdict}")
    return "\n".join(lines)
