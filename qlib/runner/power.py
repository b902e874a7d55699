"""A published row's d′ range recomputed under the thresholds of the code as it is now.

:mod:`qlib.power` computes a range from the thresholds it is handed; here, above the studies,
the thresholds are read from the study that owns the criterion (``tests/test_claims_power.py``).
"""

from __future__ import annotations

from qlib.power import CRITERIA, pass_range
from qlib.runner.registry import study_named


def recompute(published: dict) -> tuple[int, int] | None:
    """The d′ range of a published row's ``power`` (claims.json) under the full-mode thresholds of
    the code as it is now: what it would read if the table were regenerated.

    Args:
        published: the row's ``power`` as claims.json holds it (``criterion``, ``inputs``).

    Returns:
        (low, high), or None when JSQ(d) itself fails the criterion in the theory.
    """
    c = CRITERIA[published["criterion"]]
    t = c.thresholds(study_named(c.module).PARAMETERS["full"]["claims"])
    x = published["inputs"]
    return pass_range(lambda dd: c.passes(dd, x, t), x["d"])
