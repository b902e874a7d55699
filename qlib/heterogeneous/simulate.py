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
does not depend on how many replicas run beside it or how they are batched.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng, _validate
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


@partial(jax.jit, static_argnames=("policy",), donate_argnums=(0,))
def _run_chunk(carry, thresholds, nsteps, *, policy: str):
    """Advance every replica ``nsteps`` steps; return the carry and the chunk's counters.

    Arrays are (servers, replicas) so the replica axis is the contiguous, vectorised one.
    """
    state, busy, q, stamp = carry
    n, R = busy.shape
    t_arr = thresholds[0]
    lo_t = thresholds[:-1, None]  # server j owns [t[j], t[j+1]) in the high 32 bits
    hi_t = thresholds[1:, None]
    idx = jnp.arange(n, dtype=jnp.int32)[:, None]
    zeros_n = jnp.zeros((n, R), jnp.int32)
    zeros_r = jnp.zeros((R,), jnp.int32)
    zeros_q = jnp.zeros((R,), jnp.int64)  # sum of q over a chunk may exceed 2^31

    def step(i, c):
        state, busy, q, stamp, acc_busy, acc_done, acc_q, acc_arr, acc_wait = c
        state, bits = _rng.next_u64(state)
        hi, lo = _rng.split_u32(bits)
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
        return (state, busy, q, stamp, acc_busy + busy, acc_done + hit,
                acc_q + q, acc_arr + arrival, acc_wait + waits)

    c = (state, busy, q, stamp, zeros_n, zeros_n, zeros_q, zeros_r, zeros_r)
    state, busy, q, stamp, acc_busy, acc_done, acc_q, acc_arr, acc_wait = jax.lax.fori_loop(0, nsteps, step, c)
    stamp = jnp.maximum(stamp - nsteps, _STAMP_FLOOR)
    return (state, busy, q, stamp), (acc_busy, acc_done, acc_q, acc_arr, acc_wait)


def _select_bit(x, r):
    """Index of the r-th (0-based) set bit of the uint32 ``x``: binary search on popcounts
    (XLA has no pdep; five masked popcounts keep it branch-free and elementwise)."""
    pos = jnp.zeros_like(r)
    for w in (16, 8, 4, 2, 1):
        c = jax.lax.population_count(x & jnp.uint32((1 << w) - 1)).astype(jnp.int32)
        go = r >= c
        r = jnp.where(go, r - c, r)
        x = jnp.where(go, x >> w, x)
        pos = pos + jnp.where(go, w, 0)
    return pos


@partial(jax.jit, static_argnames=("policy", "n"), donate_argnums=(0,))
def _run_chunk_bits(carry, thresholds, nsteps, *, policy: str, n: int):
    """Fast path for n <= 32: the busy set is a uint32 bitmask per replica, so the step is
    elementwise over replicas (one fused loop body). "longest_idle" keeps the idle servers'
    FIFO as 4-bit ids packed in a uint64 (n <= 16): the head is the server idle the longest.
    Same rules and random numbers as :func:`_run_chunk`, hence identical results.
    """
    state, mask, q, fifo = carry
    R = mask.shape[0]
    t32 = thresholds.astype(jnp.uint32)[:, None]  # t[n] = 2^32 wraps to 0 and is never used
    t_arr = t32[0]
    idx = jnp.arange(n, dtype=jnp.uint32)[:, None]
    full = jnp.uint32((1 << n) - 1) if n < 32 else jnp.uint32(0xFFFFFFFF)

    def step(i, c):
        state, mask, q, fifo, acc_busy, acc_done, acc_q, acc_arr, acc_wait = c
        state, bits = _rng.next_u64(state)
        hi = (bits >> 32).astype(jnp.uint32)
        lo = bits & jnp.uint64(0xFFFFFFFF)
        arrival = hi < t_arr[0]
        # event index e in 0..n-1 for a potential completion: thresholds t[1..n-1] passed
        e = jnp.sum(hi[None, :] >= t32[1:n], axis=0, dtype=jnp.uint32)
        idle = (~mask) & full
        k = jax.lax.population_count(idle).astype(jnp.int32)
        if policy == "random":
            r = ((lo * k.astype(jnp.uint64)) >> 32).astype(jnp.int32)
            j = _select_bit(idle, r).astype(jnp.uint32)
        elif policy == "fastest":
            j = jax.lax.population_count((idle & (~idle + jnp.uint32(1))) - jnp.uint32(1))
        else:
            j = (fifo & jnp.uint64(15)).astype(jnp.uint32)
        join = arrival & (k > 0)
        waits = arrival & (k == 0)
        hit = jnp.logical_not(arrival) & (((mask >> e) & 1) == 1)
        from_queue = q > 0
        free = hit & jnp.logical_not(from_queue)
        bit_j = jnp.where(join, jnp.uint32(1) << j, jnp.uint32(0))
        bit_e = jnp.where(free, jnp.uint32(1) << e, jnp.uint32(0))
        if policy == "longest_idle":
            fifo = jnp.where(join, fifo >> 4, fifo)
            fifo = jnp.where(free, fifo | (e.astype(jnp.uint64) << (4 * k).astype(jnp.uint64)), fifo)
        mask = (mask | bit_j) & ~bit_e
        q = q + waits.astype(jnp.int32) - (hit & from_queue).astype(jnp.int32)
        acc_busy = acc_busy + ((mask[None, :] >> idx) & 1).astype(jnp.int32)
        acc_done = acc_done + ((idx == e[None, :]) & hit[None, :]).astype(jnp.int32)
        return (state, mask, q, fifo, acc_busy, acc_done, acc_q + q, acc_arr + arrival, acc_wait + waits)

    zn = jnp.zeros((n, R), jnp.int32)
    zr = jnp.zeros((R,), jnp.int32)
    c = (state, mask, q, fifo, zn, zn, jnp.zeros((R,), jnp.int64), zr, zr)
    state, mask, q, fifo, *acc = jax.lax.fori_loop(0, nsteps, step, c)
    return (state, mask, q, fifo), tuple(acc)


