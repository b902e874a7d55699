"""Uniformised JAX simulation of M/M/n with heterogeneous servers, many replicas at once.

The model (docs/models.md, "Heterogeneous servers"; Cabral, arXiv:0706.0560): Poisson(lam)
arrivals, server j serves at rate mus[j]; an arrival that finds idle servers joins one of them
(by ``policy``), else it waits in one FIFO queue taken by the first server to finish.

The chain is uniformised at rate Lambda = lam + sum(mu): every step is an arrival with
probability lam/Lambda, otherwise a *potential* completion at server j with probability
mu_j/Lambda, which happens only if j is busy. Time averages of the continuous-time chain equal
step averages of the uniformised one, so ``steps`` steps cover steps/Lambda time units.

Exact event probabilities. Each step draws two 64-bit SplitMix64 words. The first, w1, picks
the event against integer cut points C_0 <= C_1 <= ... <= C_{n-1} < 2^64: an arrival if
w1 < C_0, else the server j with C_j <= w1 < C_{j+1} (C_n = 2^64). Each cut point is
C_j = round(2^64 (lam + mu_0 + ... + mu_{j-1}) / Lambda), computed in exact rational
arithmetic from the float64 inputs (:func:`step_probabilities` returns what is simulated), so
lam's share and every mu_j's share of Lambda are represented to within 2^-64. The second word,
w2, picks the idle server: the r-th idle one (in server order) with r = floor(w2 k / 2^64) for
k idle servers, so every rank has probability 1/k to within 2^-64. The resolvable range, checked
before any run (ValueError naming the parameter): every share lam/Lambda and mu_j/Lambda is at
least 2^-40 (≈ 9.1e-13), so its relative error is at most 2^-24; and 1 - rho >= 2^-40, where
rho = lam/sum(mu), so the simulated 1 - rho has relative error at most 2^-23.
(Until this version one 64-bit word per step was split into a 32-bit event choice and a 32-bit
idle pick; the random streams, and so the numbers for a given seed, changed with this scheme.)

Policies for an arrival that finds idle servers:
- ``"random"``: the r-th idle server above, uniform among the idle ones (Cabral);
- ``"longest_idle"``: the server idle the longest, which has the same stationary law
  (Doroudi & Gopalakrishnan, arXiv:1305.6249);
- ``"fastest"``: the fastest idle server (informed customers), for contrast;
- ``"slowest"``: the slowest idle server, a deliberately wrong rule (it breaks Cabral's claim
  that the faster server does more work), for counterfactuals.
For "fastest" and "slowest" the kernels lay the servers out sorted by rate (fastest, resp.
slowest, first; ties in input order) and take the lowest idle one; the cut points follow that
order, so their random streams map to events in that order.

Replica r's random stream is SplitMix64 seeded from (seed, r) (:mod:`qlib._rng`), so its result
does not depend on how many replicas run beside it, how the steps are chunked, or on how many
devices they are sharded over (:mod:`qlib._sharding`). A result keeps every chain's final
state and random state (:class:`ChainState`), so ``simulate(..., initial=result)`` continues
the run exactly: T steps and then T more end in the same state as 2T steps in one call.

Two kernels, bit-identical to each other and to the numba loop of
``benchmarks/numba_heterogeneous.py``: "bits" keeps the busy set as 64-bit masks and does
O(n/64 + log n) work per step (any n for "random", "fastest" and "slowest", n <= 16 for
"longest_idle");
"array" keeps (servers, replicas) arrays and does O(n) work per step (any n, any policy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from qlib import _rng, _sharding, _validate
from qlib import cache as _cache
from qlib._progress import progress_bar
from qlib.heterogeneous.exact import POLICIES, check_rates
from qlib.stats import Estimate, replica_mean

#: The smallest share of the total rate Lambda = lam + sum(mu) that lam or any mu_j may have,
#: and the smallest 1 - rho: 2^-40. Shares are represented to 2^-64, so relative errors <= 2^-24.
MIN_SHARE = 2.0**-40
_MAX_CHUNK = 1 << 22  # int32 per-chunk counters (and packed per-server sums) cannot overflow
_BITS_MAX_N = 1 << 16  # the bits kernel records the server index in 16 bits
_FIFO_MAX_N = 16  # "longest_idle" in the bits kernel: 4-bit ids of the idle FIFO in a uint64


# --------------------------------------------------------------------------- states and results

class ChainState(NamedTuple):
    """Where every replica's chain stands: host arrays, one row per replica, servers in input order.

    ``rng`` (R,) uint64: SplitMix64 state (the next step draws the two words after it);
    ``busy`` (R, n) bool: busy servers; ``queue`` (R,) int64: customers waiting;
    ``idle_order`` (R, n) int64, only for "longest_idle" (else None): the position of each idle
    server in the order of becoming idle (0 = idle the longest), -1 for a busy server.
    """

    rng: np.ndarray
    busy: np.ndarray
    queue: np.ndarray
    idle_order: np.ndarray | None


@dataclass(frozen=True)
class SimulationResult:
    """Time averages per replica (rows) from :func:`simulate`, over the ``steps`` recorded steps.

    ``busy_fraction`` (R, n): fraction of time server j is busy (estimates Cabral's P_j);
    ``throughput`` (R, n): completions of server j per unit time (estimates mu_j P_j, counted
    independently of ``busy_fraction``); ``mean_queue`` (R,): time-average number waiting;
    ``wait_fraction`` (R,): fraction of arrivals that found every server busy (estimates
    P(wait)); ``arrivals`` (R,) int64: arrivals counted; ``time`` (R,): simulated time,
    steps/Lambda. ``state``: the final :class:`ChainState`, from which ``simulate(...,
    initial=result)`` continues. ``seed`` is the seed the chains started from (None when they
    were started from a bare :class:`ChainState`).
    """

    lam: float
    mus: np.ndarray
    policy: str
    steps: int
    burn_in: int
    seed: int | None
    busy_fraction: np.ndarray
    throughput: np.ndarray
    mean_queue: np.ndarray
    wait_fraction: np.ndarray
    arrivals: np.ndarray
    time: np.ndarray
    state: ChainState

    @property
    def replicas(self) -> int:
        return self.busy_fraction.shape[0]

    def arrays(self) -> dict[str, np.ndarray]:
        """Every field as a dict of arrays (the sweep cache's form: :func:`qlib.cache.cached`);
        :meth:`from_arrays` gives the same result back, bit for bit."""
        out = {f: np.asarray(getattr(self, f)) for f in _RESULT_ARRAYS}
        out |= {"lam": np.float64(self.lam), "mus": np.asarray(self.mus, np.float64), "policy": np.str_(self.policy),
                "steps": np.int64(self.steps), "burn_in": np.int64(self.burn_in),
                "seed": np.uint64(0 if self.seed is None else self.seed), "seeded": np.bool_(self.seed is not None)}
        return out | {f"state_{k}": np.asarray(v) for k, v in self.state._asdict().items() if v is not None}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> SimulationResult:
        """The result :meth:`arrays` was made from."""
        state = ChainState(*(a.get(f"state_{k}") for k in ChainState._fields))
        return cls(lam=float(a["lam"]), mus=np.asarray(a["mus"]), policy=str(a["policy"]), steps=int(a["steps"]),
                   burn_in=int(a["burn_in"]), seed=int(a["seed"]) if bool(a["seeded"]) else None, state=state,
                   **{f: np.asarray(a[f]) for f in _RESULT_ARRAYS})

    def estimate(self, name: str) -> Estimate:
        """Mean over replicas with its standard error (needs replicas >= 2), e.g. "busy_fraction"."""
        return replica_mean(np.asarray(getattr(self, name)), axis=0)

    def to_dataframe(self):
        """A tidy pandas DataFrame: one row per (replica, server j), with lam, policy, seed,
        steps, burn_in, the server's rate ``mu``, its ``busy_fraction`` (P_j) and ``throughput``
        (mu_j P_j), and the replica's ``mean_queue``, ``wait_fraction``, ``arrivals`` and ``time``
        (repeated over its servers)."""
        import pandas as pd

        R, n = self.busy_fraction.shape
        mus = np.asarray(self.mus, dtype=float)
        return pd.DataFrame({
            "lam": self.lam, "policy": self.policy, "seed": self.seed, "steps": self.steps, "burn_in": self.burn_in,
            "replica": np.repeat(np.arange(R), n), "server": np.tile(np.arange(n), R), "mu": np.tile(mus, R),
            "busy_fraction": np.asarray(self.busy_fraction).ravel(), "throughput": np.asarray(self.throughput).ravel(),
            "mean_queue": np.repeat(np.asarray(self.mean_queue), n),
            "wait_fraction": np.repeat(np.asarray(self.wait_fraction), n),
            "arrivals": np.repeat(np.asarray(self.arrivals), n), "time": np.repeat(np.asarray(self.time), n),
        })


_RESULT_ARRAYS = ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals", "time")


class _Totals(NamedTuple):
    """Run totals on the devices (replicas last): steps busy and completions per server (n, R),
    sum of the queue length after each step, arrivals and waiting arrivals (R,); all int64."""

    busy: jax.Array
    done: jax.Array
    queue: jax.Array
    arrivals: jax.Array
    waits: jax.Array


class _BitsChain(NamedTuple):
    """The bits kernel's state (replicas last). ``mask`` (W, R) uint64: bit j % 64 of word j // 64
    is set iff server j is busy; ``fifo`` (R,) uint64: the idle servers' 4-bit ids, the one idle
    the longest in the low bits ("longest_idle" only, else 0); ``queue`` (R,) int32."""

    rng: jax.Array
    mask: jax.Array
    queue: jax.Array
    fifo: jax.Array


class _ArrayChain(NamedTuple):
    """The array kernel's state (servers, replicas). ``stamp`` (n, R) int32: when each server last
    became idle, rebased after every chunk to ranks in [-n, 0) (only the order of idle ones matters)."""

    rng: jax.Array
    busy: jax.Array
    queue: jax.Array
    stamp: jax.Array


# --------------------------------------------------------------------------- exact cut points

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
            f"mus must each be >= 2^-40 (lam + sum(mus)) = {float(floor * total):.6g} (the simulator resolves "
            f"rate shares >= 2^-40 ≈ {MIN_SHARE:.3g} of the total rate lam + sum(mus), each to relative error "
            f"<= 2^-24); got mus[{j}] = {float(fm[j])!r} ({len(small)} server(s) below)")


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


def _totals_add(totals: _Totals, counts, record) -> _Totals:
    """Chunk counts added to the int64 run totals when ``record`` is 1."""
    r = record.astype(jnp.int64)
    return _Totals(*(t + r * c.astype(jnp.int64) for t, c in zip(totals, counts)))


# --------------------------------------------------------------------------- array kernel

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
def _array_chunk(chain: _ArrayChain, totals: _Totals, cuts, nsteps, record, weights=None, *, rule: str):
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
    return _ArrayChain(rng, busy, q, stamp), _totals_add(totals, acc, record)


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
def _bits_chunk(chain: _BitsChain, totals: _Totals, cuts, nsteps, record, *, rule: str, n: int):
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
    return _BitsChain(rng, mask, q, fifo), _totals_add(totals, (busy, done, acc_q, acc_arr, acc_wait), record)


# --------------------------------------------------------------------------- state conversions

def _fresh_state(seed: int, replicas: int, n: int, policy: str) -> ChainState:
    """Every chain empty, server 0 idle the longest; random states from (seed, r)."""
    with jax.enable_x64(True):
        rng = np.asarray(_rng.replica_states(seed, jnp.arange(replicas, dtype=jnp.uint64)))
    order = np.broadcast_to(np.arange(n, dtype=np.int64), (replicas, n)).copy()
    return ChainState(rng=rng.astype(np.uint64), busy=np.zeros((replicas, n), bool),
                      queue=np.zeros(replicas, np.int64),
                      idle_order=order if policy == "longest_idle" else None)


def _check_state(state: ChainState, n: int, replicas: int | None, policy: str) -> ChainState:
    """Validated continuation state (copied to plain arrays), or ValueError naming ``initial``."""
    try:
        rng = np.asarray(state.rng)
        busy = np.asarray(state.busy)
        queue = np.asarray(state.queue)
        order = None if state.idle_order is None else np.asarray(state.idle_order)
    except AttributeError:
        raise ValueError("initial must be a SimulationResult or a ChainState; "
                         f"got {type(state).__name__}") from None
    R = rng.shape[0] if rng.ndim == 1 else -1
    if rng.ndim != 1 or rng.dtype != np.uint64:
        raise ValueError(f"initial: rng must be a 1-D uint64 array; got {rng.dtype} of shape {rng.shape}")
    if replicas is not None and R != replicas:
        raise ValueError(f"initial holds {R} replicas but replicas={replicas}: a continued run keeps "
                         "every chain, so the replica count must match (or leave replicas unset)")
    if busy.shape != (R, n) or busy.dtype != bool:
        raise ValueError(f"initial: busy must be a ({R}, {n}) bool array for {n} servers; got "
                         f"{busy.dtype} of shape {busy.shape}")
    if queue.shape != (R,) or queue.dtype.kind not in "iu" or np.any(queue < 0) or np.any(queue >= 2**31):
        raise ValueError(f"initial: queue must be ({R},) integers in [0, 2^31)")
    if np.any((queue > 0) & ~busy.all(axis=1)):
        raise ValueError("initial: a replica has customers waiting while a server is idle")
    if (order is not None) != (policy == "longest_idle"):
        raise ValueError(f"initial: idle_order is kept only for policy 'longest_idle'; this state "
                         f"{'has' if order is not None else 'lacks'} it and policy={policy!r}: "
                         "continue with the policy the run was made with")
    if order is not None:
        if order.shape != (R, n):
            raise ValueError(f"initial: idle_order must be ({R}, {n}); got {order.shape}")
        k = (~busy).sum(axis=1)
        ok = bool(np.all(order[busy] == -1)) and all(
            np.array_equal(np.sort(order[r][~busy[r]]), np.arange(k[r])) for r in range(R))
        if not ok:
            raise ValueError("initial: idle_order must number the idle servers 0..k-1 (and be -1 for busy ones)")
    return ChainState(rng, busy.copy(), queue.astype(np.int64), None if order is None else order.astype(np.int64))


def _to_kernel(state: ChainState, perm: np.ndarray, R: int, use_bits: bool):
    """Canonical host state -> a kernel chain on the devices (replicas padded to R by repeating
    the last one: padding replicas are dropped, so what they compute does not matter)."""
    pad = R - state.rng.shape[0]

    def rows(a):
        return np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]) if pad else a

    rng, busy, queue = rows(state.rng), rows(state.busy)[:, perm], rows(state.queue)
    n = busy.shape[1]
    order = None if state.idle_order is None else rows(state.idle_order)[:, perm]
    if use_bits:
        W = -(-n // 64)
        bits = np.zeros((R, 64 * W), bool)
        bits[:, :n] = busy
        # server j is bit j % 64 of word j // 64: little-endian bit and byte order
        mask = np.packbits(bits, axis=1, bitorder="little").view("<u8").astype(np.uint64).T
        fifo = np.zeros(R, np.uint64)
        if order is not None:  # position p of the FIFO holds the p-th longest idle server
            for j in range(n):
                p = order[:, j]
                fifo |= np.where(p >= 0, np.uint64(j) << (np.uint64(4) * np.maximum(p, 0).astype(np.uint64)),
                                 np.uint64(0))
        chain = _BitsChain(rng, mask, np.asarray(queue, np.int32), fifo)
    else:
        stamp = np.zeros((R, n), np.int32) if order is None else (np.where(order >= 0, order, n) - n).astype(np.int32)
        chain = _ArrayChain(rng, busy.T, np.asarray(queue, np.int32), stamp.T)
    # host arrays -> global arrays: each process places only its own devices' replicas
    return type(chain)(*(_sharding.put(x, -1) for x in chain))


def _from_kernel(chain, perm: np.ndarray, replicas: int, n: int, policy: str) -> ChainState:
    """Kernel chain -> canonical host state of the first ``replicas`` replicas, input order."""
    inv = np.argsort(perm)
    host = _sharding.gather  # the whole array on every process (all processes call it together)
    rng = host(chain.rng)[:replicas].copy()
    queue = host(chain.queue)[:replicas].astype(np.int64)
    order = None
    if isinstance(chain, _BitsChain):
        mask = np.ascontiguousarray(host(chain.mask)[:, :replicas].T).astype("<u8")
        busy = np.unpackbits(mask.view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool)
        if policy == "longest_idle":
            fifo = host(chain.fifo)[:replicas]
            k = (~busy).sum(axis=1)
            order = np.full((replicas, n), -1, np.int64)
            for p in range(n):
                j = ((fifo >> np.uint64(4 * p)) & np.uint64(15)).astype(np.int64)
                live = p < k
                order[np.nonzero(live)[0], j[live]] = p
    else:
        busy = host(chain.busy)[:, :replicas].T.copy()
        if policy == "longest_idle":
            stamp = host(chain.stamp)[:, :replicas].T  # ranks - n, idle servers first
            order = np.where(busy, -1, stamp.astype(np.int64) + n)
    return ChainState(rng, busy[:, inv], queue, None if order is None else order[:, inv])


# --------------------------------------------------------------------------- driver

def _chunk_length(R: int, n: int) -> int:
    """Steps per chunk: about 2^24 replica-step units (a fraction of a second), 2^10..2^20 steps."""
    return int(min(1 << 20, max(1 << 10, (1 << 24) // max(1, R * max(1, n // 16)))))


def _plan(burn_in: int, steps: int, chunk: int) -> list[tuple[int, int]]:
    """(steps, record) per chunk: burn-in unrecorded, then the measured steps."""
    out = []
    for total, record in ((burn_in, 0), (steps, 1)):
        full, rest = divmod(total, chunk)
        out += [(chunk, record)] * full + ([(rest, record)] if rest else [])
    return out


def _drive(run_chunk: Callable, chain, totals: _Totals, *, burn_in: int, steps: int, chunk: int | None,
           replicas: int, progress: bool):
    """The one chunk driver: ``burn_in`` unrecorded and ``steps`` recorded steps in chunks of
    ``chunk`` steps (default :func:`_chunk_length`), one compiled loop each, with the progress
    bar (which waits for the devices after each chunk, so it follows them). Chunking changes
    nothing in the results. ``run_chunk(chain, totals, nsteps, record)`` advances every replica."""
    n, R = totals.busy.shape
    plan = _plan(burn_in, steps, _chunk_length(R, n) if chunk is None else chunk)
    with progress_bar((burn_in + steps) * replicas, show=progress and _sharding.is_main_process(),
                      desc="heterogeneous") as bar:
        for nsteps, record in plan:
            chain, totals = run_chunk(chain, totals, jnp.int32(nsteps), jnp.int32(record))
            if progress:
                jax.block_until_ready(chain.rng)
            bar.update(nsteps * replicas)
    return chain, totals


def _work_units(n: int, use_bits: bool) -> float:
    """Cost of one replica-step in units of the reference rate of :func:`qlib._validate.work`."""
    return max(1.0, n / 32.0) if use_bits else max(1.0, n / 8.0)


def simulate(lam: float, mus: ArrayLike, *, steps: int, replicas: int | None = None, seed: int | None = None,
             burn_in: int = 0, policy: str = "random", initial: SimulationResult | ChainState | None = None,
             chunk: int | None = None, progress: bool | None = None, kernel: str = "auto",
             routing_exponent: float | None = None) -> SimulationResult:
    """Simulate ``replicas`` independent copies of the heterogeneous M/M/n for ``steps`` steps each.

    The model (docs/models.md, "Heterogeneous servers"): Poisson(lam) arrivals, server j serves
    at rate mus[j] (mus: (n,) rates), an arrival finding idle servers picks one by ``policy``,
    else waits in one FIFO queue. Each replica runs ``burn_in`` uniformised steps unrecorded,
    then ``steps`` recorded steps (steps/Lambda time units, Lambda = lam + sum(mus)). Under
    "random" and "longest_idle" the busy fractions estimate Cabral's P_j (the fast server is
    busy less, yet completes more); "fastest" is the informed-customer contrast and "slowest"
    a deliberately wrong rule (counterfactuals). Returns a
    :class:`SimulationResult` with (replicas, n) and (replicas,) arrays and the final state.

    ``initial``: None (every chain starts empty, random streams from ``seed``, default 0), or a
    :class:`SimulationResult` / :class:`ChainState` to continue: its chains go on from their final
    state and random state, so a run of T steps continued by T more ends exactly where one run
    of 2T ends, and the two runs' time averages combine (weighted by steps) into the whole. A
    continuation needs the same number of servers, the same policy and the same replica count
    (``replicas`` may be left unset), and takes no ``seed``.

    Replicas are sharded over all JAX devices (:mod:`qlib._sharding`); their number is padded
    to a multiple of the device count with extra streams, which are dropped. Replica r's numbers
    depend only on (seed, r), not on ``replicas``, the device count or ``chunk``. Work runs in
    chunks of ``chunk`` steps (default: sized from replicas and n), one compiled loop each,
    with a progress bar when ``progress`` (default: when the run is long). ``kernel``: "bits",
    "array" or "auto" (bits where it applies); all give identical results. Parameters outside
    the resolvable range (see the module docstring), runs beyond a year of compute and arrays
    beyond the available memory raise ValueError before anything is compiled.

    ``policy="mu_power"`` with ``routing_exponent`` gamma: a near wrong model, an arrival picks
    idle server j with probability mu_j^gamma / (sum over idle i of mu_i^gamma) (gamma = 0 is
    uniform routing in law, not in streams); array kernel only (docs/models.md#near-wrong-models).
    """
    lam_f, m = check_rates(lam, mus)
    n = m.size
    _check_resolvable(lam_f, m)
    steps = _validate.integer("steps", steps, low=1)
    burn_in = _validate.integer("burn_in", burn_in, low=0)
    policy = _validate.choice("policy", policy, POLICIES + ("mu_power",))
    kernel = _validate.choice("kernel", kernel, ("auto", "bits", "array"))
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
    use_bits = kernel == "bits" or (kernel == "auto" and n <= bits_max)
    if initial is None:
        replicas = 1 if replicas is None else _validate.integer("replicas", replicas, low=1)
        seed = 0 if seed is None else _validate.integer("seed", seed, low=0, high=(1 << 64) - 1)
    else:
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
        start = _check_state(start, n, replicas, policy)
        replicas = start.rng.shape[0]
    if chunk is not None:
        chunk = _validate.integer("chunk", chunk, low=1, high=_MAX_CHUNK)
    R = _sharding.padded(replicas)
    _validate.work("steps", float(steps + burn_in) * R * _work_units(n, use_bits))
    _validate.memory("replicas", R * (64.0 * n + 256.0),
                     f"{R} replicas x {n} servers x about 64 bytes (counters, state, results)")
    if progress is None:
        progress = (steps + burn_in) * R * _work_units(n, use_bits) > 2e8  # roughly > 10 s
    if initial is None:
        start = _fresh_state(seed, replicas, n, policy)

    perm = _order(m, policy)  # kernel order; results are mapped back to input order
    cuts = _cut_points(lam_f, m[perm])
    Lambda = lam_f + math.fsum(m)
    with jax.enable_x64(True):
        chain = _to_kernel(start, perm, R, use_bits)
        totals = _Totals(*(_sharding.put(np.zeros(s, np.int64), -1) for s in ((n, R), (n, R), (R,), (R,), (R,))))
        cuts_d = jnp.asarray(np.array(cuts, dtype=np.uint64))
        if use_bits:
            run = partial(_bits_chunk, cuts=cuts_d, rule=_RULE[policy], n=n)
        else:
            wd = None if weights is None else jnp.asarray(weights[perm], jnp.float64)
            run = partial(_array_chunk, cuts=cuts_d, rule=_RULE[policy], weights=wd)
        chain, totals = _drive(lambda c, t, s, r: run(c, t, nsteps=s, record=r), chain, totals,
                               burn_in=burn_in, steps=steps, chunk=chunk, replicas=replicas, progress=progress)
        tot_busy, tot_done, tot_q, tot_arr, tot_wait = (_sharding.gather(t)[..., :replicas] for t in totals)
        state = _from_kernel(chain, perm, replicas, n, policy)

    inv = np.argsort(perm)
    time = steps / Lambda
    with np.errstate(invalid="ignore", divide="ignore"):
        wait_fraction = np.where(tot_arr > 0, tot_wait / np.maximum(tot_arr, 1), np.nan)
    res = SimulationResult(
        lam=lam_f, mus=m.copy(), policy=policy, steps=steps, burn_in=burn_in, seed=seed,
        busy_fraction=(tot_busy / steps).T[:, inv], throughput=(tot_done / time).T[:, inv],
        mean_queue=tot_q / steps, wait_fraction=wait_fraction, arrivals=tot_arr,
        time=np.full(replicas, time), state=state)
    _cache.report_heterogeneous(res, start, routing_exponent, seeded=initial is None)  # provenance (cache.recording)
    return res
