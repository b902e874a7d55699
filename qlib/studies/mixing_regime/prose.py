"""The notebook's words on the in-regime study, rendered from the result (no number typed by hand)."""

from __future__ import annotations

from qlib.studies.mixing_regime.claims import claim_rows
from qlib.studies.mixing_regime.compute import LONG_COMMAND, RegimeResult


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
