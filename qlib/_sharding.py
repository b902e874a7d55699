"""Replicas (lanes) split over every JAX device: one mesh axis, "replicas".

Lane counts are padded up to a multiple of the device count; padding lanes are inactive (they
never step) and are dropped at the end. Because each replica's stream depends only on
(seed, replica index), results are identical on 1 or many devices. On CPU, ``import qlib``
asks XLA for one host device per core.

Several processes (``jax.distributed.initialize``, see :mod:`qlib.distributed`): the devices
are the *global* devices of every process, and the same code runs on every process (SPMD).
Every process builds the same host arrays (inputs are determined by the parameters and the
seed); :func:`put` makes a global array of which each process places only the shards of its
own devices (``jax.make_array_from_callback``), and :func:`gather` brings a global array back
to every process in full (``process_allgather``). Host-side decisions taken from gathered
arrays are therefore the same on every process, so the processes take the same branches and
issue the same collectives in the same order. In one process both are plain transfers.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXIS = "replicas"


def device_count() -> int:
    """Number of devices lanes are split over (all of ``jax.devices()``, every process's)."""
    return len(jax.devices())


def process_count() -> int:
    """Number of JAX processes in this job (1 unless ``jax.distributed`` joined several)."""
    return jax.process_count()


def is_main_process() -> bool:
    """True on process 0 (the one that shows progress bars); always True in one process."""
    return jax.process_index() == 0


def padded(replicas: int) -> int:
    """``replicas`` rounded up to a multiple of the device count."""
    d = device_count()
    return -(-replicas // d) * d


def lane_devices(lanes: int) -> tuple:
    """The devices ``lanes`` lanes are split over: in one process the first min(lanes, D) (no
    device holds only padding); with several processes all global devices, because every
    process must take part in each computation (its devices may then hold only padding)."""
    devs = jax.devices()
    if process_count() > 1:
        return tuple(devs)
    return tuple(devs[: max(1, min(len(devs), lanes))])


@functools.cache
def _mesh(devices: tuple) -> Mesh:
    return Mesh(np.array(devices), (AXIS,))


def mesh(devices: tuple | None = None) -> Mesh:
    """The 1-D mesh over ``devices`` (default: all devices), axis ``"replicas"``."""
    return _mesh(tuple(jax.devices()) if devices is None else tuple(devices))


def lane_spec(ndim: int) -> P:
    """PartitionSpec splitting the LAST axis of an ``ndim``-array over the devices (P() for scalars)."""
    return P(*([None] * (ndim - 1) + [AXIS])) if ndim >= 1 else P()


def replica_sharding(ndim: int, axis: int = -1, devices: tuple | None = None) -> NamedSharding:
    """A sharding that splits dimension ``axis`` of an ``ndim``-array over ``devices`` (default all)."""
    spec = [None] * ndim
    spec[axis] = AXIS
    return NamedSharding(mesh(devices), P(*spec))


def put(x, axis: int = -1, devices: tuple | None = None) -> jax.Array:
    """Place ``x`` with dimension ``axis`` split over ``devices`` (default all, every process's).

    A host array (the same on every process) becomes a global array of which each process
    fills only its own devices' shards (``jax.make_array_from_callback``); a ``jax.Array``
    already on these devices is resharded (``jax.device_put``). Call inside
    ``jax.enable_x64(True)`` for 64-bit dtypes.
    """
    sharding = replica_sharding(np.ndim(x), axis, devices)
    if isinstance(x, jax.Array):
        return jax.device_put(x, sharding)
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def gather(x) -> np.ndarray:
    """The whole of ``x`` as a host array, on every process.

    A global array split over several processes is all-gathered (every process must call
    this, in the same order); one held in full by this process (one process, or a replicated
    result) is simply copied. Anything else goes through ``np.asarray``.
    """
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
        return np.asarray(x)
    if x.is_fully_replicated:
        return np.asarray(x.addressable_data(0))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def any_true(x) -> bool:
    """Whether any element of the (global) bool array ``x`` is True: one reduction over every
    device, whose replicated result every process reads, so all take the same branch."""
    return bool(gather(jnp.any(x)))


def interleave(lanes: int, devices: int | None = None) -> np.ndarray:
    """Physical position of each logical lane when ``lanes`` (a multiple of the device count D)
    are dealt to the D devices in turn: lane j goes to device j % D, slot j // D.

    Lanes sorted by run length then give every device a share of each length, and each
    device's shard is itself sorted (so its finished lanes form a suffix)."""
    D = device_count() if devices is None else devices
    if lanes % D:
        raise ValueError(f"lanes must be a multiple of the device count {D}; got {lanes}")
    j = np.arange(lanes)
    return (j % D) * (lanes // D) + j // D
