"""The event map of the supermarket count chain: two 64-bit words per step -> an arrival or a departure
and the integer (or log U) the counts are compared with, exactly (docs/models.md, "monotone coupling");
the near wrong models' swaps of it (:class:`EventMap`) and log g of sampling without replacement."""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng
from qlib._xla import wide_vectors_supported

_NOOP = 0xFFFFFFFF  # a departure with this rank touches level 0: the step of an inactive lane
_M32 = 0xFFFFFFFF


class LaneParams(NamedTuple):
    """Per-lane model parameters, each of shape (lanes,), traced (a sweep compiles once)."""

    n: Any  # uint64: number of queues
    d: Any  # float64: choices per arrival
    arrival: Any  # uint64: an arrival iff the event word is < this (A = round(2^64 lam/(1+lam)))
    log_norm: Any  # float64: F(n) = log(n (n-1) ... (n-d+1)); filled on the device (see _with_norm)


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


def avx2_forms() -> bool:
    """True where the event map is traced in its AVX2 forms: XLA:CPU on a CPU without AVX-512 (or
    with it capped, :func:`qlib._xla.isa_capped`). AVX2 has no float64 <-> int64 vector conversion
    and no 64-bit vector multiply, so LLVM runs ``frexp``'s exponent and ``astype(int64)`` of a
    float one element at a time and a uint64 product as three 32-bit ones; the AVX2 forms below
    give the same bits with vector instructions (bit tricks exact in the ranges used). Elsewhere
    (AVX-512, GPU) the event map is traced as before, so its code there does not change."""
    return jax.default_backend() == "cpu" and not wide_vectors_supported()


_MANTISSA = 0x000FFFFFFFFFFFFF
_HALF = 0x3FE0000000000000  # the bits of 0.5
_TWO52 = 0x4330000000000000  # the bits of 2^52


def _frexp_positive(u):
    """frexp(u) = (m, e as float64) for finite normal u > 0, from the bits: m = u with the exponent
    of 1/2, e = biased exponent - 1022 (as 2^52 + e' - (2^52 + 1022), exact): what jnp.frexp gives."""
    b = jax.lax.bitcast_convert_type(u, jnp.uint64)
    m = jax.lax.bitcast_convert_type((b & jnp.uint64(_MANTISSA)) | jnp.uint64(_HALF), jnp.float64)
    e = jax.lax.bitcast_convert_type((b >> 52) | jnp.uint64(_TWO52), jnp.float64) - (2.0**52 + 1022.0)
    return m, e


def _small_int(x):
    """x.astype(int64) for integer-valued float64 x in [0, 2^52): the bits of x + 2^52 less those of
    2^52 (exact; a vector integer subtract in place of a scalar conversion on AVX2)."""
    return (jax.lax.bitcast_convert_type(x + 2.0**52, jnp.uint64) - jnp.uint64(_TWO52)).astype(jnp.int64)


def uniform_log(w):
    """log U for U = (w + 1/2)/2^64, w uint64: accurate (a few ulp) near 0 and near 1.

    Below 1 - 2^-20, U is rounded to float64 (relative 2^-53, so log U to 2^-53 absolute)
    and its log taken as above; nearer 1, from x = 1 - U = (2^64 - 1 - w + 1/2)/2^64 (exact),
    log U = -x (1 + x (1/2 + x/3)) (truncation x^3/4 < 2^-62 relative).
    """
    u = (w.astype(jnp.float64) + 0.5) * 2.0**-64  # >= 2^-65: normal
    if avx2_forms():
        m, e = _frexp_positive(u)
    else:
        m, e = jnp.frexp(u)
        e = e.astype(jnp.float64)
    x = ((~w).astype(jnp.float64) + 0.5) * 2.0**-64
    near = -x * (1.0 + x * (0.5 + x * (1.0 / 3.0)))
    return jnp.where(w >= jnp.uint64(_NEAR_ONE), near, _log_reduced(m, e))


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
    x = jnp.clip(x, 0.0, nf - 1.0)  # an integer in [0, n - 1], n < 2^32
    return _small_int(x) if avx2_forms() else x.astype(jnp.int64)


