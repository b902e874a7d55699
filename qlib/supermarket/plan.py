"""One parameter point of a simulation, validated and resolved: its start, seed and level cap.

A :class:`Plan` is what a point's own :func:`qlib.supermarket.simulate` call would run; many
plans run as lanes of one kernel (:func:`qlib.supermarket.simulation._run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from qlib import _rng
from qlib import _validate as V
from qlib.supermarket import chain as K
from qlib.supermarket.initial import default_level_cap, start_counts
from qlib.supermarket.point import Point
from qlib.supermarket.result import SupermarketResult


@dataclass
class Plan:
    """One parameter point of a run, validated: what its own simulate call would do."""

    point: Point
    steps: int
    burn_in: int
    seed: int
    u0: np.ndarray  # (R, L0+1) counts
    rng0: np.ndarray  # (R,) uint64
    levels: int  # the cap its own call would start with
    limit: int  # no queue of this point can pass this level

    @property
    def n(self) -> int:
        return self.point.n

    @property
    def end(self) -> int:
        return self.burn_in + self.steps


def _resolve_initial(where: str, point: Point, initial, replicas, seed, capacity=None):
    """(u0 (R, L0+1), rng0 (R,), seed) from ``initial``, which may be a previous result."""
    if isinstance(initial, SupermarketResult):
        res = initial
        for name, have, want in (("n", res.n, point.n), ("d", res.d, point.d),
                                 ("lam", res.point.arrival_threshold, point.arrival_threshold),
                                 ("replacement", res.replacement, point.replacement),
                                 ("replicas", res.replicas, replicas), ("capacity", res.capacity, capacity)):
            if have != want:
                shown = (res.lam, point.lam) if name == "lam" else (have, want)
                raise ValueError(
                    f"{where}initial is a result with {name} = {shown[0]!r}, but {name} = {shown[1]!r} "
                    f"was asked for; a run continues only with the same {name}"
                )
        if seed is not None and seed != res.seed:
            raise ValueError(f"{where}seed = {seed} differs from the continued result's seed = {res.seed}; "
                             "leave seed out (the result carries its random states)")
        # Trailing all-zero levels are dropped: a continued run starts from the levels in use,
        # so a chain continued many times does not accumulate empty levels (and cost).
        u = res.counts.astype(np.int64)
        used = int(np.max(np.nonzero(u.any(axis=0))[0])) + 1
        return u[:, : max(used, 2)], np.asarray(res.state, np.uint64), res.seed
    seed = 0 if seed is None else seed
    try:
        u0 = start_counts(point, initial)
    except ValueError as e:
        raise ValueError(f"{where}{e}") from None
    if u0.ndim == 2 and u0.shape[0] != replicas:
        raise ValueError(
            f"{where}initial counts with one row per replica must have {replicas} rows; got {u0.shape[0]}"
        )
    # the start (int64 counts, and their uint32 device copy) and random states, before building them
    V.memory("replicas", float(replicas) * (16.0 * u0.shape[-1] + 32.0),
             f"{replicas} replicas x {u0.shape[-1]} levels of start counts and random states")
    u0 = np.broadcast_to(u0 if u0.ndim == 2 else u0[None], (replicas, u0.shape[-1])).astype(np.int64)
    return u0, _rng.replica_states_np(seed, np.arange(replicas)), seed


def plan_points(where, point: Point, *, steps, burn_in, seed, initial, replicas, levels,
                capacity=None) -> Plan:
    """The plan of one point (the theory of the start and of the level cap uses the arrival
    rate as the caller gave it). With ``capacity`` (the bounded model) the cap is the capacity."""
    u0, rng0, seed = _resolve_initial(where, point, initial, replicas, seed, capacity)
    total = burn_in + steps
    if capacity is not None:
        if u0.shape[-1] > capacity + 1 and np.any(u0[:, capacity + 1:] > 0):
            raise ValueError(
                f"{where}initial has a queue longer than capacity = {capacity}: the bounded model "
                f"holds at most {capacity} customers per queue"
            )
        u0 = np.ascontiguousarray(u0[:, : capacity + 1])
        return Plan(point, steps, burn_in, seed, u0, rng0, capacity, capacity)
    L = (default_level_cap(point, u0, total) if levels is None
         else V.integer("levels", levels, low=u0.shape[-1]))
    return Plan(point, steps, burn_in, seed, u0, rng0, L,
                  max(L, K.level_limit(u0.shape[-1], total)))


def per_point(name: str, value: Any, P: int, check) -> list:
    """An int (or None) for every point, or one per point."""
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        if len(value) != P:
            raise ValueError(f"{name} must be one value or one per point ({P}); got {len(value)}")
        return [check(f"{name}[{j}]", v) for j, v in enumerate(value)]
    v = check(name, value)
    return [v] * P


def is_per_point_initial(initial: Any, P: int) -> bool:
    """A list/tuple of P entries that are not plain numbers is one initial state per point."""
    if not isinstance(initial, (list, tuple)) or len(initial) != P:
        return False
    return not all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
                   for x in initial)
