"""qlib.cache: sweep results cached with their parameters, seed and versions."""

import json

import numpy as np

from qlib import cache

def test_cache_reuses_and_records_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path))
    monkeypatch.delenv("QLIB_REFRESH", raising=False)
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(3) * len(calls)}

    a = cache.cached("demo", {"n": 5}, 0, compute)
    b = cache.cached("demo", {"n": 5}, 0, compute)
    assert len(calls) == 1 and np.array_equal(a["x"], b["x"])
    cache.cached("demo", {"n": 6}, 0, compute)  # other parameters: recomputed
    cache.cached("demo", {"n": 5}, 1, compute)  # other seed: recomputed
    assert len(calls) == 3
    c = cache.cached("demo", {"n": 5}, 0, compute, refresh=True)
    assert len(calls) == 4 and np.array_equal(c["x"], np.arange(3) * 4)
    meta = json.loads(next(tmp_path.glob("demo-*.json")).read_text())
    assert {"params", "seed", "versions", "git_commit"} <= set(meta)
    assert {"qlib", "jax", "numpy"} <= set(meta["versions"])