def simulate(lam: float, mus, *, events: int, replicas: int = 1, seed: int = 0, burn_in: int = 0,
             policy: str = "random", chunk: int = 1 << 16, progress: bool = False,
             kernel: str = "auto", threads: int | None = None) -> SimulationResult:
    """Simulate ``replicas`` independent copies of the heterogeneous M/M/n for ``events`` steps each.

    The model: Poisson(lam) arrivals, server j serves at rate mus[j], an arrival finding idle
    servers picks one by ``policy``, else waits in one FIFO queue. Each replica starts empty,
    runs ``burn_in`` uniformised steps unrecorded, then ``events`` recorded steps. Under "random"
    and "longest_idle" the busy fractions estimate Cabral's P_j (the fast server is busy less,
    yet completes more); "fastest" is the informed-customer contrast.

    Work is split into chunks of ``chunk`` steps (one compiled loop, host loop over chunks,
    optional tqdm bar); the carry holds only the state and this chunk's counters.
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

    if threads is None:
        threads = min(os.cpu_count() or 1, 8)
    threads = _validate.integer("threads", threads, low=1)
    # replicas are independent streams, so shards can run concurrently (XLA releases the GIL)
    shards = max(1, min(threads, replicas // 64))
    bounds = np.linspace(0, replicas, shards + 1).astype(int)
    sizes = _chunks(burn_in, chunk) + _chunks(events, chunk)
    n_burn = len(_chunks(burn_in, chunk))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=(burn_in + events) * replicas, unit="ev", unit_scale=True)

    def run_shard(r0: int, r1: int):
        R = r1 - r0
        with jax.enable_x64(True):  # thread-local switch: set in every worker
            th = jnp.asarray(thresholds, dtype=jnp.uint64)
            state = _rng.replica_states(seed, jnp.arange(r0, r1, dtype=jnp.uint64))
            q = jnp.zeros((R,), jnp.int32)
            if use_bits:
                fifo0 = sum((n - 1 - p) << (4 * p) for p in range(n)) if policy == "longest_idle" else 0
                carry = (state, jnp.zeros((R,), jnp.uint32), q, jnp.full((R,), fifo0, jnp.uint64))
                run = partial(_run_chunk_bits, policy=policy, n=n)
            else:
                stamp = jnp.broadcast_to(-1 - jnp.arange(n, dtype=jnp.int32)[:, None], (n, R))
                carry = (state, jnp.zeros((n, R), bool), q, jnp.array(stamp))
                run = partial(_run_chunk, policy=policy)
            tot = [np.zeros((n, R)), np.zeros((n, R)), np.zeros(R), np.zeros(R), np.zeros(R)]
            for ci, s in enumerate(sizes):
                carry, acc = run(carry, th, jnp.int32(s))
                if ci >= n_burn:
                    for t, a in zip(tot, acc):
                        t += np.asarray(a)
                if bar is not None:
                    bar.update(s * R)
        return tot

    if shards == 1:
        parts = [run_shard(0, replicas)]
    else:
        with ThreadPoolExecutor(shards) as ex:
            parts = list(ex.map(run_shard, bounds[:-1], bounds[1:]))
    if bar is not None:
        bar.close()
    tot_busy, tot_done, tot_q, tot_arr, tot_wait = (np.concatenate(x, axis=-1) for x in zip(*parts))

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
