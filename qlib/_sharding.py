"""Replicas sharded over every JAX device: one mesh axis, "replicas".

Replica counts are padded up to a multiple of the device count; the padding replicas are real,
independent streams (their indices continue past the last real one) and are dropped at the end.
Because each replica's stream depends only on (seed, replica index), results are identical on
1 or many devices. On CPU, ``import qlib`` asks XLA for one host device per core.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def device_count() -> int:
    """Number of devices replicas are sharded over (all of ``jax.devices()``)."""
    return len(jax.devices())


def padded(replicas: int) -> int:
    """``replicas`` rounded up to a multiple of the device count."""
    d = device_count()
    return -(-replicas // d) * d


def replica_sharding(ndim: int, axis: int = -1) -> NamedSharding:
    """A sharding that splits dimension ``axis`` of an ``ndim``-array over all devices."""
    mesh = Mesh(np.array(jax.devices()), ("replicas",))
    spec = [None] * ndim
    spec[axis] = "replicas"
    return NamedSharding(mesh, P(*spec))


def put(x, axis: int = -1):
    """Place ``x`` with its replica axis split over all devices."""
    return jax.device_put(x, replica_sharding(np.ndim(x), axis))
