"""qlib.results.cache: sweep results cached with their parameters, seed and versions."""

import json
import warnings

import numpy as np
import pytest

from qlib.results import cache


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


def test_truncated_or_corrupt_entry_is_discarded_and_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path))
    monkeypatch.delenv("QLIB_REFRESH", raising=False)
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(1000.0)}

    cache.cached("demo", {"n": 1}, 0, compute)
    npz = next(tmp_path.glob("demo-*.npz"))
    npz.write_bytes(npz.read_bytes()[:100])  # a piece of the file, as after a crash
    with pytest.warns(cache.CacheWarning, match="unreadable"):
        again = cache.cached("demo", {"n": 1}, 0, compute)
    assert len(calls) == 2 and np.array_equal(again["x"], np.arange(1000.0))
    npz.write_bytes(b"not a zip file at all")
    with pytest.warns(cache.CacheWarning):
        cache.cached("demo", {"n": 1}, 0, compute)
    assert len(calls) == 3
    meta = next(tmp_path.glob("demo-*.json"))  # a record that does not match what is asked
    m = json.loads(meta.read_text())
    m["params"] = {"n": 2}
    meta.write_text(json.dumps(m))
    with pytest.warns(cache.CacheWarning, match="does not match"):
        cache.cached("demo", {"n": 1}, 0, compute)
    assert len(calls) == 4


def test_interrupted_write_leaves_no_entry_and_the_old_one_intact(tmp_path, monkeypatch):
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path))
    old = cache.cached("demo", {"n": 1}, 0, lambda: {"x": np.ones(3)})

    def crash(f, **arrays):  # writes half a file, then the process is interrupted
        f.write(b"PK\x03\x04 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(cache.np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        cache.cached("demo", {"n": 2}, 0, lambda: {"x": np.zeros(3)})
    with pytest.raises(KeyboardInterrupt):
        cache.cached("demo", {"n": 1}, 0, lambda: {"x": np.zeros(3)}, refresh=True)
    monkeypatch.undo()
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path))
    assert not list(tmp_path.glob(".*.tmp")), "temporary files were left behind"
    assert len(list(tmp_path.glob("demo-*.npz"))) == 1  # n = 2 never became an entry
    np.testing.assert_array_equal(cache.cached("demo", {"n": 1}, 0, lambda: {"x": np.zeros(3)})["x"],
                                  old["x"])


def test_cached_points_resume_after_an_interruption(tmp_path, monkeypatch):
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path))
    monkeypatch.delenv("QLIB_REFRESH", raising=False)
    params = [{"n": n} for n in range(10)]
    done = []

    def compute(idx, fail_after=None):
        if fail_after is not None and len(done) >= fail_after:
            raise KeyboardInterrupt  # the sweep is stopped part of the way through
        done.extend(idx)
        return [{"y": np.array(params[j]["n"] ** 2)} for j in idx]

    with pytest.raises(KeyboardInterrupt):
        cache.cached_points("sweep", params, list(range(10)), lambda idx: compute(idx, fail_after=6), group=3)
    assert done == [0, 1, 2, 3, 4, 5]  # two groups finished and were stored
    done.clear()
    out = cache.cached_points("sweep", params, list(range(10)), compute, group=3)
    assert done == [6, 7, 8, 9]  # the rerun computes only the unfinished points
    assert [int(o["y"]) for o in out] == [n**2 for n in range(10)]


def test_names_with_a_dot_keep_one_entry_per_point(tmp_path, monkeypatch):
    """A cache name such as "near_eta=0.01" must not lose its tail to a file suffix: each point
    (and each name) keeps its own entry, so a rerun computes nothing."""
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path))
    monkeypatch.delenv("QLIB_REFRESH", raising=False)
    done = []

    def compute(idx):
        done.extend(idx)
        return [{"y": np.array(j)} for j in idx]

    for name in ("near_eta=0.01", "near_eta=0.001"):
        cache.cached_points(name, [{"p": j} for j in range(3)], [0, 1, 2], compute)
    assert len(list(tmp_path.glob("*.npz"))) == 6 and len(done) == 6
    done.clear()
    for name in ("near_eta=0.01", "near_eta=0.001"):
        out = cache.cached_points(name, [{"p": j} for j in range(3)], [0, 1, 2], compute)
        assert [int(o["y"]) for o in out] == [0, 1, 2]
    assert done == []


def test_check_writable(tmp_path):
    assert cache.check_writable(tmp_path / "new" / "dir", "figures").is_dir()
    blocker = tmp_path / "a_file"
    blocker.write_text("a file where a folder should be")  # fails for root too, unlike chmod
    with pytest.raises(ValueError, match="figures folder .* is not writable"):
        cache.check_writable(blocker / "figures", "figures")


def test_one_key_for_the_local_cache_and_the_stored_results(tmp_path, monkeypatch):
    """A point's local entry has the stored tiers' file name; an entry of other code versions is
    recomputed and rewritten in place, silently; an entry under the key before issue 50 is read."""
    from qlib.results import store

    monkeypatch.setenv("QLIB_CACHE", str(tmp_path))
    monkeypatch.delenv("QLIB_REFRESH", raising=False)
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(3) * len(calls)}

    cache.cached("demo", {"n": 5}, 0, compute)
    (meta,) = tmp_path.glob("demo-*.json")
    assert meta.name == store.entry_key("demo", {"n": 5}, 0) + ".json"
    m = json.loads(meta.read_text())
    meta.write_text(json.dumps(dict(m, versions=dict(m["versions"], jax="0.0.1"))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # other code's entry: no warning, recomputed
        again = cache.cached("demo", {"n": 5}, 0, compute)
    assert len(calls) == 2 and int(again["x"][1]) == 2 and len(list(tmp_path.glob("demo-*.json"))) == 1
    for suffix in (".npz", ".json"):  # the same entry under the key before issue 50
        stem = tmp_path / store.entry_key("demo", {"n": 5}, 0)
        (tmp_path / (cache.legacy_key("demo", {"n": 5}, 0) + suffix)).write_bytes(
            (stem.parent / (stem.name + suffix)).read_bytes())
        (stem.parent / (stem.name + suffix)).unlink()
    assert cache.key("demo", {"n": 5}, 0) != cache.legacy_key("demo", {"n": 5}, 0)
    old = cache.cached("demo", {"n": 5}, 0, compute)
    assert len(calls) == 2 and int(old["x"][1]) == 2
