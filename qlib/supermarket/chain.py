"""The count chain of the supermarket model: its state, its step, and the one chunk driver.

Model (docs/models.md, "count chain"): n FIFO queues with Exp(1) service; customers arrive at
rate lam n and each joins a shortest of d queues sampled uniformly (with replacement by
default). Uniformised at total rate n(1 + lam), each step is an arrival with probability
lam/(1 + lam), otherwise a potential departure from a uniformly chosen queue. The counts
u_i = #queues with length >= i (u_0 = n, non-increasing) form a Markov chain of their own:

- an arrival joins a queue of length i with probability g(u_i) - g(u_{i+1}), where
  g(u) = (u/n)^d (with replacement) or C(u, d)/C(n, d) (without);
- a departure hits a queue of length i >= 1 with probability (u_i - u_{i+1})/n.

One step costs O(levels), whatever n and d. The level touched is found by the monotone
coupling of docs/models.md ("monotone coupling"), from two 64-bit random words per step:

- the event: an arrival iff word 1 < A = round(2^64 lam/(1+lam)), A computed exactly (with
  ``fractions.Fraction``) from the float64 lam or from 1 - lam given as such, so the simulated
  lam is within 2^-63 of the requested one;
- an arrival joins the largest i with U < g(u_i), U = (word 2 + 1/2)/2^64. With replacement
  U < (u/n)^d <=> u > floor(n U^(1/d)) =: x, computed as n + floor(n (U^(1/d) - 1)) near
  U^(1/d) = 1 (log U from the exact 1 - U there), so that x <= n - 1 always: an arrival into
  an all-busy state joins a queue of length >= 1 for every d (counts never leave [0, n]);
- a departure removes a customer from the queue of rank r = floor(word 2 * n / 2^64) (in
  decreasing order of length), by an exact 64 x 32-bit high multiply: every rank in [0, n) has
  probability 1/n up to 2^-64.

So both events compare the counts with one integer x: the level touched is #{i >= 1: u_i > x}.
Several chains fed the same words are the monotone coupling (the level is non-decreasing in u).
Without replacement g(u) = C(u, d)/C(n, d) is compared in logs, log g(u) = F(u) - F(n) with
F(a) = log(a (a-1) ... (a-d+1)) from one accurate formula (Stirling differences for large
arguments), so g(n) = 1 exactly and u = n is always hit. The sequential loops carry log g(u_i)
of every level and recompute it only at the level a step changes (one evaluation per step, not
one per level: the lgammas are scalar C-library calls on XLA:CPU; 7-10x more steps per second).

The streams changed with issue 13: the old kernel (commit 85b3b95 and issue 12's refactor of it)
used one word per step and 32 bits for each of the event, U and r, which rounded 1 - lam up to
a multiple of 2^-32 (+86% at 1 - lam = 10^-9), gave the longest queue's departure rate
+100% at n = 2^32 - 1, made joining the top queue at n = 10^5, d = 2 impossible, and let an
arrival land above n at huge d. The same seed gives different (correct) numbers since.

Layout. A *lane* is one replica of one parameter point; every array has the lanes on its last
axis and each lane carries its own parameters (:class:`LaneParams`), so one kernel runs many
points at once. Counts have shape (chains, levels+1, lanes): one chain for simulation, two or
more coupled chains for meeting times and coupled paths.

Random words are counter-based (:mod:`qlib._rng`): the words of step t of a lane are
mix64(s_0 + (2t - 1) GOLDEN) and mix64(s_0 + 2t GOLDEN). The fast path therefore draws a
whole block of steps at once, vectorised over (steps, lanes) -- the SplitMix64 mix and the
log/exp of the arrival threshold -- and leaves only the cheap compare-and-update to the
sequential loop. That loop runs over groups of lanes, each group through a whole chunk:
XLA:CPU compiles a while loop whose body touches less than
``xla_cpu_small_while_loop_byte_threshold`` bytes (1 kB unless raised; ``import qlib`` raises
it) into one kernel, instead of dispatching every fused op of the body separately, which
dominated the cost at few replicas (benchmarks/README.md).

Public here: :class:`ChainState`, :class:`LaneParams`, :class:`Events`, the plain step
(:func:`draw`, :func:`level`, :func:`apply`, :func:`step`), the block draws
(:func:`draw_block`), the exact event maps (:func:`arrival_threshold`, :func:`simulated_lam`,
:func:`uniform_log`, :func:`join_threshold`, :func:`departure_rank`, :func:`log_falling`)
the level-flow pieces (:func:`flow_g`, :func:`flow_units`, :data:`FLOW_BITS`: the "flow" observer
keeps exact time sums of the model's g(u_i), docs/models.md#level-flow), :class:`EventMap` (the
event-map swaps of the near wrong models, :mod:`qlib.supermarket.variants`; "model" is the plain
map, the code path of every default run) and :class:`ChainDriver`, which owns chunk sizing, level
growth (bounded, memory-checked) and
the progress bar for :func:`qlib.supermarket.simulate`, :func:`qlib.supermarket.simulate_many`,
:func:`qlib.supermarket.meeting_times` and :func:`qlib.supermarket.coupled_paths`.
"""

from __future__ import annotations

import functools
import math
import os
import re
from fractions import Fraction
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng, _sharding
from qlib import _validate as V
from qlib._progress import progress_bar

# the resolvable ranges and the exact event map live with the validated point
from qlib.supermarket.point import LAM_RESOLUTION, MAX_N, Point, arrival_threshold  # noqa: F401

#: Which random streams the chain uses: 1 = one word per step (32-bit event, uniform and rank,
#: up to issue 12), 2 = two 64-bit words per step (issue 13). A result cached under another
#: version holds other numbers for the same seed.
STREAM_VERSION = 2
_NOOP = 0xFFFFFFFF  # a departure with this rank touches level 0: the step of an inactive lane
_M32 = 0xFFFFFFFF


# --------------------------------------------------------------------------- types

class LaneParams(NamedTuple):
    """Per-lane model parameters, each of shape (lanes,), traced (a sweep compiles once)."""

    n: Any  # uint64: number of queues
    d: Any  # float64: choices per arrival
    arrival: Any  # uint64: an arrival iff the event word is < this (A = round(2^64 lam/(1+lam)))
    log_norm: Any  # float64: F(n) = log(n (n-1) ... (n-d+1)); filled on the device (see _with_norm)


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


