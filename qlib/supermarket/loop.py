"""The state (:class:`ChainState`) and step of the supermarket count chain -- the plain step that
defines it and the fast one -- and the per-device sequential loops that run the fast step over groups
of lanes, block by block of drawn events (:mod:`qlib.supermarket.events`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from qlib import _rng
from qlib._xla import small_loop_bytes
from qlib.supermarket.events import (
    MODEL,
    EventMap,
    Events,
    LaneParams,
    _update_log_g,
    _with_norm,
    draw,
    draw_block,
    log_g,
)
from qlib.supermarket.observers import _observe, flow_units


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


# --------------------------------------------------------------------------- the plain step

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


def _lane_slice(x, start, size):
    return jax.lax.dynamic_slice_in_dim(x, start, size, axis=x.ndim - 1)


def _lane_update(x, y, start):
    return jax.lax.dynamic_update_slice_in_dim(x, y, start, axis=x.ndim - 1)


def small_loops_in_one_kernel() -> bool:
    """True on XLA:CPU with the small-while-loop threshold raised (:func:`qlib.configure_xla`):
    a small group's step loop then compiles into one kernel instead of running op by op."""
    return jax.default_backend() == "cpu" and small_loop_bytes() > 1024


def unroll_steps(group: int) -> int:
    """Steps unrolled per iteration of a group's step loop: 4 for groups of at most 32 lanes when
    the loop is one kernel (:func:`small_loops_in_one_kernel`), where the loop's own overhead is a
    large part of a step; else 1. The same steps in the same order: the numbers do not change.
    Measured here (2 cores, n = 1000, d = 10, replicas 1 / 64 / 1024, groups of 1 / 32 / 64
    lanes): 1.33x, 1.18x and 0.90x the rolled loop's rate; without the threshold raised the
    unrolled body runs op by op, 4x slower than the rolled one."""
    return 4 if small_loops_in_one_kernel() and group <= 32 else 1


