"""A study's plan: the runs it needs, each a cached computation the runner carries out.

A study written as plain functions (``perfect`` so far) gives ``parameters(mode)`` (its typed,
frozen parameters), ``plan(params) -> list[Run]`` and ``assemble(arrays, params) -> Result``; it
imports nothing from :mod:`qlib.results`. :func:`qlib.runner.run` looks each run up in the cache
and the stored results, measures the ones missing, and hands the arrays, in the plan's order, to
``assemble``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Run:
    """One run of a study: a cache entry, and how to measure it.

    Args:
        name: the cache name (with ``params`` and ``seed``, the entry's key: once results are stored
            under it, a change recomputes them).
        params: the parameters the key hashes (JSON-able).
        seed: the run's seed.
        measure: computes the run's arrays (name -> array). Define it in the study's module: the
            stored record names that module as the entry's study.
    """

    name: str
    params: Mapping[str, Any]
    seed: int
    measure: Callable[[], Mapping[str, Any]]
