"""The fast kernel of the count chain: the step on a group of lanes and the sequential loop.

The words of step t of a lane are counter-based (:mod:`qlib._rng`), so a whole block of steps
is drawn at once, vectorised over (steps, lanes), and only the compare-and-update runs in the
sequential loop. That loop runs over groups of lanes, each group through a whole chunk, as a
hand-written loop over replicas would (its counts stay in cache): XLA:CPU compiles a while loop
whose body touches less than ``xla_cpu_small_while_loop_byte_threshold`` bytes into one kernel
instead of dispatching every fused op of the body separately (:mod:`qlib._xla`). The join words
T(u_i) of every level are carried through the loop and looked up (table) or evaluated (formula)
only at the level a step changes (:mod:`qlib.supermarket.arrival`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from qlib import _rng, _sharding
from qlib.supermarket.arrival import (
    MODEL,
    EventMap,
    Events,
    _hits,
    _with_norm,
    draw_block,
    join_index,
    join_words,
)
from qlib.supermarket.lanes import ChainState, LaneParams
from qlib.supermarket.observers import flow_units, recompute_where_changed
from qlib.supermarket.observers import observe as _observe


def apply(u, ev: Events, lvl):
    """Move one customer: arrival -> u_{level+1} += 1; departure -> u_level -= 1 (if level >= 1).

    An arrival at the top level (level = L) is dropped here; it sets the overflow flag of
    :func:`qlib.supermarket.chain.step`, and the driver reruns the chunk with more levels.
    """
    arrival = ev.arrival[None]
    idx = jnp.where(arrival, lvl + 1, lvl)
    delta = jnp.where(arrival, 1, -(lvl > 0).astype(jnp.int32)).astype(u.dtype)
    rows = jnp.arange(u.shape[1], dtype=jnp.int32)[None, :, None]
    return u + jnp.where(rows == idx[:, None], delta[:, None], jnp.zeros((), u.dtype))


def _fast_step(u, ev: Events, p: LaneParams, replacement: bool, variant: EventMap = MODEL, tc=None):
    """One step on a group of lanes: (new u, overflow flag (lanes,), level > 0 (chains, lanes)).

    ``tc``: the carried join words T(u_i) (see :func:`_step`). The hits c_i are true exactly for
    i = 1..level (T is non-decreasing in u, u non-increasing in i), so the one-hot update of
    :func:`apply` is a difference of neighbouring c's: an arrival adds c_{i-1} - c_i (one customer
    moves to length level+1), a departure adds c_{i+1} - c_i (one leaves length level; nothing if
    level = 0). That skips the sum over levels (faster for groups of 1-4 lanes; for wider groups
    the sum and the one-hot update vectorise better, measured 5-10%). Every form gives the
    numbers of the plain step (tested).
    """
    c = _hits(u, ev, p, replacement, tc, variant)
    if variant.kind == "tie_longer":
        lvl = _tie_longer(u, ev, p, jnp.sum(c, axis=1, dtype=jnp.int32))
        top = jnp.any(ev.arrival[None] & (lvl >= u.shape[1] - 1), axis=0)
        return apply(u, ev, lvl), top, lvl > 0
    top = jnp.any(ev.arrival[None] & c[:, -1], axis=0)
    if u.shape[-1] >= 8:
        lvl = jnp.sum(c, axis=1, dtype=jnp.int32)
        return apply(u, ev, lvl), top, lvl > 0
    one = jnp.ones(c.shape[:1] + (1,) + c.shape[2:], bool)
    prev = jnp.concatenate([one, c[:, :-1]], axis=1)
    nxt = jnp.concatenate([c[:, 1:], ~one], axis=1)
    w = jnp.where(ev.arrival[None, None], prev, nxt).astype(u.dtype) - c.astype(u.dtype)
    zero = jnp.zeros(c.shape[:1] + (1,) + c.shape[2:], u.dtype)
    return u + jnp.concatenate([zero, w], axis=1), top, c[:, 0]


def _update_words(tc, u, u_new, look):
    """The carried join words of levels 1..L after one step (see observers.recompute_where_changed)."""
    return recompute_where_changed(tc, u[:, 1:], u_new[:, 1:], look)


def _step(u, tc, ev: Events, p: LaneParams, replacement: bool, variant: EventMap, look):
    """:func:`_fast_step` carrying the join words T(u_i) of levels 1..L (``tc``): the sequential
    loops' step. ``look(u)`` gives T at counts u (a table lookup, or :func:`join_words`)."""
    u_new, top, busy = _fast_step(u, ev, p, replacement, variant, tc)
    return u_new, _update_words(tc, u, u_new, look), top, busy


def _looker(p: LaneParams, replacement: bool, variant: EventMap, table, offsets):
    """The function u -> T(u) of a group's lanes (lanes last): from the table if there is one."""
    if table is None:
        return lambda u: join_words(join_index(u, p, variant), p, replacement)
    # int32 indices (the tables have at most 2^22 entries, all in bounds): measured ~10-20% faster
    off32 = offsets.astype(jnp.int32)
    return lambda u: table.at[off32
                              + join_index(u, p, variant).astype(jnp.int32)].get(mode="promise_in_bounds")


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


