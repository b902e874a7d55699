"""Exact simulation of the supermarket model through its count chain.

Model (Brightwell & Luczak, arXiv:1201.5523): n FIFO queues with Exp(1) service; customers
arrive at rate lam*n; each samples d queues uniformly (with replacement by default) and joins a
shortest. Uniformised at total rate n(1+lam), each step is an arrival with probability
lam/(1+lam), otherwise a potential departure from a uniformly chosen queue.

Queues of equal length are interchangeable, so the counts u_i = #queues with length >= i
(u_0 = n) form a Markov chain of their own:

- an arrival joins a queue of length i with probability g(u_i) - g(u_{i+1}), where
  g(u) = (u/n)^d (with replacement) or C(u, d)/C(n, d) (without);
- a departure hits a queue of length i >= 1 with probability (u_i - u_{i+1})/n.

One step costs O(levels), whatever n and d: n = 10^9 is as cheap as n = 10. The level is found
by the monotone coupling of MODELS.md: one 64-bit random word per step; its high half picks the
event, its low half either the arrival uniform U (join the largest i with U < g(u_i)) or the
departure rank r in [0, n) (the queue of rank r in decreasing order of length), compared as
integers so nothing is lost to float rounding at large n.

Replicas are the last axis of every array (u has shape (levels+1, replicas)), so the step is
SIMD-wide across replicas; replicas are sharded over all JAX devices. Each replica draws from
its own stream, seeded from (seed, replica index), so a replica's result never depends on
how many replicas run or on how many devices share them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng, _sharding
from qlib import _validate as V
from qlib.supermarket.theory import check_parameters as _theory_check
from qlib.supermarket.theory import fluid_fixed_point, predicted_max_length

MAX_N = 2**32 - 1  # the departure rank is drawn as (32 random bits * n) >> 32 in uint64
_TWO32 = 4294967296.0


# --------------------------------------------------------------------------- validation

def check_parameters(n: Any, d: Any, lam: Any, replacement: Any = True) -> tuple[int, int, float, bool]:
    """Validate (n, d, lam, replacement) for simulation (n <= 2^32 - 1); ValueError otherwise."""
    n = V.integer("n", n, low=1, high=MAX_N)
    return _theory_check(n, d, lam, replacement)  # type: ignore[return-value]


# --------------------------------------------------------------------------- initial states

def counts_from_lengths(lengths: Any) -> np.ndarray:
    """Counts u_i = #queues with length >= i, i = 0..max, from a vector of queue lengths."""
    q = np.asarray(lengths)
    if q.ndim != 1 or q.size < 1:
        raise ValueError(f"lengths must be a non-empty 1-D array of queue lengths; got shape {q.shape}")
    if not np.issubdtype(q.dtype, np.number) or np.any(~np.isfinite(q)) or np.any(q < 0) \
            or np.any(q != np.floor(q)):
        raise ValueError("lengths must hold non-negative integers")
    q = q.astype(np.int64)
    hist = np.bincount(q)
    return np.cumsum(hist[::-1])[::-1].astype(np.int64)


def counts_all_at(n: int, length: int) -> np.ndarray:
    """Counts of the state where every one of the n queues has the given length."""
    n = V.integer("n", n, low=1, high=MAX_N)
    length = V.integer("length", length, low=0)
    return np.full(length + 1, n, dtype=np.int64)


def _valid_counts(u: np.ndarray, n: int) -> bool:
    return (u.ndim >= 1 and u.shape[-1] >= 1 and np.all(u[..., 0] == n) and np.all(u >= 0)
            and np.all(np.diff(u, axis=-1) <= 0))


