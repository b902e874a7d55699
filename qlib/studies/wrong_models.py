"""The wrong models a claim row runs its own criterion on, in one table.

Far ones (JSQ(2) for JSQ(d), half the choices) must fail every claim row; near ones are the
plausible bugs of docs/models.md#near-wrong-models: d - 1 or d + 1 choices, d scaled by 0.9 or
1.1, the other sampling rule, an arrival rule greedy only most of the time (eta-greedy). A row's
*resolution* says which near models its criterion rejects and which it cannot tell apart; a row
that tells none apart rests, for the routing rule, on the level-flow identity rows
(docs/models.md#level-flow), which every near model fails.

Each entry is a :class:`WrongModel`: how its point is made from the model's point (d changed,
the sampling rule flipped) and which kernel variant (:mod:`qlib.supermarket.variants`) it runs.
Every wrong model runs on the right model's clock (as many steps as the model).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

from qlib.claims import Counterfactual


class WrongModel(NamedTuple):
    """``far``: a far model (must fail); ``label`` the display text; ``d_of`` the d it runs from
    the model's d; ``flip``: the other sampling rule; ``variant``: a kernel variant (None: the
    model's event map)."""

    far: bool
    label: str
    d_of: Callable[[int], int]
    flip: bool = False
    variant: Any = None


def _same(d: int) -> int:
    return d


WRONG_MODELS: dict[str, WrongModel] = {
    "jsq1": WrongModel(True, "JSQ(1) in place of JSQ(d) (uniform routing)", lambda d: 1),
    "jsq2": WrongModel(True, "JSQ(2) in place of JSQ(d)", lambda d: 2),
    "d*0.75": WrongModel(True, "JSQ(0.75 d) in place of JSQ(d) (d off by 25%)", lambda d: round(0.75 * d)),
    "d*1.25": WrongModel(True, "JSQ(1.25 d) in place of JSQ(d) (d off by 25%)", lambda d: round(1.25 * d)),
    "half_d": WrongModel(True, "JSQ(d/2) in place of JSQ(d) (half the choices)", lambda d: max(2, d // 2)),
    "d-1": WrongModel(False, "JSQ(d-1) in place of JSQ(d)", lambda d: max(1, d - 1)),
    "d+1": WrongModel(False, "JSQ(d+1) in place of JSQ(d)", lambda d: d + 1),
    "d*0.9": WrongModel(False, "JSQ(0.9 d) in place of JSQ(d)", lambda d: max(1, round(0.9 * d))),
    "d*1.1": WrongModel(False, "JSQ(1.1 d) in place of JSQ(d)", lambda d: round(1.1 * d)),
    "other_sampling": WrongModel(False, "the other sampling rule (without replacement) in place of with", _same,
                                 flip=True),
    # eta-greedy: with probability eta an arrival joins a uniformly chosen one of its d samples
    "eta=0.01": WrongModel(False, "eta-greedy routing (eta = 0.01) in place of JSQ(d)", _same,
                           variant=("eta_greedy", 0.01)),
    "eta=0.001": WrongModel(False, "eta-greedy routing (eta = 0.001) in place of JSQ(d)", _same,
                            variant=("eta_greedy", 0.001)),
}


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
