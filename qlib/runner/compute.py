"""Cache or compute: a study's plan carried out, then assembled into its result.

The one place a plain-function study (:mod:`qlib.studies.plan`) meets the cache and the stored
results (:func:`qlib.results.cache.cached`: the local cache, then ``results/default`` and
``results/long``, then the run's ``measure``).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from qlib.results import cache
from qlib.studies.plan import Run


def execute(runs: Sequence[Run]) -> list[dict[str, np.ndarray]]:
    """The arrays of each run, in order: read where the cache or the stored results hold them,
    measured (and stored) where not.

    Args:
        runs: a study's plan.

    Returns:
        One dict of arrays per run.
    """
    return [cache.cached(r.name, r.params, r.seed, r.measure) for r in runs]


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