class Events(NamedTuple):
    """One step's events, any leading shape, lanes last.

    ``arrival`` (bool); ``x`` (uint32): with replacement the integer the counts are compared
    with (floor(n U^(1/d)) for an arrival, the rank r for a departure), without replacement
    the departure rank; ``log_u`` (float64, without replacement only): log U of an arrival.
    """

    arrival: Any
    x: Any
    log_u: Any = None
    v: Any = None  # a second uniform of an arrival (w_event / A), drawn only for the tie variant


class EventMap(NamedTuple):
    """Which event map the kernel runs (static): ``kind`` "model" is the chain of the model; the
    others are the near wrong models of :mod:`qlib.supermarket.variants`, each one swap of a
    piece of the event map below (``value``: eta of "eta_greedy", the d offset of "d_offset")."""

    kind: str = "model"
    value: float = 0.0


MODEL = EventMap()
EVENT_KINDS = ("model", "d_offset", "other_sampling", "arrival_off_by_one", "departure_off_by_one",
               "tie_longer", "eta_greedy")
#: kinds whose map is written for the with-replacement threshold only
WITH_REPLACEMENT_ONLY = ("arrival_off_by_one", "tie_longer", "eta_greedy")


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


# --------------------------------------------------------------------------- the plain step

def log_falling(a, d):
    """F(a) = log(a (a-1) ... (a-d+1)) = lgamma(a+1) - lgamma(a-d+1) for real a >= d, float64.

    When a - d + 1 >= 64 both lgammas are large and nearly cancel; there the difference of
    their Stirling series is used, (x - 1/2) log1p(d/x) + d log(x + d) - d + sum of the
    1/(12 z), 1/(360 z^3), 1/(1260 z^5) differences (x = a - d + 1; truncation < 1e-16).
    """
    x = jnp.maximum(a - d + 1.0, 1.0)
    direct = jax.lax.lgamma(a + 1.0) - jax.lax.lgamma(x)
    y = x + d
    series = (1 / (12 * y) - 1 / (12 * x)) - (1 / (360 * y**3) - 1 / (360 * x**3)) \
        + (1 / (1260 * y**5) - 1 / (1260 * x**5))
    stirling = (x - 0.5) * jnp.log1p(d / x) + d * jnp.log(y) - d + series
    return jnp.where(x >= 64.0, stirling, direct)


def _with_norm(p: LaneParams) -> LaneParams:
    """Fill ``log_norm`` = F(n) on the device, with the same function as F(u): g(n) = 1 exactly."""
    return p._replace(log_norm=log_falling(p.n.astype(jnp.float64), p.d))


# log U and floor(n U^(1/d)) are written out in basic float64 operations (frexp, +, *, /, one
# exp) rather than with log/log1p/expm1: XLA:CPU calls the C library for a float64 log, one
# scalar call per element, which was half the cost of a step at few replicas; these forms
# vectorise, and the numba reference repeats them operation by operation.
_LN2 = math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)
_NEAR_ONE = 2**64 - 2**44  # words with 1 - U < 2^-20: log U from its series in 1 - U
# 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...): 11 terms for |s| <= 3 - 2 sqrt(2) (error < 1e-17)
_ATANH = tuple(1.0 / (2 * k + 1) for k in range(11))


def _log_reduced(m, e):
    """log(m 2^e) for m in [1/2, 1), e integer-valued float64: reduce m to [1/sqrt 2, sqrt 2),
    then log m = 2 atanh((m - 1)/(m + 1)) by its series."""
    low = m < _SQRT_HALF
    m = jnp.where(low, 2.0 * m, m)
    e = jnp.where(low, e - 1.0, e)
    t = (m - 1.0) / (m + 1.0)
    z = t * t
    q = _ATANH[-1]
    for c in _ATANH[-2::-1]:
        q = c + z * q
    return e * _LN2 + (2.0 * t) * q


def uniform_log(w):
    """log U for U = (w + 1/2)/2^64, w uint64: accurate (a few ulp) near 0 and near 1.

    Below 1 - 2^-20, U is rounded to float64 (relative 2^-53, so log U to 2^-53 absolute)
    and its log taken as above; nearer 1, from x = 1 - U = (2^64 - 1 - w + 1/2)/2^64 (exact),
    log U = -x (1 + x (1/2 + x/3)) (truncation x^3/4 < 2^-62 relative).
    """
    u = (w.astype(jnp.float64) + 0.5) * 2.0**-64
    m, e = jnp.frexp(u)
    x = ((~w).astype(jnp.float64) + 0.5) * 2.0**-64
    near = -x * (1.0 + x * (0.5 + x * (1.0 / 3.0)))
    return jnp.where(w >= jnp.uint64(_NEAR_ONE), near, _log_reduced(m, e.astype(jnp.float64)))


def join_threshold(log_u, n, d):
    """x = floor(n U^(1/d)) with U = exp(log_u), as int64 in [0, n - 1] for every d.

    U < (u/n)^d <=> u > x. With z = log U / d < 0 (strictly: log U <= -2^-65): for
    U^(1/d) < 1/2, x = floor(n e^z); above, x = n + floor(n (e^z - 1)), with e^z - 1 from
    its series z (1 + z/2) when |z| < 2^-26, so x <= n - 1 even when U^(1/d) rounds to 1
    (huge d). The absolute error of n U^(1/d) is about n 2^-53 either way.
    """
    z = log_u / d
    nf = n.astype(jnp.float64)
    ez = jnp.exp(z)
    em1 = jnp.where(z > -(2.0**-26), z * (1.0 + 0.5 * z), ez - 1.0)
    x = jnp.where(z < -_LN2, jnp.floor(nf * ez), nf + jnp.floor(nf * em1))
    return jnp.clip(x, 0.0, nf - 1.0).astype(jnp.int64)


def departure_rank(w, n):
    """r = floor(w n / 2^64) for w uint64, n < 2^32, exact (64 x 32-bit high product), as int64."""
    n = n.astype(jnp.uint64)
    return (((w >> 32) * n + (((w & jnp.uint64(_M32)) * n) >> 32)) >> 32).astype(jnp.int64)


