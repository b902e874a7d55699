"""The observers of the supermarket count chain: what the kernel records along the way, per lane
(time sums, the level-flow sums of g(u_i), the levels reached, meeting times)."""

from __future__ import annotations

import jax.numpy as jnp

from qlib.supermarket.events import Events, LaneParams, _log_reduced, _recompute_where_changed, log_falling

#: The level-flow sums hold g(u_i) rounded to a multiple of 2^-FLOW_BITS per step: int64
#: chunk sums are exact for 2^(63 - FLOW_BITS) steps (a chunk has at most 2^22), and the time
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


# Bytes XLA's cost model charges per (count, lane) in one step of the sequential loop, by
# observer (measured: the loop is hoisted into one kernel up to about this budget).
_LOOP_BYTES = {"sums": 72, "flow": 96, "seen": 40, "meet": 48, "meet_unordered": 56}