def initial_counts(n: int, d: int, lam: float, initial: Any, replacement: bool = True) -> np.ndarray:
    """Resolve ``initial`` to counts: shape (levels+1,) or (replicas, levels+1).

    ``initial`` is "empty", "fluid" (integer counts nearest n times the fluid fixed point),
    ``{"counts": u}``, ``{"lengths": q}``, or a bare array: counts u (u_0 = n, non-increasing;
    1-D, or 2-D with one row per replica) or a length-n vector of queue lengths.
    """
    if isinstance(initial, str):
        V.choice("initial", initial, ("empty", "fluid"))
        if initial == "empty":
            return np.array([n, 0], dtype=np.int64)
        k = predicted_max_length(d, lam) if d > 1 else 1
        levels = int(min(k if math.isfinite(k) else 1, 60)) + 4
        s = fluid_fixed_point(d, lam, levels, replacement=replacement,
                              n=None if replacement else n)
        u = np.rint(n * s).astype(np.int64)
        while u[-1] > 0:  # (d = 1: geometric tail) extend until the rounded profile ends
            levels *= 2
            s = fluid_fixed_point(d, lam, levels, replacement=replacement, n=None if replacement else n)
            u = np.rint(n * s).astype(np.int64)
        last = int(np.nonzero(u)[0][-1])
        return u[: last + 2]
    if isinstance(initial, Mapping):
        if set(initial) == {"lengths"}:
            q = np.asarray(initial["lengths"])
            if q.ndim != 1 or q.size != n:
                raise ValueError(f"initial['lengths'] must be a 1-D array of n = {n} queue lengths; got shape {q.shape}")
            return counts_from_lengths(q)
        if set(initial) == {"counts"}:
            u = _as_int_array("initial['counts']", initial["counts"])
            if not _valid_counts(u, n) or u.ndim > 2:
                raise ValueError(f"initial['counts'] must have u_0 = n = {n}, be non-negative and non-increasing "
                                 "(1-D, or 2-D with one row per replica)")
            return u
        raise ValueError(f"initial as a mapping must be {{'counts': u}} or {{'lengths': q}}; got keys {sorted(initial)}")
    a = np.asarray(initial)
    if a.dtype == object or a.ndim == 0:
        raise ValueError(f"initial must be 'empty', 'fluid', an array of counts or of queue lengths; got {initial!r}")
    u = _as_int_array("initial", a)
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


def _as_int_array(name: str, x: Any) -> np.ndarray:
    a = np.asarray(x)
    if not np.issubdtype(a.dtype, np.number) or np.any(~np.isfinite(a)) or np.any(a != np.floor(a)):
        raise ValueError(f"{name} must hold finite integers")
    return a.astype(np.int64)


# --------------------------------------------------------------------------- the step

class _Consts(NamedTuple):
    """Per-run scalars, traced (not static) so a sweep over (n, d, lam) compiles once."""

    n: Any
    d: Any
    lam_thr: Any  # arrival iff high 32 bits < lam_thr = floor(2^32 lam/(1+lam))
    log_cn: Any  # log C(n, d), for sampling without replacement


def _consts(n: int, d: int, lam: float) -> _Consts:
    log_cn = math.lgamma(n + 1) - math.lgamma(n - d + 1) if d <= n else 0.0
    return _Consts(jnp.int64(n), jnp.float64(d), jnp.uint64(int(_TWO32 * lam / (1.0 + lam))),
                   jnp.float64(log_cn))


def _draw(rng, c: _Consts):
    """One step's randomness: (new rng, is_arrival, low 32 bits).

    The high half of one 64-bit word picks the event; the low half is the arrival uniform or
    the departure rank. Two chains fed the same draw are the monotone coupling of MODELS.md.
    """
    rng, w = _rng.next_u64(rng)
    hi, lo = _rng.split_u32(w)
    return rng, hi < c.lam_thr, lo


def _threshold(arrival, lo, c: _Consts):
    """With replacement, the integer the event compares u_i against, per replica (int64).

    Arrival: floor(n U^(1/d)) with U = (lo + 1/2)/2^32, since U < (u_i/n)^d <=> u_i > n U^(1/d)
    <=> u_i > floor(n U^(1/d)). Departure: the rank r = floor(lo n / 2^32).
    The touched length is then #{i >= 1: u_i > threshold}.
    """
    rank = ((lo * c.n.astype(jnp.uint64)) >> 32).astype(jnp.int64)
    U = _rng.uniform_open(lo)
    thr_arr = jnp.floor(c.n.astype(jnp.float64) * jnp.exp(jnp.log(U) / c.d)).astype(jnp.int64)
    return jnp.where(arrival, thr_arr, rank)


