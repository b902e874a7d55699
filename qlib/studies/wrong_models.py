"""The wrong models a claim row runs its own criterion on, in one table.

Far ones (JSQ(2) for JSQ(d), half the choices) must fail every claim row; near ones are the
plausible bugs of docs/models.md#near-wrong-models: d - 1 or d + 1 choices, d scaled by 0.9 or
1.1, the other sampling rule, an arrival rule greedy only most of the time (eta-greedy). A row's
*resolution* says which near models its criterion rejects and which it cannot tell apart; a row
that tells none apart rests, for the routing rule, on the level-flow identity rows
(docs/models.md#level-flow), which every near model fails.

The one registry, :data:`qlib.supermarket.variants.WRONG_MODELS` (re-exported here), gives each
entry as a :class:`WrongModel`: how its point is made from the model's point (d changed, the
sampling rule flipped), the kernel variant a study runs there, and the kernel variant that is the
same model on the model's own point (the level-flow rows). Every wrong model runs on the right
model's clock (as many steps as the model).
"""

from __future__ import annotations

from collections.abc import Sequence

from qlib.claims import Counterfactual
from qlib.supermarket.variants import WRONG_MODELS, WrongModel


def point_of(name: str, point: Sequence) -> tuple[int, int, float]:
    """The (n, d, lam) wrong model ``name`` runs in place of ``point``."""
    n, d, lam = point[:3]
    return int(n), int(WRONG_MODELS[name].d_of(int(d))), float(lam)


def _short(label: str) -> str:
    """A wrong model's label up to " in place of": what a resolution names."""
    return label.split(" in place")[0]


def short_label(name: str) -> str:
    """The short label of wrong model ``name``."""
    return _short(WRONG_MODELS[name].label)


def resolution(cfs: Sequence[Counterfactual]) -> str:
    """Which near models the row's criterion tells apart (FAIL on them) and which it does not
    ("" if the row ran none). An INCONCLUSIVE near model is not told apart."""
    near = [c for c in cfs if c.near]
    if not near:
        return ""
    told = [_short(c.model) for c in near if not c.passed]
    not_told = [_short(c.model) for c in near if c.passed]
    return ("tells apart: " + (", ".join(told) or "none of the near models")
            + ("; does not resolve: " + ", ".join(not_told) if not_told else "")
            + ("" if told else " (its evidence on the routing rule rests on the level-flow identity rows)"))


__all__ = ["WrongModel", "WRONG_MODELS", "point_of", "short_label", "resolution"]
