"""The kernels' chain states and totals, and their conversions from and to a :class:`ChainState`.

The host form (:class:`qlib.heterogeneous.result.ChainState`: one row per replica, servers in
input order) is what results carry; the kernels hold replicas last, servers in kernel order.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng, _sharding
from qlib.heterogeneous.result import ChainState


class Totals(NamedTuple):
    """Run totals on the devices (replicas last): steps busy and completions per server (n, R),
    sum of the queue length after each step, arrivals and waiting arrivals (R,); all int64."""

    busy: jax.Array
    done: jax.Array
    queue: jax.Array
    arrivals: jax.Array
    waits: jax.Array


class BitsChain(NamedTuple):
    """The bits kernel's state (replicas last). ``mask`` (W, R) uint64: bit j % 64 of word j // 64
    is set iff server j is busy; ``fifo`` (R,) uint64: the idle servers' 4-bit ids, the one idle
    the longest in the low bits ("longest_idle" only, else 0); ``queue`` (R,) int32."""

    rng: jax.Array
    mask: jax.Array
    queue: jax.Array
    fifo: jax.Array


class ArrayChain(NamedTuple):
    """The array kernel's state (servers, replicas). ``stamp`` (n, R) int32: when each server last
    became idle, rebased after every chunk to ranks in [-n, 0) (only the order of idle ones matters)."""

    rng: jax.Array
    busy: jax.Array
    queue: jax.Array
    stamp: jax.Array


def fresh_state(seed: int, replicas: int, n: int, policy: str) -> ChainState:
    """Every chain empty, server 0 idle the longest; random states from (seed, r)."""
    with jax.enable_x64(True):
        rng = np.asarray(_rng.replica_states(seed, jnp.arange(replicas, dtype=jnp.uint64)))
    order = np.broadcast_to(np.arange(n, dtype=np.int64), (replicas, n)).copy()
    return ChainState(rng=rng.astype(np.uint64), busy=np.zeros((replicas, n), bool),
                      queue=np.zeros(replicas, np.int64),
                      idle_order=order if policy == "longest_idle" else None)


def check_state(state: ChainState, n: int, replicas: int | None, policy: str) -> ChainState:
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
            raise ValueError(
                "initial: idle_order must number the idle servers 0..k-1 (and be -1 for busy ones)"
            )
    return ChainState(
        rng, busy.copy(), queue.astype(np.int64), None if order is None else order.astype(np.int64)
    )


def to_kernel(state: ChainState, perm: np.ndarray, R: int, use_bits: bool):
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
        chain = BitsChain(rng, mask, np.asarray(queue, np.int32), fifo)
    else:
        stamp = (
            np.zeros((R, n), np.int32)
            if order is None
            else (np.where(order >= 0, order, n) - n).astype(np.int32)
        )
        chain = ArrayChain(rng, busy.T, np.asarray(queue, np.int32), stamp.T)
    # host arrays -> global arrays: each process places only its own devices' replicas
    return type(chain)(*(_sharding.put(x, -1) for x in chain))


def from_kernel(chain, perm: np.ndarray, replicas: int, n: int, policy: str) -> ChainState:
    """Kernel chain -> canonical host state of the first ``replicas`` replicas, input order."""
    inv = np.argsort(perm)
    host = _sharding.gather  # the whole array on every process (all processes call it together)
    rng = host(chain.rng)[:replicas].copy()
    queue = host(chain.queue)[:replicas].astype(np.int64)
    order = None
    if isinstance(chain, BitsChain):
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
