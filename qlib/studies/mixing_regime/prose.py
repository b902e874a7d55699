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
