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

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from qlib import _rng
from qlib import cache as _cache
from qlib import _validate as V
from qlib.supermarket import chain as K
from qlib.supermarket.point import MAX_N, Point, as_point, check_point  # noqa: F401  (check_point: older import path)
from qlib.supermarket.theory import fluid_fixed_point, predicted_max_length

__all__ = ["SupermarketResult", "simulate", "simulate_many", "Point", "check_point", "initial_counts",
           "counts_from_lengths", "counts_all_at", "default_levels", "MAX_N"]


# --------------------------------------------------------------------------- initial states

def counts_from_lengths(lengths: Any) -> np.ndarray:
    """Counts u_i = #queues with length >= i, i = 0..max, shape (max+1,), from queue lengths (n,)."""
    q = V.array("lengths", lengths)
    if q.ndim != 1 or q.size < 1:
        raise ValueError(f"lengths must be a non-empty 1-D array of queue lengths; got shape {q.shape}")
    if q.dtype.kind not in "iuf" or np.any(~np.isfinite(q)) or np.any(q < 0) \
            or np.any(q != np.floor(q)):
        raise ValueError("lengths must hold non-negative integers")
    V.memory("lengths", 16.0 * (float(q.max()) + 1), f"counts up to the longest queue, {float(q.max()):.3g}, x 16 bytes")
    q = q.astype(np.int64)
    hist = np.bincount(q)
    return np.cumsum(hist[::-1])[::-1].astype(np.int64)


def counts_all_at(n: int, length: int) -> np.ndarray:
    """Counts of the state where every one of the n queues has the given length, shape (length+1,)."""
    n = V.integer("n", n, low=1, high=MAX_N)
    length = V.integer("length", length, low=0)
    V.memory("length", 8.0 * (length + 1), f"{length + 1} levels x 8 bytes")
    return np.full(length + 1, n, dtype=np.int64)


def _valid_counts(u: np.ndarray, n: int) -> bool:
    return (u.ndim >= 1 and u.shape[-1] >= 1 and np.all(u[..., 0] == n) and np.all(u >= 0)
            and np.all(np.diff(u, axis=-1) <= 0))


def initial_counts(n: int, d: int, lam: float | None, initial: Any, replacement: bool = True, *,
                   one_minus_lam: float | None = None) -> np.ndarray:
    """Resolve ``initial`` to counts: shape (levels+1,) or (replicas, levels+1).

    ``initial`` is "empty", "fluid" (integer counts nearest n times the fluid fixed point),
    ``{"counts": u}``, ``{"lengths": q}``, or a bare array: counts u (u_0 = n, non-increasing;
    1-D, or 2-D with one row per replica) or a length-n vector of queue lengths. At d = 1 the
    fluid profile is geometric, n lam^i, with about log(2n)/(1 - lam) levels: its memory is
    checked before it is built (ValueError naming ``initial`` when it would not fit). ``n``,
    ``d``, ``lam`` (or ``one_minus_lam``) and ``replacement`` are checked as in :func:`simulate`.
    """
    return _initial_counts(as_point(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement,
                                    simulation=True), initial)


