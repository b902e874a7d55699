"""The claims table, the sweep cache and the command line."""

import importlib
import json

import numpy as np
import pytest

from qlib import cache, claims
from qlib.__main__ import main


def test_every_claim_source_exists():
    for title, (mod, fn) in claims.SOURCES.items():
        assert callable(getattr(importlib.import_module(mod), fn)), title


def test_markdown_table_has_one_row_per_claim_and_a_verdict():
    rows = [claims.ClaimRow("P_l < P_m", "lam=3", "0.44 < 0.51", "0.443 ± 0.002", True, "CI below"),
            claims.ClaimRow("k = 2", "d=10", "2", "3", False, "modal max == k")]
    md = claims.to_markdown(rows)
    assert md.startswith("1 of 2 claims PASS")
    lines = [l for l in md.splitlines() if l.startswith("| ") and ("PASS" in l or "FAIL" in l)]
    assert sum("**PASS**" in l for l in lines) == 1 and sum("**FAIL**" in l for l in lines) == 1
    assert json.loads(claims.to_json(rows))[1]["verdict"] == "FAIL"


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


def test_cli_rejects_unknown_command():
    with pytest.raises(SystemExit):
        main(["nonsense"])