def _level(u, arrival, lo, c: _Consts, replacement: bool):
    """The length of the queue the event touches, given counts u (levels+1, replicas).

    Arrival: the length joined, #{i >= 1: U < g(u_i)} with U = (lo + 1/2)/2^32.
    Departure: the length of the queue of rank r = floor(lo n / 2^32), #{i >= 1: r < u_i}.
    Both are non-decreasing in u, which makes the coupling monotone.
    """
    if replacement:
        thr = _threshold(arrival, lo, c)
        return jnp.sum((u[1:] > thr[None]).astype(jnp.int64), axis=0)
    rank = ((lo * c.n.astype(jnp.uint64)) >> 32).astype(jnp.int64)
    U = _rng.uniform_open(lo)
    uf = u[1:].astype(jnp.float64)
    log_g = jax.lax.lgamma(uf + 1) - jax.lax.lgamma(jnp.maximum(uf - c.d, 0.0) + 1) - c.log_cn
    arr_hit = (uf >= c.d) & (jnp.log(U)[None] < log_g)
    dep_hit = u[1:] > rank[None]
    return jnp.sum(jnp.where(arrival[None], arr_hit, dep_hit).astype(jnp.int64), axis=0)


def _apply(u, arrival, level):
    """Move one customer: arrival -> u_{level+1} += 1; departure -> u_level -= 1 (if level >= 1)."""
    idx = jnp.where(arrival, level + 1, level)
    delta = jnp.where(arrival, 1, -(level > 0).astype(jnp.int64))
    rows = jnp.arange(u.shape[0], dtype=jnp.int64)[:, None]
    return u + jnp.where(rows == idx[None], delta[None], 0)


def _step_hits(u, arrival, thr):
    """One step with replacement, as (new u, top level hit by an arrival), without the level.

    c_i = [u_i > thr] (i = 1..L) is true exactly for i = 1..level (u is non-increasing), so the
    one-hot update of :func:`_apply` is a difference of neighbouring c's: an arrival adds
    c_{i-1} - c_i (one customer moves to length level+1), a departure adds c_{i+1} - c_i (one
    leaves length level; nothing if level = 0). This skips the level's reduction and the
    compare against it: fewer passes over the (levels+1, replicas) state.
    """
    ut = u.dtype
    c = u[1:] > thr[None]
    one = jnp.ones((1,) + c.shape[1:], bool)
    prev = jnp.concatenate([one, c[:-1]], axis=0)
    nxt = jnp.concatenate([c[1:], ~one], axis=0)
    w = jnp.where(arrival[None], prev, nxt).astype(ut) - c.astype(ut)
    return u + jnp.concatenate([jnp.zeros((1,) + c.shape[1:], ut), w], axis=0), c[-1]