def _initial_counts(point: Point, initial: Any) -> np.ndarray:
    """:func:`initial_counts` of a validated point."""
    n, d, one_minus_lam, replacement = point.n, point.d, point.one_minus_lam, point.replacement
    if isinstance(initial, str):
        V.choice("initial", initial, ("empty", "fluid"))
        if initial == "empty":
            return np.array([n, 0], dtype=np.int64)
        kw = point.rate
        fp = lambda L: fluid_fixed_point(d, levels=L, replacement=replacement,  # noqa: E731
                                         n=None if replacement else n, **kw)
        if d == 1:  # u_i = rint(n lam^i) > 0 up to i = log(2n)/log(1/lam)
            levels = int(math.floor(math.log(2 * n) / -math.log1p(-one_minus_lam))) + 2
            V.memory("initial", (levels + 1) * 8.0 * 4,
                     f"initial='fluid' at d = 1 and 1 - lam = {one_minus_lam:.3g}: {levels + 1} levels x 8 bytes x 4 copies")
        else:
            k = predicted_max_length(d, **kw)
            levels = int(min(k, 60)) + 4
        s = fp(levels)
        u = np.rint(n * s).astype(np.int64)
        while u[-1] > 0:  # extend until the rounded profile ends
            levels *= 2
            u = np.rint(n * fp(levels)).astype(np.int64)
        last = int(np.nonzero(u)[0][-1])
        return u[: last + 2]
    if isinstance(initial, Mapping):
        if set(initial) == {"lengths"}:
            q = V.array("initial['lengths']", initial["lengths"])
            if q.ndim != 1 or q.size != n:
                raise ValueError(f"initial['lengths'] must be a 1-D array of n = {n} queue lengths; got shape {q.shape}")
            return counts_from_lengths(q)
        if set(initial) == {"counts"}:
            u = V.int_array("initial['counts']", initial["counts"])
            if not _valid_counts(u, n) or u.ndim > 2:
                raise ValueError(f"initial['counts'] must have u_0 = n = {n}, be non-negative and non-increasing "
                                 "(1-D, or 2-D with one row per replica)")
            return u
        raise ValueError(f"initial as a mapping must be {{'counts': u}} or {{'lengths': q}}; got keys {sorted(initial)}")
    a = V.array("initial", initial)
    if a.dtype == object or a.ndim == 0:
        raise ValueError(f"initial must be 'empty', 'fluid', an array of counts or of queue lengths; got {initial!r}")
    u = V.int_array("initial", a)
    as_counts = _valid_counts(u, n) and u.ndim <= 2
    as_lengths = u.ndim == 1 and u.size == n and np.all(u >= 0)
    if as_counts and as_lengths and not np.array_equal(counts_from_lengths(u), u):
        raise ValueError("initial is ambiguous (valid both as counts and as n queue lengths); "
                         "pass {'counts': u} or {'lengths': q}")
    if as_counts:
        return u
    if as_lengths:
        return counts_from_lengths(u)
    raise ValueError(f"initial must be counts (u_0 = n = {n}, non-increasing, non-negative) or a vector of "
                     f"n = {n} non-negative queue lengths; got shape {u.shape}")


def default_levels(d: int, lam: float | None, u0: np.ndarray, steps: int | None = None, *,
                   one_minus_lam: float | None = None) -> int:
    """The initial level cap of a run of ``steps`` steps (burn-in included) from counts ``u0``.

    k + 3 (k the predicted maximum); at d = 1 the level a queue exceeds with probability 1e-3,
    log(1e-3)/log(lam) + 4, but never more than the run can reach: the longest queue grows by
    at most one per step, so the cap is at most (levels of u0) + steps (then it grows on demand).
    """
    return _default_levels(Point(None, d, lam, one_minus_lam=one_minus_lam), u0, steps)


def _default_levels(point: Point, u0: np.ndarray, steps: int | None = None) -> int:
    """:func:`default_levels` of a validated point."""
    k = predicted_max_length(point)
    if math.isfinite(k):
        guess = int(k) + 3
    else:
        guess = int(math.ceil(math.log(1e-3) / math.log1p(-point.one_minus_lam))) + 4
    if steps is not None:
        guess = min(guess, u0.shape[-1] + int(steps))
    return max(guess, u0.shape[-1] + 1, 4)


# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class SupermarketResult:
    """Output of :func:`simulate`. Arrays have one row per replica (R = ``replicas``, L = ``levels``).

    - ``tail_fraction[r, i]`` (R, L+1): time average of u_i/n (fraction of queues with
      length >= i) over the ``steps`` steps after burn-in.
    - ``max_length[r]`` (R,): the largest queue length present at any step after burn-in.
    - ``max_length_distribution[r, i]`` (R, L+1): fraction of those steps at which the maximum was i.
    - ``counts[r, i]`` (R, L+1): the final u_i.
    - ``state[r]`` (R,) uint64: the final random state of replica r (pass the result as
      ``initial`` to continue the same chains).
    - ``batch_tail_fraction[r, b, i]`` (R, batches, L+1): ``tail_fraction`` over each of
      ``batches`` equal batches.
    - ``trajectory[r, t, i]`` (R, steps // record_every, L+1): u_i after every
      ``record_every`` steps (only if asked for).
    - ``flow_fraction[r, i]`` (R, L+1), with ``flows=True`` only: time average of g(u_i), the
      probability that all d sampled queues have length >= i under the *model's* d and sampling
      rule ((u_i/n)^d, or C(u_i, d)/C(n, d) without replacement), over the same steps as
      ``tail_fraction``; lam ``flow_fraction[:, j-1]`` is the rate per queue at which arrivals
      enter level j, so in equilibrium E[u_j/n] = lam E[g(u_{j-1})] (docs/models.md#level-flow).
      Exact time sums of g rounded to 2^-40 per step (chain.FLOW_BITS), so bit-identical however
      the run is batched or sharded. ``batch_flow_fraction`` (R, batches, L+1) per batch.
    - ``capacity``, ``lost_arrivals`` (R,): the bounded model (each queue holds at most
      ``capacity`` customers, docs/models.md#bounded-model) and the arrivals it lost at a full
      queue in the measured steps (None without a capacity); ``loss_probability`` their share.
    - ``variant``: the event map simulated, "model" or a near wrong model of
      :mod:`qlib.supermarket.variants` (its name, e.g. "eta_greedy(0.01)").
    """

    point: Point  # the parameters simulated (1 - lam as given, when given as one_minus_lam)
    steps: int
    burn_in: int
    seed: int
    tail_fraction: np.ndarray
    max_length: np.ndarray
    max_length_distribution: np.ndarray
    counts: np.ndarray
    batch_tail_fraction: np.ndarray
    state: np.ndarray
    trajectory: np.ndarray | None = None
    record_every: int | None = None
    flow_fraction: np.ndarray | None = None
    batch_flow_fraction: np.ndarray | None = None
    variant: str = "model"
    capacity: int | None = None
    lost_arrivals: np.ndarray | None = None

    n = property(lambda self: self.point.n, doc="number of queues")
    d = property(lambda self: self.point.d, doc="choices per arrival")
    lam = property(lambda self: self.point.lam, doc="arrival rate per queue")
    one_minus_lam = property(lambda self: self.point.one_minus_lam, doc="1 - lam (as given, when given)")
    replacement = property(lambda self: self.point.replacement, doc="sampling with replacement")

    @property
    def replicas(self) -> int:
        return self.tail_fraction.shape[0]

    @property
    def levels(self) -> int:
        return self.tail_fraction.shape[1] - 1

    @property
    def queue_length_distribution(self) -> np.ndarray:
        """Time-average fraction of queues with length exactly i, (R, L+1): s_i - s_{i+1}."""
        t = self.tail_fraction
        return t - np.concatenate([t[:, 1:], np.zeros((t.shape[0], 1))], axis=1)

    @property
    def time(self) -> float:
        """Model time covered by the measured steps: steps / ((1 + lam) n)."""
        return self.steps / ((1.0 + self.lam) * self.n)

    def to_dataframe(self):
        """A tidy pandas DataFrame: one row per (replica, level i), with the point's parameters
        (n, d, lam, one_minus_lam, replacement), seed, steps and burn_in, then
        ``tail_fraction`` (time-average u_i/n), ``queue_length_fraction`` (length exactly i),
        ``max_length_probability`` (P(max = i)) and the final ``counts`` u_i."""
        import pandas as pd

        R, L1 = self.tail_fraction.shape
        p = self.point
        return pd.DataFrame({
            "n": p.n, "d": p.d, "lam": p.lam, "one_minus_lam": p.one_minus_lam, "replacement": p.replacement,
            "seed": self.seed, "steps": self.steps, "burn_in": self.burn_in,
            "replica": np.repeat(np.arange(R), L1), "level": np.tile(np.arange(L1), R),
            "tail_fraction": self.tail_fraction.ravel(),
            "queue_length_fraction": self.queue_length_distribution.ravel(),
            "max_length_probability": self.max_length_distribution.ravel(),
            "counts": self.counts.ravel(),
        })

    def tail_fraction_estimate(self):
        """Mean and standard error of ``tail_fraction``: over replicas if there are several,
        else by batch means of the single run (needs ``batches >= 2``)."""
        from qlib import stats

        if self.replicas >= 2:
            return stats.replica_mean(self.tail_fraction)
        if self.batch_tail_fraction.shape[1] >= 2:
            return stats.replica_mean(self.batch_tail_fraction[0])
        raise ValueError("an error bar needs replicas >= 2 or batches >= 2")

    @property
    def loss_probability(self) -> np.ndarray | None:
        """Bounded model: lost arrivals / expected arrivals (lam n per unit time) in the measured
        steps, per replica (R,), an estimate of P(an arrival is lost); None without a capacity."""
        if self.lost_arrivals is None:
            return None
        return self.lost_arrivals / (self.lam * self.n * self.time)

    def level_flow_residual(self):
        """The paired residual of the level-flow identity, Z_j = u_j/n - lam g(u_{j-1}) time-averaged,
        for j = 1..L+1 (index j - 1), as an :class:`qlib.stats.Estimate` over replicas (or batch
        means of one replica). Mean zero in equilibrium for JSQ(d) with the model's sampling rule
        (docs/models.md#level-flow); needs ``flows=True``."""
        from qlib import stats

        if self.flow_fraction is None:
            raise ValueError("the level-flow sums were not kept: simulate with flows=True")
        z = lambda t, f: np.concatenate([t[..., 1:], np.zeros(t.shape[:-1] + (1,))], axis=-1) - self.lam * f  # noqa: E731
        if self.replicas >= 2:
            return stats.replica_mean(z(self.tail_fraction, self.flow_fraction))
        if self.batch_flow_fraction.shape[1] >= 2:
            return stats.replica_mean(z(self.batch_tail_fraction[0], self.batch_flow_fraction[0]))
        raise ValueError("an error bar needs replicas >= 2 or batches >= 2")


