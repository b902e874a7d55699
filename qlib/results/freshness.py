"""Reading stored entries: their arrays, whether they are fresh, stale or missing, and the text a
claim row shows for them.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qlib.results.checkpoints import verify
from qlib.results.store import LONG_COMMAND, TIERS, Entry, ResultsWarning, code_versions, entry, jsonable

# --------------------------------------------------------------------------- read


def read(e: Entry) -> tuple[dict[str, np.ndarray], dict] | None:
    """(arrays, record) of a stored entry, or None when it does not exist. Raises ValueError
    when its files are unreadable or disagree with its record (:func:`verify` says how)."""
    if not (e.npz.exists() and e.json.exists()):
        return None
    problems = verify(e)
    if problems:
        raise ValueError("; ".join(problems))
    with np.load(e.npz) as f:
        arrays = {k: f[k] for k in f.files}
    return arrays, e.record()


def stale_reasons(record: Mapping) -> list[str]:
    """Why a record does not match the running code (empty: it matches). The code version and
    the random streams must match; JAX and NumPy versions are recorded, not required (the
    stored exact arrays do not depend on them: ``make figures`` checks that they reproduce)."""
    now, then = code_versions(), record.get("versions", {})
    out = [
        f"{k} {then.get(k)!r} != {now[k]!r} now"
        for k in ("qlib", "streams")
        if str(then.get(k)) != str(now[k])
    ]
    return out


def status(e: Entry | None, *, recompute: bool = False) -> str:
    """ "fresh" (stored, intact and matching the code), "stale" (stored, but from other code or
    edited) or "missing". ``recompute``: also recompute the checkpoint (seconds)."""
    if e is None or not (e.json.exists() and e.npz.exists()):
        return "missing"
    if verify(e, recompute=recompute):
        return "stale"
    return "stale" if stale_reasons(e.record()) else "fresh"


def stale_row_text(tier: str = "long", command: str | None = None) -> str:
    """What a claim row shows for a stored result that is not fresh (``command``: the one that
    recomputes it, default the tier's)."""
    return f"stale: rerun `{command or (LONG_COMMAND if tier == 'long' else 'make figures')}`"


def row_status(name: str, params: Mapping, seed: Any, tier: str = "long",
               command: str | None = None) -> tuple[str, str]:
    """(status, text for the claim row): "fresh" with the entry's provenance, else the stale or
    missing text naming ``command`` (default: the tier's). For the studies' rows of long points."""
    e = entry(tier, name, params, seed)
    s = status(e)
    if s == "fresh":
        r = e.record()
        return (
            s,
            f"{tier} result {r['date'][:10]}, commit {r['commit'][:9]}, "
            f"{r['replica_steps']:.3g} replica-steps",
        )
    return s, stale_row_text(tier, command) if s == "stale" else f"missing: run `{command or LONG_COMMAND}`"


def lookup(
    name: str, params: Mapping, seed: Any, tiers: Sequence[str] = TIERS
) -> dict[str, np.ndarray] | None:
    """The arrays of a fresh stored entry in the first of ``tiers`` that holds one; None when
    none does. A stored entry that is not fresh is reported (:class:`ResultsWarning`) and not used."""
    for tier in tiers:
        e = entry(tier, name, params, seed)
        if e is None or not e.json.exists():
            continue
        try:
            got = read(e)
            if got is None:
                continue
            arrays, rec = got
            if {k: rec.get(k) for k in ("name", "params", "seed")} != jsonable(
                {"name": name, "params": params, "seed": seed}
            ):
                raise ValueError("its record's name, parameters or seed differ")
            why = stale_reasons(rec)
            if why:
                raise ValueError("computed by other code: " + ", ".join(why))
            return arrays
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as err:
            what = "recomputing" if tier == "default" else stale_row_text(tier)
            warnings.warn(
                f"stored result {tier}/{e.stem.name} is stale ({err}); {what}", ResultsWarning, stacklevel=3
            )
    return None


def provenance_text(records: Sequence[Mapping], command: str) -> str:
    """One line on where stored entries came from: how many, the commits and dates, the
    replica-steps and wall time they record, and ``command``, which recomputes them ("" if none)."""
    if not records:
        return ""
    commits = sorted({str(r.get("commit", "?"))[:9] for r in records})
    dates = sorted({str(r.get("date", "?"))[:10] for r in records})
    steps = sum(float(r.get("replica_steps", 0)) for r in records)
    wall = sum(float(r.get("wall_s", 0)) for r in records)
    return (f"results/long: {len(records)} entries, commit {', '.join(commits)}, {', '.join(dates)}, "
            f"{steps:.3g} replica-steps, {wall / 3600:.2f} h wall here; `{command}` recomputes them")
