"""A published row's d′ range recomputed under the thresholds of the code as it is now.

:mod:`qlib.power` computes a range from the thresholds it is handed; here, above the studies,
the thresholds are read from the study that owns the criterion (``tests/test_claims_power.py``).
"""

from __future__ import annotations

import functools
import json

from qlib.power import CRITERIA, pass_bands
from qlib.runner.registry import study_named


def recompute(published: dict) -> tuple[int, int] | None:
    """The d′ band around d of a published row's ``power`` (claims.json) under the full-mode
    thresholds of the code as it is now: what it would read if the table were regenerated.

    Args:
        published: the row's ``power`` as claims.json holds it (``criterion``, ``inputs``).

    Returns:
        (low, high), or None when JSQ(d) itself fails the criterion in the theory.
    """
    d = published["inputs"]["d"]
    return next(((lo, hi) for lo, hi in recompute_bands(published) if lo <= d <= hi), None)


def recompute_bands(published: dict) -> tuple[tuple[int, int], ...]:
    """Every d′ band of a published row's ``power`` under the thresholds of the code now (issue 47:
    a full scan; cached, the tests ask for a row's bands more than once)."""
    c = CRITERIA[published["criterion"]]
    t = c.thresholds(study_named(c.module).PARAMETERS["full"]["claims"])
    return _bands(published["criterion"], json.dumps(published["inputs"], sort_keys=True),
                  json.dumps(t, sort_keys=True, default=str))


@functools.lru_cache(maxsize=64)
def _bands(criterion: str, inputs: str, thresholds: str) -> tuple[tuple[int, int], ...]:
    c, x, t = CRITERIA[criterion], json.loads(inputs), json.loads(thresholds)
    return pass_bands(lambda dd: c.passes(dd, x, t), x["d"])
