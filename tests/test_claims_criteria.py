"""Issue 47, item 1: no PASS row rests on a criterion committed after its data. Walks
figures/claims.json: a PASS row's criteria commit must be an ancestor of the code commit of every
stored record its study read (and, where a record's code commit is unknown, of the commit that
was HEAD when it was written, which its code can only precede); and the criteria commit the
table names must be the one git history gives for the row's thresholds now."""

import json

import pytest

from qlib import criteria
from qlib.config import ROOT
from qlib.results import pins

TABLE = ROOT / "figures" / "claims.json"


def after_data(rows):
    """(row index, why) of every PASS row whose criteria commit is not an ancestor of a commit its
    data came from."""
    bad = []
    for i, r in enumerate(rows):
        info = r.get("criteria") or {}
        if r["verdict"] != "PASS" or "commit" not in info:  # no commit: its study read no stored record
            continue
        crit = info["commit"]
        if crit == pins.UNKNOWN:
            bad.append((i, "criteria commit unknown"))
            continue
        for c in [c for c in info["code_commits"] if c != pins.UNKNOWN] + info["written_at"]:
            if pins.is_ancestor(crit, c) is not True:
                bad.append((i, f"criteria {crit[:9]} not an ancestor of {c[:9]}"))
    return bad


def _rows():
    if not TABLE.exists():
        pytest.skip("figures/claims.json not generated")
    return json.loads(TABLE.read_text())


def test_no_pass_row_rests_on_a_criterion_committed_after_its_data():
    rows = _rows()
    assert any("commit" in (r.get("criteria") or {}) for r in rows), "claims.json names no criteria commit"
    assert after_data(rows) == []
    # rows 5, 7 and 16-18 of issue 47: their refined-mean-field clause (model_error) came after their data
    flagged = [r for r in rows if r["verdict"] == criteria.AFTER_DATA]
    assert {(r["criteria"]["spec"], r["source"]) for r in flagged} >= {
        ("most_at_k", "supermarket: maximum queue length"), ("boundary", "supermarket: maximum queue length")}
    assert not any(r["sound"] for r in flagged)


def test_the_walk_fails_on_a_pass_row_judged_by_a_later_criterion():
    """The deliberately broken case: row 5 as it read before issue 47 (PASS), its criteria commit
    52d21b2 (model_error) and its data's code 11ed723 (12-02), before it."""
    later, data = "52d21b285eb657019adecc943cdba79761c2ffe9", "11ed723994f50ad2363a6dc5a17da03979c8e93c"
    row = {"verdict": "PASS", "criteria": {"commit": later, "code_commits": [data], "written_at": []}}
    assert after_data([row]) == [(0, f"criteria {later[:9]} not an ancestor of {data[:9]}")]
    unknown_code = {"verdict": "PASS", "criteria": {"commit": later, "code_commits": ["unknown"],
                                                    "written_at": [data]}}
    assert after_data([unknown_code]) == [(0, f"criteria {later[:9]} not an ancestor of {data[:9]}")]
    assert after_data([row | {"verdict": criteria.AFTER_DATA}]) == []
    assert criteria.judge(later, [{"code_commit": data, "commit": data}])[0] == criteria.AFTER_DATA
    assert criteria.judge(data, [{"code_commit": later, "commit": later}])[0] == "pinned"
    assert criteria.judge(data, [{"code_commit": "unknown", "commit": later}])[0] == "unpinned"


def test_the_table_names_the_criteria_commit_git_history_gives():
    """Recomputed, not believed: each row's criteria commit from its study's thresholds now."""
    from qlib.runner.registry import STUDIES

    rows = _rows()
    for r in rows:
        info = r.get("criteria") or {}
        if "commit" not in info:
            continue
        study = STUDIES[r["source"]]
        specs = [study.CLAIMS[info["spec"]]] if info["spec"] else list(study.CLAIMS.values())
        paths = tuple(sorted({tuple(p) for s in specs for p in s.thresholds}))
        assert criteria.criteria_commit(study.__name__, paths) == info["commit"], (r["claim"], info)


def test_criteria_commit_of_the_most_at_k_thresholds_is_the_commit_that_added_model_error():
    from qlib.studies import max_length

    spec = max_length.CLAIMS["most_at_k"]
    got = criteria.criteria_commit(max_length.__name__, tuple(tuple(p) for p in spec.thresholds))
    assert got.startswith("52d21b2")