def departure_rank(w, n):
    """r = floor(w n / 2^64) for w uint64, n < 2^32, exact (64 x 32-bit high product), as int64."""
    n = n.astype(jnp.uint64)
    if avx2_forms():  # n < 2^32 made visible to LLVM: each product is one 32 x 32-bit vector multiply
        n = n & jnp.uint64(_M32)
    return (((w >> 32) * n + (((w & jnp.uint64(_M32)) * n) >> 32)) >> 32).astype(jnp.int64)


# --------------------------------------------------------------------------- exact thresholds
# Without replacement an arrival joins level i iff U < g(u_i) = C(u_i, d)/C(n, d), U = (w + 1/2)/2^64
# for its value word w. For every count u that is w < T(u), with the integer
#     T(u) = #{w in [0, 2^64): (2w + 1) C(n, d) < 2^65 C(u, d)} = min(ceil(2^65 C(u, d)/C(n, d)) // 2, 2^64),
# non-decreasing in u, T(u) = 0 for u < d and T(n) = 2^64. So the levels an arrival passes are those with
# u_i > x, x = max{u: T(u) <= w}, a prefix of the levels exactly as with replacement: the arrival's x
# is computed with its draw (:func:`table_threshold`, vectorised over the block) and the step is the
# step of sampling with replacement, with no float compare or lgamma in the sequential loop. T is exact
# (Python integers), so the decisions are those of the exact law, word for word.

#: Bytes of threshold tables (one column per lane, n_max + 1 rows) a driver may hold; above it, or with
#: n_max + 1 > TABLE_MAX_ROWS, sampling without replacement falls back to the carried log g (float compare).
TABLE_BYTES = 2**26
TABLE_MAX_ROWS = 2**20


