"""Replicas (lanes) split over every JAX device: one mesh axis, "replicas".

Lane counts are padded up to a multiple of the device count; padding lanes are inactive (they
never step) and are dropped at the end. Because each replica's stream depends only on
(seed, replica index), results are identical on 1 or many devices. On CPU, ``import qlib``
asks XLA for one host device per core.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

AXIS = "replicas"


def device_count() -> int:
    """Number of devices lanes are split over (all of ``jax.devices()``)."""
    return len(jax.devices())


def padded(replicas: int) -> int:
    """``replicas`` rounded up to a multiple of the device count."""
    d = device_count()
    return -(-replicas // d) * d


@functools.lru_cache(maxsize=None)
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


def put(x, axis: int = -1):
    """Place ``x`` with its replica axis split over all devices."""
    return jax.device_put(x, replica_sharding(np.ndim(x), axis))


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
