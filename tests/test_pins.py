"""qlib.results.pins (issue 47, item 3): a run that writes a tier records the commit its code
started from (not HEAD when an entry is written), refuses uncommitted code unless allowed (and
then names the diff's hash), records its criteria commit, and ``results --verify`` rejects a
criteria commit that is not an ancestor of the code commit. Each on a throw-away repository."""

import json
import subprocess

import numpy as np
import pytest

from qlib import results
from qlib.results import pins

STUDY = "qlib.studies.demo.compute"
CRITERIA = "qlib/studies/demo/parameters.py"


def _thresholds(t):
    return f"PARAMETERS = {{'full': {{'claims': {{'t': {t}}}}}}}\n"


def _git(repo, *args):
    out = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org",
                          *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _commit(repo, files, message):
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path, tiers, monkeypatch):
    """A repository with a study's criteria file and other code, its two commits; qlib's pins read it."""
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    c1 = _commit(r, {CRITERIA: _thresholds(0.5), "qlib/other.py": "X = 1\n", "notes.md": "a\n"}, "criteria")
    c2 = _commit(r, {"qlib/other.py": "X = 2\n"}, "code after the criteria")
    monkeypatch.setattr(pins, "repo_root", lambda: r)
    monkeypatch.delenv(pins.ALLOW_DIRTY_ENV)  # this repository is clean unless a test edits it
    return r, c1, c2


def _store(name="demo"):
    return results.commit("default", name, {"a": 1}, 1, {"x": np.arange(3)}, {"study": STUDY})


def _record(name="demo"):
    (e,) = [e for e in results.entries("default") if e.stem.name.startswith(name)]
    return e.record()


def test_a_record_names_the_commit_its_run_started_from(repo):
    r, c1, c2 = repo
    with results.writing("default", "make figures", out=lambda *_: None):
        _commit(r, {"qlib/other.py": "X = 3\n"}, "a commit while the run computes")
        _store()
    rec = _record()
    assert rec["code_commit"] == rec["commit"] == c2  # HEAD at the start, not the later commit
    assert rec["code_diff"] is None
    assert rec["criteria_file"] == CRITERIA and rec["criteria_commit"] == c1
    assert pins.pin_problems(rec) == ([], [])
    assert results.verify(results.entries("default")[0]) == []  # the self-hash covers the new fields


def test_uncommitted_code_is_refused_unless_allowed_then_its_diff_is_named(repo):
    r, c1, c2 = repo
    (r / "notes.md").write_text("not code\n")  # outside qlib/: no refusal
    with results.writing("default", "make figures", out=lambda *_: None):
        _store("clean")
    assert _record("clean")["code_diff"] is None
    (r / "qlib/other.py").write_text("X = 99\n")
    with pytest.raises(RuntimeError, match=r"uncommitted changes \(qlib/other.py\).*--allow-dirty"):
        with results.writing("default", "make figures", out=lambda *_: None):
            _store("refused")
    assert not [e for e in results.entries("default") if e.stem.name.startswith("refused")]
    with results.writing("default", "make figures", out=lambda *_: None, allow_dirty=True):
        _store("dirty")
    rec = _record("dirty")
    assert rec["code_commit"] == c2 and rec["code_diff"]["paths"] == ["qlib/other.py"]
    assert len(rec["code_diff"]["sha256"]) == 16 and rec["criteria_commit"] == c1
    (r / "qlib/other.py").write_text("X = 100\n")  # another diff, another hash
    assert pins.code_state()["diff"]["sha256"] != rec["code_diff"]["sha256"]
    # a threshold changed but not committed: the record says so, and verification rejects it
    (r / CRITERIA).write_text(_thresholds(0.4))
    with results.writing("default", "make figures", out=lambda *_: None, allow_dirty=True):
        _store("uncommitted")
    rec = _record("uncommitted")
    assert rec["criteria_commit"] == pins.UNCOMMITTED
    assert "were not committed" in pins.pin_problems(rec)[0][0]


def test_verify_rejects_a_criteria_commit_after_the_code_commit(repo, capsys):
    from qlib.__main__ import main

    r, c1, c2 = repo
    with results.writing("default", "make figures", out=lambda *_: None):
        _store()
    (e,) = results.entries("default")
    assert main(["results", "--verify"]) == 0
    assert "0 entries fail verification" in capsys.readouterr().out
    # the deliberately broken case: the criteria came after the code (c2 is not an ancestor of c1)
    rec = e.record() | {"code_commit": c1, "criteria_commit": c2}
    rec = rec | {"record_sha256": results.self_hash(rec)}
    e.json.write_text(results.record_text(rec))
    assert results.verify(e) == []  # its bytes are intact: only the ancestry check can catch it
    assert pins.pin_problems(rec)[0] == [f"its criteria commit {c2[:9]} is not an ancestor of its code "
                                          f"commit {c1[:9]}"]
    assert main(["results", "--verify"]) == 1
    assert "is not an ancestor" in capsys.readouterr().out
    # a record without the fields, or one that says "unknown", is reported apart and claims nothing
    bare = {k: v for k, v in rec.items() if k not in pins.PIN_FIELDS}
    assert pins.pin_problems(bare) == ([], ["no code_commit, code_diff, criteria_file, criteria_commit: the "
                                            "record predates pinned records"])
    unknown = rec | {"code_commit": pins.UNKNOWN, "code_diff": pins.UNKNOWN, "criteria_commit": pins.UNKNOWN}
    assert pins.pin_problems(unknown) == ([], ["code commit unknown", "criteria commit unknown",
                                               "code diff unknown"])
    assert "not a commit of this repository" in pins.pin_problems(rec | {"code_commit": "0" * 40})[0][0]


