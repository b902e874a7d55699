"""Writing a tier: each recomputed entry compared with the stored one and committed, the run's
report, pruning, the notebooks' note and the summary, and :func:`writing` (what ``make figures``
runs under).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from qlib.config import current, using
from qlib.results.freshness import read, stale_reasons, status
from qlib.results.pins import start_run
from qlib.results.store import (
    FLOAT_RTOL,
    LONG_COMMAND,
    TIERS,
    array_hash,
    atomic_bytes,
    entries,
    entry,
    make_record,
    npz_bytes,
    record_text,
    root,
)

# --------------------------------------------------------------------------- write and compare

#: What hears of each entry :func:`commit` stores in a :func:`writing` block (a long run's
#: progress line), given by the caller of ``writing``.
_ON_STORED: contextvars.ContextVar[Callable[[Mapping], None] | None] = contextvars.ContextVar(
    "qlib_results_on_stored", default=None)


def compare(
    new: Mapping[str, np.ndarray],
    new_rec: Mapping,
    old: Mapping[str, np.ndarray],
    old_rec: Mapping,
    rtol: float = FLOAT_RTOL,
) -> tuple[str, list[str]]:
    """("bit" | "tol" | "mismatch", what differs): integer, boolean and string arrays, the hashes
    of every chain's final counts and random states and the checkpoint must agree bit for bit;
    float arrays to ``rtol`` times the array's largest magnitude (NaNs in the same places)."""
    diffs, inexact = [], []
    if sorted(new) != sorted(old):
        diffs.append(f"arrays {sorted(set(new) ^ set(old))} present in one only")
    for k in sorted(set(new) & set(old)):
        a, b = np.asarray(new[k]), np.asarray(old[k])
        if a.shape != b.shape or a.dtype != b.dtype:
            diffs.append(f"{k}: shape/dtype {a.shape} {a.dtype} != stored {b.shape} {b.dtype}")
        elif array_hash(a) == array_hash(b):
            continue
        elif a.dtype.kind in "fc":
            nan_a, nan_b = np.isnan(a), np.isnan(b)
            scale = float(np.nanmax(np.abs(b))) if b.size and not nan_b.all() else 0.0
            err = np.where(nan_a | nan_b, 0.0, np.abs(a - b))
            worst = float(err.max()) if err.size else 0.0
            if np.array_equal(nan_a, nan_b) and worst <= rtol * scale:
                inexact.append(k)
            else:
                diffs.append(f"{k}: max |new - stored| = {worst:.3g} (tolerance {rtol:g} x {scale:.3g})")
        else:
            diffs.append(f"{k}: {int(np.sum(a != b))} of {a.size} exact values differ")
    fin = lambda r: [(c.get("seed"), c.get("final")) for c in r.get("simulations", [])]  # noqa: E731
    if fin(new_rec) != fin(old_rec):
        diffs.append("final counts / random states of the simulated chains differ")
    cp = lambda r: (r.get("checkpoint") or {}).get("hash")  # noqa: E731
    if cp(new_rec) != cp(old_rec):
        diffs.append(f"checkpoint hash {cp(new_rec)} != stored {cp(old_rec)}")
    if diffs:
        return "mismatch", diffs
    return ("tol", [f"{k} within {rtol:g}" for k in inexact]) if inexact else ("bit", [])


