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

from typing import Any

from qlib import _validate as V
from qlib.supermarket.chain import EventMap, MODEL, WITH_REPLACEMENT_ONLY

#: name -> (what it changes, what it tests); parameterised ones take (name, value).
VARIANTS: dict[str, tuple[str, str]] = {
    "jsq_d_minus_1": ("the arrival samples d - 1 queues", "the d of the arrival rule (g's exponent)"),
    "jsq_d_plus_1": ("the arrival samples d + 1 queues", "the d of the arrival rule (g's exponent)"),
    "d_offset": ("the arrival samples d + k queues (k = value)", "the d of the arrival rule"),
    "d_scale": ("the arrival samples round(f d) queues (f = value)", "the d of the arrival rule"),
    "other_sampling": ("samples without replacement where the model samples with it, or the other way",
                       "the sampling rule (g's form)"),
    "arrival_off_by_one": ("the join comparison u_i >= x in place of u_i > x (x >= 1)",
                           "the arrival's level (g evaluated at u + 1)"),
    "departure_off_by_one": ("the departure rank r + 1 in place of r", "the departure rule (rate u_i - 1)"),
    "tie_longer": ("a tied shortest sampled length L joins a queue of length L + 1 when one exists",
                   "the join at ties (the minimum of the sample)"),
    "eta_greedy": ("with probability eta the arrival joins a uniformly chosen sampled queue",
                   "greediness: the mixture (1 - eta) g + eta u/n"),
}
#: The variants of the identity rows (eta_greedy at the eta a study picks).
NEAR = ("jsq_d_minus_1", "jsq_d_plus_1", "other_sampling", "arrival_off_by_one", "departure_off_by_one",
        "tie_longer", "eta_greedy")
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
        raise ValueError(f"variant must be a name of qlib.supermarket.variants.VARIANTS or (name, value); got {variant!r}")
    V.choice("variant", name, tuple(VARIANTS))
    if (name in _PARAMETERISED) != (value is not None):
        raise ValueError(f"variant {name!r} {'needs' if name in _PARAMETERISED else 'takes no'} a parameter: "
                         f"pass {'(name, value)' if name in _PARAMETERISED else 'the name alone'}; got {variant!r}")
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


__all__ = ["VARIANTS", "NEAR", "event_map", "name_of"]
