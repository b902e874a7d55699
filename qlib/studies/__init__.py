"""Studies: one per paper section, each the same shape.

A study module composes the model layer (:mod:`qlib.supermarket`, :mod:`qlib.heterogeneous`)
into the numbers one notebook and one part of the claims table show:

- ``PARAMETERS[mode]``: every parameter of the study, for ``mode`` "full" (the published
  figures) and "smoke" (tiny runs that only check that everything executes), in one place; every
  threshold a claim row is judged by under ``PARAMETERS[mode]["claims"]``;
- ``CLAIMS``: the study's claims as data, one :class:`qlib.claims.ClaimSpec` each (thresholds,
  criterion text rendered from them, wrong models by their key in
  :data:`qlib.supermarket.variants.WRONG_MODELS`), from which the rows are built;
- ``run(mode, *, progress=True) -> <Study>Result``: computes everything (sweeps are cached
  in ``.qlib_cache/``) and returns a frozen dataclass whose array shapes are documented; or, for a
  study of plain functions (issue 50; ``perfect`` so far), ``parameters(mode)`` (typed, frozen),
  ``plan(params) -> list[Run]`` (:mod:`qlib.studies.plan`: each run a cache entry and how to
  measure it) and ``assemble(arrays, params) -> <Study>Result``, which :func:`qlib.runner.run`
  carries out: such a study imports nothing from :mod:`qlib.results`;
- ``claim_rows(result) -> list[ClaimRow]``: the claims-table rows, computed from that same
  result, so the table and the figures share their numbers;
- ``summary(result) -> pandas.DataFrame``: the numbers its notebook shows beside the figures;
- the figures are drawn by ``qlib.plots.<study>`` functions named ``*_figure``.

A study longer than about 500 lines is a package by role (``compute``, ``claims``, ``prose``, and
``parameters`` where they are long) whose ``__init__`` re-exports its public names
(CONTRIBUTING.md).

The studies are listed in :data:`qlib.runner.STUDIES`, which runs them; nothing here imports it.
"""

from __future__ import annotations

import contextlib
from dataclasses import fields

import numpy as np

from qlib import _validate as V
from qlib import results
from qlib.results import cache

MODES = ("full", "smoke")


class ArrayResult:
    """Base of a study's frozen dataclasses whose fields are all arrays: they round-trip through
    the sweep cache (:func:`qlib.results.cache.cached` stores a dict of arrays)."""

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]):
        """The dataclass from a dict holding (at least) one array per field."""
        return cls(**{f.name: arrays[f.name] for f in fields(cls)})  # type: ignore[arg-type]

    @classmethod
    def concat(cls, parts):
        """One result from several, their arrays joined along the point axis (the first)."""
        return cls.from_arrays({k: np.concatenate([p.arrays()[k] for p in parts]) for k in parts[0].arrays()})

    def arrays(self) -> dict[str, np.ndarray]:
        """The fields as a dict of arrays (what the cache stores)."""
        return {f.name: np.asarray(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


def check_mode(mode: str) -> str:
    """``mode`` must be "full" or "smoke"; ValueError otherwise."""
    return V.choice("mode", mode, MODES)


def long_points_read(mode: str) -> bool:
    """Whether a study reads its long-tier points from results/long (full mode outside ``make
    results-long``) instead of computing them (smoke mode, and the long run itself)."""
    return mode == "full" and results.write_tier() != "long"


def long_point(read: bool, compute, command: str):
    """``compute()`` for a long-tier point: run as it is where the point is computed, and inside
    :func:`qlib.results.cache.stored_only` where it is ``read`` (:func:`long_points_read` says where).

    Returns:
        (value, records of the entries read, "") or, where results/long lacks the point or holds it
        stale, (None, [], the row's text naming ``command``).
    """
    try:
        with cache.stored_only("long") if read else contextlib.nullcontext([]) as records:
            value = compute()
    except cache.NotStored as err:
        name, params, seed = err.points[0]
        return None, [], results.row_status(name, params, seed, command=command)[1]
    return value, records, ""