def test_the_criteria_changed_after_the_data_are_named(repo):
    r, c1, c2 = repo
    with results.writing("default", "make figures", out=lambda *_: None):
        _store()
    rec = _record()
    assert pins.criteria_after(rec) is None
    c3 = _commit(r, {CRITERIA: _thresholds(0.6)}, "a threshold moved after the data")
    assert pins.criteria_after(rec) == c3


def test_criteria_file_of_a_study():
    assert pins.criteria_file("qlib.studies.max_length.compute") == "qlib/studies/max_length/parameters.py"
    assert pins.criteria_file("qlib.studies.perfect") == "qlib/studies/perfect.py"
    assert pins.criteria_file("regime side job") is None and pins.criteria_file(None) is None
    assert json.loads(json.dumps(pins.code_state()))["commit"]  # the repository's own state is plain JSON


def test_a_new_study_not_yet_committed_has_uncommitted_criteria(repo):
    r, c1, c2 = repo
    (r / "qlib/studies/fresh").mkdir(parents=True)
    (r / "qlib/studies/fresh/parameters.py").write_text(_thresholds(0.1))
    state = pins.code_state()
    assert pins.criteria_commit("qlib.studies.fresh.compute", state) == pins.UNCOMMITTED
    assert pins.criteria_commit(STUDY, state) == c1  # the other study's criteria are committed


def test_historical_pins_name_a_commit_only_where_the_run_could_not_outlive_it(repo):
    """Records made before the pins: the code commit is their ``commit`` only where every record of
    the run names it and it existed before the run began; else "unknown", never a guess."""
    r, c1, c2 = repo
    when = _git(r, "show", "-s", "--format=%cI", c2)
    import datetime

    t2 = datetime.datetime.fromisoformat(when).timestamp()
    iso = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(  # noqa: E731
        "%Y-%m-%dT%H:%M:%SZ")
    base = {"tier": "long", "study": STUDY, "command": "results-long"}
    recs = {
        # one run, begun an hour after c2: pinned to c2, its criteria c1
        "a": base | {"commit": c2, "date": iso(t2 + 3600), "wall_s": 60},
        "b": base | {"commit": c2, "date": iso(t2 + 3700), "wall_s": 60},
        # a run of another command whose entry began computing 2 min after c2: it may have started before
        "c": base | {"command": "make figures", "commit": c2, "date": iso(t2 + 125), "wall_s": 5},
        # a run two days later that names two commits: HEAD moved during it
        "d": base | {"commit": c1, "date": iso(t2 + 2 * 86400), "wall_s": 60},
        "e": base | {"commit": c2, "date": iso(t2 + 2 * 86400 + 100), "wall_s": 60},
    }
    got = pins.historical_pins(recs)
    assert got["a"] == got["b"] == {"code_commit": c2, "code_diff": "unknown", "criteria_file": CRITERIA,
                                    "criteria_commit": c1}
    for n in "cde":
        assert got[n]["code_commit"] == got[n]["criteria_commit"] == "unknown", n


def test_stored_records_carry_pins_that_git_history_rederives(monkeypatch):
    """Every record of the repository's results/ names its pins, none fails them, and those made
    before the pins (``code_diff`` "unknown") hold exactly what :func:`pins.historical_pins`
    derives from git history now (the stamp is recomputed, not believed)."""
    monkeypatch.delenv(results.RESULTS_DIR_ENV, raising=False)
    recs = {f"{t}/{e.stem.name}": e.record() for t in results.TIERS for e in results.entries(t)}
    if not recs:
        pytest.skip("results/ holds no entries")
    missing = [n for n, r in recs.items() if not all(f in r for f in pins.PIN_FIELDS)]
    assert not missing, f"records without their pins: {missing[:5]}"
    failing = {n: p for n, r in recs.items() if (p := pins.pin_problems(r)[0])}
    assert not failing, failing
    old = {n: r for n, r in recs.items() if r["code_diff"] == pins.UNKNOWN}
    want = pins.historical_pins(old)
    wrong = [n for n, r in old.items() if {f: r[f] for f in pins.PIN_FIELDS} != want[n]]
    assert not wrong, f"stamped pins that git history does not give: {wrong[:5]}"
