"""The lanes of the count chain's kernel: their parameters and their state.

A *lane* is one replica of one parameter point; every array has the lanes on its last axis and
each lane carries its own parameters (:class:`LaneParams`), so one kernel runs many points at
once. Counts have shape (chains, levels+1, lanes): one chain for simulation, two or more
coupled chains for meeting times and coupled paths.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from qlib.supermarket.point import Point


class LaneParams(NamedTuple):
    """Per-lane model parameters, each of shape (lanes,), traced (a sweep compiles once)."""

    n: Any  # uint64: number of queues
    d: Any  # float64: choices per arrival
    arrival: Any  # uint64: an arrival iff the event word is < this (A = round(2^64 lam/(1+lam)))
    log_norm: Any  # float64: F(n) = log(n (n-1) ... (n-d+1)); filled on the device (see arrival._with_norm)


class ChainState(NamedTuple):
    """The state of every lane's chains.

    - ``rng`` (lanes,) uint64: the SplitMix64 state (s_0 + 2t GOLDEN after t steps);
    - ``u`` (chains, levels+1, lanes) uint32: the counts u_0..u_levels of each chain;
    - ``overflow`` (lanes,) int64: the steps at which an arrival would have joined a queue of
      length ``levels`` (in some chain): the driver grows the cap and reruns the chunk, except
      in the bounded model (``capacity``), where such an arrival is lost and this counts them.
    """

    rng: Any
    u: Any
    overflow: Any


def simulated_lam(threshold: int) -> tuple[Fraction, Fraction]:
    """(lam, 1 - lam) that the chain simulates for the event threshold A, as exact fractions."""
    p = Fraction(threshold, 2**64)
    return p / (1 - p), (1 - 2 * p) / (1 - p)


def point_params(point: Point | tuple) -> tuple:
    """(n, d, A, 0.0) of one parameter point, as host scalars (see :class:`LaneParams`).

    ``point``: a :class:`~qlib.supermarket.point.Point` (the simulation's entry points pass
    one, validated by :meth:`Point.simulation`), or a plain (n, d, lam) that is made one."""
    if not isinstance(point, Point):
        point = Point.simulation(*point)
    return int(point.n), float(point.d), point.arrival_threshold, 0.0


def lane_params(points: list[Point | tuple], lanes_per_point: list[int]) -> LaneParams:
    """Host arrays of :class:`LaneParams` for consecutive lanes: point j (a Point or (n, d, lam)),
    repeated lanes_per_point[j] times."""
    cols = list(zip(*(point_params(p) for p in points))) if points else [[], [], [], []]
    rep = np.asarray(lanes_per_point, dtype=np.int64)
    n, d, thr, ln = (np.repeat(np.asarray(c, dtype=t), rep) for c, t in
                     zip(cols, (np.uint64, np.float64, np.uint64, np.float64)))
    return LaneParams(n=n, d=d, arrival=thr, log_norm=ln)
