"""The studies of the claims table, and running them into rows.

The studies are imported here by name, so the import graph (and ``tests/test_import_graph.py``)
sees the runner reach down into them; nothing below the runner names a study.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

from qlib.claims import ClaimRow, tagging, with_criteria, with_source
from qlib.results.cache import reading
from qlib.runner.compute import run
from qlib.studies import (
    families,
    fluctuations,
    k3,
    level_flow,
    max_length,
    mixing,
    mixing_regime,
    perfect,
    who_works_the_most,
)

#: table section -> study module, in table order.
STUDIES: dict[str, ModuleType] = {
    "supermarket: maximum queue length": max_length,
    "supermarket: scaling families": families,
    "supermarket: mixing time": mixing,
    "supermarket: mixing time in the regime": mixing_regime,
    "heterogeneous servers": who_works_the_most,
    "supermarket: level flow": level_flow,
    "supermarket: exact stationary samples": perfect,
    "supermarket: fluctuations": fluctuations,
    "supermarket: k = 3 inside the regime": k3,
}


def study_named(name: str) -> ModuleType:
    """The registered study whose module is ``name`` ("qlib.studies.max_length").

    Args:
        name: the study's module name.

    Returns:
        The module. KeyError if no registered study has that name.
    """
    for m in STUDIES.values():
        if m.__name__ == name:
            return m
    names = [m.__name__ for m in STUDIES.values()]
    raise KeyError(f"{name!r} is no registered study; the studies are {names}")


def collect(mode: str = "full", only: Iterable[str] | None = None,
            progress: Callable[[str], None] | None = None) -> list[ClaimRow]:
    """Run every study (:func:`qlib.runner.run` then its ``claim_rows``) and return the rows, in table
    order.

    Args:
        mode: "full" or "smoke".
        only: the table titles to run (all when None).
        progress: called with each title before its study runs.

    Returns:
        The rows, each with its ``source`` (the title) filled in.
    """
    rows: list[ClaimRow] = []
    for title, study in STUDIES.items():
        if only is not None and title not in only:
            continue
        if progress:
            progress(title)
        with reading() as read, tagging(study):
            result = run(study, mode, progress=False)
            got = study.claim_rows(result)
        if mode == "full":  # the thresholds judged are the full mode's; smoke runs judge nothing stored
            got = [with_criteria(r, study, read) for r in got]
        rows.extend(with_source(r, title) for r in got)
    return rows
