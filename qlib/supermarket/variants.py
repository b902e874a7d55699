"""Near wrong models of the supermarket count chain: plausible bugs, one swap of the event map each.

Every variant is the kernel of :mod:`qlib.supermarket.chain` with one piece of its event map
changed (a :class:`qlib.supermarket.chain.EventMap` passed to the same jitted kernel, never a copy
of it), driven by the model's random words. Run one with the ``variant=`` keyword of
:func:`qlib.supermarket.simulate`, :func:`qlib.supermarket.simulate_many` or
:func:`qlib.supermarket.estimate_equilibrium`; with ``flows=True`` the result keeps the
level-flow sums of the *model's* g, so the identity E[u_j] = lam n E[g(u_{j-1})]
(docs/models.md#level-flow) can catch the variant. What each one changes, in count-chain terms
(docs/models.md#near-wrong-models):

- ``"jsq_d_minus_1"``, ``"jsq_d_plus_1"``: the arrival samples d - 1 (d + 1) queues; ``("d_offset",
  k)`` samples d + k, ``("d_scale", f)`` samples round(f d).
- ``"other_sampling"``: the d queues are sampled without replacement where the model samples
  with it (or the other way round).
- ``"arrival_off_by_one"``: the join comparison u_i > x is written u_i >= x (for x >= 1): an
  arrival joins length >= i with probability ((u_i + 1)/n)^d in place of (u_i/n)^d (u_i >= 1).
- ``"departure_off_by_one"``: the departure rank is r + 1 in place of r, so the queue of rank 0
  (a longest queue) is never served and rank n serves no queue: the departure rate from lengths
  >= i is u_i - 1 in place of u_i.
- ``"tie_longer"``: an arrival whose shortest sampled length L is shared by two or more of its
  samples joins a queue of length L + 1 instead, when there is one (a tie broken toward the
  longer queue); a unique minimum is joined as it should be.
- ``("eta_greedy", eta)``: with probability eta the arrival joins a uniformly chosen one of its
  samples (whose length is that of one uniform queue: the JSQ(1) threshold, x = the rank r of
  the step's second word) instead of a shortest.

All but ``jsq_d_*``, ``d_*`` and ``other_sampling`` and ``departure_off_by_one`` are written for
the with-replacement model (the chain's integer threshold); asking for them without
replacement raises a ValueError.

The mutation tests of the test-suite and the evidence here share these names: a mutant of the
event map is the variant of the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from qlib import _validate as V
from qlib.supermarket.chain import MODEL, WITH_REPLACEMENT_ONLY, EventMap


class WrongModel(NamedTuple):
    """One wrong model of the supermarket studies (an entry of :data:`WRONG_MODELS`).

    Args:
        far: a far model (every claim row run on it must fail) or a near one (a plausible bug).
        label: the display text of a claim row's counterfactual.
        d_of: the d it runs from the model's d, where a study reruns the point.
        flip: the other sampling rule.
        variant: the kernel variant a study runs at the point ``d_of(d)`` (None: the model's event map).
        kernel: the kernel variant that is this model on the model's own point, keeping the model's g
            in the level-flow sums (a name of :data:`VARIANTS` or (name, value); None: no kernel variant).
        identity: run by the level-flow identity rows (:data:`NEAR`).
        changes: what the kernel variant changes, in count-chain terms.
        tests: which piece of the chain it tests.
    """

    far: bool
    label: str
    d_of: Callable[[int], int]
    flip: bool = False
    variant: Any = None
    kernel: Any = None
    identity: bool = False
    changes: str = ""
    tests: str = ""


def _same(d: int) -> int:
    return d


_D_OF = "the d of the arrival rule (g's exponent)"
_ETA = ("with probability eta the arrival joins a uniformly chosen sampled queue",
        "greediness: the mixture (1 - eta) g + eta u/n")

#: Every wrong model, by its one name (the key the studies, the tests and the mutants use). Adding a
#: near wrong model is its kernel branch (qlib.supermarket.chain: EVENT_KINDS and the branch of
#: the event map) and an entry here (CONTRIBUTING.md).
WRONG_MODELS: dict[str, WrongModel] = {
    "jsq1": WrongModel(True, "JSQ(1) in place of JSQ(d) (uniform routing)", lambda d: 1),
    "jsq2": WrongModel(True, "JSQ(2) in place of JSQ(d)", lambda d: 2),
    "half_d": WrongModel(True, "JSQ(d/2) in place of JSQ(d) (half the choices)", lambda d: max(2, d // 2)),
    "d*0.75": WrongModel(True, "JSQ(0.75 d) in place of JSQ(d) (d off by 25%)", lambda d: round(0.75 * d)),
    "d*1.25": WrongModel(True, "JSQ(1.25 d) in place of JSQ(d) (d off by 25%)", lambda d: round(1.25 * d)),
    "d-1": WrongModel(False, "JSQ(d-1) in place of JSQ(d)", lambda d: max(1, d - 1), kernel="jsq_d_minus_1",
                      identity=True, changes="the arrival samples d - 1 queues", tests=_D_OF),
    "d+1": WrongModel(False, "JSQ(d+1) in place of JSQ(d)", lambda d: d + 1, kernel="jsq_d_plus_1",
                      identity=True, changes="the arrival samples d + 1 queues", tests=_D_OF),
    "d*0.9": WrongModel(False, "JSQ(0.9 d) in place of JSQ(d)", lambda d: max(1, round(0.9 * d)),
                        kernel=("d_scale", 0.9), changes="the arrival samples round(f d) queues (f = value)",
                        tests="the d of the arrival rule"),
    "d*1.1": WrongModel(False, "JSQ(1.1 d) in place of JSQ(d)", lambda d: round(1.1 * d),
                        kernel=("d_scale", 1.1), changes="the arrival samples round(f d) queues (f = value)",
                        tests="the d of the arrival rule"),
    "other_sampling": WrongModel(False, "the other sampling rule (without replacement) in place of with",
                                 _same, flip=True, kernel="other_sampling", identity=True,
                                 changes="samples without replacement where the model samples with it, or "
                                         "the other way", tests="the sampling rule (g's form)"),
    # eta-greedy: with probability eta an arrival joins a uniformly chosen one of its d samples
    "eta=0.01": WrongModel(False, "eta-greedy routing (eta = 0.01) in place of JSQ(d)", _same,
                           variant=("eta_greedy", 0.01), kernel=("eta_greedy", 0.01), changes=_ETA[0],
                           tests=_ETA[1]),
    "eta=0.001": WrongModel(False, "eta-greedy routing (eta = 0.001) in place of JSQ(d)", _same,
                            variant=("eta_greedy", 0.001), kernel=("eta_greedy", 0.001), changes=_ETA[0],
                            tests=_ETA[1]),
    "arrival_off_by_one": WrongModel(False, "the join comparison u_i >= x in place of u_i > x", _same,
                                     variant="arrival_off_by_one", kernel="arrival_off_by_one", identity=True,
                                     changes="the join comparison u_i >= x in place of u_i > x (x >= 1)",
                                     tests="the arrival's level (g evaluated at u + 1)"),
    "departure_off_by_one": WrongModel(False, "the departure rank r + 1 in place of r", _same,
                                       variant="departure_off_by_one", kernel="departure_off_by_one",
                                       identity=True, changes="the departure rank r + 1 in place of r",
                                       tests="the departure rule (rate u_i - 1)"),
    "tie_longer": WrongModel(False, "a tie toward the longer queue in place of the shortest", _same,
                             variant="tie_longer", kernel="tie_longer", identity=True,
                             changes="a tied shortest sampled length L joins a queue of length L + 1 when "
                                     "one exists",
                             tests="the join at ties (the minimum of the sample)"),
    # the level-flow rows pick eta per point (the smallest of a ladder that the identity can resolve)
    "eta_greedy": WrongModel(False, "eta-greedy routing (eta chosen per point) in place of JSQ(d)", _same,
                             kernel="eta_greedy", identity=True, changes=_ETA[0], tests=_ETA[1]),
}


def kernel_name(kernel: Any) -> str:
    """The name of a kernel variant spec: "tie_longer" of "tie_longer", "eta_greedy" of
    ("eta_greedy", 0.01)."""
    return kernel if isinstance(kernel, str) else kernel[0]


#: kernel variant name -> (what it changes, what it tests), from :data:`WRONG_MODELS` (and the
#: generic d offset they are made of); parameterised ones take (name, value).
VARIANTS: dict[str, tuple[str, str]] = {
    **{kernel_name(m.kernel): (m.changes, m.tests) for m in WRONG_MODELS.values() if m.kernel is not None},
    "d_offset": ("the arrival samples d + k queues (k = value)", "the d of the arrival rule"),
}
#: The kernel variants of the identity rows, by registry key (eta_greedy at the eta a study picks).
NEAR_MODELS = tuple(k for k, m in WRONG_MODELS.items() if m.identity)
#: Their kernel variant names (what the level-flow rows and their seeds are named by).
NEAR = tuple(kernel_name(WRONG_MODELS[k].kernel) for k in NEAR_MODELS)
_PARAMETERISED = ("d_offset", "d_scale", "eta_greedy")


def name_of(variant: Any) -> str:
    """The display name of a variant spec: "jsq_d_minus_1", "eta_greedy(0.01)", ..."""
    if isinstance(variant, str):
        return variant
    name, value = variant
    return f"{name}({value:g})"


def event_map(variant: Any, *, d: int | list, replacement: bool) -> tuple[EventMap, str]:
    """(EventMap for the kernel, display name) of ``variant``: a name of :data:`VARIANTS`, or
    (name, value) for "d_offset" (int k), "d_scale" (factor f > 0) and "eta_greedy" (eta in
    (0, 1]); "model" (or None) is the model. ``d``: the point's d (one, or one per point; the
    d-shifting variants need d + k >= 1, and "d_scale" one d for all points). ValueError naming
    ``variant`` otherwise."""
    if variant is None or variant == "model":
        return MODEL, "model"
    if isinstance(variant, EventMap):
        return variant, f"{variant.kind}({variant.value:g})" if variant.value else variant.kind
    if isinstance(variant, str):
        name, value = variant, None
    elif isinstance(variant, (tuple, list)) and len(variant) == 2 and isinstance(variant[0], str):
        name, value = variant
    else:
        raise ValueError("variant must be a name of qlib.supermarket.variants.VARIANTS or (name, value); "
                         f"got {variant!r}")
    V.choice("variant", name, tuple(VARIANTS))
    if (name in _PARAMETERISED) != (value is not None):
        raise ValueError(f"variant {name!r} {'needs' if name in _PARAMETERISED else 'takes no'} a parameter: "
                         f"pass {'(name, value)' if name in _PARAMETERISED else 'the name alone'}; got "
                         f"{variant!r}")
    ds = sorted({int(x) for x in (d if isinstance(d, (list, tuple)) else [d])})
    if name == "jsq_d_minus_1":
        name, value = "d_offset", -1
    elif name == "jsq_d_plus_1":
        name, value = "d_offset", 1
    elif name == "d_scale":
        f = V.real("variant value", value, low=0.0)
        if len(ds) != 1:
            raise ValueError(f"variant 'd_scale' needs one d for all points; got d = {ds}")
        value = int(round(f * ds[0])) - ds[0]
        name = "d_offset"
    if name == "d_offset":
        k = V.integer("variant value", value, low=-(2**62), high=2**62)
        if ds[0] + k < 1:
            raise ValueError(f"variant {name_of(variant)}: d + {k} = {ds[0] + k} must be >= 1")
        return EventMap("d_offset", float(k)), name_of(variant)
    if not replacement and name in WITH_REPLACEMENT_ONLY:
        raise ValueError(f"variant {name!r} is written for the with-replacement chain; got replacement=False")
    if name == "eta_greedy":
        eta = V.real("variant value", value, low=0.0, high=1.0, high_open=False)
        return EventMap("eta_greedy", eta), name_of(variant)
    return EventMap(name), name


__all__ = ["WrongModel", "WRONG_MODELS", "VARIANTS", "NEAR", "NEAR_MODELS", "event_map", "kernel_name",
           "name_of"]