@partial(jax.jit, static_argnames=("replacement", "accumulate"))
def _run_chunk(carry, nsteps, c: _Consts, *, replacement: bool, accumulate: bool):
    """Advance every replica ``nsteps`` steps; with ``accumulate``, sum u_i and 1[u_i > 0].

    Chunk sums are int64 (at most 2^20 steps * 2^32 per chunk); the caller adds them to float64
    totals, so long runs never overflow.

    With replacement (the fast path) the loop is software-pipelined: each iteration draws the
    *next* step's event and threshold and passes them on in the carry. Loop-carried values are
    stored once, so XLA cannot fuse (and thus recompute) the random word and its log/exp into
    every one of the (levels+1, replicas) elements of the update, which it otherwise does. Counts
    run as uint32 (u <= n <= 2^32 - 1, so compares and +-1 updates are exact) for twice the SIMD
    width of int64. The draws, thresholds and updates are those of :func:`_draw`,
    :func:`_threshold` and :func:`_apply`, so results are identical to the plain loop.
    """
    levels = carry["u"].shape[0] - 1

    def accumulated(s, u):
        if accumulate:
            s["sum_u"] = s["sum_u"] + u.astype(jnp.int64)
            s["sum_busy"] = s["sum_busy"] + (u > 0).astype(jnp.int32)
        return s

    sums = dict(sum_u=jnp.zeros(carry["u"].shape, jnp.int64), sum_busy=jnp.zeros(carry["u"].shape, jnp.int32))
    if not replacement:
        def body(_, s):
            rng, arrival, lo = _draw(s["rng"], c)
            level = _level(s["u"], arrival, lo, c, replacement)
            overflow = s["overflow"] | (arrival & (level == levels))
            u = _apply(s["u"], arrival, level)
            return accumulated(dict(s, rng=rng, u=u, overflow=overflow), u)

        return jax.lax.fori_loop(0, nsteps, body, dict(carry, **sums))

    def lookahead(rng):
        rng_next, arrival, lo = _draw(rng, c)
        return rng_next, arrival, _threshold(arrival, lo, c).astype(jnp.uint32)

    def body(_, s):
        u, top = _step_hits(s["u"], s["arrival"], s["thr"])
        rng, arrival, thr = lookahead(s["rng"])
        out = dict(s, rng=rng, rng_used=s["rng"], arrival=arrival, thr=thr, u=u,
                   overflow=s["overflow"] | (s["arrival"] & top))
        return accumulated(out, u)

    rng1, arrival1, thr1 = lookahead(carry["rng"])
    start = dict(sums if accumulate else {}, rng=rng1, rng_used=carry["rng"], arrival=arrival1, thr=thr1,
                 u=carry["u"].astype(jnp.uint32), overflow=carry["overflow"])
    out = jax.lax.fori_loop(0, nsteps, body, start)
    # rng_used is the state after exactly nsteps draws (the lookahead drew one more).
    res = dict(rng=out["rng_used"], u=out["u"].astype(carry["u"].dtype), overflow=out["overflow"])
    if accumulate:
        res.update(sum_u=out["sum_u"], sum_busy=out["sum_busy"])
    else:
        res.update(sums)
    return res


# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class SupermarketResult:
    """Output of :func:`simulate`. Arrays have one row per replica.

    - ``tail_fraction[r, i]``: time average of u_i/n (fraction of queues with length >= i)
      over the ``steps`` steps after burn-in.
    - ``max_length[r]``: the largest queue length present at any step after burn-in.
    - ``max_length_distribution[r, i]``: fraction of those steps at which the maximum was i.
    - ``counts[r, i]``: the final u_i.
    - ``batch_tail_fraction[r, b, i]``: ``tail_fraction`` over each of ``batches`` equal batches.
    - ``trajectory[r, t, i]``: u_i after every ``record_every`` steps (only if asked for).
    """

    n: int
    d: int
    lam: float
    steps: int
    burn_in: int
    seed: int
    replacement: bool
    tail_fraction: np.ndarray
    max_length: np.ndarray
    max_length_distribution: np.ndarray
    counts: np.ndarray
    batch_tail_fraction: np.ndarray
    trajectory: np.ndarray | None = None
    record_every: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def replicas(self) -> int:
        return self.tail_fraction.shape[0]

    @property
    def levels(self) -> int:
        return self.tail_fraction.shape[1] - 1

    @property
    def queue_length_distribution(self) -> np.ndarray:
        """Time-average fraction of queues with length exactly i: s_i - s_{i+1}."""
        t = self.tail_fraction
        return t - np.concatenate([t[:, 1:], np.zeros((t.shape[0], 1))], axis=1)

    @property
    def time(self) -> float:
        """Model time covered by the measured steps: steps / ((1 + lam) n)."""
        return self.steps / ((1.0 + self.lam) * self.n)

    def tail_fraction_estimate(self):
        """Mean and standard error of ``tail_fraction``: over replicas if there are several,
        else by batch means of the single run (needs ``batches >= 2``)."""
        from qlib import stats

        if self.replicas >= 2:
            return stats.replica_mean(self.tail_fraction)
        if self.batch_tail_fraction.shape[1] >= 2:
            return stats.replica_mean(self.batch_tail_fraction[0])
        raise ValueError("an error bar needs replicas >= 2 or batches >= 2")


