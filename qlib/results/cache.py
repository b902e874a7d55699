"""Cache for sweep results: ``NAME-HASH.npz`` beside ``NAME-HASH.json``.

The JSON records the parameters, the seed, the versions of qlib, jax and numpy and the git
commit, so a cached number can always be traced to what produced it. The key (the HASH) is the
stored results' (:func:`qlib.results.store.entry_key`): it covers the name, the parameters and the
seed, so a point has one file name in the local cache, ``results/default/`` and ``results/long/``;
the versions are in the record, and an entry whose versions are not the running code's is not
used (it is recomputed and rewritten, silently, as a new key was before). Entries written before
issue 50 under the old local key (which also hashed the versions, :func:`legacy_key`) are still
read. A rerun reuses the cache unless ``refresh=True`` or ``QLIB_REFRESH=1``.

Crash safety: each file is written to a temporary file in the same folder and renamed over
the entry (``os.replace`` is atomic), the ``.npz`` first and the ``.json`` last, so an entry
exists only once it is complete. An entry that cannot be read (truncated, corrupt, or whose
record does not match what was asked) is reported with a warning, discarded and recomputed:
never a raw traceback.

Sweeps cache **per point** (:func:`cached_points`), so an interrupted sweep resumes from the
points already done.

The stored results tier (:mod:`qlib.results`, ``results/`` in the repository) sits behind the
local cache: a lookup tries the local cache, then a fresh entry of ``results/default/`` and
``results/long/`` (read-only; a stale one is reported and not used), then computes. When a run
writes a tier (``$QLIB_RESULTS_WRITE``, set by ``python -m qlib figures`` and ``results-long``),
every computed entry is also compared with the stored one and written there with its record;
the simulations it ran report to a :func:`recording` (one hook in
:func:`qlib.supermarket.simulate`'s driver), which gives the record its chains and checkpoint.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qlib.config import cache_dir, current
from qlib.results.freshness import lookup
from qlib.results.recorder import recording
from qlib.results.store import atomic_write, code_versions, entry, entry_key, git_commit, run_id, write_tier
from qlib.results.tier import commit


class CacheWarning(UserWarning):
    """A cache entry was unreadable or did not match, and is being recomputed."""


def _record(name: str, params: Mapping, seed: int) -> dict:
    return json.loads(json.dumps({"name": name, "params": params, "seed": seed, "versions": code_versions()},
                                 sort_keys=True, default=str))


def key(name: str, params: Mapping, seed: int) -> str:
    """NAME-HASH of (name, params, seed): the file stem of the point, here and in the stored tiers."""
    return entry_key(name, params, seed)


def legacy_key(name: str, params: Mapping, seed: int) -> str:
    """NAME-HASH of (name, params, seed, the code versions): the local cache's key before issue 50,
    still read (never written) so that a local cache filled then is not recomputed."""
    blob = json.dumps(_record(name, params, seed), sort_keys=True)
    return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def _refresh(refresh: bool | None) -> bool:
    if refresh is None:
        return current().refresh
    return refresh


def _files(stem: Path) -> tuple[Path, Path]:
    """The entry's arrays and record. The suffixes are appended, not substituted: a name with a
    dot in it (``eta=0.01``) must not lose its tail and share a file with another."""
    return stem.parent / (stem.name + ".npz"), stem.parent / (stem.name + ".json")


def _load(stem: Path, record: dict, run: str | None = None) -> dict[str, np.ndarray] | None:
    """The arrays of a complete, matching entry; None (after a warning) for a bad one. With
    ``run``: only an entry computed in that run (``make figures`` computes each entry once)."""
    npz, meta = _files(stem)
    if not (npz.exists() and meta.exists()):
        return None
    try:
        m = json.loads(meta.read_text())
        if run is not None and m.get("run") != run:
            return None
        if m.get("versions") != record["versions"] and all(m.get(k) == v for k, v in record.items()
                                                          if k != "versions"):
            return None  # computed by other code: recomputed and rewritten, as under a key of its own
        if {k: m.get(k) for k in record} != record:
            raise ValueError("its record (parameters, seed, versions) does not match")
        with np.load(npz) as f:
            arrays = {k: f[k] for k in f.files}
        if sorted(arrays) != sorted(m.get("arrays", [])):
            raise ValueError(f"it holds arrays {sorted(arrays)}, its record lists {m.get('arrays')}")
        return arrays
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error,
            json.JSONDecodeError) as e:
        warnings.warn(f"cache entry {stem.name} is unreadable ({type(e).__name__}: {e}); recomputing",
                      CacheWarning, stacklevel=3)
        for p in (npz, meta):
            try:
                p.unlink()
            except OSError:
                pass
        return None


def _store(stem: Path, record: dict, arrays: dict[str, np.ndarray], run: str | None = None) -> None:
    npz, meta_path = _files(stem)
    atomic_write(npz, lambda f: np.savez(f, **arrays), binary=True)
    meta = dict(record, git_commit=git_commit(), arrays=sorted(arrays), **({"run": run} if run else {}))
    atomic_write(meta_path,
                  lambda f: f.write(json.dumps(meta, indent=1, sort_keys=True, default=str)), binary=False)


def cached(name: str, params: Mapping, seed: int, compute: Callable[[], Mapping[str, Any]],
           *, refresh: bool | None = None) -> dict[str, np.ndarray]:
    """Return ``compute()``'s arrays, from the cache (or the stored results) when this
    (name, params, seed) ran before."""
    return _cached_points(name, [params], [seed], lambda idx: [compute()], group=1, refresh=refresh,
                          study=getattr(compute, "__module__", None))[0]


class NotStored(LookupError):
    """Raised inside :func:`stored_only` for points the tier holds no fresh entry of: ``points`` is
    a list of (name, params, seed), what :func:`qlib.results.row_status` needs to say why."""

    def __init__(self, tier: str, points: list[tuple[str, Mapping, Any]]):
        super().__init__(f"results/{tier} holds no fresh entry for {len(points)} point(s) of {points[0][0]}")
        self.tier, self.points = tier, points


_STORED_ONLY: contextvars.ContextVar = contextvars.ContextVar("qlib_stored_only", default=None)


_READING: contextvars.ContextVar = contextvars.ContextVar("qlib_reading", default=None)


@contextlib.contextmanager
def reading():
    """Yields a list that every point :func:`cached_points` returns inside this block appends its
    stored record to (the first tier that holds the entry, whether the arrays came from it, the
    local cache or a computation that stored it), or a stub naming no code commit where no tier
    holds it: the data a study's rows read (:mod:`qlib.criteria`)."""
    records: list[dict] = []
    token = _READING.set(records)
    try:
        yield records
    finally:
        _READING.reset(token)