@functools.cache
def _threshold_table(n: int, d: int) -> np.ndarray:
    num, den = 0, math.comb(n, d)
    out = np.zeros(n + 1, np.uint64)
    for u in range(d, n + 1):
        num = 1 if u == d else num * u // (u - d)  # C(u, d) = C(u - 1, d) u / (u - d), exact
        c = -(-(num << 65) // den)
        out[u] = min(c // 2, 2**64 - 1)  # T(n) = 2^64 is stored as 2^64 - 1; u = n is masked in use
    out.flags.writeable = False
    return out


def threshold_table(n: int, d: int) -> np.ndarray:
    """T(u) for u = 0..n, uint64 (T(n) = 2^64 stored as 2^64 - 1): an arrival of value word w
    passes a level of count u < n iff w < T(u), exactly (see above). Requires 1 <= d <= n."""
    n, d = int(n), int(d)
    if not 1 <= d <= n:
        raise ValueError(f"d must be in [1, n] for a threshold table; got d = {d}, n = {n}")
    return _threshold_table(n, d)


def _threshold_guess(log_u, n, d):
    """The integer b below (approximate inverse of g at U = exp(log_u)) - 1/2, in [d - 1, n - 1]:
    C(u, d) ~ (v^d - k d v^(d-2))/d!, v = u - c, c = (d - 1)/2, k = (d^2 - 1)/24, so g(u) = U at
    about v - k/v = (n - c - k/(n - c)) U^(1/d). Only a guess: :func:`table_threshold` checks it."""
    nf = n.astype(jnp.float64)
    c = 0.5 * (d - 1.0)
    k = (d * d - 1.0) / 24.0
    a = nf - c
    y = (a - k / a) * jnp.exp(log_u / d)
    v = 0.5 * (y + jnp.sqrt(y * y + 4.0 * k))
    return jnp.clip(jnp.floor(c + v - 0.5), d - 1.0, nf - 1.0).astype(jnp.int64)


def table_threshold(log_u, w, tab, n, d):
    """x = max{u in [0, n]: u < n and T(u) <= w} for value words ``w`` (..., lanes) uint64 with
    their ``log_u``, from the lanes' tables ``tab`` (rows, lanes) (:func:`threshold_table`,
    column per lane): an arrival passes a level iff u_i > x. int64 in [d - 1, n - 1].

    The guess b of :func:`_threshold_guess` settles x with three table entries when x is b or
    b + 1 (T(b) <= w < T(b + 2)), which is checked; otherwise (not seen in 10^5 words at any point
    tried, but not excluded) a bisection over [0, n] on the table gives it. Only the table
    decides: the guess costs no exactness.
    """
    ni = n.astype(jnp.int64)

    def le(u):  # [u < n and T(u) <= w]; T(u) for u < 0 is T(0) = 0
        i = jnp.clip(u, 0, ni)
        t = jnp.take_along_axis(tab, i.reshape((-1,) + i.shape[-1:]), axis=0).reshape(i.shape)
        return (t <= w) & (u < ni)

    b = _threshold_guess(log_u, n, d)
    x = b + le(b + 1).astype(jnp.int64)
    ok = le(b) & ~le(b + 2)

    def bisect(x):
        lo, hi = jnp.zeros_like(x), jnp.broadcast_to(ni, x.shape)  # le(0) holds, le(n) does not
        for _ in range(max(1, int(tab.shape[0] - 1).bit_length())):
            mid = (lo + hi) // 2
            t = le(mid)
            lo, hi = jnp.where(t, mid, lo), jnp.where(t, hi, mid)
        return jnp.where(ok, x, lo)

    return jax.lax.cond(jnp.all(ok), lambda x: x, bisect, x)


def _events(w_event, w_value, p: LaneParams, replacement: bool, variant: EventMap = MODEL,
            table=None) -> Events:
    """Events from the two words of a step (any leading shape, lanes last; params broadcast).

    ``variant`` swaps one piece of the map (docs/models.md#near-wrong-models): the departure
    rank r + 1 ("departure_off_by_one"); the join threshold x - 1 for x >= 1, i.e. u_i >= x in
    place of u_i > x ("arrival_off_by_one"); with probability eta the threshold of one uniform
    queue, x = r ("eta_greedy": the event word below floor(eta A) marks the arrival, a
    uniform independent of U); "d_offset" and "other_sampling" come in through ``p`` and
    ``replacement`` (see :func:`_local_advance`); "tie_longer" draws v = w_event / A here and acts
    in :func:`_fast_step`. The model's map ("model") is the code path of the plain step.

    Without replacement, ``table`` (the lanes' :func:`threshold_table` columns, (rows, lanes)) gives
    an arrival the integer x of the with-replacement events (:func:`table_threshold`): the events
    then have ``log_u`` None and the step compares integers. Without it, ``log_u`` is kept.
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
    if table is not None:
        x = jnp.where(arrival, table_threshold(log_u, w_value, table, p.n, p.d), rank)
        return Events(arrival, x.astype(jnp.uint32), None, v)
    return Events(arrival, rank.astype(jnp.uint32), log_u, v)


def draw(rng, p: LaneParams, replacement: bool) -> tuple[Any, Events]:
    """One step's randomness for every lane: (new rng, events of shape (lanes,))."""
    rng, w1 = _rng.next_u64(rng)
    rng, w2 = _rng.next_u64(rng)
    return rng, _events(w1, w2, p, replacement)


def draw_block(rng, p: LaneParams, steps: int, replacement: bool, active=None,
               variant: EventMap = MODEL, table=None) -> Events:
    """The events of the next ``steps`` steps of every lane at once: shape (steps, lanes).

    Identical, row by row, to ``steps`` calls of :func:`draw`; computed vectorised over
    (steps, lanes). Inactive lanes (``active`` False) get a no-op departure (rank 2^32 - 1).
    """
    w = _rng.block_words(rng, 2 * steps)
    w = w.reshape((steps, 2) + w.shape[1:])
    ev = _events(w[:, 0], w[:, 1], p, replacement, variant, table)
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