# --------------------------------------------------------------------------- driver

def _default_levels(d: int, lam: float, u0: np.ndarray) -> int:
    k = predicted_max_length(d, lam)
    guess = int(k) + 3 if math.isfinite(k) else int(math.ceil(math.log(1e-3) / math.log(lam))) + 4
    return max(guess, u0.shape[-1] + 1, 4)


def _pad_levels(a: jax.Array, levels: int) -> jax.Array:
    return jnp.pad(a, ((0, levels + 1 - a.shape[0]), (0, 0)))


def _chunk_length(replicas: int, levels: int) -> int:
    # About 2^24 replica-level updates per chunk: long enough to amortise dispatch, short
    # enough for a live progress bar; never above 2^20 steps (int64 chunk sums stay exact).
    return int(min(2**20, max(2**8, 2**24 // max(1, replicas * max(levels, 4) // 8))))


def simulate(n: int, d: int, lam: float, *, steps: int, replicas: int = 1, seed: int = 0,
             burn_in: int = 0, initial: Any = "empty", replacement: bool = True, batches: int = 1,
             record_every: int | None = None, levels: int | None = None,
             progress: bool | None = None) -> SupermarketResult:
    """Simulate ``replicas`` independent copies of the supermarket model's count chain.

    Parameters (paper notation): ``n`` queues, ``d`` choices per arrival, arrival rate ``lam``
    per queue (0 < lam < 1); ``steps`` uniformised steps are measured after ``burn_in`` steps
    (one unit of model time is (1 + lam) n steps). ``initial``: "empty", "fluid", or counts /
    queue lengths (see :func:`initial_counts`). ``replacement``: sample the d queues with
    replacement (the classical model) or without. ``batches`` splits the measured steps into
    equal batches for batch-means error bars; ``record_every`` stores u every so many steps
    (no trajectory is kept otherwise). ``levels`` is the initial number of tracked lengths; it
    grows automatically when a queue would exceed it (the chunk is rerun from its saved state,
    so the result is the same as with a larger cap: nothing is ever truncated).

    Returns a :class:`SupermarketResult`. The same ``seed`` gives identical arrays, and replica
    r's numbers do not depend on ``replicas`` or the number of devices.
    """
    n, d, lam, replacement = check_parameters(n, d, lam, replacement)
    steps = V.integer("steps", steps, low=1)
    replicas = V.integer("replicas", replicas, low=1)
    seed = V.integer("seed", seed, low=0, high=2**63 - 1)
    burn_in = V.integer("burn_in", burn_in, low=0)
    batches = V.integer("batches", batches, low=1, high=steps)
    if record_every is not None:
        record_every = V.integer("record_every", record_every, low=1, high=steps)
    u0 = initial_counts(n, d, lam, initial, replacement)
    if u0.ndim == 2 and u0.shape[0] != replicas:
        raise ValueError(f"initial counts with one row per replica must have {replicas} rows; got {u0.shape[0]}")
    L = _default_levels(d, lam, u0) if levels is None else V.integer("levels", levels, low=u0.shape[-1])
    if progress is None:
        progress = steps * replicas * max(L, 4) >= 5e10  # roughly > 10 s of work

    with jax.enable_x64(True):
        return _simulate(n, d, lam, steps, replicas, seed, burn_in, u0, L, replacement, batches,
                         record_every, progress)


def _simulate(n, d, lam, steps, replicas, seed, burn_in, u0, L, replacement, batches,
              record_every, progress) -> SupermarketResult:
    R = _sharding.padded(replicas)  # padding replicas: real, independent streams, dropped at the end
    sh1, sh2 = _sharding.replica_sharding(1), _sharding.replica_sharding(2)
    u_init = np.zeros((L + 1, R), dtype=np.int64)
    rows = u0.T if u0.ndim == 2 else u0[:, None]
    u_init[: rows.shape[0], :] = rows if u0.ndim == 1 else np.pad(rows, ((0, 0), (0, R - replicas)), mode="edge")
    carry = {
        "rng": jax.device_put(_rng.replica_states(seed, jnp.arange(R)), sh1),
        "u": jax.device_put(jnp.asarray(u_init), sh2),
        "overflow": jax.device_put(jnp.zeros(R, bool), sh1),
    }
    c = _consts(n, d, lam)

    # The measured steps split at batch ends and record points; each piece runs in chunks.
    cuts = {burn_in + steps}
    cuts |= {burn_in + (steps * b) // batches for b in range(1, batches)}
    if record_every:
        cuts |= set(range(burn_in + record_every, burn_in + steps + 1, record_every))
    if burn_in:
        cuts.add(burn_in)
    cuts = sorted(cuts)
    batch_ends = {burn_in + (steps * b) // batches: b - 1 for b in range(1, batches + 1)}
    record_at = set(range(burn_in + record_every, burn_in + steps + 1, record_every)) if record_every else set()

    sum_u = jnp.zeros((L + 1, R))
    sum_busy = jnp.zeros((L + 1, R))
    batch_sum = []
    last_batch_sum = jnp.zeros((L + 1, R))
    frames = []
    bar = _progress_bar(burn_in + steps, progress)
    t = 0
    for cut in cuts:
        measuring = t >= burn_in
        while t < cut:
            m = min(cut - t, _chunk_length(R, L))
            while True:
                out = _run_chunk(carry, jnp.int64(m), c, replacement=replacement, accumulate=measuring)
                if not bool(jnp.any(out["overflow"])):
                    break
                L = L + max(4, L // 2)  # a queue would pass the top level: grow, rerun the chunk
                carry = {**carry, "u": jax.device_put(_pad_levels(carry["u"], L), sh2),
                         "overflow": jnp.zeros_like(carry["overflow"])}
                sum_u, sum_busy, last_batch_sum = (_pad_levels(a, L) for a in (sum_u, sum_busy, last_batch_sum))
                batch_sum = [_pad_levels(a, L) for a in batch_sum]
                frames = [np.pad(f, ((0, L + 1 - f.shape[0]), (0, 0))) for f in frames]
            carry = {"rng": out["rng"], "u": out["u"], "overflow": out["overflow"]}
            if measuring:
                sum_u = sum_u + out["sum_u"].astype(jnp.float64)
                sum_busy = sum_busy + out["sum_busy"].astype(jnp.float64)
            t += m
            if bar is not None:
                bar.update(m)
        if t in batch_ends:
            batch_sum.append(sum_u - last_batch_sum)
            last_batch_sum = sum_u
        if t in record_at:
            frames.append(np.asarray(carry["u"]))
    if bar is not None:
        bar.close()

    sl = slice(0, replicas)
    tail = np.asarray(sum_u).T[sl] / (steps * n)
    busy = np.asarray(sum_busy).T[sl] / steps  # P(u_i > 0) = P(max length >= i)
    busy[:, 0] = 1.0
    max_dist = busy - np.concatenate([busy[:, 1:], np.zeros((replicas, 1))], axis=1)
    nz = busy > 0
    max_length = (L - np.argmax(nz[:, ::-1], axis=1)).astype(np.int64)
    lengths = np.diff([burn_in] + sorted(batch_ends))
    bt = np.stack([np.asarray(b).T[sl] for b in batch_sum], axis=1) / (lengths[None, :, None] * n)
    traj = np.stack([f.T[sl] for f in frames], axis=1) if frames else None
    return SupermarketResult(
        n=n, d=d, lam=lam, steps=steps, burn_in=burn_in, seed=seed, replacement=replacement,
        tail_fraction=tail, max_length=max_length, max_length_distribution=max_dist,
        counts=np.asarray(carry["u"]).T[sl].copy(), batch_tail_fraction=bt,
        trajectory=traj, record_every=record_every)


def _progress_bar(total: int, show: bool, desc: str = "supermarket"):
    """A tqdm.auto bar over steps (None when not shown); shared by the coupling code."""
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="step", unit_scale=True, desc=desc, leave=False)
