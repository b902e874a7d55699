"""The claims table: one row per paper claim, theory against measurement, PASS or FAIL.

Each study of :mod:`qlib.studies` (listed in :data:`STUDIES`) computes its numbers with
``run(mode)`` and turns that same result into rows with ``claim_rows(result)``. The notebooks
call the same two functions, so the table printed by ``python -m qlib reproduce`` and written
to ``figures/claims.md`` by ``make figures`` shows the numbers the figures show.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

#: table section -> study module; imported lazily so `import qlib` stays light.
STUDIES: dict[str, str] = {
    "supermarket: maximum queue length": "qlib.studies.max_length",
    "supermarket: mixing time": "qlib.studies.mixing",
    "heterogeneous servers": "qlib.studies.who_works_the_most",
}


@dataclass(frozen=True)
class ClaimRow:
    """One line of the claims table.

    ``theory`` and ``measured`` are display strings (measured carries its ± CI); ``passed`` is
    the verdict of an explicit, stated test (``criterion``), never of eyeballing.
    """

    claim: str
    parameters: str
    theory: str
    measured: str
    passed: bool
    criterion: str = ""
    source: str = ""

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"


def collect(mode: str = "full", only: Iterable[str] | None = None,
            progress: Callable[[str], None] | None = None) -> list[ClaimRow]:
    """Run every study (``run(mode)`` then ``claim_rows``) and return the rows, in table order."""
    rows: list[ClaimRow] = []
    for title, module in STUDIES.items():
        if only is not None and title not in only:
            continue
        if progress:
            progress(title)
        study = importlib.import_module(module)
        result = study.run(mode, progress=False)
        rows.extend(_with_source(r, title) for r in study.claim_rows(result))
    return rows


def _with_source(row: ClaimRow, title: str) -> ClaimRow:
    if row.source:
        return row
    return ClaimRow(**{**asdict(row), "source": title})


def to_markdown(rows: list[ClaimRow]) -> str:
    """The table as GitHub markdown, with a one-line summary above it."""
    head = "| # | source | claim | parameters | theory | measured (± 95% CI) | criterion | result |\n"
    head += "|---|---|---|---|---|---|---|---|\n"
    body = "".join(
        f"| {i} | {r.source} | {_md(r.claim)} | {_md(r.parameters)} | {_md(r.theory)} | "
        f"{_md(r.measured)} | {_md(r.criterion)} | **{r.verdict}** |\n"
        for i, r in enumerate(rows, 1)
    )
    n_pass = sum(r.passed for r in rows)
    return f"{n_pass} of {len(rows)} claims PASS.\n\n" + head + body


def to_text(rows: list[ClaimRow]) -> str:
    """A compact plain-text table for terminals."""
    lines = [f"{'#':>2}  {'result':6}  claim  [parameters]  theory | measured"]
    for i, r in enumerate(rows, 1):
        lines.append(f"{i:>2}  {r.verdict:6}  {r.claim}  [{r.parameters}]  {r.theory} | {r.measured}")
    lines.append(f"{sum(r.passed for r in rows)} of {len(rows)} claims PASS")
    return "\n".join(lines)


def to_json(rows: list[ClaimRow]) -> str:
    return json.dumps([asdict(r) | {"verdict": r.verdict} for r in rows], indent=1, default=str)


def _md(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")