def _note_read(name: str, params: Sequence[Mapping], seeds: Sequence[Any]) -> None:
    read = _READING.get()
    if read is None:
        return
    for p, s in zip(params, seeds):
        for tier in ("default", "long"):
            e = entry(tier, name, p, s)
            if e is not None and e.json.exists():
                try:
                    read.append(e.record())
                    break
                except (OSError, ValueError):
                    continue
        else:
            read.append({"key": key(name, p, s), "code_commit": "unknown", "commit": "", "stored": False})


@contextlib.contextmanager
def stored_only(tier: str):
    """Inside this block :func:`cached_points` computes nothing: it reads fresh entries of
    ``results/<tier>`` and raises :class:`NotStored` for any point the tier lacks (or holds
    stale). Yields the list the records of the entries read are appended to (their provenance).
    How a study reads its long-tier points outside ``make results-long``."""
    records: list[dict] = []
    token = _STORED_ONLY.set((tier, records))
    try:
        yield records
    finally:
        _STORED_ONLY.reset(token)


def cached_points(name: str, params: Sequence[Mapping], seeds: Sequence[int],
                  compute: Callable[[list[int]], Sequence[Mapping[str, Any]]], *, group: int = 8,
                  refresh: bool | None = None) -> list[dict[str, np.ndarray]]:
    """One cache entry per point: ``params[p]`` and ``seeds[p]`` describe point p;
    ``compute(indices)`` computes the missing points (in one batched call, e.g. one
    :func:`qlib.supermarket.simulate_many` kernel) and returns their arrays in that order.

    Missing points are computed ``group`` at a time and stored as each group finishes, so an
    interrupted sweep recomputes only the unfinished group. A point is looked up in the local
    cache, then in the stored results (:func:`qlib.results.lookup`); while a run writes a results
    tier, see the module docstring.
    """
    return _cached_points(name, params, seeds, compute, group=group, refresh=refresh,
                          study=getattr(compute, "__module__", None))


