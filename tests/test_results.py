"""qlib.results: the stored results tier, its records, verification by recomputation, the
``make figures`` comparison and the resumable long tier."""

import json
import shutil

import numpy as np
import pytest

from qlib import results, simulations
from qlib.results import cache, recorder
from qlib.runner import long
from qlib.supermarket import simulate, simulate_many


def _sweep(calls, bump=None):
    """A two-point sweep of real simulations (continued once, as the equilibrium estimates do)."""

    def compute(idx):
        calls.extend(idx)
        pts = [[(60, 2, 0.9), (80, 3, 0.8)][j] for j in idx]
        first = simulate_many(pts, steps=3000, burn_in=500, replicas=3, seeds=[11 + j for j in idx])
        second = simulate_many(pts, steps=3000, replicas=3, initial=first)
        out = [{"tail": r.tail_fraction, "counts": r.counts, "max": r.max_length} for r in second]
        if bump:
            out = [{k: bump(k, v) for k, v in o.items()} for o in out]
        return out

    return compute


PARAMS = [{"point": [60, 2, 0.9]}, {"point": [80, 3, 0.8]}]


def _figures_run(calls, bump=None):
    log = []
    with results.writing("default", "make figures", out=log.append):
        cache.cached_points("sweep", PARAMS, [11, 12], _sweep(calls, bump), group=2)
    return "\n".join(log)


def test_figures_run_stores_entries_with_provenance_then_reproduces_them(tiers):
    calls = []
    text = _figures_run(calls)
    assert "2 new entries written" in text and calls == [0, 1]
    stored = results.entries("default")
    assert len(stored) == 2
    rec = stored[0].record()
    assert {
        "command",
        "commit",
        "versions",
        "params",
        "seed",
        "replicas",
        "steps",
        "wall_s",
        "cpu_s",
        "machine",
        "simulations",
        "checkpoint",
        "arrays",
    } <= set(rec)
    assert {"qlib", "streams", "jax", "numpy"} <= set(rec["versions"]) and rec["command"] == "make figures"
    (chain,) = rec["simulations"]  # the continued call extends its chain's record
    assert (
        chain["calls"] == 2
        and chain["steps"] == 6000
        and chain["burn_in"] == 500
        and len(chain["final"]) == 3
    )
    assert chain["seed"] == rec["seed"] and chain["seeded"]
    assert rec["checkpoint"]["spec"]["steps"] == 6500  # the whole chain is shorter than CHECKPOINT_STEPS
    assert rec["checkpoint"]["hash"] == chain["final"][0]  # so its checkpoint is replica 0's final state
    assert all(results.status(e, recompute=True) == "fresh" for e in stored)
    before = {e.stem.name: (e.npz.read_bytes(), e.json.read_bytes()) for e in stored}

    text = _figures_run(calls)  # make figures again: recomputed, compared, files untouched
    assert calls == [0, 1, 0, 1]
    assert "reproduced 2 of 2 stored entries (2 bit for bit" in text and "MISMATCH" not in text
    assert before == {
        e.stem.name: (e.npz.read_bytes(), e.json.read_bytes()) for e in results.entries("default")
    }

    # a derived float that moves in its 15th digit is reproduced "within 1e-12"; more is a named mismatch
    text = _figures_run(calls, bump=lambda k, v: v * (1 + 1e-14) if k == "tail" else v)
    assert "reproduced 2 of 2" in text and "0 bit for bit, 2 within" in text
    text = _figures_run(calls, bump=lambda k, v: v * (1 + 1e-9) if k == "tail" else v)
    assert "reproduced 0 of 2" in text and text.count("MISMATCH") == 2 and "tail: max |new - stored|" in text
    # an exact array must agree bit for bit; the mismatch rewrote the files (git diff shows it)
    text = _figures_run(calls, bump=lambda k, v: v + 1 if k == "max" else v)
    assert "MISMATCH" in text and "max: 3 of 3 exact values differ" in text