def _events(w_event, w_value, p: LaneParams, replacement: bool, variant: EventMap = MODEL) -> Events:
    """Events from the two words of a step (any leading shape, lanes last; params broadcast).

    ``variant`` swaps one piece of the map (docs/models.md#near-wrong-models): the departure
    rank r + 1 ("departure_off_by_one"); the join threshold x - 1 for x >= 1, i.e. u_i >= x in
    place of u_i > x ("arrival_off_by_one"); with probability eta the threshold of one uniform
    queue, x = r ("eta_greedy": the event word below floor(eta A) marks the arrival, a
    uniform independent of U); "d_offset" and "other_sampling" come in through ``p`` and
    ``replacement`` (see :func:`_local_advance`); "tie_longer" draws v = w_event / A here and acts
    in :func:`_fast_step`. The model's map ("model") is the code path of the plain step.
    """
    arrival = w_event < p.arrival
    rank = departure_rank(w_value, p.n)
    if variant.kind == "departure_off_by_one":
        rank = rank + 1  # rank n touches no queue: the longest queue's rank 0 is never drawn
    log_u = uniform_log(w_value)
    v = None
    if variant.kind == "tie_longer":
        v = (w_event.astype(jnp.float64) + 0.5) / p.arrival.astype(jnp.float64)
    if replacement:
        x = join_threshold(log_u, p.n, p.d)
        if variant.kind == "arrival_off_by_one":
            x = x - (x > 0)
        elif variant.kind == "eta_greedy":
            uniform_pick = w_event < (p.arrival.astype(jnp.float64) * variant.value).astype(jnp.uint64)
            x = jnp.where(uniform_pick, departure_rank(w_value, p.n), x)
        x = jnp.where(arrival, x, rank)
        return Events(arrival, x.astype(jnp.uint32), None, v)
    return Events(arrival, rank.astype(jnp.uint32), log_u, v)


def draw(rng, p: LaneParams, replacement: bool) -> tuple[Any, Events]:
    """One step's randomness for every lane: (new rng, events of shape (lanes,))."""
    rng, w1 = _rng.next_u64(rng)
    rng, w2 = _rng.next_u64(rng)
    return rng, _events(w1, w2, p, replacement)


def draw_block(rng, p: LaneParams, steps: int, replacement: bool, active=None,
               variant: EventMap = MODEL) -> Events:
    """The events of the next ``steps`` steps of every lane at once: shape (steps, lanes).

    Identical, row by row, to ``steps`` calls of :func:`draw`; computed vectorised over
    (steps, lanes). Inactive lanes (``active`` False) get a no-op departure (rank 2^32 - 1).
    """
    w = _rng.block_words(rng, 2 * steps)
    w = w.reshape((steps, 2) + w.shape[1:])
    ev = _events(w[:, 0], w[:, 1], p, replacement, variant)
    if active is None:
        return ev
    x = jnp.where(active[None], ev.x, jnp.uint32(_NOOP))
    return ev._replace(arrival=ev.arrival & active[None], x=x)


def log_g(u, p: LaneParams):
    """log g(u) = log C(u, d)/C(n, d) of sampling without replacement, float64, for integer
    counts u (any shape, lanes last; meaningful for u >= d). ``p`` has ``log_norm`` filled."""
    uf = u.astype(jnp.float64)
    return log_falling(uf, p.d) - p.log_norm


def _recompute_where_changed(carried, u, u_new, f):
    """``carried`` = f(u_i) per level after one step, for counts (..., levels, lanes): a step
    changes at most one level of each chain and lane, so f is evaluated at that count only (the
    same function of the same count as f of every level: the same bits, one evaluation in place
    of one per level)."""
    changed = u_new != u
    uc = jnp.sum(jnp.where(changed, u_new, jnp.zeros((), u.dtype)), axis=-2)
    return jnp.where(changed, f(uc)[..., None, :], carried)


def _update_log_g(lg, u, u_new, p: LaneParams):
    """The carried log g(u_i) of levels 1..L after one step (see :func:`_recompute_where_changed`)."""
    return _recompute_where_changed(lg, u[:, 1:], u_new[:, 1:], lambda uc: log_g(uc, p))


def _hits(u, ev: Events, p: LaneParams, replacement: bool, lg=None):
    """hit_i = [the event touches a length >= i], i = 1..L, shape (chains, L, lanes).

    Without replacement ``lg`` may carry log g(u_i) of levels 1..L (:func:`_update_log_g`)."""
    if replacement:
        return u[:, 1:] > ev.x[None, None]
    uf = u[:, 1:].astype(jnp.float64)
    log_g_u = log_g(u[:, 1:], p) if lg is None else lg  # log C(u, d)/C(n, d)
    full = u[:, 1:] == p.n.astype(u.dtype)  # g(n) = 1: every arrival into a full level passes it
    arr_hit = full | ((uf >= p.d) & (ev.log_u[None, None] < log_g_u))
    dep_hit = u[:, 1:] > ev.x[None, None]
    return jnp.where(ev.arrival[None, None], arr_hit, dep_hit)


def level(u, ev: Events, p: LaneParams, replacement: bool):
    """The length of the queue each event touches, shape (chains, lanes), given u (chains, L+1, lanes).

    Arrival: the length joined, #{i >= 1: U < g(u_i)}; departure: the length of the queue of
    rank r, #{i >= 1: r < u_i}. Both are non-decreasing in u: the coupling is monotone.
    """
    return jnp.sum(_hits(u, ev, p, replacement), axis=1, dtype=jnp.int32)


def apply(u, ev: Events, lvl):
    """Move one customer: arrival -> u_{level+1} += 1; departure -> u_level -= 1 (if level >= 1).

    An arrival at the top level (level = L) is dropped here; it sets the overflow flag of
    :func:`step`, and the driver reruns the chunk with more levels.
    """
    arrival = ev.arrival[None]
    idx = jnp.where(arrival, lvl + 1, lvl)
    delta = jnp.where(arrival, 1, -(lvl > 0).astype(jnp.int32)).astype(u.dtype)
    rows = jnp.arange(u.shape[1], dtype=jnp.int32)[None, :, None]
    return u + jnp.where(rows == idx[:, None], delta[:, None], jnp.zeros((), u.dtype))


def step(state: ChainState, p: LaneParams, replacement: bool) -> tuple[ChainState, Any]:
    """One step of every lane's chains, the plain way: (new state, levels touched (chains, lanes)).

    This is the definition of the chain; the fast kernel of :class:`ChainDriver` is tested to
    give the same counts, random states and flags bit for bit.
    """
    p = _with_norm(p)
    rng, ev = draw(state.rng, p, replacement)
    lvl = level(state.u, ev, p, replacement)
    top = state.u.shape[1] - 1
    overflow = state.overflow + jnp.any(ev.arrival[None] & (lvl == top), axis=0).astype(state.overflow.dtype)
    return ChainState(rng, apply(state.u, ev, lvl), overflow), lvl


# --------------------------------------------------------------------------- the fast step