# --------------------------------------------------------------------------- one point's plan

@dataclass
class _Plan:
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
                raise ValueError(f"{where}initial is a result with {name} = {shown[0]!r}, but {name} = {shown[1]!r} "
                                 f"was asked for; a run continues only with the same {name}")
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
        u0 = _initial_counts(point, initial)
    except ValueError as e:
        raise ValueError(f"{where}{e}") from None
    if u0.ndim == 2 and u0.shape[0] != replicas:
        raise ValueError(f"{where}initial counts with one row per replica must have {replicas} rows; got {u0.shape[0]}")
    # the start (int64 counts, and their uint32 device copy) and random states, before building them
    V.memory("replicas", float(replicas) * (16.0 * u0.shape[-1] + 32.0),
             f"{replicas} replicas x {u0.shape[-1]} levels of start counts and random states")
    u0 = np.broadcast_to(u0 if u0.ndim == 2 else u0[None], (replicas, u0.shape[-1])).astype(np.int64)
    return u0, _rng.replica_states_np(seed, np.arange(replicas)), seed


def _plan(where, point: Point, *, steps, burn_in, seed, initial, replicas, levels, capacity=None) -> _Plan:
    """The plan of one point (the theory of the start and of the level cap uses the arrival
    rate as the caller gave it). With ``capacity`` (the bounded model) the cap is the capacity."""
    u0, rng0, seed = _resolve_initial(where, point, initial, replicas, seed, capacity)
    total = burn_in + steps
    if capacity is not None:
        if u0.shape[-1] > capacity + 1 and np.any(u0[:, capacity + 1:] > 0):
            raise ValueError(f"{where}initial has a queue longer than capacity = {capacity}: the bounded model "
                             f"holds at most {capacity} customers per queue")
        u0 = np.ascontiguousarray(u0[:, : capacity + 1])
        return _Plan(point, steps, burn_in, seed, u0, rng0, capacity, capacity)
    L = _default_levels(point, u0, total) if levels is None else V.integer("levels", levels, low=u0.shape[-1])
    return _Plan(point, steps, burn_in, seed, u0, rng0, L,
                  max(L, K.level_limit(u0.shape[-1], total)))


def _per_point(name: str, value: Any, P: int, check) -> list:
    """An int (or None) for every point, or one per point."""
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        if len(value) != P:
            raise ValueError(f"{name} must be one value or one per point ({P}); got {len(value)}")
        return [check(f"{name}[{j}]", v) for j, v in enumerate(value)]
    v = check(name, value)
    return [v] * P


def _is_per_point_initial(initial: Any, P: int) -> bool:
    """A list/tuple of P entries that are not plain numbers is one initial state per point."""
    if not isinstance(initial, (list, tuple)) or len(initial) != P:
        return False
    return not all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
                   for x in initial)


# --------------------------------------------------------------------------- public