def test_a_fresh_clone_reads_the_stored_results_and_not_stale_ones(tiers, monkeypatch):
    calls = []
    _figures_run(calls)
    monkeypatch.setenv("QLIB_CACHE", str(tiers.parent / "fresh_clone_cache"))  # nothing cached locally
    got = cache.cached_points("sweep", PARAMS, [11, 12], _sweep(calls), group=2)
    assert calls == [0, 1]  # drawn from results/default, nothing computed
    assert got[1]["counts"].shape[0] == 3
    # other code (a new stream version) makes the stored entries stale: recomputed with a warning
    import qlib.supermarket.chain as K

    monkeypatch.setattr(K, "STREAM_VERSION", K.STREAM_VERSION + 1)
    assert {results.status(e) for e in results.entries("default")} == {"stale"}
    monkeypatch.setenv("QLIB_CACHE", str(tiers.parent / "another_clone_cache"))
    with pytest.warns(results.ResultsWarning, match=r"streams '2' != '3' now\); recomputing"):
        cache.cached_points("sweep", PARAMS, [11, 12], _sweep(calls), group=2)
    assert calls == [0, 1, 0, 1]
    assert results.row_status("sweep", PARAMS[0], 11, tier="default") == (
        "stale",
        "stale: rerun `make figures`",
    )
    assert results.row_status("sweep", PARAMS[0], 11)[0] == "missing"  # nothing in the long tier


def test_one_edited_byte_fails_verification(tiers):
    _figures_run([])
    e = results.entries("default")[0]
    assert results.verify(e) == []
    for which, pos in (("npz", -40), ("npz", 100), ("json", 200), ("json", -30)):
        copy = tiers / f"copy_{which}_{pos}" / e.stem.name
        copy.parent.mkdir()
        for p in (e.npz, e.json):
            shutil.copy(p, copy.parent)
        c = results.Entry("default", copy)
        path = c.npz if which == "npz" else c.json
        data = bytearray(path.read_bytes())
        data[pos] = (
            (data[pos] + 1) % 256
            if chr(data[pos]) not in "0123456789"
            else ord("7" if data[pos] != ord("7") else "3")
        )
        path.write_bytes(bytes(data))
        assert results.verify(c), f"an edited byte at {pos} of the {which} passed verification"
        assert results.status(c) == "stale"


def test_a_changed_kernel_fails_the_checkpoint(tiers):
    _figures_run([])
    e = results.entries("default")[0]
    spec = e.record()["checkpoint"]["spec"]
    assert results.checkpoint_hashes([spec]) == [e.record()["checkpoint"]["hash"]]
    from qlib import _rng

    other_seed = dict(
        spec, seed=spec["seed"] + 1, state=str(int(_rng.replica_states_np(spec["seed"] + 1, np.arange(1))[0]))
    )
    other_kernel = dict(spec, variant=["departure_off_by_one", 0.0])
    h = results.checkpoint_hashes([other_seed, other_kernel])
    assert e.record()["checkpoint"]["hash"] not in h
    with pytest.raises(
        ValueError, match="not replica 0's state of seed"
    ):  # a spec whose state lies about its seed
        results.checkpoint_hashes([dict(spec, seed=spec["seed"] + 1)])


def test_long_tier_resumes_point_by_point_after_an_interruption(tiers):
    done = []

    class Killed(Exception):
        pass

    def study(kill_after=None):
        def compute(idx):
            if kill_after is not None and len(done) >= kill_after:
                raise Killed  # the job is killed part of the way through
            done.extend(idx)
            res = simulate_many([(50 + 10 * j, 2, 0.9) for j in idx], steps=2000, replicas=2, seeds=idx)
            return [{"tail": r.tail_fraction} for r in res]

        return lambda: cache.cached_points(
            "long_sweep", [{"j": j} for j in range(3)], [0, 1, 2], compute, group=3
        )

    lines = []
    out = lambda *a, **k: lines.append(" ".join(map(str, a)))  # noqa: E731
    with pytest.raises(Killed):
        long.run_long([("demo", study(kill_after=1))], scale=1.0, out=out)
    assert done == [0] and len(results.entries("long")) == 1  # the group of 3 ran point by point
    assert any("results-long: 1 entries stored" in ln for ln in lines)
    long.run_long([("demo", study())], scale=1.0, out=out)
    assert done == [0, 1, 2]  # the rerun computes only the unfinished points
    assert [results.status(e, recompute=True) for e in results.entries("long")] == ["fresh"] * 3
    long.run_long([("demo", study())], scale=1.0, out=out)
    assert done == [0, 1, 2]


