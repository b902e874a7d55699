"""Cache for sweep results: ``NAME-HASH.npz`` beside ``NAME-HASH.json``.

The JSON records the parameters, the seed, the versions of qlib, jax and numpy and the git
commit, so a cached number can always be traced to what produced it. The hash covers the name,
the parameters, the seed and the versions. A rerun reuses the cache unless ``refresh=True`` or
``QLIB_REFRESH=1``.

Crash safety: each file is written to a temporary file in the same folder and renamed over
the entry (``os.replace`` is atomic), the ``.npz`` first and the ``.json`` last, so an entry
exists only once it is complete. An entry that cannot be read (truncated, corrupt, or whose
record does not match what was asked) is reported with a warning, discarded and recomputed:
never a raw traceback.

Sweeps cache **per point** (:func:`cached_points`), so an interrupted sweep resumes from the
points already done.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

import qlib
from qlib.config import ROOT, cache_dir


class CacheWarning(UserWarning):
    """A cache entry was unreadable or did not match, and is being recomputed."""


def versions() -> dict[str, str]:
    """What a cached number depends on besides its parameters: the code (qlib's version and the
    version of the random streams), jax and numpy."""
    from qlib.supermarket.chain import STREAM_VERSION

    return {"qlib": qlib.__version__, "streams": str(STREAM_VERSION), "jax": jax.__version__,
            "numpy": np.__version__}


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _record(name: str, params: Mapping, seed: int) -> dict:
    return json.loads(json.dumps({"name": name, "params": params, "seed": seed, "versions": versions()},
                                 sort_keys=True, default=str))


def key(name: str, params: Mapping, seed: int) -> str:
    blob = json.dumps(_record(name, params, seed), sort_keys=True)
    return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def _refresh(refresh: bool | None) -> bool:
    if refresh is None:
        return os.environ.get("QLIB_REFRESH", "").strip().lower() in {"1", "true", "yes"}
    return refresh


def _atomic_write(path: Path, write: Callable[[Any], None], binary: bool) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _files(stem: Path) -> tuple[Path, Path]:
    """The entry's arrays and record. The suffixes are appended, not substituted: a name with a
    dot in it (``eta=0.01``) must not lose its tail and share a file with another."""
    return stem.parent / (stem.name + ".npz"), stem.parent / (stem.name + ".json")


def _load(stem: Path, record: dict) -> dict[str, np.ndarray] | None:
    """The arrays of a complete, matching entry; None (after a warning) for a bad one."""
    npz, meta = _files(stem)
    if not (npz.exists() and meta.exists()):
        return None
    try:
        m = json.loads(meta.read_text())
        if {k: m.get(k) for k in record} != record:
            raise ValueError("its record (parameters, seed, versions) does not match")
        with np.load(npz) as f:
            arrays = {k: f[k] for k in f.files}
        if sorted(arrays) != sorted(m.get("arrays", [])):
            raise ValueError(f"it holds arrays {sorted(arrays)}, its record lists {m.get('arrays')}")
        return arrays
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        warnings.warn(f"cache entry {stem.name} is unreadable ({type(e).__name__}: {e}); recomputing",
                      CacheWarning, stacklevel=3)
        for p in (npz, meta):
            try:
                p.unlink()
            except OSError:
                pass
        return None


def _store(stem: Path, record: dict, arrays: dict[str, np.ndarray]) -> None:
    npz, meta_path = _files(stem)
    _atomic_write(npz, lambda f: np.savez(f, **arrays), binary=True)
    meta = dict(record, git_commit=git_commit(), arrays=sorted(arrays))
    _atomic_write(meta_path,
                  lambda f: f.write(json.dumps(meta, indent=1, sort_keys=True, default=str)), binary=False)


def cached(name: str, params: Mapping, seed: int, compute: Callable[[], Mapping[str, Any]],
           *, refresh: bool | None = None) -> dict[str, np.ndarray]:
    """Return ``compute()``'s arrays, from the cache when this (name, params, seed) ran before."""
    record = _record(name, params, seed)
    stem = cache_dir() / key(name, params, seed)
    if not _refresh(refresh):
        hit = _load(stem, record)
        if hit is not None:
            return hit
    arrays = {k: np.asarray(v) for k, v in compute().items()}
    _store(stem, record, arrays)
    return arrays


def cached_points(name: str, params: Sequence[Mapping], seeds: Sequence[int],
                  compute: Callable[[list[int]], Sequence[Mapping[str, Any]]], *, group: int = 8,
                  refresh: bool | None = None) -> list[dict[str, np.ndarray]]:
    """One cache entry per point: ``params[p]`` and ``seeds[p]`` describe point p;
    ``compute(indices)`` computes the missing points (in one batched call, e.g. one
    :func:`qlib.supermarket.simulate_many` kernel) and returns their arrays in that order.

    Missing points are computed ``group`` at a time and stored as each group finishes, so an
    interrupted sweep recomputes only the unfinished group.
    """
    if len(params) != len(seeds):
        raise ValueError(f"params and seeds must have the same length; got {len(params)} and {len(seeds)}")
    records = [_record(name, p, s) for p, s in zip(params, seeds)]
    stems = [cache_dir() / key(name, p, s) for p, s in zip(params, seeds)]
    out: list[dict[str, np.ndarray] | None] = [None] * len(params)
    if not _refresh(refresh):
        for j, (stem, rec) in enumerate(zip(stems, records)):
            out[j] = _load(stem, rec)
    missing = [j for j, o in enumerate(out) if o is None]
    for g in range(0, len(missing), max(1, group)):
        idx = missing[g: g + group]
        results = list(compute(idx))
        if len(results) != len(idx):
            raise ValueError(f"compute returned {len(results)} results for {len(idx)} points")
        for j, res in zip(idx, results):
            arrays = {k: np.asarray(v) for k, v in res.items()}
            _store(stems[j], records[j], arrays)
            out[j] = arrays
    return out  # type: ignore[return-value]


def check_writable(path: str | os.PathLike, what: str) -> Path:
    """Make sure a folder exists and can be written, before any computing (ValueError if not)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p, prefix=".qlib-write-test-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise ValueError(f"{what} folder {p} is not writable ({e.strerror or e}); set a writable one") from None
    return p
