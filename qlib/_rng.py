"""Per-replica random streams kept in the loop carry.

Each replica owns one 64-bit SplitMix64 state (Steele, Lea & Flood 2014; passes BigCrush).
Its starting point is a hash of (seed, replica index), so replica r draws the same numbers
whether it runs alone, in a batch of a million, or on another device: results never depend
on how replicas are batched or sharded. Drawing inside the step instead of from
``jax.random`` blocks keeps the carry tiny and the loop fused (see benchmarks/README.md).

All functions here must be traced under ``jax.enable_x64(True)``.
"""

from __future__ import annotations

import jax.numpy as jnp

GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def mix64(z):
    """SplitMix64 finaliser: a bijective avalanche of a uint64."""
    z = (z ^ (z >> 30)) * jnp.uint64(_M1)
    z = (z ^ (z >> 27)) * jnp.uint64(_M2)
    return z ^ (z >> 31)


def replica_states(seed: int, replicas, stream: int = 0):
    """Initial states for replica indices ``replicas`` (an int array) of ``seed``.

    ``stream`` separates independent uses of one seed (e.g. two coupled experiments).
    """
    s = mix64(jnp.uint64(seed & 0xFFFFFFFFFFFFFFFF) * jnp.uint64(GOLDEN) + jnp.uint64(stream))
    r = jnp.asarray(replicas, dtype=jnp.uint64)
    return mix64(mix64(s ^ mix64(r + jnp.uint64(1))) + jnp.uint64(GOLDEN))


def next_u64(state):
    """(new_state, 64 random bits)."""
    state = state + jnp.uint64(GOLDEN)
    return state, mix64(state)


def split_u32(word):
    """High and low 32-bit halves of a uint64 word, as uint64."""
    return word >> 32, word & jnp.uint64(0xFFFFFFFF)


def uniform_open(bits32):
    """Uniform on (0, 1) from 32 random bits, as float64: (b + 1/2) / 2^32."""
    return (bits32.astype(jnp.float64) + 0.5) * (1.0 / 4294967296.0)