def test_npz_bytes_are_deterministic_and_readable(tmp_path):
    arrays = {"b": np.arange(5, dtype=np.int64), "a": np.linspace(0, 1, 7), "s": np.str_("random")}
    one, two = results.npz_bytes(arrays), results.npz_bytes(dict(reversed(list(arrays.items()))))
    assert one == two
    (tmp_path / "x.npz").write_bytes(one)
    with np.load(tmp_path / "x.npz") as f:
        assert all(np.array_equal(f[k], v) for k, v in arrays.items())


def test_recorder_attributes_chains_to_entries_by_seed():
    with recorder.recording() as rec:
        r = simulate(40, 2, 0.8, steps=500, replicas=2, seed=5)
        simulate(40, 2, 0.8, steps=500, replicas=2, initial=r)  # continued: the same chain
        simulate(30, 2, 0.8, steps=500, replicas=1, seed=6)
        with simulations.listening(None):  # no one hears: not recorded
            simulate(30, 2, 0.8, steps=500, replicas=1, seed=7)
    assert [(c["seed"], c["calls"], c["steps"]) for c in rec.chains] == [(5, 2, 1000), (6, 1, 500)]
    prov = rec.provenance([5, 6])
    assert [[c["seed"] for c in p["simulations"]] for p in prov] == [[5], [6]]
    assert prov[1]["checkpoint"]["hash"] == results.state_hash(*_final(30, 6))


def _final(n, seed):
    r = simulate(n, 2, 0.8, steps=500, replicas=1, seed=seed)
    return r.counts[0], r.state[0]


def _stored():
    return [e for tier in results.TIERS for e in results.entries(tier)]


def test_stored_results_verify_by_recomputation(monkeypatch):
    """Every entry of the repository's results/: its bytes match its record, it matches the code,
    and replica 0 recomputed to its checkpoint has the recorded hash."""
    monkeypatch.delenv(results.RESULTS_DIR_ENV, raising=False)
    stored = _stored()
    if not stored:
        print("results/ holds no entries yet (`make figures` fills results/default): nothing to verify")
        pytest.skip("results/ holds no entries yet (`make figures` fills results/default)")
    bad = {e.stem.name: p for e in stored if (p := results.verify(e) + results.stale_reasons(e.record()))}
    assert not bad, bad
    cps = [(e.stem.name, e.record()["checkpoint"]) for e in stored if e.record().get("checkpoint")]
    got = results.checkpoint_hashes([c["spec"] for _, c in cps])
    wrong = [name for (name, c), h in zip(cps, got) if h != c["hash"]]
    assert not wrong, f"checkpoints not reproduced (the kernel or the streams changed): {wrong}"


def test_summary_lists_costs_from_the_records(tiers):
    _figures_run([])
    text = results.summary()
    assert text.count("sweep-") == 2 and "fresh" in text and "min of wall time" in text
    assert json.loads(results.entries("default")[0].json.read_text())["wall_s"] >= 0


def test_cli_lists_and_verifies_the_stored_results(tiers, capsys):
    from qlib.__main__ import main

    _figures_run([])
    assert main(["results", "--summary"]) == 0
    assert capsys.readouterr().out.count("fresh") == 2
    assert main(["results", "--verify"]) == 0
    e = results.entries("default")[0]
    e.json.write_text(e.json.read_text().replace('"wall_s": ', '"wall_s": 1'))
    assert main(["results", "--verify"]) == 1
    assert "record does not match its own hash" in capsys.readouterr().out
    assert main(["results-long", "--only", "no such study"]) == 2
    assert "matches no study" in capsys.readouterr().err


def test_note_says_where_the_numbers_come_from(tiers):
    assert "No stored results" in results.note(["sweep"])
    _figures_run([])
    text = results.note(["sweep"])
    assert text.startswith("Drawn from results/default/ (2 entries") and "`make figures` recomputes" in text


