"""The event map of the count chain: which queue length a step's two random words touch.

- the event: an arrival iff word 1 < A = round(2^64 lam/(1+lam)) (:mod:`qlib.supermarket.point`);
- an arrival joins the largest i with U < g(u_i), U = (word 2 + 1/2)/2^64, g(u) = (u/n)^d
  (with replacement) or C(u, d)/C(n, d) (without). For an integer word w, U < g(u) is
  w < ceil(2^64 g(u) - 1/2) =: T(u), so the arrival compares its word with the *join words*
  T(u_i) (:func:`join_words`): hit_i = [w < T(u_i)], and the level joined is #{i: hit_i};
- a departure removes a customer from the queue of rank r = floor(word 2 * n / 2^64) (in
  decreasing order of length), exact by a 64 x 32-bit high multiply: hit_i = [u_i > r].

T is computed in float64 (:func:`join_words`; its relative error, tested against exact
integers, is 4 (|log g| + 1) 2^-53 with replacement and 2e-12 without), so the joining
probabilities are exact up to that relative error; T(n) = 2^64 - 1 and word 2 is capped at
2^64 - 2 for the arrival compare (both words hit only u = n, where g = 1), so an arrival into an
all-busy state joins a busy queue for every d and the counts never leave [0, n]. T is
non-decreasing in u (its relative step g(u+1)/g(u) - 1 >= d/(u+1) >= 2^-32 is far above its
error), so the hits are a prefix.
The kernel carries T(u_i) per level and recomputes it only where a step changes a count: by a
lookup in a per-point table of T(0..n) (:func:`join_table`, when all points' tables together
have at most :data:`TABLE_ENTRIES` entries), else by the formula. Both give the same words.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng
from qlib.supermarket.lanes import LaneParams

_NOOP = 0xFFFFFFFF  # a departure with this rank touches level 0: the step of an inactive lane
_M32 = 0xFFFFFFFF
_MAX_WORD = 2**64 - 1
#: Most entries (sum over a run's points of n + 1) of the join-word tables, 8 bytes each per device:
#: above, the kernel evaluates :func:`join_words` at the level a step changes instead.
TABLE_ENTRIES = 2**22


class Events(NamedTuple):
    """One step's events, any leading shape, lanes last.

    ``arrival`` (bool); ``x`` (uint32): the departure rank r (also for arrivals; 2^32 - 1 for an
    inactive lane); ``w`` (uint64): word 2 capped at 2^64 - 2, compared with the join words T(u_i);
    ``v``: a second uniform of an arrival (w_event / A), drawn only for the "tie_longer" variant;
    ``pick``: an arrival that joins the queue of rank r ("eta_greedy" only).
    """

    arrival: Any
    x: Any
    w: Any = None
    v: Any = None
    pick: Any = None


class EventMap(NamedTuple):
    """Which event map the kernel runs (static): ``kind`` "model" is the chain of the model; the
    others are the near wrong models of :mod:`qlib.supermarket.variants`, each one swap of a
    piece of the event map (``value``: eta of "eta_greedy", the d offset of "d_offset")."""

    kind: str = "model"
    value: float = 0.0


MODEL = EventMap()
EVENT_KINDS = ("model", "d_offset", "other_sampling", "arrival_off_by_one", "departure_off_by_one",
               "tie_longer", "eta_greedy")
#: kinds whose map is written for the with-replacement rule only
WITH_REPLACEMENT_ONLY = ("arrival_off_by_one", "tie_longer", "eta_greedy")


# --------------------------------------------------------------------------- g(u)

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


def log_g(u, p: LaneParams):
    """log g(u) = log C(u, d)/C(n, d) of sampling without replacement, float64, for integer
    counts u (any shape, lanes last; meaningful for u >= d). ``p`` has ``log_norm`` filled."""
    uf = u.astype(jnp.float64)
    return log_falling(uf, p.d) - p.log_norm


# 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...): 20 terms for |s| <= 1/3 (truncation < 2^-64)
_ATANH20 = tuple(1.0 / (2 * k + 1) for k in range(20))


def _log_ratio(u, n):
    """log(u/n) for float64 integers 0 < u <= n, to a few ulp of (|log(u/n)| + 1) (no libm
    log1p, which XLA:CPU computes to ~2^-45 relative): for u >= n/2 as 2 atanh((u - n)/(u + n))
    by its series, the argument rounded once; below, log of the float64 u/n."""
    s = (u - n) / (u + n)
    z = s * s
    q = _ATANH20[-1]
    for c in _ATANH20[-2::-1]:
        q = c + z * q
    m, e = jnp.frexp(u / n)
    return jnp.where(u >= 0.5 * n, 2.0 * s * q, _log_reduced(m, e.astype(jnp.float64)))


def join_words(u, p: LaneParams, replacement: bool):
    """T(u) = ceil(2^64 g(u) - 1/2) as uint64 (T(n) = 2^64 - 1), for integer counts u (any
    shape, lanes last; ``p`` with ``log_norm`` filled): an arrival's word w joins a length >= i
    iff w < T(u_i). In float64: with replacement log g = d log(u/n) (:func:`_log_ratio`), T
    within 4 (|log g| + 1) 2^-53 relative of 2^64 g(u); without, log g = :func:`log_g` (to
    1e-12 absolute, as before), T within 2e-12 relative (tests/test_supermarket_join_words.py)."""
    uf = u.astype(jnp.float64)
    nf = p.n.astype(jnp.float64)
    if replacement:
        lg = p.d * _log_ratio(jnp.maximum(uf, 1.0), nf)
        some = u > 0
    else:
        lg = log_g(jnp.maximum(uf, p.d), p)
        some = uf >= p.d
    t = jnp.where(some, jnp.ceil(jnp.exp(lg) * 2.0**64 - 0.5), 0.0)
    full = u.astype(jnp.uint64) == p.n.astype(jnp.uint64)
    return jnp.where(full, jnp.uint64(_MAX_WORD), t.astype(jnp.uint64))


def join_index(u, p: LaneParams, variant: EventMap):
    """The count whose join word an arrival compares at a level with count u: u itself, or for
    "arrival_off_by_one" u + 1 (capped at n; 0 stays 0), i.e. u_i >= x in place of u_i > x."""
    if variant.kind != "arrival_off_by_one":
        return u
    return jnp.where(u > 0, jnp.minimum(u + 1, p.n.astype(u.dtype)), u)


@functools.partial(jax.jit, static_argnums=(3,))
def _table_words(u, n, d, replacement):
    return join_words(u, _with_norm(LaneParams(n, d, n, d)), replacement)


def join_table(n: np.ndarray, d: np.ndarray, replacement: bool):
    """Per-lane tables of join words: (table (E,) uint64, offsets (lanes,) int64) with
    T_lane(u) = table[offset + u] for u = 0..n of that lane's point; lanes with the same (n, d)
    share a table. None when the tables would have more than :data:`TABLE_ENTRIES` entries."""
    n = np.asarray(n, np.uint64)
    d = np.asarray(d, np.float64)
    keys = np.stack([n.astype(np.float64), d], axis=1) if n.size else np.zeros((0, 2))
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    sizes = uniq[:, 0].astype(np.int64) + 1
    if sizes.sum() > TABLE_ENTRIES:
        return None
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    u = np.concatenate([np.arange(s, dtype=np.uint64) for s in sizes]) if sizes.size else np.zeros(0,
                                                                                                   np.uint64)
    pn = np.repeat(uniq[:, 0].astype(np.uint64), sizes)
    pd = np.repeat(uniq[:, 1], sizes)
    with jax.enable_x64(True):
        table = np.asarray(_table_words(u, pn, pd, bool(replacement))) if u.size else np.zeros(1, np.uint64)
    return table, starts[np.reshape(inverse, -1)]


# --------------------------------------------------------------------------- the words of a step

def departure_rank(w, n):
    """r = floor(w n / 2^64) for w uint64, n < 2^32, exact (64 x 32-bit high product), as int64."""
    n = n.astype(jnp.uint64)
    return (((w >> 32) * n + (((w & jnp.uint64(_M32)) * n) >> 32)) >> 32).astype(jnp.int64)


def _events(w_event, w_value, p: LaneParams, replacement: bool, variant: EventMap = MODEL) -> Events:
    """Events from the two words of a step (any leading shape, lanes last; params broadcast).

    ``variant`` swaps one piece of the map (docs/models.md#near-wrong-models): the departure
    rank r + 1 ("departure_off_by_one"); with probability eta an arrival joins the queue of rank
    r ("eta_greedy": the event word below floor(eta A) marks it, independent of word 2);
    "tie_longer" draws v = w_event / A here and acts in the loop's step; "arrival_off_by_one"
    acts in :func:`join_index`, "d_offset" and "other_sampling" through ``p`` and
    ``replacement``. The model's map ("model") is the code path of the plain step.
    """
    del replacement  # both rules compare word 2 with their own join words
    arrival = w_event < p.arrival
    rank = departure_rank(w_value, p.n)
    if variant.kind == "departure_off_by_one":
        rank = rank + 1  # rank n touches no queue: the longest queue's rank 0 is never drawn
    v = pick = None
    if variant.kind == "tie_longer":
        v = (w_event.astype(jnp.float64) + 0.5) / p.arrival.astype(jnp.float64)
    if variant.kind == "eta_greedy":
        pick = w_event < (p.arrival.astype(jnp.float64) * variant.value).astype(jnp.uint64)
    w = jnp.minimum(w_value, jnp.uint64(_MAX_WORD - 1))
    return Events(arrival, rank.astype(jnp.uint32), w, v, pick)


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


# --------------------------------------------------------------------------- the level touched

def _hits(u, ev: Events, p: LaneParams, replacement: bool, tc=None, variant: EventMap = MODEL):
    """hit_i = [the event touches a length >= i], i = 1..L, shape (chains, L, lanes).

    ``tc``: the join words T(u_i) of levels 1..L, carried by the loops; None: computed here."""
    if tc is None:
        tc = join_words(join_index(u[:, 1:], p, variant), p, replacement)
    dep_hit = u[:, 1:] > ev.x[None, None]
    arr_hit = ev.w[None, None] < tc
    if ev.pick is not None:  # "eta_greedy": the queue of rank r
        arr_hit = jnp.where(ev.pick[None, None], dep_hit, arr_hit)
    return jnp.where(ev.arrival[None, None], arr_hit, dep_hit)


def level(u, ev: Events, p: LaneParams, replacement: bool):
    """The length of the queue each event touches, shape (chains, lanes), given u (chains, L+1, lanes).

    Arrival: the length joined, #{i >= 1: U < g(u_i)}; departure: the length of the queue of
    rank r, #{i >= 1: r < u_i}. Both are non-decreasing in u: the coupling is monotone.
    """
    return jnp.sum(_hits(u, ev, p, replacement), axis=1, dtype=jnp.int32)


# --------------------------------------------------------------------------- the previous arrival map

# Until stream version 2 the arrival computed x = floor(n U^(1/d)) per step and joined the levels
# with u_i > x (with replacement), or compared log U with log g(u_i) (without). The kernel no
# longer does; these stay as accurate float64 references (benchmarks/numba_supermarket.py repeats
# them operation by operation, and tests/test_supermarket_chain.py checks their accuracy).
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