def _local_advance(state: ChainState, obs, p: LaneParams, active, t0, m, table, offsets, *, replacement: bool,
                   observe: str, block: int, group: int, frames: int, variant: EventMap = MODEL,
                   flow_replacement: bool = True, inner: bool = False, tabled: bool = True):
    """Per device: advance every active lane ``frames`` x ``m`` steps (see :class:`ChainDriver`).

    Lanes are taken ``group`` at a time and each group runs all ``m`` steps before the next
    (as a hand-written loop over replicas would: its counts stay in cache): per block of
    ``block`` steps its events are drawn at once, vectorised over (steps, lanes), then applied
    one step after another. Groups past the last active lane are skipped; with a meeting
    observer a group stops as soon as all its lanes have met. ``table``, ``offsets``: the join
    words of every point on this device and each lane's offset into them (used if ``tabled``).
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
        look = _looker(pg, replacement, variant, table if tabled else None, sl(offsets))

        def run_block(b, c):
            """Steps t0 + b*block + 1, ... of this group: drawn at once, applied in turn."""
            rg, ug, tc, og, obg = c
            k_len = jnp.minimum(block, m - b * block)
            ev = draw_block(rg, pg, block, replacement, ag, variant)
            t_start = t0 + b * block

            def one(k, c):
                ug, tc, og, obg = c
                evk = jax.tree.map(lambda x: x[k], ev)
                u_new, tc, top, busy = _step(ug, tc, evk, pg, replacement, variant, look)
                return u_new, tc, og + top.astype(og.dtype), _observe(observe, obg, u_new, evk, busy,
                                                                      t_start + k + 1,
                                                                      ug, (pm, flow_replacement))

            ug, tc, og, obg = jax.lax.fori_loop(0, k_len, one, (ug, tc, og, obg))
            return jnp.where(ag, _rng.advance(rg, 2 * k_len), rg), ug, tc, og, obg

        obs_g = jax.tree.map(sl, obs)
        if flowing:  # the current flow units of every level, carried through the group's steps
            obs_g = tuple(obs_g) + (flow_units(sl(u)[0], pm, flow_replacement),)
        c = (sl(rng), sl(u), look(sl(u)[:, 1:]), sl(ovf), obs_g)
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
        return _local_record(state, obs, p, active, t0, m, table if tabled else None, offsets,
                             replacement=replacement, observe=observe, block=block, group=group,
                             frames=frames, n_groups=n_groups)

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


def _local_record(state: ChainState, obs, p: LaneParams, active, t0, m, table, offsets, *, replacement: bool,
                  observe: str, block: int, group: int, frames: int, n_groups):
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
        look = _looker(pg, replacement, MODEL, table, sl(offsets))
        fpb = jnp.maximum(1, block // m)  # whole frames per block of draws
        nblocks = (frames + fpb - 1) // fpb

        def run_frames(b, c):
            rg, ug, tc, og, obg, buf = c
            f0 = b * fpb
            nf = jnp.minimum(fpb, frames - f0)
            ev = draw_block(rg, pg, block, replacement, ag)  # block >= m steps (see _call)
            t_start = t0 + f0 * m

            def frame(f, c):
                ug, tc, og, obg, buf = c

                def one(k, c):
                    ug, tc, og, obg = c
                    i = f * m + k
                    evk = jax.tree.map(lambda x: x[i], ev)
                    ug, tc, top, busy = _step(ug, tc, evk, pg, replacement, MODEL, look)
                    return ug, tc, og + top.astype(og.dtype), _observe(observe, obg, ug, evk, busy,
                                                                       t_start + i + 1)

                ug, tc, og, obg = jax.lax.fori_loop(0, m, one, (ug, tc, og, obg))
                buf = jax.lax.dynamic_update_slice_in_dim(buf, ug[None], f0 + f, axis=0)
                return ug, tc, og, obg, buf

            ug, tc, og, obg, buf = jax.lax.fori_loop(0, nf, frame, (ug, tc, og, obg, buf))
            return jnp.where(ag, _rng.advance(rg, 2 * nf * m), rg), ug, tc, og, obg, buf

        buf0 = jnp.zeros((frames, C, L1, group), u.dtype)
        c = (sl(rng), sl(u), look(sl(u)[:, 1:]), sl(ovf), jax.tree.map(sl, obs), buf0)
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
def advance_fn(devices: tuple, obs_ndims: tuple, replacement: bool, observe: str, block: int,
               group: int, frames: int, variant: EventMap = MODEL, flow_replacement: bool = True,
               inner: bool = False, tabled: bool = True):
    """The jitted kernel for one static configuration: shard_map over the lanes, no communication."""
    spec = _sharding.lane_spec
    state_spec = ChainState(spec(1), spec(3), spec(1))
    obs_spec = tuple(spec(k) for k in obs_ndims)
    p_spec = LaneParams(spec(1), spec(1), spec(1), spec(1))
    fn = functools.partial(_local_advance, replacement=replacement, observe=observe, block=block,
                           group=group, frames=frames, variant=variant, flow_replacement=flow_replacement,
                           inner=inner, tabled=tabled)
    out_specs = (state_spec, obs_spec, spec(4) if frames else None)
    mapped = jax.shard_map(fn, mesh=_sharding.mesh(devices),
                           in_specs=(state_spec, obs_spec, p_spec, spec(1), spec(0), spec(0), spec(1),
                                     spec(1)),
                           out_specs=out_specs, check_vma=False)
    return jax.jit(mapped)


