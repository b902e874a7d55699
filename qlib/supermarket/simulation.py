"""Exact simulation of the supermarket model through its count chain: simulate, simulate_many.

Model (Brightwell & Luczak, arXiv:1201.5523; docs/models.md, "count chain"): n FIFO queues
with Exp(1) service; customers arrive at rate lam n; each samples d queues uniformly (with
replacement by default) and joins a shortest. The counts u_i = #queues with length >= i form a
Markov chain, simulated exactly by :mod:`qlib.supermarket.chain` (uniformised at rate
n(1 + lam): one unit of model time is (1 + lam) n steps).

:func:`simulate` runs ``replicas`` independent copies of one parameter point;
:func:`simulate_many` runs many points as lanes of one kernel, each bit-identical to its own
:func:`simulate` call. A result keeps each replica's final counts and random state, so
``simulate(..., initial=result)`` continues the very same chains.

Each replica draws from its own stream, seeded from (seed, replica index), so a replica's
result never depends on how many replicas run, on the other points of a grid, or on the
number of devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qlib import _validate as V
from qlib import simulations
from qlib.supermarket import chain as K
from qlib.supermarket.initial import (
    counts_all_at,
    counts_from_lengths,
    default_levels,
    initial_counts,
)
from qlib.supermarket.plan import Plan, is_per_point_initial, per_point, plan_points
from qlib.supermarket.point import MAX_N, Point, as_point
from qlib.supermarket.result import SupermarketResult
from qlib.supermarket.variants import event_map

__all__ = ["SupermarketResult", "simulate", "simulate_many", "Point", "initial_counts",
           "counts_from_lengths", "counts_all_at", "default_levels", "MAX_N"]


# --------------------------------------------------------------------------- public

def simulate(n: int | Point, d: int | None = None, lam: float | None = None, *,
             one_minus_lam: float | None = None, steps: int, replicas: int = 1, seed: int | None = None,
             burn_in: int = 0, initial: Any = "empty", replacement: bool | None = None, batches: int = 1,
             record_every: int | None = None, levels: int | None = None, progress: bool | None = None,
             flows: bool = False, variant: Any = None, capacity: int | None = None) -> SupermarketResult:
    """Simulate ``replicas`` independent copies of the supermarket model's count chain.

    The chain is uniformised: one unit of model time is (1 + lam) n steps. The level cap grows
    automatically when a queue would exceed it (the chunk is rerun from its saved state, so
    nothing is ever truncated). The same ``seed`` gives identical arrays, and replica r's
    numbers do not depend on ``replicas`` or the number of devices.

    Args:
        n: number of queues, <= 2^32 - 1; or a :class:`~qlib.supermarket.point.Point` in place
            of (n, d, lam, replacement).
        d: choices per arrival, <= 2^63 - 1.
        lam: arrival rate per queue, in (0, 1).
        one_minus_lam: 1 - lam in place of ``lam``, carried exactly into the 64-bit event
            threshold (lam and 1 - lam must both be >= 2^-43).
        steps: uniformised steps measured after the burn-in.
        replicas: independent copies.
        seed: seed of the random streams (default 0; a continued result carries its own).
        burn_in: steps run before the measured ones.
        initial: "empty", "fluid", counts or queue lengths (:func:`initial_counts`), or a
            previous :class:`SupermarketResult`, whose chains then continue from their final
            counts and random states (n, d, lam, replacement and replicas must match): T steps
            and then T more end in the same counts as 2T steps in one call.
        replacement: sample the d queues with replacement (the classical model, default) or not.
        batches: equal batches of the measured steps, for batch-means error bars.
        record_every: keep u every so many steps (no trajectory otherwise).
        levels: the initial number of tracked lengths (it grows on demand).
        progress: show a progress bar (default: for runs of more than about 10 s).
        flows: also keep the level-flow time sums (``flow_fraction``); off by default.
        variant: a near wrong model in place of JSQ(d): a name or (name, parameter) of
            :data:`qlib.supermarket.variants.VARIANTS`, e.g. "jsq_d_minus_1" or
            ("eta_greedy", 0.01); it uses the model's random streams. None: the model.
        capacity: L for the bounded model (docs/models.md#bounded-model): every queue holds at
            most L customers and an arrival whose chosen queue is full is lost (counted in
            ``lost_arrivals``); the level cap is L. The start must fit.

    Returns:
        A :class:`SupermarketResult`.

    Raises:
        ValueError: naming the parameter and its range, before any compile; also for runs
            whose memory would not fit or that would take longer than a year.
    """
    point = as_point(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement, simulation=True)
    emap, vname = _variant(variant, point.d, point.replacement)
    flows = _flag("flows", flows)
    steps = V.integer("steps", steps, low=1)
    replicas = V.integer("replicas", replicas, low=1)
    if seed is not None:
        seed = V.integer("seed", seed, low=0, high=2**63 - 1)
    burn_in = V.integer("burn_in", burn_in, low=0)
    batches = V.integer("batches", batches, low=1, high=steps)
    if record_every is not None:
        record_every = V.integer("record_every", record_every, low=1, high=steps)
    V.work("steps", float(burn_in + steps) * replicas)
    capacity = checked_capacity(capacity)
    pt = plan_points("", point, steps=steps, burn_in=burn_in, seed=seed, initial=initial, replicas=replicas,
               levels=levels, capacity=capacity)
    return _run([pt], replicas, point.replacement, batches, record_every, progress, flows, emap, vname,
                capacity)[0]


def simulate_many(points: Sequence[tuple | Point], *, steps: int | Sequence[int], replicas: int = 1,
                  seeds: Sequence[int] | None = None, burn_in: int | Sequence[int] = 0,
                  initial: Any = "empty", replacement: bool | None = None, batches: int = 1,
                  record_every: int | None = None, levels: int | None = None,
                  one_minus_lam: float | Sequence[float] | None = None, progress: bool | None = None,
                  flows: bool = False, variant: Any = None, capacity: int | None = None
                  ) -> list[SupermarketResult]:
    """Simulate many parameter points at once, as lanes of one kernel.

    Result p is bit-identical to ``simulate(*points[p], steps=steps[p], burn_in=burn_in[p],
    replicas=replicas, seed=seeds[p], ...)``. Lanes are ordered by run length, so a lane that
    has finished neither advances nor costs a sequential step (:mod:`qlib.supermarket.chain`).

    Args:
        points: (n, d, lam) or :class:`~qlib.supermarket.point.Point`, or (n, d) with
            ``one_minus_lam``; all share one ``replacement`` (the points' own, or True).
        steps: an int or one per point.
        replicas: replicas of every point.
        seeds: one per point (default 0, 1, ..., P-1).
        burn_in: an int or one per point.
        initial: one start for all points or a list of one per point (anything
            :func:`simulate` accepts, including a previous result of that point).
        one_minus_lam: one value per point, or one for all, with (n, d) points.
        replacement, batches, record_every, levels, progress, flows, variant, capacity: as in
            :func:`simulate`, for every point.

    Returns:
        One :class:`SupermarketResult` per point, in order.

    Raises:
        ValueError: naming the parameter (``points[j]: ...`` for a point), before any compile.
    """
    checked = _checked_points(points, one_minus_lam, replacement)
    P = len(checked)
    replacement = checked[0].replacement
    emap, vname = _variant(variant, min(c.d for c in checked), replacement)
    flows = _flag("flows", flows)
    steps_l = per_point("steps", steps, P, lambda nm, v: V.integer(nm, v, low=1))
    burn_l = per_point("burn_in", burn_in, P, lambda nm, v: V.integer(nm, v, low=0))
    replicas = V.integer("replicas", replicas, low=1)
    seeds_l = _seeds(seeds, P)
    batches = V.integer("batches", batches, low=1, high=min(steps_l))
    if record_every is not None:
        record_every = V.integer("record_every", record_every, low=1, high=min(steps_l))
    V.work("steps", float(sum(b + st for b, st in zip(burn_l, steps_l))) * replicas)
    inits = list(initial) if is_per_point_initial(initial, P) else [initial] * P
    pts = []
    for j, (point, st, bi, sd, ini) in enumerate(zip(checked, steps_l, burn_l, seeds_l, inits)):
        sd = sd if not isinstance(ini, SupermarketResult) or seeds is not None else None
        pts.append(plan_points(f"points[{j}]: ", point, steps=st, burn_in=bi, seed=sd, initial=ini,
                         replicas=replicas, levels=levels, capacity=capacity))
    return _run(pts, replicas, replacement, batches, record_every, progress, flows, emap, vname, capacity)


def _checked_points(points: Any, one_minus_lam: Any, replacement: bool | None) -> list[Point]:
    """The points of :func:`simulate_many` as simulable Points sharing one sampling rule."""
    if isinstance(points, (str, bytes)) or not isinstance(points, Sequence) or len(points) < 1:
        raise ValueError(f"points must be a non-empty sequence of (n, d, lam); got {points!r}")
    P = len(points)
    oml_l = ([None] * P if one_minus_lam is None
             else per_point("one_minus_lam", one_minus_lam, P, lambda nm, v: v))
    if replacement is None:  # the points' own (one kernel has one sampling rule)
        replacement = next((pt.replacement for pt in points if isinstance(pt, Point)), True)
    checked: list[Point] = []
    for j, (pt, oml) in enumerate(zip(points, oml_l)):
        want = 3 if oml is None else 2
        if not isinstance(pt, Point) and (not isinstance(pt, (tuple, list)) or len(pt) != want):
            shape = "(n, d, lam)" if want == 3 else "(n, d) (one_minus_lam is given)"
            raise ValueError(f"points[{j}] must be {shape} or a Point; got {pt!r}")
        try:
            if isinstance(pt, Point):
                if oml is not None:
                    raise ValueError("a Point carries its arrival rate: leave one_minus_lam out")
                checked.append(as_point(pt, replacement=replacement, simulation=True))
            else:
                checked.append(Point.simulation(pt[0], pt[1], pt[2] if oml is None else None,
                                                replacement=replacement, one_minus_lam=oml))
        except ValueError as err:
            raise ValueError(f"points[{j}]: {err}") from None
    return checked


def _seeds(seeds: Any, P: int) -> list[int]:
    """One seed per point (default 0, 1, ..., P-1)."""
    if seeds is None:
        return list(range(P))
    if (not isinstance(seeds, (list, tuple, np.ndarray))
            or (isinstance(seeds, np.ndarray) and seeds.ndim != 1) or len(seeds) != P):
        raise ValueError(f"seeds must be a sequence of one seed per point ({P}); got {seeds!r}")
    return [V.integer(f"seeds[{j}]", s, low=0, high=2**63 - 1) for j, s in enumerate(seeds)]


#: Lane-steps from which a burn-in stretch runs its own kernel, with the "seen" observer (0-15%
#: faster than the measuring "sums" kernel: benchmarks/README.md, "Burn-in kernel"); a shorter
#: one runs the measuring kernel and drops its sums, since a second compile (~0.5 s) would cost
#: more than it saves (the same bits either way: observers never touch the chain).
BURN_IN_KERNEL_WORK = 2**28

#: Largest capacity of the bounded model: the counts are capacity + 1 levels per chain.
MAX_CAPACITY = 10_000


def checked_capacity(capacity: Any) -> int | None:
    """``capacity`` of the bounded model (docs/models.md#bounded-model): None or an int in [1, 10^4]."""
    return None if capacity is None else V.integer("capacity", capacity, low=1, high=MAX_CAPACITY)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def _variant(variant: Any, d: int, replacement: bool):
    """(chain.EventMap, display name) of ``variant`` (None: the model)."""
    if variant is None:
        return K.MODEL, "model"
    return event_map(variant, d=d, replacement=replacement)


# --------------------------------------------------------------------------- the run

def _exact_zeros(shape, big: bool) -> np.ndarray:
    # int64 holds every time sum below 2^63; beyond, Python integers (never rounded)
    return np.zeros(shape, dtype=object if big else np.int64)


def _bytes_per_level(lanes: int, batches: int, frames: int, big: bool) -> tuple[float, dict]:
    """Bytes per tracked count level over all lanes, by what holds them (see :func:`_run`)."""
    cell = 40.0 if big else 8.0  # one exact time sum: an int64, or a Python integer
    parts = {
        # device: counts (uint32), chunk sums (int64 + int32); host: totals, last batch, chunk copies
        "replicas": lanes * (4 + 12 + 3 * cell + 2 * 8 + 12),
        # per batch: the exact sums, their float copy and the stacked result
        "batches": lanes * batches * (cell + 16) if batches > 1 else 0.0,
        # per recorded frame: int64 counts, and the stacked trajectory
        "record_every": lanes * frames * 16.0,
    }
    return sum(parts.values()), parts


@dataclass
class _Lanes:
    """Where each point's replicas run: points sorted by run length (longest first), R lanes each."""

    R: int
    lane0: dict[int, int]  # first logical lane of point j
    burn: np.ndarray  # (lanes,) the burn-in end of each lane's point
    stop: np.ndarray  # (lanes,) the end of each lane's point

    @classmethod
    def of(cls, pts: list[Plan], R: int) -> _Lanes:
        order = sorted(range(len(pts)), key=lambda j: -pts[j].end)
        lane0 = {j: i * R for i, j in enumerate(order)}
        lane_point = np.empty(len(pts) * R, np.int64)
        for j in range(len(pts)):
            lane_point[lane0[j]: lane0[j] + R] = j
        return cls(R, lane0, np.array([pts[j].burn_in for j in lane_point]),
                   np.array([pts[j].end for j in lane_point]))

    @property
    def count(self) -> int:
        return len(self.lane0) * self.R

    @property
    def order(self) -> list[int]:
        """The points in lane order."""
        return sorted(self.lane0, key=self.lane0.get)

    def of_point(self, j: int) -> slice:
        return slice(self.lane0[j], self.lane0[j] + self.R)


@dataclass
class _Cuts:
    """The steps at which a run stops its kernel: every point's burn-in end, batch ends, record
    points and end, in order; ``recorders[c]`` are the points that record at ``at[c]``."""

    at: list[int]
    recorders: list[frozenset]
    hard: set  # where the sums are read (batch ends) or the lane masks change (burn-in ends, ends)
    batch_ends: dict[int, dict[int, int]]  # point -> {step: batch index}
    record_at: dict[int, set]  # point -> its record steps

    @classmethod
    def of(cls, pts: list[Plan], batches: int, record_every: int | None) -> _Cuts:
        batch_ends = {j: {p.burn_in + (p.steps * b) // batches: b - 1 for b in range(1, batches + 1)}
                      for j, p in enumerate(pts)}
        record_at = {
            j: (set(range(p.burn_in + record_every, p.end + 1, record_every)) if record_every else set())
            for j, p in enumerate(pts)
        }
        hard = set()
        for j, p in enumerate(pts):
            hard |= set(batch_ends[j]) | ({p.burn_in} if p.burn_in else set()) | {p.end}
        at = set(hard)
        for j in range(len(pts)):
            at |= record_at[j]
        at = sorted(at)
        recorders = [frozenset(j for j in range(len(pts)) if c in record_at[j]) for c in at]
        return cls(at, recorders, hard, batch_ends, record_at)

    def frame_run(self, i: int, t: int, record_every: int | None) -> int:
        """End k of the run of cuts i, i+1, ..., k-1 that one kernel call can record: record points
        every ``record_every`` steps from t, recorded by the same points, with no batch end, burn-in
        end or end before the last one (the kernel stores the counts after each frame)."""
        k = i
        while (
            record_every
            and k < len(self.at)
            and self.recorders[k]
            and self.recorders[k] == self.recorders[i]
            and self.at[k] == t + (k - i + 1) * record_every
            and (k == i or self.at[k - 1] not in self.hard)
        ):
            k += 1
        return k


class _Sums:
    """The exact time sums of a run, per tracked level and lane, with what each batch, record
    point and bounded-model loss adds (see :func:`_run`)."""

    def __init__(self, width: int, lanes: int, P: int, big: bool, flows: bool):
        self.u = _exact_zeros((width, lanes), big)
        self.busy = np.zeros((width, lanes), np.int64)
        self.last = _exact_zeros((width, lanes), big)
        self.batches: dict[int, list] = {j: [] for j in range(P)}
        # level-flow sums: Python integers (chunk sums reach 2^60), exact whatever the chunking
        self.flow = np.zeros((width, lanes), object) if flows else None
        self.last_flow = np.zeros((width, lanes), object) if flows else None
        self.flow_batches: dict[int, list] = {j: [] for j in range(P)}
        self.traj: dict[int, list] = {j: [] for j in range(P)}  # blocks of frames (F, L+1, R)
        self.lost = np.zeros(lanes, np.int64)  # arrivals lost at a full queue in the measured steps

    def widen(self, width: int) -> None:
        """Pad every sum to ``width`` levels after the driver's level cap grew."""
        if width > self.u.shape[0]:
            self.u, self.busy, self.last = (K.pad_levels(a, width) for a in (self.u, self.busy, self.last))
            if self.flow is not None:
                self.flow, self.last_flow = (
                    K.pad_levels(self.flow, width),
                    K.pad_levels(self.last_flow, width),
                )

    def add(self, drv: K.ChainDriver, out: dict, measuring: np.ndarray) -> None:
        """Add a kernel call's sums to the lanes that measure."""
        su, sb = drv.lanes_of(out["sum_u"]), drv.lanes_of(out["sum_busy"])
        self.u[:, measuring] += su[:, measuring].astype(self.u.dtype)
        self.busy[:, measuring] += sb[:, measuring]
        if self.flow is not None:
            self.flow[:, measuring] += drv.lanes_of(out["sum_flow"])[:, measuring]

    def end_batch(self, j: int, sl: slice) -> None:
        """Close point j's current batch: keep what its lanes summed since the last batch end."""
        self.batches[j].append((self.u[:, sl] - self.last[:, sl]).copy())
        self.last[:, sl] = self.u[:, sl]
        if self.flow is not None:
            self.flow_batches[j].append((self.flow[:, sl] - self.last_flow[:, sl]).copy())
            self.last_flow[:, sl] = self.flow[:, sl]


def _check_memory(pts: list[Plan], lanes: int, batches: int, record_every: int | None) -> float:
    """Bytes per tracked level of the run, after checking that its initial cap fits in memory."""
    L0 = max(p.levels for p in pts)
    big = any(p.steps * p.n >= 2**62 for p in pts)
    frames = max((p.steps // record_every for p in pts), default=0) if record_every else 0
    per_level, parts = _bytes_per_level(lanes, batches, frames, big)
    blame = max(parts, key=parts.get)
    V.memory(blame, (L0 + 1) * per_level,
             f"{L0 + 1} levels x {lanes} lanes: " + ", ".join(f"{k} {v * (L0 + 1) / 2**30:.3g} GiB"
                                                            for k, v in parts.items() if v))
    return per_level


def _driver(pts: list[Plan], lanes: _Lanes, replacement: bool, progress: bool | None, per_level: float,
            variant: K.EventMap, capacity: int | None) -> K.ChainDriver:
    """The chain driver of the run, every lane at its point's start counts and random state."""
    width0 = max(p.u0.shape[1] for p in pts)
    u0 = np.zeros((1, width0, lanes.count), np.int64)
    rng0 = np.zeros(lanes.count, np.uint64)
    for j, p in enumerate(pts):
        sl = lanes.of_point(j)
        u0[0, : p.u0.shape[1], sl] = p.u0.T
        rng0[sl] = p.rng0
    params = K.lane_params([pts[j].point for j in lanes.order], [lanes.R] * len(pts))
    if progress is None:
        progress = sum(p.end * lanes.R * max(p.levels, 4) for p in pts) >= 5e10  # roughly > 10 s of work
    return K.ChainDriver(u0.astype(np.uint32), rng0, params, replacement=replacement,
                         levels=max(p.levels for p in pts), progress=progress, total=max(p.end for p in pts),
                         desc="supermarket", max_levels=max(p.limit for p in pts), bytes_per_level=per_level,
                         variant=variant, capacity=capacity is not None)


def _record_frames(drv: K.ChainDriver, sums: _Sums, lanes: _Lanes, recorders: frozenset, frames: int,
                   record_every: int, active: np.ndarray, measuring: np.ndarray) -> None:
    """One kernel call over ``frames`` record points, each ``record_every`` steps on."""
    out = drv.run(record_every, observe="sums", active=drv.mask(active), frames=frames)
    sums.widen(drv.levels + 1)
    sums.add(drv, out, measuring)
    # the driver keeps every frame of a call at its current width (it pads them on growth)
    fr = K.pad_levels(np.stack([f[0] for f in out["frames"]]), drv.levels + 1, axis=1)[
        ..., drv.pos[: drv.lanes]
    ]
    for j in recorders:
        sums.traj[j].append(fr[..., lanes.of_point(j)].copy())


def _advance(drv: K.ChainDriver, sums: _Sums, steps: int, active: np.ndarray, measuring: np.ndarray,
             flows: bool, capacity: int | None) -> None:
    """Advance the active lanes ``steps`` steps, adding the sums of the lanes that measure."""
    observe = "flow" if flows else "sums"
    if not measuring.any() and steps * drv.width >= BURN_IN_KERNEL_WORK:
        observe = "seen"  # a long burn-in: its own, faster kernel
    lost_before = drv.lost() if capacity is not None else None
    out = drv.run(steps, observe=observe, active=drv.mask(active))
    if capacity is not None:
        sums.lost[measuring] += (drv.lost() - lost_before)[measuring]
    sums.widen(drv.levels + 1)
    if measuring.any():
        sums.add(drv, out, measuring)


def _read_at(drv: K.ChainDriver, sums: _Sums, lanes: _Lanes, cuts: _Cuts, t: int) -> None:
    """At cut t: close the batches that end there and record the points that record there."""
    u_now = None
    for j in cuts.batch_ends:
        sl = lanes.of_point(j)
        if t in cuts.batch_ends[j]:
            sums.end_batch(j, sl)
        if t in cuts.record_at[j]:
            if u_now is None:
                u_now = drv.counts()[0]
            sums.traj[j].append(u_now[None, :, sl].copy())


def _drive(drv: K.ChainDriver, sums: _Sums, lanes: _Lanes, cuts: _Cuts, record_every: int | None,
           flows: bool, capacity: int | None) -> None:
    """Run every lane to its end, from cut to cut, summing into ``sums``."""
    t, i = 0, 0
    while i < len(cuts.at):
        active = lanes.stop > t
        measuring = active & (lanes.burn <= t)
        k = cuts.frame_run(i, t, record_every)
        # (the level-flow sums and the lost arrivals of the bounded model take the general path)
        if k - i >= 2 and not flows and capacity is None:
            _record_frames(drv, sums, lanes, cuts.recorders[i], k - i, record_every, active, measuring)
            t, i = cuts.at[k - 1], k
            for j in cuts.batch_ends:  # (its frames are recorded already)
                if t in cuts.batch_ends[j]:
                    sums.end_batch(j, lanes.of_point(j))
            continue
        cut = cuts.at[i]
        i += 1
        if cut > t:
            _advance(drv, sums, cut - t, active, measuring, flows, capacity)
            t = cut
        _read_at(drv, sums, lanes, cuts, t)


def _result(p: Plan, j: int, sl: slice, sums: _Sums, cuts: _Cuts, peak: np.ndarray, counts: np.ndarray,
            state: np.ndarray, record_every: int | None, variant_name: str,
            capacity: int | None) -> SupermarketResult:
    """Point j's result from the run's sums over its lanes ``sl``."""
    R = sl.stop - sl.start
    L = K.final_levels(p.levels, int(peak[sl].max()), p.limit)
    w = L + 1
    fit = lambda a: K.pad_levels(a, max(w, a.shape[0]))[:w]  # noqa: E731
    tail = fit(sums.u[:, sl]).astype(np.float64).T / float(p.steps * p.n)
    busy = fit(sums.busy[:, sl]).T / p.steps  # P(u_i > 0) = P(max length >= i)
    busy[:, 0] = 1.0
    max_dist = busy - np.concatenate([busy[:, 1:], np.zeros((R, 1))], axis=1)
    nz = busy > 0
    max_length = (L - np.argmax(nz[:, ::-1], axis=1)).astype(np.int64)
    lengths = np.diff([p.burn_in] + sorted(cuts.batch_ends[j]))
    bt = np.stack([fit(b).astype(np.float64).T for b in sums.batches[j]], axis=1) \
        / (lengths[None, :, None] * float(p.n))
    tr = None
    if sums.traj[j]:  # blocks (F, L_b+1, R) -> (R, frames, L+1)
        wide = max(w, max(b.shape[1] for b in sums.traj[j]))
        tr = np.concatenate([K.pad_levels(b, wide, axis=1)[:, :w] for b in sums.traj[j]], axis=0)
        tr = np.ascontiguousarray(tr.transpose(2, 0, 1)).astype(np.int64)
    flow = bflow = None
    if sums.flow is not None:  # exact integer sums / (steps 2^FLOW_BITS), each rounded once to float64
        unit = 2**K.FLOW_BITS
        flow = _ratio(fit(sums.flow[:, sl]).T, p.steps * unit)
        bflow = np.stack(
            [_ratio(fit(b).T, int(ln) * unit) for b, ln in zip(sums.flow_batches[j], lengths)], axis=1
        )
    return SupermarketResult(
        point=p.point, steps=p.steps, burn_in=p.burn_in, seed=p.seed, tail_fraction=tail,
        max_length=max_length, max_length_distribution=max_dist,
        counts=np.ascontiguousarray(fit(counts[:, sl]).T), batch_tail_fraction=bt,
        state=state[sl].copy(), trajectory=tr, record_every=record_every, flow_fraction=flow,
        batch_flow_fraction=bflow, variant=variant_name, capacity=capacity,
        lost_arrivals=sums.lost[sl].copy() if capacity is not None else None)


def _run(pts: list[Plan], R: int, replacement: bool, batches: int, record_every: int | None,
         progress: bool | None, flows: bool = False, variant: K.EventMap = K.MODEL,
         variant_name: str = "model", capacity: int | None = None) -> list[SupermarketResult]:
    """Run the planned points as lanes of one chain kernel and return one result per point.

    Each point's R replicas are R lanes; the lanes advance from cut to cut (:class:`_Cuts`: the
    steps where a burn-in ends, a batch ends, a frame is recorded or a point ends), and the exact
    time sums of the measuring lanes are kept on the host (:class:`_Sums`). The memory the run
    needs per tracked level is checked before it starts (and by the driver at every growth).

    Args:
        pts: the validated points (:func:`plan_points`), each with its start, seed and level cap.
        R: replicas per point.
        replacement: the sampling rule of every point.
        batches: equal batches of each point's measured steps.
        record_every: record the counts every so many measured steps (None: no trajectory).
        progress: show a progress bar (None: only for runs of more than about 10 s).
        flows: also keep the level-flow sums.
        variant: the event map (the model or a near wrong model).
        variant_name: its display name, carried by the results.
        capacity: the bounded model's capacity (None: unbounded).

    Returns:
        One :class:`SupermarketResult` per point, in the order of ``pts``.
    """
    lanes = _Lanes.of(pts, R)
    per_level = _check_memory(pts, lanes.count, batches, record_every)
    big = any(p.steps * p.n >= 2**62 for p in pts)
    cuts = _Cuts.of(pts, batches, record_every)
    drv = _driver(pts, lanes, replacement, progress, per_level, variant, capacity)
    try:
        sums = _Sums(drv.levels + 1, lanes.count, len(pts), big, flows)
        _drive(drv, sums, lanes, cuts, record_every, flows, capacity)
        peak, counts, state = drv.peak(), drv.counts()[0], drv.rng()
    finally:
        drv.close()
    results = [
        _result(
            p, j, lanes.of_point(j), sums, cuts, peak, counts, state, record_every, variant_name, capacity
        )
        for j, p in enumerate(pts)
    ]
    simulations.ran_supermarket(pts, results, variant, capacity)  # whoever listens (e.g. a provenance record)
    return results


def _ratio(a: np.ndarray, den: int) -> np.ndarray:
    """Integer array (object or int) / a positive integer, each quotient correctly rounded to float64."""
    return np.array([int(x) / den for x in np.asarray(a, dtype=object).ravel()], dtype=np.float64).reshape(
        a.shape
    )
