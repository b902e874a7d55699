"""qlib.claims: the claims table and its registry of studies."""

import importlib
import json

import pytest

from qlib import claims


def test_every_study_has_the_study_shape():
    for title, module in claims.STUDIES.items():
        m = importlib.import_module(module)
        assert callable(m.run) and callable(m.claim_rows), title
        assert set(m.PARAMETERS) == {"full", "smoke"}, title


def test_markdown_table_has_one_row_per_claim_and_a_verdict():
    rows = [claims.ClaimRow("P_l < P_m", "lam=3", "0.44 < 0.51", "0.443 ± 0.002", True, "CI below"),
            claims.ClaimRow("k = 2", "d=10", "2", "3", False, "modal max == k")]
    md = claims.to_markdown(rows)
    assert md.startswith("1 of 2 claims PASS")
    lines = [l for l in md.splitlines() if l.startswith("| ") and ("PASS" in l or "FAIL" in l)]
    assert sum("**PASS**" in l for l in lines) == 1 and sum("**FAIL**" in l for l in lines) == 1
    assert json.loads(claims.to_json(rows))[1]["verdict"] == "FAIL"


def test_a_claim_is_sound_only_if_every_wrong_model_fails_and_runs_are_long_enough():
    cf_fail = claims.Counterfactual("JSQ(1) in place of JSQ(d)", "max == k 0.00 of the time", False, 0.0)
    cf_pass = claims.Counterfactual("d off by 25%", "max == k 0.99 of the time", True, 0.99)
    row = lambda **k: claims.ClaimRow("max concentrates on k", "p", "k = 2", "0.99", True, **k)  # noqa: E731
    assert row(counterfactuals=(cf_fail,), taus=12.0).sound
    assert not row().sound  # no counterfactual: nothing shows the criterion can fail
    assert not row(counterfactuals=(cf_fail, cf_pass), taus=12.0).sound  # a wrong model passes too
    assert not row(counterfactuals=(cf_fail,), taus=3.0).sound  # shorter than 10 relaxation times
    failed = claims.ClaimRow("c", "p", "t", "m", False, counterfactuals=(cf_fail,))
    assert not failed.sound
    ident = claims.ClaimRow("E[u_1] = lam n", "p", "t", "m", True, kind="identity")
    assert ident.sound
    with pytest.raises(ValueError, match="kind"):
        claims.ClaimRow("c", "p", "t", "m", True, kind="theorem")


def test_markdown_puts_claims_and_identities_in_separate_sections():
    cf = claims.Counterfactual("JSQ(1)", "0.00", False)
    rows = [claims.ClaimRow("a claim", "p", "t", "m", True, counterfactuals=(cf,), taus=20.0, start="empty"),
            claims.ClaimRow("an identity", "p", "t", "m", True, kind="identity")]
    md = claims.to_markdown(rows)
    assert md.index("### Claims") < md.index("a claim") < md.index("### Identities") < md.index("an identity")
    assert "JSQ(1): 0.00 → FAIL" in md and "empty; 20 τ" in md
    data = json.loads(claims.to_json(rows))
    assert data[0]["kind"] == "claim" and data[0]["sound"] and data[0]["counterfactuals"][0]["passed"] is False
    assert data[1]["kind"] == "identity"


def test_measurements_have_their_own_section_and_are_not_counted_as_claims():
    rows = [claims.ClaimRow("a claim", "p", "t", "m", True, counterfactuals=(claims.Counterfactual("w", "0", False),)),
            claims.ClaimRow("a tail", "p", "t", "m", False, kind="measurement")]
    md = claims.to_markdown(rows)
    assert md.index("### Claims") < md.index("a claim") < md.index("### Measurements") < md.index("a tail")
    assert "1 of 1 claims PASS (1 sound" in md and "0 of 1 measurements reach their precision" in md
    assert claims.ClaimRow("t", "p", "t", "m", True, kind="measurement").sound


def test_to_dataframe_one_row_per_table_row():
    """issue 20, item 9: the claims table as a DataFrame, numbered as in the markdown."""
    cf = claims.Counterfactual("JSQ(2)", "0.0", False)
    rows = [claims.ClaimRow("k = 2", "d=10", "2", "0.99", True, "modal max == k", counterfactuals=(cf,)),
            claims.ClaimRow("sum = lam", "p", "lam", "lam", True, "<= 5 SE", kind="identity")]
    df = claims.to_dataframe(rows)
    assert list(df.number) == [1, 2] and list(df.verdict) == ["PASS", "PASS"]
    assert list(df.wrong_models) == [1, 0] and df.wrong_models_failing[0] == 1 and bool(df.sound[0])
    assert df.columns[0] == "number" and "counterfactuals" not in df
    assert len(claims.to_dataframe([])) == 0
