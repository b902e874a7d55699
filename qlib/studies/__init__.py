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
  in ``.qlib_cache/``) and returns a frozen dataclass whose array shapes are documented;
- ``claim_rows(result) -> list[ClaimRow]``: the claims-table rows, computed from that same
  result, so the table and the figures share their numbers;
- ``summary(result) -> pandas.DataFrame``: the numbers its notebook shows beside the figures;
- the figures are drawn by ``qlib.plots.<study>`` functions named ``*_figure``.

A study longer than about 500 lines is a package by role (``compute``, ``claims``, ``prose``, and
``parameters`` where they are long) whose ``__init__`` re-exports its public names
(CONTRIBUTING.md).

The studies are listed in :data:`qlib.claims.STUDIES`.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

MODES = ("full", "smoke")


class ArrayResult:
    """Base of a study's frozen dataclasses whose fields are all arrays: they round-trip through
    the sweep cache (:func:`qlib.cache.cached` stores a dict of arrays)."""

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]):
        """The dataclass from a dict holding (at least) one array per field."""
        return cls(**{f.name: arrays[f.name] for f in fields(cls)})  # type: ignore[arg-type]

    def arrays(self) -> dict[str, np.ndarray]:
        """The fields as a dict of arrays (what the cache stores)."""
        return {f.name: np.asarray(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


def check_mode(mode: str) -> str:
    """``mode`` must be "full" or "smoke"; ValueError otherwise."""
    from qlib import _validate as V

    return V.choice("mode", mode, MODES)
