"""Mixing time of the supermarket model by the monotone coupling of its count chain.

Model: the count chain u_i = #queues with length >= i of :mod:`qlib.supermarket.chain`
(n queues, Exp(1) service, arrivals at rate lam n joining the shortest of d sampled queues),
uniformised at rate n(1 + lam): one unit of model time is (1 + lam) n steps.

Coupling (docs/models.md, "monotone coupling"): feed several copies of the chain the SAME
random words (arrival or not, and the arrival uniform U or the departure rank r). The level an
event touches is non-decreasing in u, so u <= u' componentwise before a step implies it after.
Hence a chain from any start between a bottom (all queues empty) and a top (all queues at
``top_length``) stays sandwiched, and once bottom and top coincide every start in between has
coalesced with them. With T_meet the meeting time of bottom and top,

    d_TV(law of u(t) from x, pi) <= P(T_meet > t) + pi(some queue longer than top_length)

for every x between bottom and top (the second term is the stationary mass the top does not
dominate; it is negligible once ``top_length`` >= k + 2).

The total number of customers D = sum_i (u'_i - u_i) between two ordered coupled chains never
increases: arrivals add one customer to both, and a departure removes one from the top alone
exactly when its rank r lands on a queue that is busy in the top and idle in the bottom
(u_1 <= r < u'_1). The chains meet when D = 0, which is how the meeting is detected (for free).

Public API: :func:`meeting_times` (and :func:`meeting_times_many` over many parameter points,
each bit-identical to its own call), :func:`coupled_paths` (trajectories of several coupled
starts), :func:`l1_distance`, :func:`tv_distance`, :func:`tv_noise_floor`, and the small-n
oracle :func:`exact_coupling` (exact meeting-time law and marginal laws on the pair chain).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qlib import _rng
from qlib import _validate as V
from qlib.supermarket import chain as K
from qlib.supermarket import simulation as S
from qlib.supermarket.initial import start_counts
from qlib.supermarket.point import Point, as_point
from qlib.supermarket.simulation import counts_all_at

__all__ = ["meeting_times", "meeting_times_many", "coupled_paths", "CoupledPaths", "l1_distance",
           "tv_distance", "tv_noise_floor", "exact_coupling", "ExactCoupling"]


# --------------------------------------------------------------------------- helpers

def _resolve_starts(point: Point, starts: Sequence[Any], replicas: int, where: str = "starts"
                    ) -> list[np.ndarray]:
    """Each start as counts of shape (levels+1, replicas), padded to a common number of levels."""
    us = []
    for j, s in enumerate(starts):
        try:
            u = start_counts(point, s)
        except ValueError as e:
            raise ValueError(f"{where}[{j}]: {e}") from None
        if u.ndim == 2 and u.shape[0] != replicas:
            raise ValueError(
                f"{where}[{j}] has one row per replica, so it needs {replicas} rows; got {u.shape[0]}"
            )
        us.append(np.broadcast_to(u if u.ndim == 2 else u[None], (replicas, u.shape[-1])))
    top = max(u.shape[1] for u in us)
    # every start as int64 counts (and their uint32 device copy), before building them
    V.memory("replicas", float(replicas) * len(us) * top * 16.0,
             f"{len(us)} starts x {replicas} replicas x {top} levels x 16 bytes")
    return [np.pad(u, ((0, 0), (0, top - u.shape[1]))).T.astype(np.int64) for u in us]


def _check_ordered(lower: np.ndarray, upper: np.ndarray, what: str) -> None:
    if np.any(lower > upper):
        raise ValueError(f"{what}: the lower start must be <= the upper start in every count u_i "
                         "(the coupling sandwiches only ordered starts)")


def _replica_states(seed: int, replicas: int) -> np.ndarray:
    return _rng.replica_states_np(seed, np.arange(replicas))


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


# --------------------------------------------------------------------------- meeting times

@dataclass
class _MeetPoint:
    point: Point
    seed: int
    max_steps: int
    lo: np.ndarray  # (L0+1, R)
    hi: np.ndarray  # (L0+1, R)
    levels: int


def _meet_point(where: str, n, d, lam, *, one_minus_lam, replicas, seed, top_length, max_steps, replacement,
                bottom, top, ordered, levels, capacity=None) -> _MeetPoint:
    point = as_point(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement, simulation=True)
    n = point.n
    seed = V.integer("seed", seed, low=0, high=2**63 - 1)
    top_length = V.integer("top_length", top_length, low=0)
    max_steps = V.integer("max_steps", max_steps, low=1, high=2**62)
    V.work("max_steps", float(max_steps) * replicas)  # before any start is built
    if top is None:
        V.memory("top_length", 16.0 * replicas * (top_length + 1),
                 f"the top start: {replicas} replicas x {top_length + 1} levels x 16 bytes")
        top = {"counts": counts_all_at(n, top_length)}  # a dict: n entries of n would be ambiguous
    lo0, hi0 = _resolve_starts(point, [bottom, top], replicas, where="bottom/top")
    if ordered:
        _check_ordered(lo0, hi0, f"{where}bottom/top")
    L0 = lo0.shape[0] - 1
    if capacity is not None:  # the bounded model: the cap is the capacity, the starts must fit
        if L0 > capacity and (np.any(lo0[capacity + 1:] > 0) or np.any(hi0[capacity + 1:] > 0)):
            raise ValueError(f"{where}bottom/top: a start has a queue longer than capacity = {capacity}")
        return _MeetPoint(point, seed, max_steps, lo0[: capacity + 1], hi0[: capacity + 1], capacity)
    L = max(L0 + 3, 4) if levels is None else V.integer("levels", levels, low=L0)
    return _MeetPoint(point, seed, max_steps, lo0, hi0, L)


def meeting_times(n: int | Point, d: int | None = None, lam: float | None = None, *, replicas: int, seed: int,
                  top_length: int, max_steps: int, one_minus_lam: float | None = None,
                  replacement: bool | None = None,
                  bottom: Any = "empty", top: Any = None, ordered: bool = True, levels: int | None = None,
                  progress: bool | None = None, capacity: int | None = None) -> np.ndarray:
    """Meeting times of the monotone coupling from the bottom and the top start.

    Two count chains are driven by the same draws, the bottom one from ``bottom``, the top one
    from ``top``. P(T_meet > t) bounds the total-variation distance to equilibrium at step t from
    every start in between (the coupling inequality). Replica r uses the stream
    ``_rng.replica_states(seed, r)``, so its meeting time does not depend on ``replicas``.

    Args:
        n: number of queues, or a :class:`~qlib.supermarket.point.Point` in place of
            (n, d, lam, replacement) (see :func:`qlib.supermarket.simulate`).
        d: choices per arrival.
        lam: arrival rate per queue (or ``one_minus_lam``).
        replicas: independent pairs.
        seed: seed of the random streams.
        top_length: the top start's queue length (all n queues at it) when ``top`` is None.
        max_steps: steps at most; a pair that has not met by then reads ``inf``.
        one_minus_lam: 1 - lam in place of ``lam``.
        replacement: sample with replacement (default True) or without.
        bottom: the bottom start (default: all queues empty), as :func:`qlib.supermarket.simulate`'s
            ``initial``.
        top: the top start (default: all n queues at ``top_length``); ``bottom <= top`` is required.
        ordered: False lets the starts be unordered (e.g. a good start against a stationary
            sample, one row per replica): the meeting is then detected by equality of all counts;
            the coupling inequality still holds.
        levels: the initial number of tracked lengths (speed only: it grows on demand).
        progress: show a progress bar.
        capacity: L for the coupling of the bounded model (docs/models.md#bounded-model), whose top
            state is all queues at L (``top_length`` <= L); an arrival lost in the top only also
            closes the gap, so the meeting is detected by equality of all counts.

    Returns:
        (replicas,) float jump-chain steps until the two chains coincide (one unit of model time
        is (1 + lam) n steps), ``inf`` where they have not met within ``max_steps``.

    Raises:
        ValueError: naming the parameter out of its range (or starts that are not ordered), before
            any compile.
    """
    replicas = V.integer("replicas", replicas, low=1)
    ordered = _bool("ordered", ordered)
    capacity = _capacity(capacity, top_length)
    pt = _meet_point(
        "",
        n,
        d,
        lam,
        one_minus_lam=one_minus_lam,
        replicas=replicas,
        seed=seed,
        top_length=top_length,
        max_steps=max_steps,
        replacement=replacement,
        bottom=bottom,
        top=top,
        ordered=ordered,
        levels=levels,
        capacity=capacity,
    )
    return _run_meeting([pt], replicas, pt.point.replacement, ordered, progress, capacity)[0]


def _capacity(capacity: Any, top_length: Any) -> int | None:
    if capacity is None:
        return None
    capacity = S.checked_capacity(capacity)
    if isinstance(top_length, (int, np.integer)) and top_length > capacity:
        raise ValueError(
            f"top_length must be <= capacity = {capacity} in the bounded model; got {top_length}"
        )
    return capacity


def meeting_times_many(points: Sequence[tuple | Point], *, replicas: int, top_length: int | Sequence[int],
                       max_steps: int | Sequence[int], seeds: Sequence[int] | None = None,
                       one_minus_lam: float | Sequence[float] | None = None, replacement: bool | None = None,
                       bottom: Any = "empty", top: Any = None, ordered: bool = True,
                       levels: int | None = None, progress: bool | None = None,
                       capacity: int | None = None) -> list[np.ndarray]:
    """:func:`meeting_times` at many parameter points in one kernel: entry p is bit-identical to
    ``meeting_times(*points[p], replicas=replicas, seed=seeds[p], top_length=top_length[p],
    max_steps=max_steps[p], ...)``.

    ``points`` are (n, d, lam) or Points, or (n, d) with ``one_minus_lam`` one value per point
    (or one for all); they share one ``replacement`` (the points' own, or True). ``top_length``
    and ``max_steps`` are an int or one per point; ``seeds`` one per point (default 0, 1, ...,
    P-1); ``bottom`` and ``top`` one start for all points or a list of one
    per point. Lanes are ordered by ``max_steps``; every lane stops at its own ``max_steps``,
    and the run ends as soon as every replica of every point has met.

    Args:
        points: (n, d, lam) or Points, or (n, d) with ``one_minus_lam``.
        replicas: pairs per point.
        top_length, max_steps: an int or one per point.
        seeds: one per point.
        one_minus_lam, replacement, bottom, top, ordered, levels, progress, capacity: as in
            :func:`meeting_times`; ``bottom`` and ``top`` may be one per point.

    Returns:
        One (replicas,) array of meeting times per point.

    Raises:
        ValueError: naming the parameter (``points[j]`` for a point), before any compile.
    """
    if isinstance(points, (str, bytes)) or not isinstance(points, Sequence) or len(points) < 1:
        raise ValueError(f"points must be a non-empty sequence of (n, d, lam); got {points!r}")
    P = len(points)
    replicas = V.integer("replicas", replicas, low=1)
    ordered = _bool("ordered", ordered)
    if replacement is None:  # the points' own (one kernel has one sampling rule)
        replacement = next((p.replacement for p in points if isinstance(p, Point)), True)
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement must be True or False; got {replacement!r}")

    def per(name, v):
        if isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim > 0):
            if len(v) != P:
                raise ValueError(f"{name} must be one value or one per point ({P}); got {len(v)}")
            return list(v)
        return [v] * P

    def per_start(v):
        return list(v) if isinstance(v, (list, tuple)) and len(v) == P and not all(
            isinstance(x, (int, np.integer)) for x in v) else [v] * P

    seeds_l = list(range(P)) if seeds is None else per("seeds", seeds)
    if seeds is not None and (
        not isinstance(seeds, (list, tuple, np.ndarray))
        or (isinstance(seeds, np.ndarray) and seeds.ndim != 1)
    ):
        raise ValueError(f"seeds must be a sequence of one seed per point ({P}); got {seeds!r}")
    oml_l = per("one_minus_lam", one_minus_lam) if one_minus_lam is not None else [None] * P
    pts = []
    for j, (pt, oml, tl, ms, sd, b, tp) in enumerate(
        zip(
            points,
            oml_l,
            per("top_length", top_length),
            per("max_steps", max_steps),
            seeds_l,
            per_start(bottom),
            per_start(top),
        )
    ):
        want = 3 if oml is None else 2
        if not isinstance(pt, Point) and (not isinstance(pt, (tuple, list)) or len(pt) != want):
            raise ValueError(
                f"points[{j}] must be {'(n, d, lam)' if want == 3 else '(n, d) (one_minus_lam is given)'}"
                f" or a Point; got {pt!r}"
            )
        args = (pt, None, None) if isinstance(pt, Point) else (pt[0], pt[1], pt[2] if oml is None else None)
        try:
            pts.append(
                _meet_point(
                    f"points[{j}]: ",
                    *args,
                    one_minus_lam=oml,
                    replicas=replicas,
                    seed=sd,
                    top_length=tl,
                    max_steps=ms,
                    replacement=replacement,
                    bottom=b,
                    top=tp,
                    ordered=ordered,
                    levels=levels,
                    capacity=_capacity(capacity, tl),
                )
            )
        except ValueError as err:
            raise ValueError(f"points[{j}]: {err}") from None
    V.work("max_steps", float(sum(p.max_steps for p in pts)) * replicas)
    return _run_meeting(pts, replicas, bool(replacement), ordered, progress, _capacity(capacity, None))


def _run_meeting(pts: list[_MeetPoint], R: int, replacement: bool, ordered: bool,
                 progress: bool | None, capacity: int | None = None) -> list[np.ndarray]:
    P = len(pts)
    order = sorted(range(P), key=lambda j: -pts[j].max_steps)
    lane0 = {j: i * R for i, j in enumerate(order)}
    lanes = P * R
    width = max(p.lo.shape[0] for p in pts)
    u0 = np.zeros((2, width, lanes), np.int64)
    rng0 = np.zeros(lanes, np.uint64)
    stop = np.zeros(lanes, np.int64)
    for j, p in enumerate(pts):
        sl = slice(lane0[j], lane0[j] + R)
        u0[0, : p.lo.shape[0], sl], u0[1, : p.hi.shape[0], sl] = p.lo, p.hi
        rng0[sl] = _replica_states(p.seed, R)
        stop[sl] = p.max_steps
    D0 = (u0[1] - u0[0]).sum(axis=0) if ordered else np.abs(u0[1] - u0[0]).sum(axis=0)
    T0 = np.where(D0 == 0, 0, -1).astype(np.int64)
    params = K.lane_params([pts[j].point for j in order], [R] * P)
    end = int(stop.max())
    if progress is None:
        progress = sum(p.max_steps for p in pts) * R >= 2e9
    L0 = max(p.levels for p in pts)
    per_level = K.ChainDriver.device_bytes_per_level(lanes, 2)
    V.memory("replicas", (L0 + 1) * per_level, f"{L0 + 1} levels x {lanes} lanes x 2 chains")
    drv = K.ChainDriver(
        u0.astype(np.uint32),
        rng0,
        params,
        replacement=replacement,
        levels=L0,
        progress=progress,
        total=end,
        desc="meeting times",
        max_levels=max(L0, K.level_limit(width, end)),
        bytes_per_level=per_level,
        capacity=capacity is not None,
    )
    # bounded: a lost arrival can close the gap too, which the ordered (D) test does not count
    ordered = ordered and capacity is None
    try:
        meet = drv.meeting_state(D0.astype(np.int64), T0)
        t = 0
        for cut in sorted(set(stop.tolist())):
            active = (stop > t) & (drv.lanes_of(meet[1]) < 0)
            if not active.any():
                break
            out = drv.run(cut - t, observe="meet" if ordered else "meet_unordered",
                          active=drv.mask(active), meet=meet)
            meet = out["meet"]
            t = cut
        T = drv.lanes_of(meet[1]).astype(float)
    finally:
        drv.close()
    T[T < 0] = np.inf
    return [T[lane0[j]: lane0[j] + R].copy() for j in range(P)]


# --------------------------------------------------------------------------- coupled paths

@dataclass(frozen=True)
class CoupledPaths:
    """Trajectories of several coupled chains (the same draws drive every chain).

    ``counts[c, r, f, i]`` (chains, replicas, frames, levels+1) is u_i of chain c (in the
    order of ``starts``) in replica r at step ``times[f]`` (times[0] = 0, then every
    ``record_every`` steps). One unit of model time is (1 + lam) n steps.
    """

    point: Point
    seed: int
    times: np.ndarray
    counts: np.ndarray

    n = property(lambda self: self.point.n, doc="number of queues")
    d = property(lambda self: self.point.d, doc="choices per arrival")
    lam = property(lambda self: self.point.lam, doc="arrival rate per queue")
    replacement = property(lambda self: self.point.replacement, doc="sampling with replacement")

    @property
    def model_time(self) -> np.ndarray:
        """``times`` in units of model time (mean service times)."""
        return self.times / ((1.0 + self.lam) * self.n)


def coupled_paths(n: int | Point, d: int | None = None, lam: float | None = None,
                  starts: Sequence[Any] | None = None, *, steps: int, replicas: int, seed: int,
                  record_every: int = 1, one_minus_lam: float | None = None, replacement: bool | None = None,
                  levels: int | None = None, progress: bool | None = None) -> CoupledPaths:
    """Run one coupled chain per entry of ``starts`` and record all of them.

    Each start is anything :func:`qlib.supermarket.initial_counts` accepts ("empty", "fluid",
    counts, queue lengths, one row per replica). Every chain of replica r is driven by the
    same stream ``_rng.replica_states(seed, r)`` as :func:`meeting_times`, so the first frame
    at which two of these chains agree is the meeting time that function reports. Frames are
    taken at steps 0, ``record_every``, ..., ``steps`` (``steps`` must be a multiple of
    ``record_every``). Each chain alone is the supermarket count chain (tested).

    Args:
        n, d, lam, one_minus_lam, replacement: the point, as in :func:`meeting_times`.
        starts: the starts, one chain each.
        steps: steps recorded, a multiple of ``record_every``.
        replicas: independent sets of coupled chains.
        seed: seed of the random streams.
        record_every: steps between frames.
        levels: the initial number of tracked lengths.
        progress: show a progress bar.

    Returns:
        A :class:`CoupledPaths`.

    Raises:
        ValueError: naming the parameter out of its range, before any compile.
    """
    point = as_point(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement, simulation=True)
    replacement = point.replacement
    if isinstance(starts, (str, np.ndarray)) or not isinstance(starts, Sequence) or len(starts) < 1:
        raise ValueError("starts must be a non-empty list of initial states; got "
                         f"{type(starts).__name__}")
    replicas = V.integer("replicas", replicas, low=1)
    seed = V.integer("seed", seed, low=0, high=2**63 - 1)
    record_every = V.integer("record_every", record_every, low=1)
    steps = V.integer("steps", steps, low=record_every)
    if steps % record_every:
        raise ValueError(f"steps must be a multiple of record_every = {record_every}; got {steps}")
    V.work("steps", float(steps) * replicas * len(starts))
    u0 = _resolve_starts(point, starts, replicas)
    L0 = u0[0].shape[0] - 1
    L = max(L0 + 3, 4) if levels is None else V.integer("levels", levels, low=L0)
    nframes = steps // record_every
    if progress is None:
        progress = steps * replicas * len(starts) >= 2e9
    C = len(starts)
    # device state, plus every frame kept on the host (int64) and stacked at the end
    per_level = K.ChainDriver.device_bytes_per_level(replicas, C) + replicas * C * (nframes + 1) * 16.0
    V.memory("record_every", (L + 1) * per_level,
             f"{nframes + 1} frames x {C} chains x {replicas} replicas x {L + 1} levels x 16 bytes")
    params = K.lane_params([point], [replicas])
    drv = K.ChainDriver(
        np.stack(u0).astype(np.uint32),
        _replica_states(seed, replicas),
        params,
        replacement=replacement,
        levels=L,
        progress=progress,
        total=steps,
        desc="coupled paths",
        max_levels=max(L, K.level_limit(L0 + 1, steps)),
        bytes_per_level=per_level,
    )
    try:
        first = drv.lanes_of(drv.state.u)
        out = drv.run(record_every, observe="seen", frames=nframes)
        frames = [first] + [drv.lanes_of(f) for f in out["frames"]]
        Lf = K.final_levels(L, int(drv.peak().max()), drv.max_levels)
    finally:
        drv.close()
    arr = np.stack([K.pad_levels(f, max(Lf + 1, f.shape[1]), axis=1)[:, : Lf + 1] for f in frames]).astype(
        np.int64
    )
    # (F, C, L+1, R) -> (C, R, F, L+1)
    counts = np.ascontiguousarray(arr.transpose(1, 3, 0, 2))
    times = np.arange(nframes + 1, dtype=np.int64) * record_every
    return CoupledPaths(point=point, seed=seed, times=times, counts=counts)


# the small-n oracle and the distance estimators, importable from here as before
from qlib.supermarket.coupling_exact import ExactCoupling, exact_coupling  # noqa: E402
from qlib.supermarket.distances import l1_distance, tv_distance, tv_noise_floor  # noqa: E402
