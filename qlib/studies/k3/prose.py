"""The notebooks' words on the k = 3 study, rendered from its rows (no number typed by hand)."""

from __future__ import annotations

import pandas as pd

from qlib.studies.k3.claims import claim_rows, max_estimate, profile_measured
from qlib.studies.k3.compute import LONG_COMMAND, K3Result
from qlib.supermarket.mixing_law import predicted_meeting_time


def findings_markdown(result: K3Result, which: str | None = None) -> str:
    """What the k = 3 runs show, from the rows: ``which`` "maximum" (notebook 01), "mixing" (notebook
    02) or None (all)."""
    if result.missing:
        return (f"*The long tier (`results/long/`) lacks {result.missing} pieces of the k = 3 study: "
                f"`{LONG_COMMAND}` computes them. Every row below reads INCONCLUSIVE until then.*")
    lines = []
    for r in claim_rows(result, which):
        lines.append(f"- **{r.verdict}.** {r.claim[0].upper()}{r.claim[1:]}.")
        lines.append(f"  Measured: {r.measured}.")
        wrong = [c for c in r.counterfactuals if not c.near]
        if wrong:
            failed = sum(not c.passed for c in wrong)
            lines.append(f"  Far wrong models that fail it: {failed} of {len(wrong)}.")
    return "\n".join(lines)


def summary(result: K3Result) -> pd.DataFrame:
    """One line per point: the set, n, d, 1 - lam, T_pred and the mean meeting time (mixing points),
    P(max = 3) (time average) and the fraction of queues at 3.

    Args:
        result: what :func:`qlib.studies.k3.run` returned.

    Returns:
        A DataFrame, one row per design point (nan where the long tier lacks a piece).
    """
    rows = []
    for tag, points in (("mixing", result.mixing), ("maximum", result.maximum)):
        for p in points:
            done = p.missing == 0
            at_k = profile_measured(p)[0][p.k] if done and p.tail.shape[0] > 1 else float("nan")
            rows.append(
                {
                    "set": tag,
                    "n": p.n,
                    "d": p.d,
                    "1-lam": 1 - p.lam,
                    "T_pred": predicted_meeting_time(p.n, p.d, p.lam).steps,
                    "T_meet (mean)": float(p.T.mean()) if tag == "mixing" and done else float("nan"),
                    "P(max = 3)": max_estimate(p, p.k)[0]
                    if done and p.max_dist.shape[0] > 1
                    else float("nan"),
                    "fraction at 3": at_k,
                }
            )
    return pd.DataFrame(rows)
