"""The runner: what runs the studies, above them.

The studies compute; the runner decides which of them run and in what order, and turns their
results into the claims table's rows. Nothing below imports it (``tests/test_import_graph.py``).

- :mod:`~qlib.runner.registry`: the studies of the claims table (:data:`STUDIES`, title -> module)
  and :func:`collect` (every study run, its rows in table order);
- :mod:`~qlib.runner.compute`: cache or compute: :func:`run` (a study's result in a mode: its plan
  looked up or measured, then assembled) and :func:`execute` (the plan's runs);
- :mod:`~qlib.runner.power`: a published row's d′ range recomputed under the thresholds of the code;
- :mod:`~qlib.runner.long`: the long tier (:func:`run_long`) and the ``results`` / ``results-long``
  command line.
"""

from __future__ import annotations

# ruff: noqa: F401 (re-exports)
from qlib.runner.compute import execute, run
from qlib.runner.registry import STUDIES, collect, study_named

__all__ = ["STUDIES", "collect", "execute", "run", "study_named"]