def test_claims_json_is_the_same_on_any_cpu():
    """Derived floats that differ in their last bits (as BLAS kernels on two CPUs give) publish
    the same claims.json; round-off-level residuals publish as "< 1e-12"."""
    from qlib import claims, claims_table

    def rows(eps):
        cf = claims.Counterfactual(
            "near model",
            f"|sim - exact|/SE = {65.12734223588045 * (1 + eps)!r}",
            False,
            value=-0.10599040773329493 * (1 + eps),
            near=True,
            se_distance=65.12734223588045 * (1 + eps),
        )
        return [
            claims.ClaimRow(
                "a claim",
                "n=1000",
                "theory",
                f"residual {4.4e-16 if eps == 0 else 2.2e-16:.2g}",
                True,
                counterfactuals=[cf],
                taus=20.000057842365162 * (1 + eps),
            )
        ]

    one, two = claims_table.to_json(rows(0.0)), claims_table.to_json(rows(3e-15))
    assert one == two
    row = json.loads(one)[0]
    assert row["taus"] == 20.0001 and row["counterfactuals"][0]["value"] == -0.10599
    assert row["counterfactuals"][0]["se_distance"] == 65.1273 and row["measured"] == "residual < 1e-12"
    assert row["counterfactuals"][0]["measured"] == "|sim - exact|/SE = 65.1273"
    assert claims_table.published([1e-3, 0.0, 7, "n = 100000, lam = 0.9, 1e-5"]) == [
        0.001,
        0.0,
        7,
        "n = 100000, lam = 0.9, 1e-5",
    ]
    assert (
        claims_table.published(-4.4e-16) == "< 1e-12"
        and claims_table.published("lam=0.9099999999999999") == "lam=0.91"
    )


def test_heterogeneous_runs_are_recorded_and_their_checkpoint_recomputes():
    from qlib.heterogeneous import simulate as hsim

    with recorder.recording() as rec:
        r = hsim(0.9, [1.0, 0.5], steps=3000, replicas=2, seed=4, policy="longest_idle")
        hsim(0.9, [1.0, 0.5], steps=3000, initial=r, policy="longest_idle")  # continued: the same chain
    (chain,) = rec.chains
    assert (
        chain["model"] == "heterogeneous"
        and chain["calls"] == 2
        and chain["steps"] == 6000
        and chain["seeded"]
    )
    (prov,) = rec.provenance([4])
    cp = prov["checkpoint"]
    assert cp["spec"]["steps"] == 6000 and cp["hash"] == chain["final"][0]  # the whole chain: its final state
    assert results.checkpoint_hashes([cp["spec"]]) == [cp["hash"]]
    assert results.checkpoint_hashes(
        [
            dict(
                cp["spec"],
                policy="random",
                start={k: v for k, v in cp["spec"]["start"].items() if k != "idle_order"},
            )
        ]
    ) != [cp["hash"]]


def _with_record(e, **changes):
    """Rewrite an entry's record with ``changes`` and a valid self-hash (a record as another run
    would have written it)."""
    from qlib.results import store

    rec = {k: v for k, v in e.record().items() if k != "record_sha256"} | changes
    e.json.write_text(store.record_text(rec | {"record_sha256": store.self_hash(rec)}))


def test_the_check_tells_stale_code_from_another_environment(tiers, monkeypatch):
    """A checkpoint that recomputes to other bits is "stale code" in the lock's environment, and
    "different environment" when the record names another lock or the installed packages are not
    the lock's (issue 38): the same code may give other bits there."""
    from qlib.results import environment

    _figures_run([])
    e = results.entries("default")[0]
    rec = e.record()
    assert rec["lock"] == environment.lock_hash() and results.verify(e, recompute=True) == []
    _with_record(e, checkpoint=dict(rec["checkpoint"], hash="0" * 16))

    (problem,) = results.verify(e, recompute=True)
    assert "stale code" in problem and "different environment" not in problem
    _with_record(e, lock="another0lock0000")
    (problem,) = results.verify(e, recompute=True)
    assert "different environment: the record was made under lock another0lock0000" in problem
    _with_record(e, lock=rec["lock"])
    monkeypatch.setattr(environment, "differences",
                        lambda path=None: [environment.Difference("numpy", "9.9.9", "2.4.6")])
    (problem,) = results.verify(e, recompute=True)
    assert "different environment: installed numpy 2.4.6 (locked 9.9.9)" in problem
