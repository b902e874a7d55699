"""Cache or compute: a study's plan carried out, then assembled into its result.

The one place a plain-function study (:mod:`qlib.studies.plan`) meets the cache and the stored
results. Each run is looked up once (:func:`qlib.results.cache.look_up`: the local cache, then
``results/default`` and ``results/long``); where it is missing, the runner itself calls the run's
``measure`` (so the study is entered from above, never from the store) and hands the arrays to the
store once (:func:`qlib.results.cache.keep`), with what the recorder saw while a tier is written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from qlib.results import cache
from qlib.results.recorder import recording
from qlib.results.store import write_tier
from qlib.studies.plan import Run


def execute(runs: Sequence[Run]) -> list[dict[str, np.ndarray]]:
    """The arrays of each run, in order: read where the cache or the stored results hold them,
    measured (and stored) where not.

    Args:
        runs: a study's plan.

    Returns:
        One dict of arrays per run.
    """
    out = []
    for r in runs:
        got = cache.look_up(r.name, r.params, r.seed)
        if got is None:
            tier = write_tier()
            with recording() if tier else contextlib.nullcontext() as rec:
                arrays = r.measure()
            got = cache.keep(r.name, r.params, r.seed, arrays, rec.provenance([r.seed])[0] if tier else None,
                             study=getattr(r.measure, "__module__", None))
        out.append(got)
    return out


def run(study: ModuleType, mode: str = "full", *, progress: bool = True) -> Any:
    """A study's result in ``mode``: ``assemble(execute(plan(params)), params)`` for a study of
    plain functions, its own ``run(mode)`` for the others.

    Args:
        study: the study's module (a value of :data:`qlib.runner.STUDIES`).
        mode: "full" or "smoke".
        progress: show progress bars (the studies that still run themselves).

    Returns:
        The study's result.
    """
    if hasattr(study, "plan"):
        params = study.parameters(mode)
        return study.assemble(execute(study.plan(params)), params)
    return study.run(mode, progress=progress)
