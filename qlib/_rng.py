"""Per-replica counter-based random streams (SplitMix64).

Each replica owns one 64-bit SplitMix64 state (Steele, Lea & Flood 2014; passes BigCrush).
Its starting point s_0 is a hash of (seed, replica index), so replica r draws the same numbers
whether it runs alone, in a batch of a million, or on another device: results never depend on
how replicas are batched or sharded.

The generator is counter-based: after t draws the state is s_t = s_0 + t * GOLDEN (mod 2^64)
and the t-th word is mix64(s_t). So the words of a whole block of steps can be computed at
once, vectorised over the steps (:func:`block_words`), and a stream can be continued exactly
from a saved state. Drawing inside the step instead of from ``jax.random`` keeps the loop
carry to one uint64 per replica (see benchmarks/README.md).

All functions here must be traced under ``jax.enable_x64(True)``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

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


def mix64_np(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


def replica_states_np(seed: int, replicas, stream: int = 0) -> np.ndarray:
    """:func:`replica_states` computed with NumPy on the host (the same uint64 arithmetic, so the
    same bits), without a JAX dispatch: (replicas.shape) uint64."""
    with np.errstate(over="ignore"):
        s = mix64_np(
            np.array([seed & 0xFFFFFFFFFFFFFFFF], np.uint64) * np.uint64(GOLDEN) + np.uint64(stream)
        )
        r = np.asarray(replicas).astype(np.uint64)
        return mix64_np(mix64_np(s ^ mix64_np(r + np.uint64(1))) + np.uint64(GOLDEN))


def next_u64(state):
    """(new_state, 64 random bits): one draw."""
    state = state + jnp.uint64(GOLDEN)
    return state, mix64(state)


def advance(state, k):
    """The state after ``k`` more draws (k an integer or integer array, broadcast)."""
    return state + jnp.asarray(k).astype(jnp.uint64) * jnp.uint64(GOLDEN)


def block_words(state, steps: int):
    """The next ``steps`` words of every stream at once: shape (steps,) + state.shape.

    Row k is the word of draw k + 1 from ``state``, i.e. what the (k+1)-th :func:`next_u64`
    would return; the state after the block is :func:`advance` (state, steps).
    """
    k = jnp.arange(1, steps + 1, dtype=jnp.uint64).reshape((steps,) + (1,) * jnp.ndim(state))
    return mix64(state[None] + k * jnp.uint64(GOLDEN))


def named_seed(*parts: object) -> int:
    """A 63-bit seed named by ``parts`` (e.g. ``named_seed("families", "A", 1000, "d-1")``): the
    studies' independent sets of runs each draw from their own named stream instead of a
    hand-picked seed offset. The hash (SHA-256 of the parts' reprs joined by "/") is fixed, so a
    name always gives the same seed, and distinct names give unrelated ones."""
    import hashlib

    blob = "/".join(repr(p) if not isinstance(p, str) else p for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little") & 0x7FFFFFFFFFFFFFFF
