"""Cache for sweep results: ``NAME-HASH.npz`` beside ``NAME-HASH.json``.

The JSON records the parameters, the seed, the versions of qlib, jax and numpy and the git
commit, so a cached number can always be traced to what produced it. The hash covers the
parameters, the seed and the qlib/jax/numpy versions. A rerun reuses the cache unless
``refresh=True`` or ``QLIB_REFRESH=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from typing import Callable, Mapping

import jax
import numpy as np

import qlib
from qlib.config import ROOT, cache_dir


def versions() -> dict[str, str]:
    return {"qlib": qlib.__version__, "jax": jax.__version__, "numpy": np.__version__}


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def key(name: str, params: Mapping, seed: int) -> str:
    blob = json.dumps({"name": name, "params": params, "seed": seed, "versions": versions()},
                      sort_keys=True, default=str)
    return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def cached(name: str, params: Mapping, seed: int, compute: Callable[[], Mapping[str, np.ndarray]],
           *, refresh: bool | None = None) -> dict[str, np.ndarray]:
    """Return ``compute()``'s arrays, from the cache when this (name, params, seed) ran before."""
    if refresh is None:
        refresh = os.environ.get("QLIB_REFRESH", "").strip().lower() in {"1", "true", "yes"}
    stem = cache_dir() / key(name, params, seed)
    npz, meta = stem.with_suffix(".npz"), stem.with_suffix(".json")
    if not refresh and npz.exists() and meta.exists():
        with np.load(npz) as f:
            return {k: f[k] for k in f.files}
    arrays = {k: np.asarray(v) for k, v in compute().items()}
    np.savez(npz, **arrays)
    meta.write_text(json.dumps({"name": name, "params": params, "seed": seed,
                                "versions": versions(), "git_commit": git_commit(),
                                "arrays": sorted(arrays)}, indent=1, sort_keys=True, default=str))
    return arrays