def _fast_step(u, ev: Events, p: LaneParams, replacement: bool, variant: EventMap = MODEL, lg=None):
    """One step on a group of lanes: (new u, overflow flag (lanes,), level > 0 (chains, lanes)).

    Without replacement ``lg`` is the carried log g(u_i) (see :func:`_step`).

    With replacement the hits c_i = [u_i > x] are true exactly for i = 1..level (u is
    non-increasing, x one integer), so the one-hot update of :func:`apply` is a difference of
    neighbouring c's: an arrival adds c_{i-1} - c_i (one customer moves to length level+1), a
    departure adds c_{i+1} - c_i (one leaves length level; nothing if level = 0). That skips
    the sum over levels (faster for groups of 1-4 lanes; for wider groups the sum and the
    one-hot update vectorise better, measured 5-10%). Without replacement the float compare
    need not give a prefix, so the level is summed as in :func:`level` and applied by
    :func:`apply`. Every form gives the numbers of the plain step (tested).
    """
    c = _hits(u, ev, p, replacement, lg)
    if variant.kind == "tie_longer":
        lvl = _tie_longer(u, ev, p, jnp.sum(c, axis=1, dtype=jnp.int32))
        top = jnp.any(ev.arrival[None] & (lvl >= u.shape[1] - 1), axis=0)
        return apply(u, ev, lvl), top, lvl > 0
    top = jnp.any(ev.arrival[None] & c[:, -1], axis=0)
    if not replacement or u.shape[-1] >= 8:
        lvl = jnp.sum(c, axis=1, dtype=jnp.int32)
        return apply(u, ev, lvl), top, lvl > 0
    one = jnp.ones(c.shape[:1] + (1,) + c.shape[2:], bool)
    prev = jnp.concatenate([one, c[:, :-1]], axis=1)
    nxt = jnp.concatenate([c[:, 1:], ~one], axis=1)
    w = jnp.where(ev.arrival[None, None], prev, nxt).astype(u.dtype) - c.astype(u.dtype)
    zero = jnp.zeros(c.shape[:1] + (1,) + c.shape[2:], u.dtype)
    return u + jnp.concatenate([zero, w], axis=1), top, c[:, 0]


def _step(u, lg, ev: Events, p: LaneParams, replacement: bool, variant: EventMap = MODEL):
    """:func:`_fast_step` carrying log g(u_i) without replacement (``lg``, None with it): the
    sequential loops' step. Evaluating log g at every level each step (two lgammas and a log per
    level, scalar C-library calls on XLA:CPU) made sampling without replacement ~12x slower per
    step than with it; carried, it costs one evaluation per step."""
    u_new, top, busy = _fast_step(u, ev, p, replacement, variant, lg)
    return u_new, (None if lg is None else _update_log_g(lg, u, u_new, p)), top, busy


def _initial_log_g(u, p: LaneParams, replacement: bool):
    """The carried log g(u_i) of levels 1..L at the start of a loop (None with replacement)."""
    return None if replacement else log_g(u[:, 1:], p)


def _at(u, idx):
    """u[c, idx[c, lane], lane] as int64 (0 where idx is past the top), u (chains, L+1, lanes)."""
    rows = jnp.arange(u.shape[1], dtype=jnp.int32)[None, :, None]
    return jnp.sum(jnp.where(rows == idx[:, None], u.astype(jnp.int64), 0), axis=1)


def _tie_longer(u, ev: Events, p: LaneParams, lvl):
    """The "tie_longer" variant: an arrival whose shortest sampled length L is shared by two or
    more of its d samples joins a queue of length L + 1 instead, when one exists.

    With i.i.d. samples of tail s_i = u_i/n: P(min = L) = s_L^d - s_{L+1}^d and P(min = L, only
    one sample at L) = d (s_L - s_{L+1}) s_{L+1}^(d-1); the tie is decided by the arrival's
    second uniform v (independent of U). Departures are untouched.
    """
    nf = p.n.astype(jnp.float64)
    sL = _at(u, lvl).astype(jnp.float64) / nf
    sL1 = _at(u, lvl + 1).astype(jnp.float64) / nf
    exists = _at(u, lvl + 1) > _at(u, lvl + 2)
    pmin = jnp.power(sL, p.d) - jnp.power(sL1, p.d)
    unique = p.d * (sL - sL1) * jnp.power(sL1, p.d - 1.0)
    tie = ev.v[None] * pmin >= unique
    move = ev.arrival[None] & tie & exists & (pmin > 0)
    return lvl + move.astype(jnp.int32)


#: The level-flow sums hold g(u_i) rounded to a multiple of 2^-FLOW_BITS per step: int64
#: chunk sums are exact for 2^(63 - FLOW_BITS) steps (a chunk has at most 2^20), and the time
#: average is off by at most 2^-(FLOW_BITS+1), i.e. n 2^-41 customers in lam n E[g(u_i)].
FLOW_BITS = 40


def _log_pos(x):
    """log x for float64 x > 0 (frexp and the series of :func:`_log_reduced`; vectorises)."""
    m, e = jnp.frexp(x)
    return _log_reduced(m, e.astype(jnp.float64))


def flow_g(u, p: LaneParams, replacement: bool):
    """g(u) of the model (docs/models.md#notation), float64, for integer counts u (any shape,
    lanes last): (u/n)^d with replacement, C(u, d)/C(n, d) without; g(0) = 0 and g(n) = 1 exactly.
    ``p`` must have ``log_norm`` filled (:func:`_with_norm`)."""
    uf = u.astype(jnp.float64)
    nf = p.n.astype(jnp.float64)
    full = u.astype(jnp.uint64) == p.n
    if replacement:
        lg = p.d * (_log_pos(jnp.maximum(uf, 1.0)) - _log_pos(nf))
        g = jnp.where(u > 0, jnp.exp(lg), 0.0)
    else:
        lg = log_falling(jnp.maximum(uf, p.d), p.d) - p.log_norm
        g = jnp.where(uf >= p.d, jnp.exp(lg), 0.0)
    return jnp.where(full, 1.0, g)


def flow_units(u, p: LaneParams, replacement: bool):
    """round(g(u) 2^FLOW_BITS) as int64: what one step adds to a level-flow sum."""
    return jnp.round(flow_g(u, p, replacement) * float(2**FLOW_BITS)).astype(jnp.int64)


