"""One validated parameter point of the supermarket model: :class:`Point`.

A point is (n, d, lam, one_minus_lam, replacement), built once at the public boundary and then
passed as it is to the theory, the kernel's lane parameters, the simulation, the coupling, the
equilibrium estimates and the results (which carry it). Every range is checked in exactly one
place:

- :class:`Point` itself checks the model's ranges (the theory's): ``n`` in [1, 2^63 - 1] or
  None (the n -> oo theory, only with replacement), ``d`` in [1, 2^63 - 1] (d <= n without
  replacement), the arrival rate given as exactly one of ``lam`` and ``one_minus_lam``, each
  in (0, 1), ``replacement`` a bool;
- :meth:`Point.simulable` adds what the 64-bit simulation can resolve: n <= 2^32 - 1 and lam,
  1 - lam both >= 2^-43 (docs/models.md#resolution-of-the-random-numbers).

The arrival rate keeps the number that was given: from ``one_minus_lam`` the point holds it as
given (and lam = 1 - one_minus_lam, rounded); from ``lam`` it holds lam and 1 - lam (exact in
float64 for lam >= 1/2). ``given`` records which, because the theory computes in logs of
1 - lam only when 1 - lam was given (a float lam near 1 has already lost its digits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from qlib import _validate as V

#: A point as a sweep passes it around, (n, d, lam) or (n, d, one_minus_lam), unchecked: the one alias
#: every study uses (:class:`Point` is the checked form, :func:`as_point` turns one into the other).
PointTuple = tuple[int, int, float]

#: Largest n and d of the model (the theory's range).
MAX_D = 2**63 - 1
#: Largest n the simulation resolves: counts are uint32, the departure rank a 64 x 32-bit product.
MAX_N = 2**32 - 1
#: lam and 1 - lam below this lose more than 2^-20 of their value in the 64-bit event threshold.
LAM_RESOLUTION = 2.0**-43


def arrival_threshold(lam: float | None = None, one_minus_lam: float | None = None) -> int:
    """A = round(2^64 p), p = lam/(1+lam), exactly from the float64 lam or 1 - lam (as given).

    P(arrival) = A/2^64, so the simulated lam = A/(2^64 - A) is within 2^-63 of the requested
    one. The caller validates the range (:meth:`Point.simulable`)."""
    lam_q = 1 - Fraction(one_minus_lam) if one_minus_lam is not None else Fraction(lam)
    p = lam_q / (1 + lam_q)
    return int(math.floor(p * 2**64 + Fraction(1, 2)))


def _rate(lam: Any, one_minus_lam: Any) -> tuple[float, float, str]:
    """(lam, 1 - lam, which was given) from exactly one of them, each in (0, 1)."""
    if (lam is None) == (one_minus_lam is None):
        raise ValueError("give exactly one of lam and one_minus_lam (= 1 - lam), each in (0, 1); got "
                         f"lam={lam!r}, one_minus_lam={one_minus_lam!r}")
    if one_minus_lam is None:
        lam = V.real("lam", lam, low=0.0, high=1.0)
        return lam, 1.0 - lam, "lam"
    one_minus_lam = V.real("one_minus_lam", one_minus_lam, low=0.0, high=1.0)
    return 1.0 - one_minus_lam, one_minus_lam, "one_minus_lam"


def _simulation_n(n: Any) -> int:
    """n of a simulation: an integer in [1, 2^32 - 1] (the one check of that range)."""
    return V.integer("n", n, low=1, high=MAX_N)


@dataclass(frozen=True, init=False)
class Point:
    """A validated parameter point: ``Point(n, d, lam)`` or ``Point(n, d, one_minus_lam=e)``.

    Fields: ``n`` (int, or None for the n -> oo theory), ``d`` (int), ``lam`` and
    ``one_minus_lam`` (floats; the one given is kept exactly), ``replacement`` (bool) and
    ``given`` ("lam" or "one_minus_lam"). Raises ValueError naming the parameter and its range.
    Equal parameters, given the same way, make equal (and equally hashed) points.
    """

    n: int | None
    d: int
    lam: float
    one_minus_lam: float
    replacement: bool
    given: str

    def __init__(self, n: Any, d: Any, lam: Any = None, *, one_minus_lam: Any = None,
                 replacement: Any = True):
        if n is not None:
            n = V.integer("n", n, low=1, high=MAX_D)
        d = V.integer("d", d, low=1, high=MAX_D)
        lam, one_minus_lam, given = _rate(lam, one_minus_lam)
        if not isinstance(replacement, (bool, np.bool_)):
            raise ValueError(f"replacement must be True or False; got {replacement!r}")
        if not replacement:
            if n is None:
                raise ValueError("n is required when replacement=False (the law depends on n); got None")
            if d > n:
                raise ValueError(f"d must be an integer in [1, n] = [1, {n}] when sampling without "
                                 f"replacement; got {d}")
        for k, v in (("n", n), ("d", d), ("lam", lam), ("one_minus_lam", one_minus_lam),
                     ("replacement", bool(replacement)), ("given", given)):
            object.__setattr__(self, k, v)

    # -- constructors

    @classmethod
    def simulation(cls, n: Any, d: Any, lam: Any = None, *, one_minus_lam: Any = None,
                   replacement: Any = True) -> Point:
        """A point the simulation resolves: :class:`Point` and then :meth:`simulable` (n is
        checked against the simulation's range first, so it is the one named when too big)."""
        n = _simulation_n(n)
        return cls(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement).simulable()

    def simulable(self) -> Point:
        """This point, if the 64-bit simulation resolves it (n in [1, 2^32 - 1]; lam and
        1 - lam both >= 2^-43, about 1.1e-13: the event threshold then holds them to 2^-20 of
        their value); ValueError naming the parameter otherwise."""
        if self.n is None:
            raise ValueError("n must be an integer in [1, 4294967295] for a simulation; got None")
        _simulation_n(self.n)
        res = LAM_RESOLUTION
        name, value = self.given, getattr(self, self.given)
        if self.lam < res or self.one_minus_lam < res:
            raise ValueError(
                f"{name} must give lam and 1 - lam both >= 2^-43 = {res:.3g} "
                f"(lam in [{res:.3g}, 1 - {res:.3g}]): the 64-bit event threshold resolves them to 2^-20 "
                "of their value only there; got "
                f"{name}={value!r}"
                + (
                    "; for lam near 1 pass one_minus_lam"
                    if name == "lam" and self.one_minus_lam < res
                    else ""
                )
            )
        return self

    # -- views

    @property
    def one_minus_lam_given(self) -> float | None:
        """1 - lam if it was given as such, else None (the theory then works from lam)."""
        return self.one_minus_lam if self.given == "one_minus_lam" else None

    @property
    def rate(self) -> dict[str, float]:
        """The arrival rate as given: ``{"lam": lam}`` or ``{"one_minus_lam": 1 - lam}``."""
        return {self.given: getattr(self, self.given)}

    @property
    def arrival_threshold(self) -> int:
        """The kernel's 64-bit arrival threshold: from 1 - lam when it is <= 1/2 (then exact
        either way for a float lam), else from lam."""
        if self.one_minus_lam <= 0.5:
            return arrival_threshold(one_minus_lam=self.one_minus_lam)
        return arrival_threshold(self.lam)

    @property
    def steps_per_time(self) -> float:
        """Uniformised steps per unit of model time, (1 + lam) n."""
        return (1.0 + self.lam) * self.n

    def as_tuple(self) -> tuple:
        """(n, d, lam) or (n, d, one_minus_lam), as given: the plain form sweeps and cache keys use."""
        return (self.n, self.d, getattr(self, self.given))

    def cache_params(self) -> dict[str, Any]:
        """The point as JSON-able cache-key content: equal points give equal dicts (the arrival
        rate under the name it was given; ``replacement`` only when False)."""
        out: dict[str, Any] = {"n": self.n, "d": self.d, self.given: getattr(self, self.given)}
        if not self.replacement:
            out["replacement"] = False
        return out

    def __repr__(self) -> str:
        extra = "" if self.replacement else ", replacement=False"
        return f"Point(n={self.n!r}, d={self.d!r}, {self.given}={getattr(self, self.given)!r}{extra})"


def as_point(n: Any, d: Any = None, lam: Any = None, *, one_minus_lam: Any = None,
             replacement: Any = None, simulation: bool = False) -> Point:
    """A :class:`Point` from a Point (first argument; then d, lam and one_minus_lam must be left
    out) or from plain (n, d, lam | one_minus_lam). ``replacement`` None means True for plain
    values and the point's own for a Point; a Point asked for another replacement is an error.
    ``simulation``: also require :meth:`Point.simulable`."""
    if isinstance(n, Point):
        if d is not None or lam is not None or one_minus_lam is not None:
            raise ValueError("a Point was given: leave d, lam and one_minus_lam out; got "
                             f"d={d!r}, lam={lam!r}, one_minus_lam={one_minus_lam!r}")
        if replacement is not None and bool(replacement) != n.replacement:
            raise ValueError(
                f"replacement={replacement!r} differs from the point's replacement={n.replacement!r}"
            )
        return n.simulable() if simulation else n
    rep = True if replacement is None else replacement
    if simulation:
        return Point.simulation(n, d, lam, one_minus_lam=one_minus_lam, replacement=rep)
    return Point(n, d, lam, one_minus_lam=one_minus_lam, replacement=rep)


__all__ = ["Point", "as_point", "arrival_threshold", "MAX_D", "MAX_N", "LAM_RESOLUTION"]