def _cached_points(name, params, seeds, compute, *, group, refresh, study):
    if len(params) != len(seeds):
        raise ValueError(f"params and seeds must have the same length; got {len(params)} and {len(seeds)}")
    if _STORED_ONLY.get() is not None:
        got = _stored_only(name, params, seeds)
        _note_read(name, params, seeds)
        return got
    tier, refresh = write_tier(), _refresh(refresh)
    out: list[dict[str, np.ndarray] | None] = [_read(name, p, s, tier, refresh)
                                                for p, s in zip(params, seeds)]
    missing = [j for j, o in enumerate(out) if o is None]
    if tier == "long":
        group = 1  # a long run stores (and resumes) point by point
    for g in range(0, len(missing), max(1, group)):
        idx = missing[g: g + group]
        with (recording() if tier else contextlib.nullcontext()) as rec:
            got = list(compute(idx))
        if len(got) != len(idx):
            raise ValueError(f"compute returned {len(got)} results for {len(idx)} points")
        provenance = rec.provenance([seeds[j] for j in idx]) if tier else [None] * len(idx)
        for j, res, prov in zip(idx, got, provenance):
            out[j] = keep(name, params[j], seeds[j], res, prov, study=study)
    _note_read(name, params, seeds)
    return out  # type: ignore[return-value]


def _stored_only(name: str, params: Sequence[Mapping], seeds: Sequence[int]) -> list[dict[str, np.ndarray]]:
    """Inside :func:`stored_only`: the tier's fresh entries of every point, or :class:`NotStored`
    naming every point it lacks."""
    tier_only, read = _STORED_ONLY.get()
    got = [lookup(name, p, s, tiers=(tier_only,)) for p, s in zip(params, seeds)]
    lacking = [(name, p, s) for p, s, g in zip(params, seeds, got) if g is None]
    if lacking:
        raise NotStored(tier_only, lacking)
    read.extend(entry(tier_only, name, p, s).record() for p, s in zip(params, seeds))
    return got  # type: ignore[return-value]


def _read(name: str, params: Mapping, seed: int, tier: str | None,
          refresh: bool) -> dict[str, np.ndarray] | None:
    """The arrays of a point where a run may use them, else None (see the module docstring)."""
    stem, rec = cache_dir() / key(name, params, seed), _record(name, params, seed)
    if tier == "default":  # make figures: every entry computed (once in this run) and compared
        run = run_id()
        return _load(stem, rec, run=run) if run else None
    if tier == "long":  # results-long: what a tier holds fresh is done (resumable per point)
        return None if refresh else lookup(name, params, seed)
    if refresh:
        return None
    got = _load(stem, rec)
    if got is None:  # a local entry under the key before issue 50
        got = _load(cache_dir() / legacy_key(name, params, seed), rec)
    return got if got is not None else lookup(name, params, seed)


def look_up(name: str, params: Mapping, seed: int, *,
            refresh: bool | None = None) -> dict[str, np.ndarray] | None:
    """The read half of :func:`cached`: a point's arrays from the local cache or the stored results,
    as the run in progress may use them (a run that writes a tier recomputes what it must), or None
    where it must be measured. Inside :func:`stored_only`, the tier's fresh entry or
    :class:`NotStored`.

    Args:
        name, params, seed: the point's key.
        refresh: recompute even what the caches hold (default ``QLIB_REFRESH``).

    Returns:
        The arrays, or None.
    """
    if _STORED_ONLY.get() is not None:
        got = _stored_only(name, [params], [seed])[0]
    else:
        got = _read(name, params, seed, write_tier(), _refresh(refresh))
    _note_read(name, [params], [seed])
    return got


def keep(name: str, params: Mapping, seed: int, arrays: Mapping[str, Any], provenance: Mapping | None = None,
         *, study: str | None = None) -> dict[str, np.ndarray]:
    """The write half of :func:`cached`: store a measured point in the local cache and, while a run
    writes a tier, compare it with the stored entry and write it there with its record.

    Args:
        name, params, seed: the point's key.
        arrays: what was measured (name -> array).
        provenance: what :func:`qlib.results.recorder.recording` saw while it was measured (needed
            while a tier is written).
        study: the module that measured it, for the record.

    Returns:
        The arrays, as numpy arrays.
    """
    tier, run = write_tier(), run_id()
    a = {k: np.asarray(v) for k, v in arrays.items()}
    _store(cache_dir() / key(name, params, seed), _record(name, params, seed), a, run=run if tier else None)
    if tier:
        commit(tier, name, params, seed, a, dict(provenance or {}) | {"study": study})
    return a


def check_writable(path: str | os.PathLike, what: str) -> Path:
    """Make sure a folder exists and can be written, before any computing (ValueError if not)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p, prefix=".qlib-write-test-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise ValueError(f"{what} folder {p} is not writable ({e.strerror or e}); "
                         "set a writable one") from None
    return p
