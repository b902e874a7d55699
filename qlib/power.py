"""The power of a claim row: the range of d′ for which JSQ(d′) at the row's own point would pass the
row's criterion (issue 41).

A row that JSQ(d/2) or JSQ(2d) would pass as well does not tell d apart from a factor of two: it is
not evidence for the claim's d however small its CI. Where the criterion is a function of the
stationary law that the fluid fixed point or the refined mean field gives exactly enough, the range
is computed here, from the same predictions and the same thresholds as the row, with the row's own
95% CI half-widths standing for those a run of JSQ(d′) of the same length would have:

- :func:`refined_fraction`, :func:`fluid_fraction`: the fraction of queues with length exactly i;
- :data:`CRITERIA`: per criterion (``"<study>.<claim>"``), the predicate "JSQ(d′) passes" given the
  row's ``inputs`` (its point, half-widths, bound) and the study's thresholds;
- :func:`d_pass`: a row's :class:`DPass`: ``bands``, every band of d′ that passes, found by scanning
  every integer d′ in [1, 4d] (issue 47: the fraction at k is not monotone in d′, and a bisection
  around d missed second bands near d/5); ``low``, ``high``: the band around d. A band below d/2 or
  above 2d makes the row unsound as surely as d/2 or 2d inside the band around d;
  :func:`qlib.runner.power.recompute` (above the studies): the same from a published row and the
  thresholds of the code as it is now (what ``tests/test_claims_power.py`` walks).

A row whose criterion the theory cannot place (the maximum at finite n, a mixing time, a model with
no d) carries a :class:`DPass` with ``low = high = None`` and the reason in ``why``; its soundness
then rests on its far wrong models alone (qlib.claims.ClaimRow.sound).

This module imports nothing from :mod:`qlib.claims` (no import circle)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from qlib.supermarket.refined import refined_mean_field
from qlib.supermarket.theory import fluid_fixed_point

#: the d′ searched: [D_MIN, D_MAX_FACTOR x d] (a range reaching the top is printed "at least")
D_MIN = 1
D_MAX_FACTOR = 4
#: the λ′ searched: 1 - λ′ within a factor LAM_FACTOR of 1 - λ
LAM_FACTOR = 4.0


@dataclass(frozen=True)
class DPass:
    """The d′ range of one row (see the module docstring).

    Args:
        d: the row's d at the point the range is about.
        at: that point, in words ("n=10000, 1-lam=0.004").
        method: how the range was computed, or "" when it was not.
        low, high: the range [low, high] of d′ that pass (None: not computed).
        criterion: the :data:`CRITERIA` key that recomputes it from ``inputs`` ("" if none).
        inputs: what the predicate needs (the point, the row's CI half-widths, its bound).
        why: why it was not computed.
        lam_low, lam_high: the range of f = (1 - lam′)/(1 - lam) for which JSQ(d) at lam′ would pass (to
            0.1%; None: not computed).
    """

    d: int | None
    at: str = ""
    method: str = ""
    low: int | None = None
    high: int | None = None
    criterion: str = ""
    inputs: dict = field(default_factory=dict)
    why: str = ""
    lam_low: float | None = None
    lam_high: float | None = None
    #: every band [low, high] of d′ in [D_MIN, D_MAX_FACTOR d] that passes (the scan), ascending
    bands: tuple[tuple[int, int], ...] = ()

    @property
    def computed(self) -> bool:
        return self.low is not None and self.high is not None

    def contains(self, x: float) -> bool:
        """Whether d′ = x (a real number: d/2 may be a half-integer) lies in the range."""
        return self.computed and self.low <= x <= self.high

    @property
    def far_bands(self) -> tuple[tuple[int, int], ...]:
        """The bands of d′ that pass and reach d/2 or below, or 2d or above."""
        return tuple((lo, hi) for lo, hi in self.bands if lo <= self.d / 2 or hi >= 2 * self.d)

    @property
    def excludes_far(self) -> bool:
        """Every d′ that passes lies strictly between d/2 and 2d: the band around d excludes both,
        and no other band passes below d/2 or above 2d (True where nothing is computed)."""
        return not self.computed or not (self.contains(self.d / 2) or self.contains(2 * self.d)
                                         or self.far_bands)

    def text(self) -> str:
        """The row's line in figures/claims.md."""
        if not self.computed:
            return f"not computed: {self.why}"
        top = self.high >= D_MAX_FACTOR * self.d

        def band(lo, hi):
            at_least = "at least " if hi >= D_MAX_FACTOR * self.d else ""
            return f"{lo}" if lo == hi else f"{lo} to {at_least}{hi}"

        rng = f"{self.low} to {'at least ' if top else ''}{self.high}"
        others = [b for b in self.bands if b != (self.low, self.high)]
        if others:
            rng += "; other bands that pass: " + ", ".join(band(*b) for b in others)
        inside = [w for w, x in (("d/2", self.d / 2), ("2d", 2 * self.d)) if self.contains(x)]
        far = [band(*b) for b in self.far_bands if b != (self.low, self.high)]
        verdict = ("excludes d/2 and 2d, no band beyond them" if self.excludes_far else
                   "; ".join((["contains " + " and ".join(inside)] if inside else [])
                             + ([f"a far band ({', '.join(far)}) beyond d/2 or 2d"] if far else [])))
        lam = ("" if self.lam_low is None else
               f"; λ′ that would pass: 1 - λ′ = {self.lam_low:.3f} to {self.lam_high:.3f} times 1 - λ")
        scan = f"every integer d′ from {D_MIN} to {D_MAX_FACTOR * self.d} scanned"
        return f"d′ = {rng} (d = {self.d}; {verdict}) at {self.at}{lam}; {self.method}; {scan}"


# ---- the predictions -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def refined_fraction(n: int, d: int, one_minus_lam: float) -> tuple[float, ...]:
    """The refined mean field (order 1/n, Gast & Van Houdt 2017) of the fraction of queues with
    length exactly i, i = 0..L, at (n, d, lam = 1 - one_minus_lam), sampling with replacement."""
    r = refined_mean_field(int(d), 1.0 - float(one_minus_lam))
    return tuple(float(x) for x in r.queue_length_distribution(int(n)))


@functools.lru_cache(maxsize=4096)
def fluid_fraction(d: int, one_minus_lam: float, levels: int) -> tuple[float, ...]:
    """The fluid fixed point's fraction of queues with length exactly i, i = 0..levels - 1."""
    s = fluid_fixed_point(int(d), one_minus_lam=float(one_minus_lam), levels=int(levels))
    return tuple(float(a - b) for a, b in zip(s[:-1], s[1:]))


def at_level(p: tuple[float, ...], i: int) -> float:
    """p[i], 0 above the levels p holds."""
    return p[i] if i < len(p) else 0.0


def within(value: float, half: float, prediction: float, tolerance: float) -> bool:
    """|value - prediction| <= tolerance + half (a 95% CI half-width): the prediction criterion."""
    return abs(value - prediction) <= tolerance + half


# ---- the criteria as predicates on d′ ---------------------------------------------------------------


def _profile(dd: int, x: dict, t: dict, f: float = 1.0) -> bool:
    """max_length.profile: at every length 1..k-1, |fluid(d′) - fluid(d)| <= tolerance fluid(d) + half
    (``f``: JSQ(d′) at 1 - lam′ = f (1 - lam), for the λ′ range)."""
    k, L, e = x["k"], x["k"] + 2, x["one_minus_lam"]
    ref, got = fluid_fraction(x["d"], e, L), fluid_fraction(dd, f * e, L)
    return all(abs(got[i] - ref[i]) <= t["tolerance"] * ref[i] + h for i, h in zip(range(1, k), x["halves"]))


def _most_at_k(dd: int, x: dict, t: dict, f: float = 1.0) -> bool:
    """max_length.most_at_k: at every point, the fraction at k of JSQ(d′) (refined mean field) has its
    lower CI end >= max(1/2, 1 - 2c) and is within model_error + half of JSQ(d)'s refined value."""
    for p in x["points"]:
        k, n, e = p["k"], p["n"], p["one_minus_lam"]
        got, ref = at_level(refined_fraction(n, dd, f * e), k), at_level(refined_fraction(n, x["d"], e), k)
        h = p["half"]
        if not (got - h >= max(0.5, 1 - 2 * p["c"]) and within(got, h, ref, t["model_error"])):
            return False
    return True


def _boundary(dd: int, x: dict, t: dict, f: float = 1.0) -> bool:
    """max_length.boundary: the fractions at k and k+1 of JSQ(d′) both have lower CI ends >= min_share
    and are within model_error + half of JSQ(d)'s refined values."""
    n, e, k = x["n"], x["one_minus_lam"], x["k"]
    got, ref = refined_fraction(n, dd, f * e), refined_fraction(n, x["d"], e)
    return all(at_level(got, i) - h >= t["min_share"]
               and within(at_level(got, i), h, at_level(ref, i), t["model_error"])
               for i, h in zip((k, k + 1), x["halves"]))


def _family_most_at_k(dd: int, x: dict, t: dict, f: float = 1.0) -> bool:
    """families.most_at_k at the largest n: the fraction at k of JSQ(d′) (refined mean field) has its
    lower CI end >= 1 - slack c, and it and the fractions at the neighbour levels are each within
    model_error + half of JSQ(d)'s refined values."""
    n, e, k, h = x["n"], x["one_minus_lam"], x["k"], x["half"]
    g, r = refined_fraction(n, dd, f * e), refined_fraction(n, x["d"], e)
    got, ref = at_level(g, k), at_level(r, k)
    if not (got - h >= 1 - t["slack"] * x["c"] and within(got, h, ref, t["model_error"])):
        return False
    # issue 47: the neighbour levels k + i too, each with the row's half-width there (``halves``, in the
    # order of the levels k + i for i in sorted {0} and neighbour_levels, those >= 0)
    levels = [k + o for o in sorted({0, *t.get("neighbour_levels", [])}) if k + o >= 0]
    halves = x.get("halves", [h] * len(levels))
    return all(within(at_level(g, i), hh, at_level(r, i), t["model_error"]) for i, hh in zip(levels, halves))


@dataclass(frozen=True)
class Criterion:
    """A row criterion as a predicate on d′: ``passes(d′, inputs, thresholds, f)`` (``f``: the candidate at
    1 - lam′ = f (1 - lam), 1 for the d′ range); ``module`` holds the
    study's PARAMETERS, ``thresholds(claims)`` picks this criterion's from ``PARAMETERS[mode]["claims"]``;
    ``method`` says what the predicate computes."""

    module: str
    thresholds: Callable[[dict], dict]
    passes: Callable[..., bool]
    method: str


_RMF = "refined mean field (order 1/n) of JSQ(d′) at each d′, the row's CI half-widths"
CRITERIA: dict[str, Criterion] = {
    "max_length.profile": Criterion("qlib.studies.max_length", lambda c: c["profile"], _profile,
                                    "fluid fixed point of JSQ(d′) at each d′, the row's CI half-widths"),
    "max_length.most_at_k": Criterion("qlib.studies.max_length", lambda c: c["most_at_k"], _most_at_k, _RMF),
    "max_length.boundary": Criterion("qlib.studies.max_length", lambda c: c["boundary"], _boundary, _RMF),
    "families.most_at_k": Criterion("qlib.studies.families", lambda c: c, _family_most_at_k, _RMF),
}


def pass_bands(passes: Callable[[int], bool], d: int, *, d_min: int = D_MIN,
               d_max: int | None = None) -> tuple[tuple[int, int], ...]:
    """Every band [low, high] of consecutive integers d′ in [d_min, d_max] (default D_MAX_FACTOR x d)
    for which ``passes(d′)``: a scan of every d′, since the criteria are not monotone in d′ (issue 47:
    the fraction at k of JSQ(d/5) can match JSQ(d)'s again)."""
    d_max = D_MAX_FACTOR * d if d_max is None else d_max
    bands: list[list[int]] = []
    for dd in range(max(d_min, 1), d_max + 1):
        if passes(dd):
            if bands and bands[-1][1] == dd - 1:
                bands[-1][1] = dd
            else:
                bands.append([dd, dd])
    return tuple((lo, hi) for lo, hi in bands)


def pass_range(passes: Callable[[int], bool], d: int, *, d_min: int = D_MIN,
               d_max: int | None = None) -> tuple[int, int] | None:
    """The band of :func:`pass_bands` that holds ``d``; None if d fails."""
    for lo, hi in pass_bands(passes, d, d_min=d_min, d_max=d_max):
        if lo <= d <= hi:
            return lo, hi
    return None


def lam_range(passes: Callable[[float], bool], *, low: float = 1 / LAM_FACTOR,
              high: float = LAM_FACTOR, rtol: float = 1e-3) -> tuple[float, float] | None:
    """The interval [f_low, f_high] of factors f = (1 - lam′)/(1 - lam) around 1 for which ``passes(f)``,
    by bisection in log f to relative precision ``rtol`` within [low, high]; None if f = 1 fails."""
    if not passes(1.0):
        return None

    def edge(far: float) -> float:
        if passes(far):
            return far
        good, bad = 1.0, far
        while abs(math.log(bad / good)) > rtol:
            mid = math.sqrt(good * bad)
            good, bad = (mid, bad) if passes(mid) else (good, mid)
        return good

    return edge(low), edge(high)


def d_pass(criterion: str, claims: dict, inputs: dict, at: str) -> DPass:
    """The :class:`DPass` of a row judged by ``criterion`` (a key of :data:`CRITERIA`) with the
    thresholds of ``claims`` (the study's ``PARAMETERS[mode]["claims"]``) at ``inputs`` (plain
    numbers: they are published in claims.json and :func:`qlib.runner.power.recompute` reads them back)."""
    c = CRITERIA[criterion]
    inputs = _plain(inputs)
    t = c.thresholds(claims)
    d = inputs["d"]
    bands = pass_bands(lambda dd: c.passes(dd, inputs, t), d)
    got = next(((lo, hi) for lo, hi in bands if lo <= d <= hi), None)
    if got is None:
        return DPass(d, at=at, criterion=criterion, inputs=inputs,
                     why="JSQ(d) itself fails the criterion in the theory", bands=bands)
    lam = lam_range(lambda f: c.passes(d, inputs, t, f))
    return DPass(d, at=at, method=c.method, low=got[0], high=got[1], criterion=criterion,
                 inputs=inputs, lam_low=lam[0], lam_high=lam[1], bands=bands)


def not_computed(d: int | None, why: str, at: str = "") -> DPass:
    """A row whose d′ range the theory cannot give: the reason, for the table."""
    return DPass(d, at=at, why=why)


#: Why the claim rows of a study carry no d′ range (qlib.claims attaches it to rows that have none).
NOT_COMPUTED: dict[str, str] = {
    "supermarket: maximum queue length": (
        "P(max = k) at finite n is decided by the few queues above k, whose number is hundreds of times "
        "its fluid value at these n (the finite-n row): the fluid cannot place it, a simulation per d′ "
        "would; the wrong models below are the simulated d′"),
    "supermarket: scaling families": (
        "P(max = k) at finite n is decided by the few queues above k, which the fluid cannot place; a "
        "simulation per d′ would; the wrong models below are the simulated d′"),
    "supermarket: mixing time": "a mixing-time criterion, not a function of the stationary law: each d′ "
                                "would need its own coupling runs",
    "supermarket: mixing time in the regime": ("a mixing-time criterion, not a function of the stationary "
                                               "law: each d′ would need its own coupling runs"),
    "heterogeneous servers": "no d: the heterogeneous M/M/n model routes uniformly among idle servers",
}


def _plain(x):
    """numpy scalars and arrays as plain Python numbers and lists (JSON, and equal after a round trip)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(float(x)) else float(x)
    return x