def simulate(n: int | Point, d: int | None = None, lam: float | None = None, *, one_minus_lam: float | None = None,
             steps: int, replicas: int = 1, seed: int | None = None, burn_in: int = 0, initial: Any = "empty",
             replacement: bool | None = None, batches: int = 1, record_every: int | None = None,
             levels: int | None = None, progress: bool | None = None, flows: bool = False,
             variant: Any = None, capacity: int | None = None) -> SupermarketResult:
    """Simulate ``replicas`` independent copies of the supermarket model's count chain.

    Parameters (paper notation), or one :class:`~qlib.supermarket.point.Point` in place of
    (n, d, lam, replacement): ``n`` queues (<= 2^32 - 1), ``d`` choices per arrival
    (<= 2^63 - 1), arrival rate ``lam`` per queue, or exclusively ``one_minus_lam`` = 1 - lam,
    carried exactly into the 64-bit event threshold (lam and 1 - lam >= 2^-43); ``steps``
    uniformised steps are measured after ``burn_in`` steps (one unit of model time is
    (1 + lam) n steps). ``initial``: "empty", "fluid", counts / queue lengths (see
    :func:`initial_counts`), or a previous :class:`SupermarketResult`, whose chains are then
    continued from their final counts and random states (n, d, lam, replacement and replicas
    must match; ``seed`` is the result's): T steps and then T more end in the same counts as
    2T steps in one call, and the time averages combine (weights ``steps``). ``seed``
    defaults to 0. ``replacement``: sample the d queues with replacement (the classical
    model, the default) or without. ``batches`` splits the measured steps into equal batches for
    batch-means error bars; ``record_every`` stores u every so many steps (no trajectory is
    kept otherwise). ``levels`` is the initial number of tracked lengths; it grows
    automatically when a queue would exceed it (the chunk is rerun from its saved state, so
    the result is the same as with a larger cap: nothing is ever truncated). The memory a run
    needs is estimated before it starts and at every growth, and runs longer than a year are
    refused (ValueError naming the parameter).

    ``flows=True`` also keeps the level-flow time sums (``flow_fraction``; measured 1.7x the
    CPU time per step at 64 replicas, n = 1000, d = 10; off by default, which costs nothing). ``variant``: simulate a near wrong model in place of JSQ(d) (a name or
    (name, parameter) of :data:`qlib.supermarket.variants.VARIANTS`, e.g. "jsq_d_minus_1" or
    ("eta_greedy", 0.01)); default None, the model. The random streams are the model's: a
    variant uses the same two words per step.

    ``capacity`` = L: the bounded model instead (docs/models.md#bounded-model): every queue holds
    at most L customers and an arrival whose chosen queue is full is lost (counted in
    ``lost_arrivals``); the level cap is L and never grows. The start must fit (no queue above L).

    Returns a :class:`SupermarketResult`. The same ``seed`` gives identical arrays, and replica
    r's numbers do not depend on ``replicas`` or the number of devices.
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
    capacity = _capacity(capacity)
    pt = _plan("", point, steps=steps, burn_in=burn_in, seed=seed, initial=initial, replicas=replicas,
               levels=levels, capacity=capacity)
    return _run([pt], replicas, point.replacement, batches, record_every, progress, flows, emap, vname,
                capacity)[0]


def simulate_many(points: Sequence[tuple | Point], *, steps: int | Sequence[int], replicas: int = 1,
                  seeds: Sequence[int] | None = None, burn_in: int | Sequence[int] = 0, initial: Any = "empty",
                  replacement: bool | None = None, batches: int = 1, record_every: int | None = None,
                  levels: int | None = None, one_minus_lam: float | Sequence[float] | None = None,
                  progress: bool | None = None, flows: bool = False, variant: Any = None,
                  capacity: int | None = None) -> list[SupermarketResult]:
    """Simulate many parameter points at once: result p is bit-identical to
    ``simulate(*points[p], steps=steps[p], burn_in=burn_in[p], replicas=replicas, seed=seeds[p], ...)``.

    ``points`` is a sequence of (n, d, lam) or :class:`~qlib.supermarket.point.Point`, or of
    (n, d) with ``one_minus_lam`` one value per point (or one for all); all points share one
    ``replacement`` (the points' own, or True); ``steps`` and ``burn_in`` are an int or one per point; ``seeds``
    one per point (default 0, 1, ..., P-1); ``initial`` one state for all points or a list of
    one per point (each anything :func:`simulate` accepts, including a previous result of that
    point). The other arguments are as in :func:`simulate` and apply to every point. The
    points run as lanes of one kernel with per-lane parameters; lanes are ordered by run
    length, so a lane that has finished neither advances nor costs a sequential step (see
    :mod:`qlib.supermarket.chain`).
    """
    if isinstance(points, (str, bytes)) or not isinstance(points, Sequence) or len(points) < 1:
        raise ValueError(f"points must be a non-empty sequence of (n, d, lam); got {points!r}")
    P = len(points)
    oml_l = _per_point("one_minus_lam", one_minus_lam, P, lambda nm, v: v) if one_minus_lam is not None else [None] * P
    if replacement is None:  # the points' own (one kernel has one sampling rule)
        replacement = next((pt.replacement for pt in points if isinstance(pt, Point)), True)
    checked: list[Point] = []
    for j, (pt, oml) in enumerate(zip(points, oml_l)):
        want = 3 if oml is None else 2
        if not isinstance(pt, Point) and (not isinstance(pt, (tuple, list)) or len(pt) != want):
            raise ValueError(f"points[{j}] must be {'(n, d, lam)' if want == 3 else '(n, d) (one_minus_lam is given)'}"
                             f" or a Point; got {pt!r}")
        try:
            if isinstance(pt, Point):
                if oml is not None:
                    raise ValueError("a Point carries its arrival rate: leave one_minus_lam out")
                checked.append(as_point(pt, replacement=replacement, simulation=True))
            else:
                checked.append(Point.simulation(pt[0], pt[1], pt[2] if oml is None else None, replacement=replacement,
                                                one_minus_lam=None if oml is None else oml))
        except ValueError as err:
            raise ValueError(f"points[{j}]: {err}") from None
    replacement = checked[0].replacement
    emap, vname = _variant(variant, min(c.d for c in checked), replacement)
    flows = _flag("flows", flows)
    steps_l = _per_point("steps", steps, P, lambda nm, v: V.integer(nm, v, low=1))
    burn_l = _per_point("burn_in", burn_in, P, lambda nm, v: V.integer(nm, v, low=0))
    replicas = V.integer("replicas", replicas, low=1)
    if seeds is None:
        seeds_l = list(range(P))
    else:
        if not isinstance(seeds, (list, tuple, np.ndarray)) or (isinstance(seeds, np.ndarray) and seeds.ndim != 1) or len(seeds) != P:
            raise ValueError(f"seeds must be a sequence of one seed per point ({P}); got {seeds!r}")
        seeds_l = [V.integer(f"seeds[{j}]", s, low=0, high=2**63 - 1) for j, s in enumerate(seeds)]
    batches = V.integer("batches", batches, low=1, high=min(steps_l))
    if record_every is not None:
        record_every = V.integer("record_every", record_every, low=1, high=min(steps_l))
    V.work("steps", float(sum(b + st for b, st in zip(burn_l, steps_l))) * replicas)
    inits = list(initial) if _is_per_point_initial(initial, P) else [initial] * P
    pts = []
    for j, (point, st, bi, sd, ini) in enumerate(zip(checked, steps_l, burn_l, seeds_l, inits)):
        sd = sd if not isinstance(ini, SupermarketResult) or seeds is not None else None
        pts.append(_plan(f"points[{j}]: ", point, steps=st, burn_in=bi, seed=sd, initial=ini, replicas=replicas,
                         levels=levels, capacity=capacity))
    return _run(pts, replicas, replacement, batches, record_every, progress, flows, emap, vname, capacity)


#: Lane-steps from which a burn-in stretch runs its own kernel, with the "seen" observer (0-15%
#: faster than the measuring "sums" kernel: benchmarks/README.md, "Burn-in kernel"); a shorter
#: one runs the measuring kernel and drops its sums, since a second compile (~0.5 s) would cost
#: more than it saves (the same bits either way: observers never touch the chain).
BURN_IN_KERNEL_WORK = 2**28

#: Largest capacity of the bounded model: the counts are capacity + 1 levels per chain.
MAX_CAPACITY = 10_000


def _capacity(capacity: Any) -> int | None:
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
    from qlib.supermarket.variants import event_map

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


def _run(pts: list[_Plan], R: int, replacement: bool, batches: int, record_every: int | None,
         progress: bool | None, flows: bool = False, variant: K.EventMap = K.MODEL,
         variant_name: str = "model", capacity: int | None = None) -> list[SupermarketResult]:
    P = len(pts)
    # lanes: points sorted by run length (longest first), R replicas each
    order = sorted(range(P), key=lambda j: -pts[j].end)
    lane0 = {j: i * R for i, j in enumerate(order)}  # first logical lane of point j
    lanes = P * R
    L0 = max(p.levels for p in pts)
    big = any(p.steps * p.n >= 2**62 for p in pts)
    frames = max((p.steps // record_every for p in pts), default=0) if record_every else 0
    per_level, parts = _bytes_per_level(lanes, batches, frames, big)
    blame = max(parts, key=parts.get)
    V.memory(blame, (L0 + 1) * per_level,
             f"{L0 + 1} levels x {lanes} lanes: " + ", ".join(f"{k} {v * (L0 + 1) / 2**30:.3g} GiB"
                                                            for k, v in parts.items() if v))
    width0 = max(p.u0.shape[1] for p in pts)
    u0 = np.zeros((1, width0, lanes), np.int64)
    rng0 = np.zeros(lanes, np.uint64)
    for j, p in enumerate(pts):
        sl = slice(lane0[j], lane0[j] + R)
        u0[0, : p.u0.shape[1], sl] = p.u0.T
        rng0[sl] = p.rng0
    params = K.lane_params([pts[j].point for j in order], [R] * P)
    end = max(p.end for p in pts)
    if progress is None:
        progress = sum(p.end * R * max(p.levels, 4) for p in pts) >= 5e10  # roughly > 10 s of work

    # Cut points: every point's burn-in end, batch ends, record points and end.
    batch_ends: dict[int, dict[int, int]] = {j: {p.burn_in + (p.steps * b) // batches: b - 1
                                                 for b in range(1, batches + 1)} for j, p in enumerate(pts)}
    record_at = {j: (set(range(p.burn_in + record_every, p.end + 1, record_every)) if record_every else set())
                 for j, p in enumerate(pts)}
    hard = set()  # where the sums are read (batch ends) or the lane masks change (burn-in ends, ends)
    for j, p in enumerate(pts):
        hard |= set(batch_ends[j]) | ({p.burn_in} if p.burn_in else set()) | {p.end}
    cuts = set(hard)
    for j in range(P):
        cuts |= record_at[j]
    cuts = sorted(cuts)
    recorders = [frozenset(j for j in range(P) if c in record_at[j]) for c in cuts]

    lane_point = np.empty(lanes, np.int64)
    for j in range(P):
        lane_point[lane0[j]: lane0[j] + R] = j
    burn = np.array([pts[j].burn_in for j in lane_point])
    stop = np.array([pts[j].end for j in lane_point])

    drv = K.ChainDriver(u0.astype(np.uint32), rng0, params, replacement=replacement, levels=L0,
                        progress=progress, total=end, desc="supermarket", max_levels=max(p.limit for p in pts),
                        bytes_per_level=per_level, variant=variant, capacity=capacity is not None)
    try:
        total_u = _exact_zeros((drv.levels + 1, lanes), big)
        total_busy = np.zeros((drv.levels + 1, lanes), np.int64)
        batch_sum: dict[int, list] = {j: [] for j in range(P)}
        last_batch = _exact_zeros((drv.levels + 1, lanes), big)
        # level-flow sums: Python integers (chunk sums reach 2^60), exact whatever the chunking
        total_flow = np.zeros((drv.levels + 1, lanes), object) if flows else None
        flow_batch: dict[int, list] = {j: [] for j in range(P)}
        last_flow = np.zeros((drv.levels + 1, lanes), object) if flows else None
        traj: dict[int, list] = {j: [] for j in range(P)}  # blocks of frames (F, L+1, R)
        lost = np.zeros(lanes, np.int64)  # arrivals lost at a full queue in the measured steps (capacity)
        t, i = 0, 0
        while i < len(cuts):
            cut = cuts[i]
            active = stop > t
            measuring = active & (burn <= t)
            # A run of record points every record_every steps, recorded by the same points and
            # with no batch end, burn-in end or end before its last one, is one kernel call that
            # stores the counts in a buffer after each frame (no host round trip per frame).
            k = i
            while (record_every and k < len(cuts) and recorders[k] and recorders[k] == recorders[i]
                   and cuts[k] == t + (k - i + 1) * record_every and (k == i or cuts[k - 1] not in hard)):
                k += 1
            frames = k - i
            # (the level-flow sums and the lost arrivals of the bounded model take the general path)
            if frames >= 2 and not flows and capacity is None:
                out = drv.run(record_every, observe="sums", active=drv.mask(active), frames=frames)
                if drv.levels + 1 > total_u.shape[0]:
                    w = drv.levels + 1
                    total_u, total_busy, last_batch = (K.pad_levels(a, w) for a in (total_u, total_busy, last_batch))
                su, sb = drv.lanes_of(out["sum_u"]), drv.lanes_of(out["sum_busy"])
                total_u[:, measuring] += su[:, measuring].astype(total_u.dtype)
                total_busy[:, measuring] += sb[:, measuring]
                w = drv.levels + 1
                # the driver keeps every frame of a call at its current width (it pads them on growth)
                fr = K.pad_levels(np.stack([f[0] for f in out["frames"]]), w, axis=1)[..., drv.pos[:drv.lanes]]
                for j in recorders[i]:
                    traj[j].append(fr[..., lane0[j]: lane0[j] + R].copy())
                t, i = cuts[k - 1], k
                for j in range(P):
                    if t in batch_ends[j]:
                        sl = slice(lane0[j], lane0[j] + R)
                        batch_sum[j].append((total_u[:, sl] - last_batch[:, sl]).copy())
                        last_batch[:, sl] = total_u[:, sl]
                continue
            i += 1
            if cut > t:
                obs_kind = "flow" if flows else "sums"
                if not measuring.any() and (cut - t) * drv.width >= BURN_IN_KERNEL_WORK:
                    obs_kind = "seen"  # a long burn-in: its own, faster kernel
                lost_before = drv.lost() if capacity is not None else None
                out = drv.run(cut - t, observe=obs_kind, active=drv.mask(active))
                if capacity is not None:
                    lost[measuring] += (drv.lost() - lost_before)[measuring]
                if drv.levels + 1 > total_u.shape[0]:
                    w = drv.levels + 1
                    total_u, total_busy, last_batch = (K.pad_levels(a, w) for a in (total_u, total_busy, last_batch))
                    if flows:
                        total_flow, last_flow = K.pad_levels(total_flow, w), K.pad_levels(last_flow, w)
                if measuring.any():
                    su, sb = drv.lanes_of(out["sum_u"]), drv.lanes_of(out["sum_busy"])
                    total_u[:, measuring] += su[:, measuring].astype(total_u.dtype)
                    total_busy[:, measuring] += sb[:, measuring]
                    if flows:
                        total_flow[:, measuring] += drv.lanes_of(out["sum_flow"])[:, measuring]
                t = cut
            u_now = None
            for j in range(P):
                sl = slice(lane0[j], lane0[j] + R)
                if t in batch_ends[j]:
                    batch_sum[j].append((total_u[:, sl] - last_batch[:, sl]).copy())
                    last_batch[:, sl] = total_u[:, sl]
                    if flows:
                        flow_batch[j].append((total_flow[:, sl] - last_flow[:, sl]).copy())
                        last_flow[:, sl] = total_flow[:, sl]
                if t in record_at[j]:
                    if u_now is None:
                        u_now = drv.counts()[0]
                    traj[j].append(u_now[None, :, sl].copy())
        peak = drv.peak()
        counts = drv.counts()[0]
        state = drv.rng()
    finally:
        drv.close()

    results = []
    for j, p in enumerate(pts):
        sl = slice(lane0[j], lane0[j] + R)
        L = K.final_levels(p.levels, int(peak[sl].max()), p.limit)
        w = L + 1
        fit = lambda a: K.pad_levels(a, max(w, a.shape[0]))[:w]  # noqa: E731
        tail = fit(total_u[:, sl]).astype(np.float64).T / float(p.steps * p.n)
        busy = fit(total_busy[:, sl]).T / p.steps  # P(u_i > 0) = P(max length >= i)
        busy[:, 0] = 1.0
        max_dist = busy - np.concatenate([busy[:, 1:], np.zeros((R, 1))], axis=1)
        nz = busy > 0
        max_length = (L - np.argmax(nz[:, ::-1], axis=1)).astype(np.int64)
        lengths = np.diff([p.burn_in] + sorted(batch_ends[j]))
        bt = np.stack([fit(b).astype(np.float64).T for b in batch_sum[j]], axis=1) \
            / (lengths[None, :, None] * float(p.n))
        tr = None
        if traj[j]:  # blocks (F, L_b+1, R) -> (R, frames, L+1)
            wide = max(w, max(b.shape[1] for b in traj[j]))
            tr = np.concatenate([K.pad_levels(b, wide, axis=1)[:, :w] for b in traj[j]], axis=0)
            tr = np.ascontiguousarray(tr.transpose(2, 0, 1)).astype(np.int64)
        flow = bflow = None
        if flows:  # exact integer sums / (steps 2^FLOW_BITS), each rounded once to float64
            unit = 2**K.FLOW_BITS
            flow = _ratio(fit(total_flow[:, sl]).T, p.steps * unit)
            bflow = np.stack([_ratio(fit(b).T, int(ln) * unit) for b, ln in zip(flow_batch[j], lengths)], axis=1)
        results.append(SupermarketResult(
            point=p.point, steps=p.steps, burn_in=p.burn_in, seed=p.seed, tail_fraction=tail, max_length=max_length, max_length_distribution=max_dist,
            counts=np.ascontiguousarray(fit(counts[:, sl]).T), batch_tail_fraction=bt,
            state=state[sl].copy(), trajectory=tr, record_every=record_every, flow_fraction=flow,
            batch_flow_fraction=bflow, variant=variant_name, capacity=capacity,
            lost_arrivals=lost[sl].copy() if capacity is not None else None))
    _cache.report_simulation(pts, results, variant, capacity)  # provenance of stored results (cache.recording)
    return results


def _ratio(a: np.ndarray, den: int) -> np.ndarray:
    """Integer array (object or int) / a positive integer, each quotient correctly rounded to float64."""
    return np.array([int(x) / den for x in np.asarray(a, dtype=object).ravel()], dtype=np.float64).reshape(a.shape)
