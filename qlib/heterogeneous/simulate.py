"""Uniformised JAX simulation of M/M/n with heterogeneous servers, many replicas at once.

The model (docs/models.md, "Heterogeneous servers"; Cabral, arXiv:0706.0560): Poisson(lam)
arrivals, server j serves at rate mus[j]; an arrival that finds idle servers joins one of them
(by ``policy``), else it waits in one FIFO queue taken by the first server to finish. The chain
is uniformised at rate Lambda = lam + sum(mu), so ``steps`` steps cover steps/Lambda time units;
its event probabilities are exact to 2^-64 (:func:`step_probabilities`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from qlib import _rng, _sharding, _validate, simulations
from qlib.heterogeneous.driver import drive
from qlib.heterogeneous.exact import POLICIES, check_rates
from qlib.heterogeneous.result import ChainState, SimulationResult
from qlib.heterogeneous.state import (
    ArrayChain,
    BitsChain,
    Totals,
    check_state,
    fresh_state,
    from_kernel,
    to_kernel,
)

#: The smallest share of the total rate Lambda = lam + sum(mu) that lam or any mu_j may have,
#: and the smallest 1 - rho: 2^-40. Shares are represented to 2^-64, so relative errors <= 2^-24.
MIN_SHARE = 2.0**-40
_MAX_CHUNK = 1 << 22  # int32 per-chunk counters (and packed per-server sums) cannot overflow
_BITS_MAX_N = 1 << 16  # the bits kernel records the server index in 16 bits
_FIFO_MAX_N = 16  # "longest_idle" in the bits kernel: 4-bit ids of the idle FIFO in a uint64


# --------------------------------------------------------------------------- exact cut points
# Each step draws two 64-bit SplitMix64 words. The first, w1, picks the event against integer cut
# points C_0 <= ... <= C_{n-1} < 2^64: an arrival if w1 < C_0, else the server j with
# C_j <= w1 < C_{j+1} (C_n = 2^64), C_j = round(2^64 (lam + mu_0 + ... + mu_{j-1}) / Lambda) in
# exact rational arithmetic, so every share of Lambda is represented to within 2^-64. The second,
# w2, picks the r-th idle server (in server order), r = floor(w2 k / 2^64) for k idle servers.
# The resolvable range (every share and 1 - rho >= 2^-40) keeps relative errors <= 2^-23.
# "fastest" and "slowest" lay the servers out sorted by rate and take the lowest idle one; the
# cut points follow that order. Replica r's stream is seeded from (seed, r) (qlib._rng).

def _cut_points(lam: float, mus: np.ndarray) -> list[int]:
    """C_j = round(2^64 (lam + mus[0] + ... + mus[j-1]) / Lambda), j = 0..n-1, in exact arithmetic
    (halves round up). C_n = 2^64 is implied."""
    rates = [Fraction(lam)] + [Fraction(float(m)) for m in mus]
    total = sum(rates)
    cuts, cum = [], Fraction(0)
    for r in rates[:-1]:
        cum += r
        x = cum * (1 << 64) / total
        cuts.append((2 * x.numerator + x.denominator) // (2 * x.denominator))
    return cuts


def _check_resolvable(lam: float, mus: np.ndarray) -> None:
    """Every share of Lambda >= 2^-40 and 1 - rho >= 2^-40, checked exactly, else ValueError."""
    fl = Fraction(lam)
    fm = [Fraction(float(m)) for m in mus]
    smu = sum(fm)
    total = fl + smu
    floor = Fraction(MIN_SHARE)
    if fl < floor * total:
        raise ValueError(
            f"lam must be >= 2^-40 (lam + sum(mus)) = {float(floor * smu / (1 - floor)):.6g} for these mus "
            f"(the simulator resolves rate shares >= 2^-40 ≈ {MIN_SHARE:.3g} of the total rate, each to "
            f"relative error <= 2^-24); got lam = {lam!r}")
    if (smu - fl) < floor * smu:
        raise ValueError(
            f"lam must be <= (1 - 2^-40) sum(mus) = {float((1 - floor) * smu):.17g}: the simulator resolves "
            f"1 - rho >= 2^-40 ≈ {MIN_SHARE:.3g} (relative error <= 2^-23); got lam = {lam!r}, "
            f"1 - rho = {float((smu - fl) / smu):.3g}")
    small = [j for j, m in enumerate(fm) if m < floor * total]
    if small:
        j = small[0]
        raise ValueError(
            f"mus must each be >= 2^-40 (lam + sum(mus)) = {float(floor * total):.6g} (the simulator "
            f"resolves rate shares >= 2^-40 ≈ {MIN_SHARE:.3g} of the total rate lam + sum(mus), each to "
            f"relative error <= 2^-24); got mus[{j}] = {float(fm[j])!r} ({len(small)} server(s) below)")


def _order(mus: np.ndarray, policy: str) -> np.ndarray:
    """Kernel server order: fastest first for "fastest", slowest first for "slowest" (ties in
    input order; the kernel then takes the lowest idle index), else input order."""
    if policy == "fastest":
        return np.argsort(-mus, kind="stable")
    if policy == "slowest":
        return np.argsort(mus, kind="stable")
    return np.arange(mus.size)


#: The kernels' routing rule per policy: "fastest" and "slowest" both take the first idle
#: server in kernel order (:func:`_order` sorts the servers for them).
_RULE = {"random": "random", "longest_idle": "longest_idle", "fastest": "first_idle", "slowest": "first_idle",
         "mu_power": "weighted"}


def step_probabilities(lam: float, mus: ArrayLike, *, policy: str = "random") -> list[Fraction]:
    """The exact probabilities the simulated chain uses per uniformised step.

    Entry 0: an arrival (the model's lam/Lambda); entry 1 + j: a potential completion at server
    j, in input order (mu_j/Lambda). Fractions with denominator 2^64, each within 2^-64 of the
    exact share of the float64 inputs. ``policy`` matters only through the server order the
    cut points are laid out in ("fastest": fastest first; "slowest": slowest first).

    Args:
        lam: arrival rate, in (0, sum(mus)).
        mus: (n,) service rates > 0.
        policy: one of :data:`POLICIES`.

    Returns:
        n + 1 Fractions: the arrival's, then each server's.

    Raises:
        ValueError: naming the parameter, also outside the resolvable range (:data:`MIN_SHARE`).
    """
    lam_f, m = check_rates(lam, mus)
    policy = _validate.choice("policy", policy, POLICIES)
    _check_resolvable(lam_f, m)
    perm = _order(m, policy)
    cuts = _cut_points(lam_f, m[perm]) + [1 << 64]
    widths = np.diff(np.array([0] + cuts, dtype=object))
    out = [Fraction(int(widths[0]), 1 << 64)] + [Fraction(0)] * m.size
    for pos, j in enumerate(perm):
        out[1 + j] = Fraction(int(widths[1 + pos]), 1 << 64)
    return out


# --------------------------------------------------------------------------- shared step pieces

def _draw2(rng):
    """(new state, w1, w2): the two words of one step (w1 picks the event, w2 the idle server)."""
    r1 = rng + jnp.uint64(_rng.GOLDEN)
    r2 = r1 + jnp.uint64(_rng.GOLDEN)
    return r2, _rng.mix64(r1), _rng.mix64(r2)


def _rank(w2, k):
    """floor(w2 k / 2^64) for uint64 w2 and 0 <= k < 2^32, exactly, from 32-bit halves:
    w2 k = hi k 2^32 + lo k, so the result is (hi k + floor(lo k / 2^32)) >> 32 (no 128-bit product)."""
    k = k.astype(jnp.uint64)
    hi = w2 >> 32
    lo = w2 & jnp.uint64(0xFFFFFFFF)
    return (hi * k + ((lo * k) >> 32)) >> 32


def _totals_add(totals: Totals, counts, record) -> Totals:
    """Chunk counts added to the int64 run totals when ``record`` is 1."""
    r = record.astype(jnp.int64)
    return Totals(*(t + r * c.astype(jnp.int64) for t, c in zip(totals, counts)))


# --------------------------------------------------------------------------- array kernel
# Two kernels, bit-identical to each other and to the numba loop of benchmarks/numba_heterogeneous.py:
# "array" keeps (servers, replicas) arrays, O(n) work per step (any n, any policy); "bits" keeps
# the busy set as 64-bit masks, O(n/64 + log n) per step (n <= 16 for "longest_idle").

def _idle_before(idle):
    """Number of idle servers before server j (exclusive prefix count along axis 0), O(n log n).
    (XLA:CPU lowers cumsum to an O(n^2) reduce-window; the associative scan is O(n log n).)"""
    x = idle.astype(jnp.int32)
    return jax.lax.associative_scan(jnp.add, x, axis=0) - x


def _array_step(rule: str, consts, i, c):
    """One step of every replica in the (servers, replicas) layout; adds to the chunk counters.

    The carry holds the current step's two words, drawn one iteration ahead: XLA:CPU duplicates
    cheap producers into each consumer fusion, so a word drawn in the body would be recomputed
    (two emulated 64-bit multiplies each) by every output; a carried word is only loaded.
    """
    c_arr, lo_t, hi_t, wts = consts
    rng, w1, w2, busy, q, stamp, acc_busy, acc_done, acc_q, acc_arr, acc_wait = c
    rng_next, w1_next, w2_next = _draw2(rng)
    arrival = w1 < c_arr
    idle = jnp.logical_not(busy)
    k = jnp.sum(idle, axis=0, dtype=jnp.int32)
    if rule == "random":
        r = _rank(w2, k).astype(jnp.int32)
        pick = idle & (_idle_before(idle) == r)
    elif rule == "weighted":  # idle server j with probability w_j / (sum of idle w): "mu_power"
        wi = jnp.where(idle, wts, 0.0)
        cw = jax.lax.associative_scan(jnp.add, wi, axis=0)
        target = ((w2 >> 11).astype(jnp.float64) + 0.5) * 2.0**-53 * cw[-1:]
        pick = idle & (cw > target) & (cw - wi <= target)
    elif rule == "first_idle":  # the first idle server in kernel order (fastest / slowest first)
        pick = idle & (_idle_before(idle) == 0)
    else:  # longest idle: smallest stamp among idle servers (stamps are distinct)
        key = jnp.where(idle, stamp, jnp.int32(2**31 - 1))
        pick = idle & (key == jnp.min(key, axis=0))
    waits = arrival & (k == 0)
    hit = (w1 >= lo_t) & (w1 <= hi_t) & busy  # potential completion at a busy server
    done = jnp.any(hit, axis=0)
    from_queue = q > 0
    freed = hit & jnp.logical_not(from_queue)
    busy = (busy | (pick & arrival)) & jnp.logical_not(freed)
    if rule == "longest_idle":
        stamp = jnp.where(freed, i, stamp)
    q = q + waits.astype(jnp.int32) - (done & from_queue).astype(jnp.int32)
    return (rng_next, w1_next, w2_next, busy, q, stamp, acc_busy + busy, acc_done + hit,
            acc_q + q, acc_arr + arrival, acc_wait + waits)


@partial(jax.jit, static_argnames=("rule",), donate_argnums=(0, 1))
def _array_chunk(chain: ArrayChain, totals: Totals, cuts, nsteps, record, weights=None, *, rule: str):
    """Advance every replica ``nsteps`` steps with the array kernel; add the counts to ``totals``
    when ``record`` is 1. ``cuts`` (n,) uint64 are the cut points C_0..C_{n-1}."""
    n, R = chain.busy.shape
    hi = jnp.concatenate([cuts[1:] - jnp.uint64(1), jnp.full((1,), 2**64 - 1, jnp.uint64)])
    wts = jnp.ones((n, 1), jnp.float64) if weights is None else weights[:, None]
    consts = (cuts[0], cuts[:, None], hi[:, None], wts)  # server j owns [C_j, C_{j+1} - 1]
    zn = jnp.zeros((n, R), jnp.int32)
    zr = jnp.zeros((R,), jnp.int32)
    rng, w1, w2 = _draw2(chain.rng)
    c = (rng, w1, w2, chain.busy, chain.queue, chain.stamp, zn, zn, jnp.zeros((R,), jnp.int64), zr, zr)
    rng, _, _, busy, q, stamp, *acc = jax.lax.fori_loop(0, nsteps, partial(_array_step, rule, consts), c)
    rng = rng - jnp.uint64(2 * _rng.GOLDEN % 2**64)  # the lookahead drew one step too many
    if rule == "longest_idle":  # rebase: the stamps' ranks, idle servers first, oldest first
        key = jnp.where(busy, jnp.int32(2**31 - 1), stamp)
        rank = jnp.argsort(jnp.argsort(key, axis=0, stable=True), axis=0, stable=True)
        stamp = rank.astype(jnp.int32) - n
    return ArrayChain(rng, busy, q, stamp), _totals_add(totals, acc, record)


# --------------------------------------------------------------------------- bits kernel
#
# The bits kernel's step has one output, a 32-bit record of what happened ("pend"): XLA:CPU has
# no multi-output loop fusion here, so every output of the step would recompute the step. The
# busy masks, the queue, the FIFO and all counters are updated one iteration later from the
# record by a few cheap ops each. Record layout: flags in bits 0..4, the idle count before the
# step in bits 5..15 ("longest_idle" only), the server touched in bits 16..31.

_JOIN, _FREE, _HIT, _ARR, _WAIT = range(5)


def _flag(pend, bit):
    return ((pend >> bit) & jnp.uint32(1)) == 1


def _swar64(x):
    """Partial popcounts of the uint64 ``x`` per 2, 4, 8, 16 and 32 bits (for :func:`_select64`)."""
    u = jnp.uint64
    s1 = x - ((x >> 1) & u(0x5555555555555555))
    s2 = (s1 & u(0x3333333333333333)) + ((s1 >> 2) & u(0x3333333333333333))
    s4 = (s2 + (s2 >> 4)) & u(0x0F0F0F0F0F0F0F0F)
    s8 = (s4 + (s4 >> 8)) & u(0x00FF00FF00FF00FF)
    s16 = (s8 + (s8 >> 16)) & u(0x0000FFFF0000FFFF)
    return s1, s2, s4, s8, s16


def _select64(x, r):
    """Index of the r-th (0-based) set bit of the uint64 ``x`` (needs r < popcount(x)).

    Binary search down the partial popcounts: halves, quarters, ..., bits; six
    shift-mask-compare-select rounds, no branches (XLA has no pdep)."""
    u = jnp.uint64
    s1, s2, s4, s8, s16 = _swar64(x)
    pos = jnp.zeros_like(x)
    for width, s, m in ((32, s16, 0xFFFF), (16, s8, 0xFF), (8, s4, 0xFF), (4, s2, 0xF), (2, s1, 0x3),
                        (1, x, 0x1)):
        c = (s >> pos) & u(m)
        go = r >= c
        r = jnp.where(go, r - c, r)
        pos = jnp.where(go, pos + u(width), pos)
    return pos


def _server_of(cuts, w1, n: int):
    """The server j with C_j <= w1 < C_{j+1} (j = 0 when w1 < C_1): the count of cut points passed
    for n <= 40 (measured faster there), an unrolled binary search (log2 n gathers) above."""
    if n <= 40:
        j = jnp.zeros(w1.shape, jnp.uint32)
        for t in range(1, n):
            j = j + (w1 >= cuts[t]).astype(jnp.uint32)
        return j
    j = jnp.zeros(w1.shape, jnp.int32)
    step = 1 << max(0, (n - 1).bit_length() - 1)
    while step >= 1:
        cand = j + step
        ok = (cand < n) & (cuts[jnp.minimum(cand, n - 1)] <= w1)
        j = jnp.where(ok, cand, j)
        step //= 2
    return j.astype(jnp.uint32)


def _word_of(mask, w):
    """mask[w[r], r] for the (W, R) words: a select over the few words (no gather)."""
    if mask.shape[0] == 1:
        return mask[0]
    sel = w[None, :] == jnp.arange(mask.shape[0], dtype=w.dtype)[:, None]
    return jnp.sum(jnp.where(sel, mask, jnp.uint64(0)), axis=0)


def _bits_decode(rule: str, n: int, cuts, w1, w2, mask, q, fifo):
    """One step: its record, from the two words and the state before the step."""
    W = mask.shape[0]
    u = jnp.uint32
    arrival = w1 < cuts[0]
    e = _server_of(cuts, w1, n)  # meaningful when not an arrival
    busy_e = ((_word_of(mask, e >> 6) >> (e & u(63)).astype(jnp.uint64)) & jnp.uint64(1)) == 1
    last = n - 64 * (W - 1)
    full = jnp.array([2**64 - 1] * (W - 1) + [(1 << last) - 1 if last < 64 else 2**64 - 1],
                     jnp.uint64)[:, None]
    idle = ~mask & full
    cnt = jax.lax.population_count(idle)  # (W, R)
    k = jnp.sum(cnt, axis=0)
    if rule == "longest_idle":
        j = (fifo & jnp.uint64(15)).astype(u)
    else:
        # find the word holding the wanted idle server, then the bit inside it
        rem = _rank(w2, k) if rule == "random" else jnp.zeros_like(k)
        word, base, found = idle[W - 1], jnp.full(k.shape, 64 * (W - 1), jnp.uint64), k == 0
        if W > 1:
            sel_rem = rem
            for w in range(W):
                here = jnp.logical_not(found) & (rem < cnt[w])
                word = jnp.where(here, idle[w], word)
                base = jnp.where(here, jnp.uint64(64 * w), base)
                sel_rem = jnp.where(here, rem, sel_rem)
                rem = jnp.where(found | here, rem, rem - cnt[w])
                found = found | here
            rem = sel_rem
        if rule == "first_idle":  # the lowest idle bit: popcount below it
            pos = jax.lax.population_count((word & (~word + jnp.uint64(1))) - jnp.uint64(1))
        else:
            pos = _select64(word, rem)
        j = (base + pos).astype(u)
    join = arrival & (k > 0)
    waits = arrival & (k == 0)
    hit = jnp.logical_not(arrival) & busy_e
    free = hit & (q == 0)
    srv = jnp.where(join, j, e)
    pend = (join.astype(u) << _JOIN) | (free.astype(u) << _FREE) | (hit.astype(u) << _HIT) \
        | (arrival.astype(u) << _ARR) | (waits.astype(u) << _WAIT) | (srv << 16)
    if rule == "longest_idle":
        pend = pend | (k.astype(u) << 5)
    return pend


def _bits_apply(rule: str, mask, q, fifo, pend):
    """The state after the recorded step: set the joined server's bit or clear the freed one's;
    +1 waiting if the arrival waited, -1 if a completion took a waiting customer; the FIFO pops
    its head on a join and appends the freed server at position k (the idle count before)."""
    W = mask.shape[0]
    join, free = _flag(pend, _JOIN), _flag(pend, _FREE)
    srv = (pend >> 16).astype(jnp.uint64)
    bit = jnp.uint64(1) << (srv & jnp.uint64(63))
    if W > 1:
        here = (srv >> 6)[None, :] == jnp.arange(W, dtype=jnp.uint64)[:, None]
        join, free = join[None, :] & here, free[None, :] & here
    mask = jnp.where(join, mask | bit, jnp.where(free, mask & ~bit, mask))
    served = _flag(pend, _HIT) & jnp.logical_not(_flag(pend, _FREE))
    q = q + _flag(pend, _WAIT).astype(jnp.int32) - served.astype(jnp.int32)
    if rule == "longest_idle":
        fifo = jnp.where(_flag(pend, _JOIN), fifo >> 4, fifo)
        k = ((pend >> 5) & jnp.uint32(0x7FF)).astype(jnp.uint64)
        fifo = jnp.where(_flag(pend, _FREE), fifo | (srv << (4 * k)), fifo)
    return mask, q, fifo


def _bits_account(acc, pend, s):
    """Add the recorded step s to the chunk counters. Per server one int64 packs
    (busy time) * 2^32 + completions; busy time is lazy: a join at step s adds -s, a release
    adds +s, and servers busy at the chunk's end add nsteps (so it sums to the steps busy)."""
    acc_srv, acc_q, acc_arr, acc_wait = acc
    join, free, hit = _flag(pend, _JOIN), _flag(pend, _FREE), _flag(pend, _HIT)
    s64 = jnp.asarray(s, jnp.int64)
    v = jnp.where(join, -s64, jnp.where(free, s64, jnp.int64(0))) * (1 << 32) + hit.astype(jnp.int64)
    # a one-hot add over (n, R): a scatter-add (vmapped, to stay local to each device) measured
    # slower at every n from 10 to 1000 on XLA:CPU
    srv = (pend >> 16).astype(jnp.int32)
    one_hot = srv[None, :] == jnp.arange(acc_srv.shape[0], dtype=jnp.int32)[:, None]
    acc_srv = acc_srv + jnp.where(one_hot, v[None, :], jnp.int64(0))
    return (acc_srv, acc_q, acc_arr + _flag(pend, _ARR).astype(jnp.int32),
            acc_wait + _flag(pend, _WAIT).astype(jnp.int32))


def _bits_step(rule: str, n: int, cuts, i, c):
    """Iteration i: finish step i - 1 from its record, then decode step i."""
    rng, mask, q, fifo, pend, acc = c
    mask, q, fifo = _bits_apply(rule, mask, q, fifo, pend)
    acc_srv, acc_q, acc_arr, acc_wait = _bits_account(acc, pend, i - 1)
    acc = (acc_srv, acc_q + q.astype(jnp.int64), acc_arr, acc_wait)  # q before step i; fixed at the end
    rng, w1, w2 = _draw2(rng)
    pend = _bits_decode(rule, n, cuts, w1, w2, mask, q, fifo)
    return rng, mask, q, fifo, pend, acc


def _busy_bits(mask, n: int):
    """(n, R) int64 0/1 from the (W, R) masks."""
    W, R = mask.shape
    b = (mask[:, None, :] >> jnp.arange(64, dtype=jnp.uint64)[None, :, None]) & jnp.uint64(1)
    return b.reshape(64 * W, R)[:n].astype(jnp.int64)


@partial(jax.jit, static_argnames=("rule", "n"), donate_argnums=(0, 1))
def _bits_chunk(chain: BitsChain, totals: Totals, cuts, nsteps, record, *, rule: str, n: int):
    """Advance every replica ``nsteps`` steps with the bits kernel; add the counts to ``totals``
    when ``record`` is 1. Same rules and random words as :func:`_array_chunk`, same results."""
    R = chain.rng.shape[0]
    acc = (jnp.zeros((n, R), jnp.int64), jnp.zeros((R,), jnp.int64), jnp.zeros((R,), jnp.int32),
           jnp.zeros((R,), jnp.int32))
    c = (chain.rng, chain.mask, chain.queue, chain.fifo, jnp.zeros((R,), jnp.uint32), acc)  # empty record
    step = partial(_bits_step, rule, n, cuts)
    rng, mask, q_prev, fifo, pend, acc = jax.lax.fori_loop(0, nsteps, step, c)
    mask, q, fifo = _bits_apply(rule, mask, q_prev, fifo, pend)
    acc_srv, acc_q, acc_arr, acc_wait = _bits_account(acc, pend, nsteps - 1)
    acc_q = acc_q - chain.queue.astype(jnp.int64) + q.astype(jnp.int64)  # q after steps 0..nsteps-1
    busy = (acc_srv >> 32) + jnp.asarray(nsteps, jnp.int64) * _busy_bits(mask, n)
    done = acc_srv & jnp.int64(0xFFFFFFFF)
    return BitsChain(rng, mask, q, fifo), _totals_add(totals, (busy, done, acc_q, acc_arr, acc_wait), record)


# --------------------------------------------------------------------------- driver

def _work_units(n: int, use_bits: bool) -> float:
    """Cost of one replica-step in units of the reference rate of :func:`qlib._validate.work`."""
    return max(1.0, n / 32.0) if use_bits else max(1.0, n / 8.0)


def simulate(lam: float, mus: ArrayLike, *, steps: int, replicas: int | None = None, seed: int | None = None,
             burn_in: int = 0, policy: str = "random", initial: SimulationResult | ChainState | None = None,
             chunk: int | None = None, progress: bool | None = None, kernel: str = "auto",
             routing_exponent: float | None = None) -> SimulationResult:
    """Simulate ``replicas`` independent copies of the heterogeneous M/M/n for ``steps`` steps each.

    The model (docs/models.md, "Heterogeneous servers"): Poisson(lam) arrivals, server j serves
    at rate mus[j], an arrival finding idle servers picks one by ``policy``, else waits in one
    FIFO queue. Each replica runs ``burn_in`` uniformised steps unrecorded, then ``steps``
    recorded steps (steps/Lambda time units, Lambda = lam + sum(mus)). Replicas are sharded over
    all JAX devices (:mod:`qlib._sharding`), padded to a multiple of the device count with extra
    streams that are dropped: replica r's numbers depend only on (seed, r), not on ``replicas``,
    the device count or ``chunk``.

    Args:
        lam: arrival rate, with lam/Lambda, every mu_j/Lambda and 1 - rho all >= 2^-40
            (:data:`MIN_SHARE`).
        mus: (n,) service rates.
        steps: recorded uniformised steps per replica.
        replicas: independent chains (default 1, or the continued run's count).
        seed: seed of the random streams (default 0); not with ``initial``.
        burn_in: unrecorded steps before the recorded ones.
        policy: where an arrival that finds idle servers goes: "random" (uniform among the idle
            ones, Cabral), "longest_idle" (the one idle the longest: the same stationary law),
            "fastest" (informed customers, for contrast), "slowest" (a deliberately wrong rule
            that breaks claim 2) or "mu_power" (idle server j with probability proportional to
            mu_j^routing_exponent: a near wrong model, docs/models.md#near-wrong-models).
        initial: None (every chain starts empty), or a :class:`SimulationResult` /
            :class:`ChainState` to continue from its final state and random state: T steps
            continued by T more end where one run of 2T ends. Needs the same servers, policy and
            replica count.
        chunk: steps per compiled loop (default: sized from replicas and n); changes no number.
        progress: show a progress bar (default: when the run is long).
        kernel: "bits", "array" or "auto" (bits where it applies); all give identical results.
        routing_exponent: gamma of policy "mu_power" (array kernel only), in [-8, 8].

    Returns:
        A :class:`SimulationResult` with (replicas, n) and (replicas,) arrays and the final state.

    Raises:
        ValueError: naming the parameter, before anything is compiled, for parameters outside
            the resolvable range, runs beyond a year of compute or arrays beyond the memory.
    """
    lam_f, m = check_rates(lam, mus)
    n = m.size
    _check_resolvable(lam_f, m)
    steps = _validate.integer("steps", steps, low=1)
    burn_in = _validate.integer("burn_in", burn_in, low=0)
    policy = _validate.choice("policy", policy, POLICIES + ("mu_power",))
    kernel = _validate.choice("kernel", kernel, ("auto", "bits", "array"))
    use_bits, weights = _kernel_for(kernel, policy, routing_exponent, m)
    start, seed, replicas = _start(initial, seed, replicas, n, policy)
    if chunk is not None:
        chunk = _validate.integer("chunk", chunk, low=1, high=_MAX_CHUNK)
    R = _sharding.padded(replicas)
    _validate.work("steps", float(steps + burn_in) * R * _work_units(n, use_bits))
    _validate.memory("replicas", R * (64.0 * n + 256.0),
                     f"{R} replicas x {n} servers x about 64 bytes (counters, state, results)")
    if progress is None:
        progress = (steps + burn_in) * R * _work_units(n, use_bits) > 2e8  # roughly > 10 s
    if start is None:
        start = fresh_state(seed, replicas, n, policy)
    perm = _order(m, policy)  # kernel order; results are mapped back to input order
    totals, state = _run(lam_f, m, perm, start, R, use_bits, weights, policy, burn_in=burn_in, steps=steps,
                         chunk=chunk, replicas=replicas, progress=progress)
    tot_busy, tot_done, tot_q, tot_arr, tot_wait = totals
    inv = np.argsort(perm)
    time = steps / (lam_f + math.fsum(m))
    with np.errstate(invalid="ignore", divide="ignore"):
        wait_fraction = np.where(tot_arr > 0, tot_wait / np.maximum(tot_arr, 1), np.nan)
    res = SimulationResult(
        lam=lam_f, mus=m.copy(), policy=policy, steps=steps, burn_in=burn_in, seed=seed,
        busy_fraction=(tot_busy / steps).T[:, inv], throughput=(tot_done / time).T[:, inv],
        mean_queue=tot_q / steps, wait_fraction=wait_fraction, arrivals=tot_arr,
        time=np.full(replicas, time), state=state)
    simulations.ran_heterogeneous(res, start, routing_exponent, seeded=initial is None)  # whoever listens
    return res


def _kernel_for(kernel: str, policy: str, routing_exponent, m: np.ndarray) -> tuple[bool, np.ndarray | None]:
    """(whether the bits kernel runs, the routing weights of "mu_power" or None), validated."""
    n = m.size
    weights = None
    if policy == "mu_power":
        gamma = _validate.real("routing_exponent", routing_exponent, low=-8.0, high=8.0, low_open=False,
                               high_open=False)
        if kernel == "bits":
            raise ValueError("policy 'mu_power' runs on the array kernel only; got kernel='bits'")
        kernel = "array"
        weights = np.power(m, gamma)
    elif routing_exponent is not None:
        raise ValueError(f"routing_exponent is for policy 'mu_power' only; got policy={policy!r}")
    bits_max = _FIFO_MAX_N if policy == "longest_idle" else _BITS_MAX_N
    if kernel == "bits" and n > bits_max:
        raise ValueError(f"kernel='bits' needs n <= {bits_max} servers for policy {policy!r}; got {n}")
    return kernel == "bits" or (kernel == "auto" and n <= bits_max), weights


def _start(initial, seed, replicas, n: int, policy: str) -> tuple[ChainState | None, int | None, int]:
    """(the continued state or None for a fresh start, the seed, the replica count), validated."""
    if initial is None:
        replicas = 1 if replicas is None else _validate.integer("replicas", replicas, low=1)
        seed = 0 if seed is None else _validate.integer("seed", seed, low=0, high=(1 << 64) - 1)
        return None, seed, replicas
    if seed is not None:
        raise ValueError("seed must not be given with initial: a continued run draws from the "
                         "random state stored in initial")
    if replicas is not None:
        replicas = _validate.integer("replicas", replicas, low=1)
    if isinstance(initial, SimulationResult):
        if initial.policy != policy:
            raise ValueError(f"policy must match the run being continued: initial was run with "
                             f"{initial.policy!r}, got policy={policy!r}")
        if initial.mus.size != n:
            raise ValueError(f"mus must have {initial.mus.size} servers, like the run being "
                             f"continued; got {n}")
        seed, start = initial.seed, initial.state
    else:
        start = initial
    start = check_state(start, n, replicas, policy)
    return start, seed, start.rng.shape[0]


def _run(lam_f: float, m: np.ndarray, perm: np.ndarray, start: ChainState, R: int, use_bits: bool,
         weights: np.ndarray | None, policy: str, *, burn_in: int, steps: int, chunk: int | None,
         replicas: int, progress: bool) -> tuple[tuple[np.ndarray, ...], ChainState]:
    """Run the kernel from ``start``: the totals (busy, done, queue, arrivals, waits) of the first
    ``replicas`` replicas on the host, and their final state."""
    n = m.size
    cuts = _cut_points(lam_f, m[perm])
    with jax.enable_x64(True):
        chain = to_kernel(start, perm, R, use_bits)
        shapes = ((n, R), (n, R), (R,), (R,), (R,))
        totals = Totals(*(_sharding.put(np.zeros(s, np.int64), -1) for s in shapes))
        cuts_d = jnp.asarray(np.array(cuts, dtype=np.uint64))
        if use_bits:
            run = partial(_bits_chunk, cuts=cuts_d, rule=_RULE[policy], n=n)
        else:
            wd = None if weights is None else jnp.asarray(weights[perm], jnp.float64)
            run = partial(_array_chunk, cuts=cuts_d, rule=_RULE[policy], weights=wd)
        step = lambda c, t, s, r: run(c, t, nsteps=s, record=r)
        chain, totals = drive(step, chain, totals, burn_in=burn_in, steps=steps, chunk=chunk,
                               replicas=replicas, progress=progress)
        host = tuple(_sharding.gather(t)[..., :replicas] for t in totals)
        return host, from_kernel(chain, perm, replicas, n, policy)
