"""Uniformised JAX simulation of M/M/n with heterogeneous servers, many replicas at once.

The chain is uniformised at rate Lambda = lam + sum(mu): every step is an arrival with
probability lam/Lambda, otherwise a *potential* completion at server j with probability
mu_j/Lambda, which happens only if j is busy. Time averages of the continuous-time chain equal
step averages of the uniformised one, so ``events`` steps cover about events/Lambda time units.

One 64-bit draw per step: its high 32 bits pick the event (arrival or server j) against integer
thresholds, its low 32 bits pick the idle server, so probabilities are exact up to 2^-32.

Policies for an arrival that finds idle servers:
- ``"random"``: the r-th idle server with r = floor(lo32 · k / 2^32) uniform on 0..k-1 (Cabral);
- ``"longest_idle"``: the server idle the longest, which has the same stationary law
  (Doroudi & Gopalakrishnan, arXiv:1305.6249);
- ``"fastest"``: the fastest idle server (informed customers), for contrast.

Replica r's random stream is SplitMix64 seeded from (seed, r) (:mod:`qlib._rng`), so its result
does not depend on how many replicas run beside it, how they are chunked, or on how many devices
they are sharded over (:mod:`qlib._sharding`; on CPU, one host device per core). The loop is a
fixed-trip ``fori_loop`` per chunk: no condition needs all replicas, so devices never wait for
each other inside a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng, _sharding, _validate
from qlib.heterogeneous.exact import POLICIES, check_rates
from qlib.stats import Estimate, replica_mean

_STAMP_FLOOR = -(1 << 30)  # idle stamps are rebased every chunk; only their order matters
_MAX_CHUNK = 1 << 22  # int32 per-chunk counters cannot overflow


@dataclass(frozen=True)
class SimulationResult:
    """Time averages per replica (rows) from :func:`simulate`.

    ``busy_fraction[r, j]``: fraction of time server j is busy; ``throughput[r, j]``: completions
    of server j per unit time (estimates mu_j P_j, counted independently of ``busy_fraction``);
    ``mean_queue[r]``: time-average number waiting; ``wait_fraction[r]``: fraction of arrivals
    that found every server busy (estimates P(wait)); ``time[r]``: simulated time (events/Lambda).
    """

    lam: float
    mus: np.ndarray
    policy: str
    events: int
    burn_in: int
    seed: int
    busy_fraction: np.ndarray
    throughput: np.ndarray
    mean_queue: np.ndarray
    wait_fraction: np.ndarray
    arrivals: np.ndarray
    time: np.ndarray
    extra: dict = field(default_factory=dict)

    @property
    def replicas(self) -> int:
        return self.busy_fraction.shape[0]

    def estimate(self, name: str) -> Estimate:
        """Mean over replicas with its standard error (needs replicas >= 2), e.g. "busy_fraction"."""
        return replica_mean(np.asarray(getattr(self, name)), axis=0)


def _thresholds(lam: float, mus: np.ndarray) -> np.ndarray:
    """Cumulative integer thresholds in [0, 2^32]: arrival below t[0], server j in [t[j], t[j+1])."""
    rates = np.concatenate([[lam], mus])
    cum = np.cumsum(rates) / rates.sum()
    t = np.rint(cum * 2.0**32).astype(np.uint64)
    t[-1] = 1 << 32
    return t


def _check(lam, mus, events, replicas, seed, burn_in, policy, chunk):
    lam_f, m = check_rates(lam, mus)
    events = _validate.integer("events", events, low=1)
    replicas = _validate.integer("replicas", replicas, low=1)
    seed = _validate.integer("seed", seed, low=0, high=(1 << 64) - 1)
    burn_in = _validate.integer("burn_in", burn_in, low=0)
    policy = _validate.choice("policy", policy, POLICIES)
    chunk = _validate.integer("chunk", chunk, low=1, high=_MAX_CHUNK)
    return lam_f, m, events, replicas, seed, burn_in, policy, chunk


# --------------------------------------------------------------------------- kernels
#
# Both kernels are software-pipelined: the loop carry holds the *current* step's random word,
# and each iteration draws the next one. XLA:CPU duplicates cheap elementwise producers into
# every consumer fusion (it has no multi-output loop fusion here), so a word computed inside the
# body would be recomputed by every output (the SplitMix64 mix is two emulated 64-bit
# multiplies on AVX2); a loop-carried word is stored once and only loaded.

def _totals_add(totals, counts, record):
    """Chunk counts (int32/int64) added to the int64 run totals when ``record`` is 1."""
    return tuple(t + record.astype(jnp.int64) * c.astype(jnp.int64) for t, c in zip(totals, counts))


@partial(jax.jit, static_argnames=("policy",), donate_argnums=(0, 1))
def _run_chunk(carry, totals, thresholds, nsteps, record, *, policy: str):
    """General kernel: advance every replica ``nsteps`` steps; add the counts to ``totals``.

    Arrays are (servers, replicas) so the replica axis is the contiguous, vectorised one (and the
    one sharded over devices). ``record`` (0 or 1) says whether this chunk is measured.
    """
    state, busy, q, stamp = carry
    n, R = busy.shape
    t_arr = thresholds[0]
    lo_t = thresholds[:-1, None]  # server j owns [t[j], t[j+1]) in the high 32 bits
    hi_t = thresholds[1:, None]
    zeros_n = jnp.zeros((n, R), jnp.int32)
    zeros_r = jnp.zeros((R,), jnp.int32)
    zeros_q = jnp.zeros((R,), jnp.int64)  # sum of q over a chunk may exceed 2^31

    def step(i, c):
        state, bits, busy, q, stamp, acc_busy, acc_done, acc_q, acc_arr, acc_wait = c
        hi, lo = _rng.split_u32(bits)
        state_next, bits_next = _rng.next_u64(state)  # pipelined draw for step i + 1
        arrival = hi < t_arr
        idle = jnp.logical_not(busy)
        k = jnp.sum(idle, axis=0, dtype=jnp.int32)
        if policy == "random":
            r = ((lo * k.astype(jnp.uint64)) >> 32).astype(jnp.int32)
            pick = idle & (jnp.cumsum(idle, axis=0, dtype=jnp.int32) == r + 1)
        elif policy == "fastest":  # servers were sorted fastest first
            pick = idle & (jnp.cumsum(idle, axis=0, dtype=jnp.int32) == 1)
        else:  # longest idle: smallest stamp among idle servers (stamps are distinct)
            key = jnp.where(idle, stamp, jnp.int32(2**31 - 1))
            pick = idle & (key == jnp.min(key, axis=0))
        waits = arrival & (k == 0)
        hit = (hi >= lo_t) & (hi < hi_t) & busy  # potential completion at a busy server
        done = jnp.any(hit, axis=0)
        from_queue = q > 0
        busy = (busy | (pick & arrival)) & jnp.logical_not(hit & jnp.logical_not(from_queue))
        if policy == "longest_idle":
            stamp = jnp.where(hit & jnp.logical_not(from_queue), i, stamp)
        q = q + waits.astype(jnp.int32) - (done & from_queue).astype(jnp.int32)
        return (state_next, bits_next, busy, q, stamp, acc_busy + busy, acc_done + hit,
                acc_q + q, acc_arr + arrival, acc_wait + waits)

    state1, bits1 = _rng.next_u64(state)
    c = (state1, bits1, busy, q, stamp, zeros_n, zeros_n, zeros_q, zeros_r, zeros_r)
    state1, _, busy, q, stamp, *acc = jax.lax.fori_loop(0, nsteps, step, c)
    state = state1 - jnp.uint64(_rng.GOLDEN)  # the lookahead drew one word too many
    stamp = jnp.maximum(stamp - nsteps, _STAMP_FLOOR)
    return (state, busy, q, stamp), _totals_add(totals, acc, record)


def _swar_counts(x):
    """Partial popcounts of the uint32 ``x``: per 2, 4, 8 and 16 bits, and the total.

    Branch-free and elementwise (AVX2 has no vector popcount; this is ~12 integer ops)."""
    u = jnp.uint32
    s1 = x - ((x >> 1) & u(0x55555555))
    s2 = (s1 & u(0x33333333)) + ((s1 >> 2) & u(0x33333333))
    s4 = (s2 + (s2 >> 4)) & u(0x0F0F0F0F)
    s8 = (s4 + (s4 >> 8)) & u(0x00FF00FF)
    total = (s8 + (s8 >> 16)) & u(0x3F)
    return (s1, s2, s4, s8), total


def _select_bit(x, partial_counts, r):
    """Index of the r-th (0-based) set bit of the uint32 ``x`` (needs r < popcount(x)).

    Binary search down the partial counts of :func:`_swar_counts`: halves, bytes, nibbles,
    pairs, bits; five shift-mask-compare-select rounds, no branches (XLA has no pdep)."""
    u = jnp.uint32
    s1, s2, s4, s8 = partial_counts
    pos = jnp.zeros_like(x)
    for width, s, m in ((16, s8, 0xFF), (8, s4, 0xFF), (4, s2, 0xF), (2, s1, 0x3), (1, x, 0x1)):
        c = (s >> pos) & u(m)
        go = r >= c
        r = jnp.where(go, r - c, r)
        pos = jnp.where(go, pos + u(width), pos)
    return pos


# Bits of the per-step record ("pending word") the bitmask kernel keeps in the low half of its
# state word: the server touched (5 bits), what happened, and the idle count before the step.
_JOIN, _FREE, _HIT, _ARR, _WAIT, _K = 5, 6, 7, 8, 9, 10


def _flag(pend, bit):
    return ((pend >> bit) & jnp.uint32(1)) == 1


def _queue_after(q, pend):
    """Queue length after the recorded step: +1 if the arrival waited, -1 if a completion took
    a waiting customer (the server stayed busy)."""
    served = _flag(pend, _HIT) & jnp.logical_not(_flag(pend, _FREE))
    return q + _flag(pend, _WAIT).astype(jnp.int32) - served.astype(jnp.int32)


def _fifo_after(fifo, pend):
    """Idle FIFO (4-bit server ids, head in the low bits) after the recorded step: a joining
    arrival pops the head; a freed server is appended at position k (idle count before)."""
    fifo = jnp.where(_flag(pend, _JOIN), fifo >> 4, fifo)
    tail = (pend & jnp.uint32(31)).astype(jnp.uint64) << (4 * (pend >> _K)).astype(jnp.uint64)
    return jnp.where(_flag(pend, _FREE), fifo | tail, fifo)


@partial(jax.jit, static_argnames=("policy", "n"), donate_argnums=(0, 1))
def _run_chunk_bits(carry, totals, thresholds, nsteps, record, *, policy: str, n: int):
    """Fast path for n <= 32: the busy set is a uint32 bitmask per replica, so the step is
    elementwise over replicas. "longest_idle" keeps the idle servers' FIFO as 4-bit ids packed
    in a uint64 (n <= 16): the head is the server idle the longest. Same rules and random
    numbers as :func:`_run_chunk`, hence identical results.

    Beyond the pipelined draw, the loop keeps XLA from recomputing the step per output: the
    step's only heavy output is one uint64 per replica, the new busy mask (high half) with a
    16-bit record of what happened (low half). The queue length, the FIFO and all counters are
    updated one iteration later from that record by a few cheap ops. Per-server busy time is
    accumulated lazily, only when a server changes state: a join at step s adds -s, a release
    at step s adds +s, and servers still busy at the end add nsteps, so busy time sums to
    sum(releases) - sum(joins) + nsteps * [busy at end], exactly the per-step count.
    """
    state, mask, q, fifo = carry
    R = mask.shape[0]
    u = jnp.uint32
    t32 = thresholds.astype(u)  # t[n] = 2^32 wraps to 0 and is never used
    t_arr = t32[0]
    idx = jnp.arange(n, dtype=u)[:, None]
    full = u((1 << n) - 1) if n < 32 else u(0xFFFFFFFF)
    low32 = jnp.uint64(0xFFFFFFFF)

    def decode(bits, mask, q, fifo):
        """One step: (new mask, record) from the random word and the state before the step."""
        hi = (bits >> 32).astype(u)
        lo = bits & low32
        arrival = hi < t_arr
        # event index e in 0..n-1 for a potential completion: thresholds t[1..n-1] passed
        e = jnp.zeros_like(hi)
        for t in range(1, n):
            e = e + (hi >= t32[t]).astype(u)
        idle = (~mask) & full
        parts, k = _swar_counts(idle)
        if policy == "random":
            r = ((lo * k.astype(jnp.uint64)) >> 32).astype(u)
            j = _select_bit(idle, parts, r)
        elif policy == "fastest":  # servers sorted fastest first: the lowest idle bit
            j = _select_bit(idle, parts, jnp.zeros_like(k))
        else:
            j = (fifo & jnp.uint64(15)).astype(u)
        join = arrival & (k > 0)
        waits = arrival & (k == 0)
        hit = jnp.logical_not(arrival) & (((mask >> e) & u(1)) == 1)
        free = hit & (q == 0)
        bit_j = jnp.where(join, u(1) << j, u(0))
        bit_e = jnp.where(free, u(1) << e, u(0))
        mask = (mask | bit_j) & ~bit_e
        pend = (jnp.where(join, j, e) | (join.astype(u) << _JOIN) | (free.astype(u) << _FREE)
                | (hit.astype(u) << _HIT) | (arrival.astype(u) << _ARR) | (waits.astype(u) << _WAIT)
                | (k << _K))
        return mask, pend

    def account(acc, pend, s):
        """Add the recorded step s to the counters (lazy busy time, completions, arrivals)."""
        acc_busy, acc_done, acc_q, acc_arr, acc_wait = acc
        server = (pend & u(31))[None, :] == idx
        v = jnp.where(_flag(pend, _JOIN), -s, jnp.where(_flag(pend, _FREE), s, 0))
        acc_busy = acc_busy + jnp.where(server, v[None, :], 0)
        acc_done = acc_done + (server & _flag(pend, _HIT)[None, :]).astype(jnp.int32)
        return (acc_busy, acc_done, acc_q, acc_arr + _flag(pend, _ARR).astype(jnp.int32),
                acc_wait + _flag(pend, _WAIT).astype(jnp.int32))

    def step(i, c):
        state, bits, word, q_prev, fifo_prev, *acc = c
        mask = (word >> 32).astype(u)
        pend = word.astype(u)  # the record of step i - 1 (low half: the per-server counters read it)
        q = _queue_after(q_prev, pend)
        fifo = _fifo_after(fifo_prev, pend) if policy == "longest_idle" else fifo_prev
        acc = list(account(acc, pend, i - 1))
        acc[2] = acc[2] + q.astype(jnp.int64)  # sum of q before steps 0..nsteps-1; fixed below
        mask, pend = decode(bits, mask, q, fifo)
        state, bits = _rng.next_u64(state)  # pipelined draw for step i + 1
        word = (mask.astype(jnp.uint64) << 32) | pend.astype(jnp.uint64)
        return (state, bits, word, q, fifo, *acc)

    zn = jnp.zeros((n, R), jnp.int32)
    zr = jnp.zeros((R,), jnp.int32)
    state1, bits1 = _rng.next_u64(state)
    acc0 = [zn, zn, jnp.zeros((R,), jnp.int64), zr, zr]
    c = (state1, bits1, mask.astype(jnp.uint64) << 32, q, fifo, *acc0)  # empty record: no-op
    state1, _, word, q_prev, fifo_prev, *acc = jax.lax.fori_loop(0, nsteps, step, c)
    state = state1 - jnp.uint64(_rng.GOLDEN)  # the lookahead drew one word too many
    mask_end = (word >> 32).astype(u)
    pend = word.astype(u)
    q_end = _queue_after(q_prev, pend)
    fifo_end = _fifo_after(fifo_prev, pend) if policy == "longest_idle" else fifo_prev
    acc = list(account(acc, pend, nsteps - 1))
    acc[0] = acc[0] + nsteps * ((mask_end[None, :] >> idx) & u(1)).astype(jnp.int32)
    acc[2] = acc[2] - q.astype(jnp.int64) + q_end.astype(jnp.int64)  # q after steps 0..nsteps-1
    return (state, mask_end, q_end, fifo_end), _totals_add(totals, acc, record)


def simulate(lam: float, mus, *, events: int, replicas: int = 1, seed: int = 0, burn_in: int = 0,
             policy: str = "random", chunk: int = 1 << 16, progress: bool = False,
             kernel: str = "auto") -> SimulationResult:
    """Simulate ``replicas`` independent copies of the heterogeneous M/M/n for ``events`` steps each.

    The model: Poisson(lam) arrivals, server j serves at rate mus[j], an arrival finding idle
    servers picks one by ``policy``, else waits in one FIFO queue. Each replica starts empty,
    runs ``burn_in`` uniformised steps unrecorded, then ``events`` recorded steps. Under "random"
    and "longest_idle" the busy fractions estimate Cabral's P_j (the fast server is busy less,
    yet completes more); "fastest" is the informed-customer contrast.

    Replicas are sharded over all JAX devices (on CPU, one host device per core; see
    :mod:`qlib._sharding`): their number is padded to a multiple of the device count with
    extra independent streams, which are dropped. Replica r's numbers depend only on
    (seed, r), not on ``replicas``, the device count or ``chunk``. Work runs in chunks of
    ``chunk`` steps (one compiled loop each, optional tqdm bar); counters stay on the devices.
    ``kernel``: "bits" (bitmask state, n <= 32, or n <= 16 for "longest_idle"), "array" (any n),
    or "auto" (bits when it applies); both give identical results.
    """
    lam_f, m, events, replicas, seed, burn_in, policy, chunk = _check(
        lam, mus, events, replicas, seed, burn_in, policy, chunk)
    n = m.size
    # "fastest" scans servers fastest-first; results are mapped back to input order
    perm = np.argsort(-m, kind="stable") if policy == "fastest" else np.arange(n)
    ms = m[perm]
    thresholds = _thresholds(lam_f, ms)
    Lambda = lam_f + float(ms.sum())

    if kernel not in ("auto", "bits", "array"):
        raise ValueError(f"kernel must be one of 'auto', 'bits', 'array'; got {kernel!r}")
    bits_ok = n <= (16 if policy == "longest_idle" else 32)
    if kernel == "bits" and not bits_ok:
        raise ValueError(f"kernel='bits' needs n <= {16 if policy == 'longest_idle' else 32} servers; got {n}")
    use_bits = bits_ok and kernel != "array"

    sizes = _chunks(burn_in, chunk) + _chunks(events, chunk)
    n_burn = len(_chunks(burn_in, chunk))
    R = _sharding.padded(replicas)  # padding replicas: real, independent streams, dropped below
    with jax.enable_x64(True):
        th = jnp.asarray(thresholds, dtype=jnp.uint64)
        state = _rng.replica_states(seed, jnp.arange(R, dtype=jnp.uint64))
        q = jnp.zeros((R,), jnp.int32)
        if use_bits:
            fifo0 = sum((n - 1 - p) << (4 * p) for p in range(n)) if policy == "longest_idle" else 0
            carry = (state, jnp.zeros((R,), jnp.uint32), q, jnp.full((R,), fifo0, jnp.uint64))
            run = partial(_run_chunk_bits, policy=policy, n=n)
        else:
            stamp = jnp.broadcast_to(-1 - jnp.arange(n, dtype=jnp.int32)[:, None], (n, R))
            carry = (state, jnp.zeros((n, R), bool), q, jnp.array(stamp))
            run = partial(_run_chunk, policy=policy)
        totals = (jnp.zeros((n, R), jnp.int64), jnp.zeros((n, R), jnp.int64),
                  jnp.zeros((R,), jnp.int64), jnp.zeros((R,), jnp.int64), jnp.zeros((R,), jnp.int64))
        carry = tuple(_sharding.put(x, -1) for x in carry)
        totals = tuple(_sharding.put(x, -1) for x in totals)
        bar = None
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=(burn_in + events) * replicas, unit="ev", unit_scale=True, leave=False)
        try:
            for ci, s in enumerate(sizes):
                carry, totals = run(carry, totals, th, jnp.int32(s), jnp.int32(ci >= n_burn))
                if bar is not None:
                    jax.block_until_ready(carry[0])  # let the bar follow the devices
                    bar.update(s * replicas)
        finally:
            if bar is not None:
                bar.close()
        tot_busy, tot_done, tot_q, tot_arr, tot_wait = (np.asarray(t)[..., :replicas] for t in totals)

    inv = np.argsort(perm)
    time = events / Lambda
    busy_fraction = (tot_busy / events).T[:, inv]
    throughput = (tot_done / time).T[:, inv]
    with np.errstate(invalid="ignore", divide="ignore"):
        wait_fraction = np.where(tot_arr > 0, tot_wait / np.maximum(tot_arr, 1), np.nan)
    return SimulationResult(
        lam=lam_f, mus=m.copy(), policy=policy, events=events, burn_in=burn_in, seed=seed,
        busy_fraction=busy_fraction, throughput=throughput, mean_queue=tot_q / events,
        wait_fraction=wait_fraction, arrivals=tot_arr, time=np.full(replicas, time))


def _chunks(total: int, chunk: int) -> list[int]:
    full, rest = divmod(total, chunk)
    return [chunk] * full + ([rest] if rest else [])