# Observers: what the kernel records along the way, per lane.
#   "sums": time sums of u_i (int64) and 1[u_i > 0] (int32) of chain 0, shape (L+1, lanes);
#   "flow": "sums" and the level-flow sums of round(g(u_i) 2^FLOW_BITS) (int64) of chain 0 under
#   the model's g (its d and sampling rule, whatever the event map); the current units are
#   carried per level and recomputed only at the level a step changes;
#   "seen": [u_i > 0 at some step] over all chains, (L+1, lanes) bool (for the final level cap);
#   "meet", "meet_unordered": the excess D (lanes,) int64 of chain 1 over chain 0 and the
#   meeting step T (lanes,) int64 (-1 until met); met means D = 0, or all counts equal.
OBSERVERS = ("sums", "flow", "seen", "meet", "meet_unordered")


def _observe(kind: str, obs, u, ev: Events, busy, t, u_prev=None, flow=None):
    if kind == "flow":
        su, sb, sf, q = obs
        p, repl = flow
        q = _recompute_where_changed(q, u_prev[0], u[0], lambda uc: flow_units(uc, p, repl))
        return su + u[0].astype(jnp.int64), sb + (u[0] > 0).astype(jnp.int32), sf + q, q
    if kind == "sums":
        su, sb = obs
        return su + u[0].astype(jnp.int64), sb + (u[0] > 0).astype(jnp.int32)
    if kind == "seen":
        return (obs[0] | jnp.any(u > 0, axis=0),)
    D, T = obs
    # D loses one when the top's departure is real and the bottom's is not (docs/models.md)
    dD = jnp.where(ev.arrival, 0, busy[1].astype(jnp.int64) - busy[0].astype(jnp.int64))
    D = D - dD
    met = (D == 0) if kind == "meet" else jnp.all(u[0] == u[1], axis=0)
    return D, jnp.where((T < 0) & met, t, T)


def _lane_slice(x, start, size):
    return jax.lax.dynamic_slice_in_dim(x, start, size, axis=x.ndim - 1)


def _lane_update(x, y, start):
    return jax.lax.dynamic_update_slice_in_dim(x, y, start, axis=x.ndim - 1)


def _local_advance(state: ChainState, obs, p: LaneParams, active, t0, m, *, replacement: bool,
                   observe: str, block: int, group: int, frames: int, variant: EventMap = MODEL,
                   flow_replacement: bool = True, inner: bool = False):
    """Per device: advance every active lane ``frames`` x ``m`` steps (see :class:`ChainDriver`).

    Lanes are taken ``group`` at a time and each group runs all ``m`` steps before the next
    (as a hand-written loop over replicas would: its counts stay in cache): per block of
    ``block`` steps its events are drawn at once, vectorised over (steps, lanes), then applied
    one step after another. Groups past the last active lane are skipped; with a meeting
    observer a group stops as soon as all its lanes have met.
    """
    W = state.rng.shape[0]
    p_model = _with_norm(p)  # the model's g (level-flow sums)
    # the event map's parameters: d + offset for the "d_offset" variant, else the model's
    p = _with_norm(p._replace(d=p.d + variant.value)) if variant.kind == "d_offset" else p_model
    flowing = observe == "flow"
    last = jnp.max(jnp.where(active, jnp.arange(W, dtype=jnp.int32), -1)) + 1
    n_groups = (last + group - 1) // group
    meeting = observe.startswith("meet")
    nblocks = (m + block - 1) // block

    def run_group(j, carry):
        rng, u, ovf, obs = carry
        s = j * group
        sl = lambda x: _lane_slice(x, s, group)  # noqa: E731
        pg, ag = jax.tree.map(sl, p), sl(active)
        pm = jax.tree.map(sl, p_model)

        def run_block(b, c):
            """Steps t0 + b*block + 1, ... of this group: drawn at once, applied in turn."""
            rg, ug, lg, og, obg = c
            k_len = jnp.minimum(block, m - b * block)
            ev = draw_block(rg, pg, block, replacement, ag, variant)
            t_start = t0 + b * block

            def one(k, c):
                ug, lg, og, obg = c
                evk = jax.tree.map(lambda x: x[k], ev)
                u_new, lg, top, busy = _step(ug, lg, evk, pg, replacement, variant)
                return u_new, lg, og + top.astype(og.dtype), _observe(observe, obg, u_new, evk, busy,
                                                                      t_start + k + 1,
                                                                      ug, (pm, flow_replacement))

            ug, lg, og, obg = jax.lax.fori_loop(0, k_len, one, (ug, lg, og, obg))
            return jnp.where(ag, _rng.advance(rg, 2 * k_len), rg), ug, lg, og, obg

        obs_g = jax.tree.map(sl, obs)
        if flowing:  # the current flow units of every level, carried through the group's steps
            obs_g = tuple(obs_g) + (flow_units(sl(u)[0], pm, flow_replacement),)
        c = (sl(rng), sl(u), _initial_log_g(sl(u), pg, replacement), sl(ovf), obs_g)
        if meeting:  # stop once every active lane of the group has met
            def cond(bc):
                b, c = bc
                return (b < nblocks) & jnp.any(ag & (c[4][1] < 0))

            _, c = jax.lax.while_loop(cond,
                                      lambda bc: (bc[0] + 1, run_block(bc[0], bc[1])), (jnp.int64(0), c))
        else:
            c = jax.lax.fori_loop(0, nblocks, run_block, c)
        rg, ug, _, og, obg = c
        if flowing:
            obg = tuple(obg[:-1])
        obs = jax.tree.map(lambda x, y: _lane_update(x, y, s), obs, obg)
        return _lane_update(rng, rg, s), _lane_update(u, ug, s), _lane_update(ovf, og, s), obs

    if frames and inner:  # frames of at most one block each: recorded inside the group's loop
        return _local_record(state, obs, p, active, t0, m, replacement=replacement, observe=observe,
                             block=block, group=group, frames=frames, n_groups=n_groups)

    def run_frame(carry, _):
        carry = jax.lax.fori_loop(0, n_groups, run_group, carry)
        return carry, carry[1]

    carry = (state.rng, state.u, state.overflow, obs)
    if frames == 0:
        carry, _ = run_frame(carry, None)
        us = None
    else:  # long frames: the whole group loop per frame (its cost is spread over many steps)
        carry, us = jax.lax.scan(run_frame, carry, None, length=frames)
    rng, u, ovf, obs = carry
    return ChainState(rng, u, ovf), obs, us


