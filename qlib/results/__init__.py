"""Stored results with provenance: ``results/default/`` (what ``make figures`` computes) and
``results/long/`` (``make results-long``), beside the code.

An entry is one sweep-cache entry (:mod:`qlib.results.cache`): ``NAME-KEY.npz`` (the arrays the figures
and claim rows are computed from) and ``NAME-KEY.json`` (its record). KEY hashes the name, the
parameters and the seed only, so an entry computed by other code is still found, and then
reported stale instead of silently missed. The record says where the arrays came from: the
command, commit, versions (qlib, the random streams, JAX, NumPy), parameters, seed, replicas,
steps, wall and CPU time, the machine, the hash of every array, and per simulated chain
(:func:`qlib.supermarket.simulate` announces it, :func:`qlib.results.recorder.recording`
listens) its start, steps and a hash of each replica's final counts and random state; plus a
checkpoint: the spec of replica 0 of the first chain and the hash of its state after at most
:data:`CHECKPOINT_STEPS` steps, which :func:`verify` recomputes in seconds.

- :func:`status` (entry) -> "fresh" | "stale" | "missing"; :func:`stale_row_text` is the text a
  claim row shows for a long entry that is not fresh.
- :func:`verify` checks an entry's bytes against its record (any edited byte fails) and, with
  ``recompute=True``, recomputes its checkpoint.
- :func:`compare` is what ``make figures`` does with each recomputed entry: bit for bit on the
  exact arrays (integers, the hashes of counts and random states), to :data:`FLOAT_RTOL` on floats.

The files are written deterministically (sorted keys, zip members without timestamps) and only
when their content changes, so ``git diff results/`` shows exactly what a code change changed.

The package by role: :mod:`~qlib.results.store` (where entries live, their files, their record),
:mod:`~qlib.results.checkpoints` (verify, checkpoints), :mod:`~qlib.results.freshness` (read,
status, lookup), :mod:`~qlib.results.tier` (compare, commit, report, prune, note, summary,
``writing``), :mod:`~qlib.results.recorder` (the chains a computation simulated),
:mod:`~qlib.results.cache` (the sweep cache: the one read path of a study's arrays, local cache
then tiers). The long tier's run and the ``results`` command line run the studies, so they live
above them, in :mod:`qlib.runner.long`.
"""

from __future__ import annotations

# ruff: noqa: F401 (re-exports: the names other modules and tests use)
from qlib.results.checkpoints import (
    checkpoint_hashes,
    checkpoint_spec,
    hetero_checkpoint,
    hetero_state_hash,
    verify,
)
from qlib.results.freshness import (
    lookup,
    provenance_text,
    read,
    row_status,
    stale_reasons,
    stale_row_text,
    status,
)
from qlib.results.store import (
    CHECKPOINT_STEPS,
    COMMAND_ENV,
    FLOAT_RTOL,
    LOG_ENV,
    LONG_COMMAND,
    RESULTS_DIR_ENV,
    RUN_ENV,
    STUDY_ENV,
    TIERS,
    WRITE_ENV,
    Entry,
    ResultsWarning,
    array_hash,
    atomic_bytes,
    command,
    entries,
    entry,
    entry_key,
    jsonable,
    machine,
    make_record,
    npz_bytes,
    record_text,
    root,
    run_id,
    self_hash,
    state_hash,
    tier_dir,
    versions,
    write_tier,
)
from qlib.results.tier import (
    commit,
    compare,
    note,
    primary_process,
    prune,
    read_log,
    report,
    summary,
    writing,
)

__all__ = [
    "TIERS",
    "FLOAT_RTOL",
    "CHECKPOINT_STEPS",
    "Entry",
    "ResultsWarning",
    "entry",
    "entries",
    "entry_key",
    "read",
    "lookup",
    "note",
    "status",
    "provenance_text",
    "stale_row_text",
    "row_status",
    "verify",
    "compare",
    "commit",
    "report",
    "prune",
    "summary",
    "checkpoint_hashes",
    "state_hash",
    "array_hash",
    "make_record",
    "machine",
]
