"""The chunk driver of the heterogeneous simulation: burn-in and measured steps in chunks of one
compiled loop each, with the progress bar. Chunking changes no number."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from qlib import _sharding
from qlib._progress import progress_bar
from qlib.heterogeneous.state import Totals


def _chunk_length(R: int, n: int) -> int:
    """Steps per chunk: about 2^24 replica-step units (a fraction of a second), 2^10..2^20 steps."""
    return int(min(1 << 20, max(1 << 10, (1 << 24) // max(1, R * max(1, n // 16)))))


def _plan(burn_in: int, steps: int, chunk: int) -> list[tuple[int, int]]:
    """(steps, record) per chunk: burn-in unrecorded, then the measured steps."""
    out = []
    for total, record in ((burn_in, 0), (steps, 1)):
        full, rest = divmod(total, chunk)
        out += [(chunk, record)] * full + ([(rest, record)] if rest else [])
    return out


def drive(run_chunk: Callable, chain, totals: Totals, *, burn_in: int, steps: int, chunk: int | None,
           replicas: int, progress: bool):
    """The one chunk driver: ``burn_in`` unrecorded and ``steps`` recorded steps in chunks of
    ``chunk`` steps (default :func:`_chunk_length`), one compiled loop each, with the progress
    bar (which waits for the devices after each chunk, so it follows them). Chunking changes
    nothing in the results. ``run_chunk(chain, totals, nsteps, record)`` advances every replica."""
    n, R = totals.busy.shape
    plan = _plan(burn_in, steps, _chunk_length(R, n) if chunk is None else chunk)
    with progress_bar((burn_in + steps) * replicas, show=progress and _sharding.is_main_process(),
                      desc="heterogeneous") as bar:
        for nsteps, record in plan:
            chain, totals = run_chunk(chain, totals, jnp.int32(nsteps), jnp.int32(record))
            if progress:
                jax.block_until_ready(chain.rng)
            bar.update(nsteps * replicas)
    return chain, totals