def _local_record(state: ChainState, obs, p: LaneParams, active, t0, m, *, replacement: bool, observe: str,
                  block: int, group: int, frames: int, n_groups):
    """:func:`_local_advance` that also records the counts after every ``m`` steps, ``frames``
    times. Each group draws blocks of whole frames at once (about ``block`` steps), runs each
    frame's ``m`` steps in the usual small step loop, and stores the counts into the frame
    buffer after it: one store per recorded value, no host round trip per frame, and the same
    numbers as ``frames`` calls of ``m`` steps (the draws are counter-based)."""
    if observe.startswith("meet"):
        raise ValueError("recording frames is for the 'sums' and 'seen' observers")
    C, L1, W = state.u.shape
    us0 = jnp.zeros((frames, C, L1, W), state.u.dtype)

    def run_group(j, carry):
        rng, u, ovf, obs, us = carry
        s = j * group
        sl = lambda x: _lane_slice(x, s, group)  # noqa: E731
        pg, ag = jax.tree.map(sl, p), sl(active)
        fpb = jnp.maximum(1, block // m)  # whole frames per block of draws
        nblocks = (frames + fpb - 1) // fpb

        def run_frames(b, c):
            rg, ug, lg, og, obg, buf = c
            f0 = b * fpb
            nf = jnp.minimum(fpb, frames - f0)
            ev = draw_block(rg, pg, block, replacement, ag)  # block >= m steps (see _call)
            t_start = t0 + f0 * m

            def frame(f, c):
                ug, lg, og, obg, buf = c

                def one(k, c):
                    ug, lg, og, obg = c
                    i = f * m + k
                    evk = jax.tree.map(lambda x: x[i], ev)
                    ug, lg, top, busy = _step(ug, lg, evk, pg, replacement)
                    return ug, lg, og + top.astype(og.dtype), _observe(observe, obg, ug, evk, busy,
                                                                       t_start + i + 1)

                ug, lg, og, obg = jax.lax.fori_loop(0, m, one, (ug, lg, og, obg))
                buf = jax.lax.dynamic_update_slice_in_dim(buf, ug[None], f0 + f, axis=0)
                return ug, lg, og, obg, buf

            ug, lg, og, obg, buf = jax.lax.fori_loop(0, nf, frame, (ug, lg, og, obg, buf))
            return jnp.where(ag, _rng.advance(rg, 2 * nf * m), rg), ug, lg, og, obg, buf

        buf0 = jnp.zeros((frames, C, L1, group), u.dtype)
        c = (sl(rng), sl(u), _initial_log_g(sl(u), pg, replacement), sl(ovf), jax.tree.map(sl, obs), buf0)
        rg, ug, _, og, obg, buf = jax.lax.fori_loop(0, nblocks, run_frames, c)
        obs = jax.tree.map(lambda x, y: _lane_update(x, y, s), obs, obg)
        return (_lane_update(rng, rg, s), _lane_update(u, ug, s), _lane_update(ovf, og, s), obs,
                _lane_update(us, buf, s))

    rng, u, ovf, obs, us = jax.lax.fori_loop(0, n_groups, run_group,
                                             (state.rng, state.u, state.overflow, obs, us0))
    # lanes of the groups past the last active one did not run: their frames are their counts
    us = jnp.where(active[None, None, None], us, state.u[None])
    return ChainState(rng, u, ovf), obs, us


@functools.cache
def _advance_fn(devices: tuple, obs_ndims: tuple, replacement: bool, observe: str, block: int,
                group: int, frames: int, with_log_u: bool, variant: EventMap = MODEL,
                flow_replacement: bool = True, inner: bool = False):
    """The jitted kernel for one static configuration: shard_map over the lanes, no communication."""
    spec = _sharding.lane_spec
    state_spec = ChainState(spec(1), spec(3), spec(1))
    obs_spec = tuple(spec(k) for k in obs_ndims)
    p_spec = LaneParams(spec(1), spec(1), spec(1), spec(1))
    fn = functools.partial(_local_advance, replacement=replacement, observe=observe, block=block,
                           group=group, frames=frames, variant=variant, flow_replacement=flow_replacement,
                           inner=inner)
    out_specs = (state_spec, obs_spec, spec(4) if frames else None)
    mapped = jax.shard_map(fn, mesh=_sharding.mesh(devices),
                           in_specs=(state_spec, obs_spec, p_spec, spec(1), spec(0), spec(0)),
                           out_specs=out_specs, check_vma=False)
    return jax.jit(mapped)


# --------------------------------------------------------------------------- sizing

def small_loop_bytes() -> int:
    """XLA:CPU's byte threshold below which a while loop compiles to one kernel (1024 by default)."""
    m = re.search(r"xla_cpu_small_while_loop_byte_threshold=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(m.group(1)) if m else 1024


# Bytes XLA's cost model charges per (count, lane) in one step of the sequential loop, by
# observer (measured: the loop is hoisted into one kernel up to about this budget).
_LOOP_BYTES = {"sums": 72, "flow": 96, "seen": 40, "meet": 48, "meet_unordered": 56}


def group_width(lanes_per_device: int, levels: int, chains: int, observe: str, replacement: bool) -> int:
    """Lanes per sequential group: the widest power of two (dividing the lanes) whose loop XLA:CPU
    still compiles into one kernel; on other backends all lanes of a device in one group."""
    if jax.default_backend() != "cpu":
        return lanes_per_device
    per = _LOOP_BYTES[observe] * (levels + 1) * chains * (1 if replacement else 3)
    g = 1
    while g * 2 <= lanes_per_device and lanes_per_device % (g * 2) == 0 and (g
                                                                             * 2) * per <= small_loop_bytes():
        g *= 2
    return g


def block_length(group: int, replacement: bool) -> int:
    """Steps per block of draws of one group: about 2^13 (step, lane) events, so a block's words,
    floats and events stay in cache (measured: 2^11-2^13 best, 2^16 ~20% slower), 16..2048 steps."""
    b = 2 ** 13 // max(1, group) // (1 if replacement else 2)
    return int(min(2048, max(16, 1 << max(0, b.bit_length() - 1))))


# --------------------------------------------------------------------------- the driver

def pad_levels(a: np.ndarray, width: int, axis: int = 0) -> np.ndarray:
    """Zero-pad axis ``axis`` of ``a`` to length ``width`` (counts above the cap are zero)."""
    pad = [(0, 0)] * a.ndim
    pad[axis] = (0, width - a.shape[axis])
    return np.pad(a, pad)


def grown(levels: int, limit: int | None = None) -> int:
    """The next level cap after an overflow, never above ``limit`` (no queue can pass it)."""
    L = levels + max(4, levels // 2)
    return L if limit is None else max(levels, min(L, limit))


def final_levels(start: int, peak: int, limit: int | None = None) -> int:
    """The cap a run that starts at ``start`` levels ends with when its longest queue is ``peak``:
    the first of start, grown(start), ... that is >= peak (a chunk is rerun with more levels
    whenever an arrival would pass the cap)."""
    L = start
    while L < peak:
        L = grown(L, limit)
    return L


def level_limit(start_levels: int, steps: int) -> int:
    """No queue can pass this level: one step lengthens the longest queue by at most one."""
    return int(start_levels) + int(steps)


class ChainDriver:
    """Runs lanes of the count chain in chunks: the one driver of simulate, meeting times and paths.

    It owns the device state (:class:`ChainState`, lanes padded to a multiple of the device
    count and split over the devices), the chunk sizing, the level cap (when an arrival would
    pass it, the cap grows and the chunk is rerun from its saved start, so nothing is ever
    truncated) and the progress bar. ``u0`` has shape (chains, levels+1, lanes), ``rng0`` and
    the :class:`LaneParams` arrays shape (lanes,); lanes are in the caller's order.

    With several processes (:mod:`qlib.distributed`) every process builds the same driver and
    places only its own devices' lanes; what it returns is gathered from all of them, and its
    decisions (rerun with more levels? all met?) come from global values, the same everywhere.
    """

    def __init__(self, u0: np.ndarray, rng0: np.ndarray, params: LaneParams, *, replacement: bool,
                 levels: int, progress: bool, total: int, desc: str, max_levels: int | None = None,
                 bytes_per_level: float = 0.0, variant: EventMap = MODEL, capacity: bool = False):
        C, L0p1, lanes = u0.shape
        # ``replacement`` is the model's sampling rule (the level-flow sums use it); the event
        # map samples the other way only for the "other_sampling" variant
        self.variant = variant
        self.flow_replacement = bool(replacement)
        self.replacement = bool(replacement) ^ (variant.kind == "other_sampling")
        self.lanes, self.chains = lanes, C
        self.levels = max(int(levels), L0p1 - 1)
        # the bounded model (docs/models.md#bounded-model): the cap is the capacity, never grows,
        # and an arrival at it is lost (counted in ChainState.overflow)
        self.capacity = bool(capacity)
        if self.capacity:
            max_levels = self.levels
        # the level cap grows up to max_levels; bytes_per_level (device and caller's host
        # arrays) lets every growth be checked against the memory available first
        self.max_levels = None if max_levels is None else max(int(max_levels), self.levels)
        self.bytes_per_level = float(bytes_per_level)
        # no device holds only padding (in one process): a single chain runs on one device
        self.devices = _sharding.lane_devices(lanes)
        D = len(self.devices)
        W = -(-max(lanes, 1) // D) * D
        self.width = W
        self.per_device = W // D
        # physical position of logical lane j; padding lanes (j >= lanes) are inactive
        self.pos = _sharding.interleave(W, D)
        u = np.zeros((C, self.levels + 1, W), np.uint32)
        u[:, :L0p1, self.pos[:lanes]] = u0
        rng = np.zeros(W, np.uint64)
        rng[self.pos[:lanes]] = rng0
        ps = [np.zeros(W, a.dtype) for a in params]
        for full, a in zip(ps, params):
            full[self.pos[:lanes]] = a
        ps[0][self.pos[lanes:]] = 1  # padding lanes: a harmless n = 1
        self.active = np.zeros(W, bool)
        self.active[self.pos[:lanes]] = True
        with jax.enable_x64(True):
            self.params = LaneParams(*(self._put(a) for a in ps))
            self.state = ChainState(self._put(rng), self._put(u), self._put(np.zeros(W, np.int64)))
        self.seen = np.zeros((self.levels + 1, W), bool)
        self.seen |= np.any(u > 0, axis=0)
        self.bar = progress_bar(total, show=progress and _sharding.is_main_process(), desc=desc)
        self.t = 0

    # -- helpers

    @staticmethod
    def device_bytes_per_level(lanes: int, chains: int) -> float:
        """Device bytes per count level over ``lanes`` lanes: counts (uint32 per chain), chunk
        sums or flags (int64 + int32), and their host copies."""
        return float(lanes) * (4 * chains + 12 + 12)

    def _put(self, a):
        # a global array: each process fills only its own devices' lanes (see qlib._sharding)
        return _sharding.put(a, devices=self.devices)

    def mask(self, lane_mask: np.ndarray | None) -> np.ndarray:
        """A per-logical-lane bool mask -> physical, padding lanes False (None: all real lanes)."""
        if lane_mask is None:
            return self.active
        out = np.zeros(self.width, bool)
        out[self.pos[:self.lanes]] = lane_mask
        return out

    def lanes_of(self, a) -> np.ndarray:
        """Physical last axis -> logical lanes (padding dropped), as a host array; a device
        array is gathered first (from every process: all must call this together)."""
        return _sharding.gather(a)[..., self.pos[:self.lanes]]

    def meeting_state(self, D0: np.ndarray, T0: np.ndarray) -> tuple:
        """The (D, T) observer of meeting times on the devices, from per-logical-lane int arrays
        (padding lanes: D = 0 and T = 0, i.e. met and inactive)."""
        out = []
        for a in (D0, T0):
            full = np.zeros(self.width, np.int64)
            full[self.pos[: self.lanes]] = a
            with jax.enable_x64(True):
                out.append(self._put(full))
        return tuple(out)

    def _grow(self) -> None:
        L = grown(self.levels, self.max_levels)
        if L == self.levels:  # cannot happen: no queue passes max_levels
            raise RuntimeError(f"a queue passed the level limit {self.max_levels}")
        if self.bytes_per_level:
            V.memory("levels", (L + 1) * self.bytes_per_level,
                     f"the level cap grows to {L}: {L + 1} counts x {self.bytes_per_level:.3g} bytes per "
                     "count over all replicas and buffers")
        with jax.enable_x64(True):
            u = jnp.pad(self.state.u, ((0, 0), (0, L - self.levels), (0, 0)))
            self.state = ChainState(self.state.rng, self._put(u), self._put(np.zeros(self.width, np.int64)))
        self.seen = pad_levels(self.seen, L + 1)
        self.levels = L

    def chunk_steps(self, block: int) -> int:
        # About 2^25 (lane, count) updates per call: long enough to amortise the call, short
        # enough for a live progress bar and a cheap rerun on growth; <= 2^20 steps keeps
        # the int64 chunk sums exact (2^20 * 2^32 < 2^53).
        m = 2**25 // max(1, self.width * (self.levels + 1) * self.chains)
        m = max(block, min(2**20, m)) // block * block
        return int(m)

    def _call(self, obs, active, t0: int, m: int, observe: str, frames: int):
        G = self.per_device
        group = group_width(G, self.levels, self.chains, observe, self.replacement)
        block = block_length(group, self.replacement)
        # a short chunk (a frame of a trajectory, a batch end) draws a short block, so a frame
        # of record_every = 1 draws one step, not 16: four sizes at most, so few compiles
        # (for frames: the span of all of them, and frames no longer than a block are recorded
        # inside the group's loop, see _local_record)
        span = m * max(frames, 1)
        block = next((b for b in (1, 4, 16, 256) if span <= b < block), block)
        # (the in-loop recorder runs the model's event map with the plain observers only)
        inner = bool(frames) and m <= block and observe in ("sums", "seen") and self.variant.kind == "model"
        fn = _advance_fn(self.devices, tuple(np.ndim(o) for o in obs), self.replacement,
                         observe, block, group, frames, not self.replacement, self.variant,
                         self.flow_replacement, inner)
        with jax.enable_x64(True):
            return fn(self.state, obs, self.params, active, jnp.int64(t0), jnp.int64(m))

    # -- running

    def run(self, steps: int, *, observe: str = "seen", active: np.ndarray | None = None,
            meet: tuple | None = None, frames: int = 0) -> dict:
        """Advance the active lanes ``steps`` steps (or, with ``frames``, ``frames`` frames of
        ``steps`` steps each, recording the counts after each frame).

        ``observe``: "sums" returns exact int64 time sums ``sum_u`` and ``sum_busy`` of chain 0,
        shape (levels+1, lanes), over these steps; "flow" also ``sum_flow``, the exact sums of
        round(g(u_i) 2^FLOW_BITS) (Python integers, object array); "seen" only tracks the levels reached;
        "meet"/"meet_unordered" update ``meet = (D, T)`` (physical lane order, device arrays)
        and stop once every active lane has met. ``active``: physical bool mask (see
        :meth:`mask`); inactive lanes do not move and their random state does not advance.
        Returns a dict with "sum_u"/"sum_busy" (physical lanes), "meet", "frames"
        (list of (chains, levels+1, lanes) host arrays, physical lanes).
        """
        active = self.active if active is None else active
        with jax.enable_x64(True):
            act = self._put(active)
        out: dict = {"frames": []}
        sums = observe in ("sums", "flow")
        if sums:
            sum_u = np.zeros((self.levels + 1, self.width), np.int64)
            sum_busy = np.zeros((self.levels + 1, self.width), np.int64)
            sum_flow = np.zeros((self.levels + 1, self.width), object) if observe == "flow" else None
        done = 0
        total = steps * max(frames, 1)
        while done < total:
            if frames:
                every = steps
                per = max(1, min(2**25 // max(1, every * self.width * (self.levels + 1) * self.chains), 4096))
                per = 1 << (per.bit_length() - 1)  # few distinct frame counts: few compiles
                # never past the last frame: the levels reached must be those of the run
                m, nf = every, min(per, frames - len(out["frames"]))
            else:
                g = group_width(self.per_device, self.levels, self.chains, observe, self.replacement)
                m, nf = min(total - done, self.chunk_steps(block_length(g, self.replacement))), 0
            while True:
                with jax.enable_x64(True):
                    if sums:
                        obs = (self._put(np.zeros((self.levels + 1, self.width), np.int64)),
                               self._put(np.zeros((self.levels + 1, self.width), np.int32)))
                        if observe == "flow":
                            obs += (self._put(np.zeros((self.levels + 1, self.width), np.int64)),)
                    elif observe == "seen":
                        obs = (self._put(np.zeros((self.levels + 1, self.width), bool)),)
                    else:
                        obs = meet
                    state, obs_out, us = self._call(obs, act, self.t, m, observe, nf)
                if self.capacity or not _sharding.any_true(state.overflow):  # one global reduction:
                    break  # every process agrees
                self._grow()  # an arrival would pass the cap: more levels, rerun the chunk
                if sums:
                    sum_u, sum_busy = pad_levels(sum_u, self.levels + 1), pad_levels(sum_busy,
                                                                                     self.levels + 1)
                    if sum_flow is not None:
                        sum_flow = pad_levels(sum_flow, self.levels + 1)
                out["frames"] = [pad_levels(f, self.levels + 1, axis=1) for f in out["frames"]]
            self.state = state
            if sums:
                su, sb = (_sharding.gather(a) for a in obs_out[:2])
                sum_u += su
                sum_busy += sb
                self.seen |= sb > 0
                if sum_flow is not None:
                    sum_flow += _sharding.gather(obs_out[2]).astype(object)
            elif observe == "seen":
                self.seen |= _sharding.gather(obs_out[0])
            else:
                meet = obs_out
                met_at = _sharding.gather(meet[1])  # every process decides from the same gathered T
                self.bar.set_postfix(met=f"{int(np.sum(self.lanes_of(met_at) >= 0))}/{self.lanes}")
            if frames:
                take = min(nf, frames - len(out["frames"]))
                out["frames"].extend(_sharding.gather(us)[:take])
                done += take * m
                self.t += take * m
                self.bar.update(take * m)
            else:
                done += m
                self.t += m
                self.bar.update(m)
                if observe.startswith("meet") and not np.any(active & (met_at < 0)):
                    break
        if sums:
            out.update(sum_u=sum_u, sum_busy=sum_busy)
            if sum_flow is not None:
                out["sum_flow"] = sum_flow
        if meet is not None:
            out["meet"] = meet
        return out

    def peak(self) -> np.ndarray:
        """Per logical lane, the longest queue length any chain has reached (from the start)."""
        s = self.lanes_of(self.seen)
        return np.where(s.any(axis=0), s.shape[0] - 1 - np.argmax(s[::-1], axis=0), 0)

    def counts(self) -> np.ndarray:
        """Final counts, shape (chains, levels+1, lanes), int64, logical lanes."""
        return self.lanes_of(self.state.u).astype(np.int64)

    def rng(self) -> np.ndarray:
        """Final random states, shape (lanes,) uint64, logical lanes."""
        return self.lanes_of(self.state.rng)

    def lost(self) -> np.ndarray:
        """Per logical lane, the steps since the start (or the last growth) at which an arrival
        of some chain found its queue full; with ``capacity`` and one chain: the lost arrivals."""
        return self.lanes_of(self.state.overflow).astype(np.int64)

    def close(self) -> None:
        self.bar.close()