def _local_advance(state: ChainState, obs, p: LaneParams, active, t0, m, table=None, *, replacement: bool,
                   observe: str, block: int, group: int, frames: int, variant: EventMap = MODEL,
                   flow_replacement: bool = True, inner: bool = False):
    """Per device: advance every active lane ``frames`` x ``m`` steps (see :class:`ChainDriver`).

    Lanes are taken ``group`` at a time and each group runs all ``m`` steps before the next
    (as a hand-written loop over replicas would: its counts stay in cache): per block of
    ``block`` steps its events are drawn at once, vectorised over (steps, lanes), then applied
    one step after another. Groups past the last active lane are skipped; with a meeting
    observer a group stops as soon as all its lanes have met.

    ``table`` (without replacement; (rows, lanes) uint64, see
    :func:`~qlib.supermarket.events.threshold_table`): the arrivals' integer thresholds come with
    the draws and the step is the with-replacement step (integer compares); None: the carried
    log g and its float compare.
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
    unroll = unroll_steps(group)
    integer = replacement or table is not None  # the step compares integers (ev.x)

    def run_group(j, carry):
        rng, u, ovf, obs = carry
        s = j * group
        sl = lambda x: _lane_slice(x, s, group)  # noqa: E731
        pg, ag = jax.tree.map(sl, p), sl(active)
        pm = jax.tree.map(sl, p_model)
        tg = None if table is None else sl(table)

        def run_block(b, c):
            """Steps t0 + b*block + 1, ... of this group: drawn at once, applied in turn."""
            rg, ug, lg, og, obg = c
            k_len = jnp.minimum(block, m - b * block)
            ev = draw_block(rg, pg, block, replacement, ag, variant, tg)
            t_start = t0 + b * block

            def one(k, c):
                ug, lg, og, obg = c
                evk = jax.tree.map(lambda x: x[k], ev)
                u_new, lg, top, busy = _step(ug, lg, evk, pg, integer, variant)
                return u_new, lg, og + top.astype(og.dtype), _observe(observe, obg, u_new, evk, busy,
                                                                      t_start + k + 1,
                                                                      ug, (pm, flow_replacement))

            if unroll > 1:  # a whole block (every one but a run's last) as a static, unrolled loop
                ug, lg, og, obg = jax.lax.cond(
                    k_len == block,
                    lambda c: jax.lax.fori_loop(0, block, one, c, unroll=unroll),
                    lambda c: jax.lax.fori_loop(0, k_len, one, c),
                    (ug, lg, og, obg))
            else:
                ug, lg, og, obg = jax.lax.fori_loop(0, k_len, one, (ug, lg, og, obg))
            return jnp.where(ag, _rng.advance(rg, 2 * k_len), rg), ug, lg, og, obg

        obs_g = jax.tree.map(sl, obs)
        if flowing:  # the current flow units of every level, carried through the group's steps
            obs_g = tuple(obs_g) + (flow_units(sl(u)[0], pm, flow_replacement),)
        c = (sl(rng), sl(u), _initial_log_g(sl(u), pg, integer), sl(ovf), obs_g)
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
                             block=block, group=group, frames=frames, n_groups=n_groups, table=table)

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
                  block: int, group: int, frames: int, n_groups, table=None):
    """:func:`_local_advance` that also records the counts after every ``m`` steps, ``frames``
    times. Each group draws blocks of whole frames at once (about ``block`` steps), runs each
    frame's ``m`` steps in the usual small step loop, and stores the counts into the frame
    buffer after it: one store per recorded value, no host round trip per frame, and the same
    numbers as ``frames`` calls of ``m`` steps (the draws are counter-based)."""
    if observe.startswith("meet"):
        raise ValueError("recording frames is for the 'sums' and 'seen' observers")
    C, L1, W = state.u.shape
    us0 = jnp.zeros((frames, C, L1, W), state.u.dtype)
    integer = replacement or table is not None

    def run_group(j, carry):
        rng, u, ovf, obs, us = carry
        s = j * group
        sl = lambda x: _lane_slice(x, s, group)  # noqa: E731
        pg, ag = jax.tree.map(sl, p), sl(active)
        tg = None if table is None else sl(table)
        fpb = jnp.maximum(1, block // m)  # whole frames per block of draws
        nblocks = (frames + fpb - 1) // fpb

        def run_frames(b, c):
            rg, ug, lg, og, obg, buf = c
            f0 = b * fpb
            nf = jnp.minimum(fpb, frames - f0)
            ev = draw_block(rg, pg, block, replacement, ag, table=tg)  # block >= m steps (see _call)
            t_start = t0 + f0 * m

            def frame(f, c):
                ug, lg, og, obg, buf = c

                def one(k, c):
                    ug, lg, og, obg = c
                    i = f * m + k
                    evk = jax.tree.map(lambda x: x[i], ev)
                    ug, lg, top, busy = _step(ug, lg, evk, pg, integer)
                    return ug, lg, og + top.astype(og.dtype), _observe(observe, obg, ug, evk, busy,
                                                                       t_start + i + 1)

                ug, lg, og, obg = jax.lax.fori_loop(0, m, one, (ug, lg, og, obg))
                buf = jax.lax.dynamic_update_slice_in_dim(buf, ug[None], f0 + f, axis=0)
                return ug, lg, og, obg, buf

            ug, lg, og, obg, buf = jax.lax.fori_loop(0, nf, frame, (ug, lg, og, obg, buf))
            return jnp.where(ag, _rng.advance(rg, 2 * nf * m), rg), ug, lg, og, obg, buf

        buf0 = jnp.zeros((frames, C, L1, group), u.dtype)
        c = (sl(rng), sl(u), _initial_log_g(sl(u), pg, integer), sl(ovf), jax.tree.map(sl, obs), buf0)
        rg, ug, _, og, obg, buf = jax.lax.fori_loop(0, nblocks, run_frames, c)
        obs = jax.tree.map(lambda x, y: _lane_update(x, y, s), obs, obg)
        return (_lane_update(rng, rg, s), _lane_update(u, ug, s), _lane_update(ovf, og, s), obs,
                _lane_update(us, buf, s))

    rng, u, ovf, obs, us = jax.lax.fori_loop(0, n_groups, run_group,
                                             (state.rng, state.u, state.overflow, obs, us0))
    # lanes of the groups past the last active one did not run: their frames are their counts
    us = jnp.where(active[None, None, None], us, state.u[None])
    return ChainState(rng, u, ovf), obs, us