def commit(
    tier: str, name: str, params: Mapping, seed: Any, arrays: Mapping[str, np.ndarray], provenance: Mapping
) -> str:
    """Store a newly computed entry in ``tier``, comparing it with the stored one first: an
    entry that reproduces is left as it is (its record keeps the original provenance); a new or
    changed one is written (atomically: the .npz, then the .json). The outcome ("new", "bit",
    "tol" or "mismatch") is appended to ``$QLIB_RESULTS_LOG`` and returned."""
    e = entry(tier, name, params, seed)
    if e is None:
        return "off"
    # A multi-process job: every process computed the same entry and writes it (atomically), so
    # each finds it at its next lookup whatever the others' timing; one process logs it.
    e.stem.parent.mkdir(parents=True, exist_ok=True)
    rec = make_record(tier, name, params, seed, arrays, provenance)
    outcome, details, stale = "new", [], []
    if e.json.exists() or e.npz.exists():
        try:
            old = read(e)
            outcome, details = compare(arrays, rec, *old) if old else ("new", [])
            stale = stale_reasons(old[1]) if old else []
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
            outcome, details = "mismatch", [f"the stored entry is unreadable or edited ({err})"]
        if stale:
            details = details + ["stored by other code (" + ", ".join(stale) + "): record rewritten"]
    if outcome in ("new", "mismatch") or stale:
        atomic_bytes(e.npz, npz_bytes(arrays))
        atomic_bytes(e.json, record_text(rec).encode())
    if not primary_process():
        return outcome
    on_stored = _ON_STORED.get()
    if on_stored is not None and outcome in ("new", "mismatch"):
        on_stored(rec)
    log = current().log
    if log:
        line = json.dumps(
            {
                "tier": tier,
                "entry": e.stem.name,
                "outcome": outcome,
                "details": details,
                "wall_s": rec["wall_s"],
                "replica_steps": rec["replica_steps"],
            }
        )
        with open(log, "a") as f:
            f.write(line + "\n")
    return outcome


def primary_process() -> bool:
    import jax

    return jax.process_index() == 0


def read_log(path: str | os.PathLike) -> list[dict]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def report(log: Sequence[Mapping]) -> tuple[str, bool]:
    """(text, all reproduced) of a ``make figures`` run's comparisons: "reproduced N of N", every
    mismatch by name, and the entries that had nothing stored to compare with."""
    last: dict[str, Mapping] = {}
    for rec in log:  # the last comparison of each entry (a point may be asked for twice)
        last[f"{rec['tier']}/{rec['entry']}"] = rec
    cmp = {k: r for k, r in last.items() if r["outcome"] != "new"}
    ok = [k for k, r in cmp.items() if r["outcome"] in ("bit", "tol")]
    bit = sum(r["outcome"] == "bit" for r in cmp.values())
    new = sorted(k for k, r in last.items() if r["outcome"] == "new")
    lines = [
        f"[qlib] results: reproduced {len(ok)} of {len(cmp)} stored entries ({bit} bit for bit, "
        f"{len(ok) - bit} within a relative {FLOAT_RTOL:g} on derived floats)"
    ]
    for k, r in sorted(cmp.items()):
        if r["outcome"] == "mismatch":
            lines.append(f"[qlib]   MISMATCH {k}: " + "; ".join(r["details"]))
    if new:
        lines.append(f"[qlib] results: {len(new)} new entries written (nothing stored to compare with)")
    return "\n".join(lines), len(ok) == len(cmp)


def prune(tier: str, keep: set[str]) -> list[str]:
    """Remove the entries of ``tier`` whose stem is not in ``keep`` (after a full ``make figures``:
    the entries no study asks for any more). Returns their names."""
    gone = []
    for e in entries(tier):
        if e.stem.name not in keep:
            for p in (e.npz, e.json):
                try:
                    p.unlink()
                except OSError:
                    pass
            gone.append(e.stem.name)
    return gone


def note(prefixes: Sequence[str] | None = None, tier: str = "default") -> str:
    """One line for a notebook's top: where its numbers come from (the stored entries whose name
    starts with one of ``prefixes``): how many, when, at which commit, their replica-steps and
    wall time as recorded, and the command that recomputes them."""
    recs = []
    for e in entries(tier):
        if prefixes is None or any(e.stem.name.startswith(p) for p in prefixes):
            try:
                recs.append(e.record())
            except (OSError, ValueError):
                continue
    cmd = "make figures" if tier == "default" else LONG_COMMAND
    if not recs:
        return f"No stored results in results/{tier}/: computing them (`{cmd}` stores them)."
    dates = sorted(r["date"][:10] for r in recs)
    commits = sorted({r["commit"][:9] for r in recs})
    wall = sum(r["wall_s"] / max(1, r.get("computed_together", 1)) for r in recs)
    steps = sum(r["replica_steps"] for r in recs)
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return (
        f"Drawn from results/{tier}/ ({len(recs)} entries, computed {when} at commit {', '.join(commits)}: "
        f"{steps:.3g} replica-steps, {wall / 60:.1f} min of wall time on "
        f"{recs[0]['machine'].get('cpu', '?')}); "
        f"`{cmd}` recomputes them and checks that they reproduce."
    )


def summary(tiers: Sequence[str] = TIERS) -> str:
    """One line per stored entry: tier, name, status, replica-steps, wall time, date, machine.
    The costs are the records', never typed."""
    lines = [
        f"{'tier':<8} {'entry':<48} {'status':<7} {'replica-steps':>13} {'wall s':>8} {'cpu s':>8}"
        "  date        cpu"
    ]
    tot: dict[str, float] = {}
    for tier in tiers:
        for e in entries(tier):
            try:
                r = e.record()
            except (OSError, ValueError):
                lines.append(f"{tier:<8} {e.stem.name:<48} unreadable")
                continue
            share = r["wall_s"] / max(1, r.get("computed_together", 1))
            tot[tier] = tot.get(tier, 0.0) + share
            lines.append(
                f"{tier:<8} {e.stem.name:<48} {status(e):<7} {r['replica_steps']:>13.3g} {r['wall_s']:>8.1f} "
                f"{r['cpu_s']:>8.1f}  {r['date'][:10]}  {r['machine'].get('cpu', '')} "
                f"({r['machine'].get('cores')} cores)"
            )
    for tier, s in tot.items():
        lines.append(
            f"{tier}: {s / 60:.1f} min of wall time (entries computed together share their batch's time)"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- runs that write a tier


@contextlib.contextmanager
def writing(tier: str, command_line: str, *, prune_after: bool = False, out=print,
            on_stored: Callable[[Mapping], None] | None = None, allow_dirty: bool = False):
    """Make this process (and the notebook kernels it starts, through the environment) write
    ``tier``: every entry computed is compared with the stored one and written (see
    :func:`commit`). On exit, print the comparison (:func:`report`: "reproduced N of N" and
    every mismatch by name); with ``prune_after`` (a complete ``make figures``), remove the
    entries of the tier that this run did not produce. ``on_stored(record)`` is called for each
    entry this process stores new or changed. The code's commit is captured here, when the run
    starts; uncommitted changes to the code make it refuse (RuntimeError) unless ``allow_dirty``
    (:func:`qlib.results.pins.start_run`). Yields the log path."""
    if root() is None:
        yield None
        return
    # the code's state when the run starts, in force for the run and its kernels (qlib.results.pins)
    code = json.dumps(start_run(allow_dirty), sort_keys=True)
    import tempfile
    import uuid

    fd, log = tempfile.mkstemp(prefix="qlib-results-", suffix=".jsonl")
    os.close(fd)
    config = replace(current(), write_tier=tier, run_id=uuid.uuid4().hex, log=log, command=command_line,
                     code=code)
    token = _ON_STORED.set(on_stored)
    completed = False
    try:
        with using(config):
            yield log
        completed = True
    finally:
        _ON_STORED.reset(token)
        entries_log = read_log(log)
        text, _ = report(entries_log)
        out(text)
        if completed and prune_after and entries_log:
            gone = prune(tier, {r["entry"] for r in entries_log if r["tier"] == tier})
            if gone:
                out(
                    f"[qlib] results: removed {len(gone)} entries of results/{tier} that no study asks for: "
                    + ", ".join(gone)
                )
        try:
            os.unlink(log)
        except OSError:
            pass
