"""qlib.claims: the claims table and its registry of studies."""

import json

import pytest

from qlib import claims, claims_table, runner


def test_every_study_has_the_study_shape():
    for title, m in runner.STUDIES.items():
        plain = callable(getattr(m, "plan", None)) and callable(m.assemble) and callable(m.parameters)
        assert (plain or callable(m.run)) and callable(m.claim_rows), title
        assert set(m.PARAMETERS) == {"full", "smoke"}, title


def test_markdown_table_has_one_row_per_claim_and_a_verdict():
    rows = [claims.ClaimRow("P_l < P_m", "lam=3", "0.44 < 0.51", "0.443 ± 0.002", True, "CI below"),
            claims.ClaimRow("k = 2", "d=10", "2", "3", False, "modal max == k")]
    md = claims_table.to_markdown(rows)
    assert md.startswith("claims: 1 PASS, 1 FAIL")
    lines = [l for l in md.splitlines() if l.startswith("| ") and ("PASS" in l or "FAIL" in l)]
    assert sum("**PASS**" in l for l in lines) == 1 and sum("**FAIL**" in l for l in lines) == 1
    assert json.loads(claims_table.to_json(rows))[1]["verdict"] == "FAIL"


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
    md = claims_table.to_markdown(rows)
    assert md.index("### 1 · PASS: a claim") < md.index("<summary>Identities") < md.index("an identity")
    assert "JSQ(1): 0.00 → FAIL" in md and "empty; 20 τ" in md
    data = json.loads(claims_table.to_json(rows))
    assert data[0]["kind"] == "claim" and data[0]["sound"]
    assert data[0]["counterfactuals"][0]["passed"] is False
    assert data[1]["kind"] == "identity"


def test_measurements_have_their_own_section_and_are_not_counted_as_claims():
    rows = [claims.ClaimRow("a claim", "p", "t", "m", True,
                            counterfactuals=(claims.Counterfactual("w", "0", False),)),
            claims.ClaimRow("a tail", "p", "t", "m", False, kind="measurement")]
    md = claims_table.to_markdown(rows)
    assert md.index("### 1 · PASS: a claim") < md.index("**Measurements**") < md.index("### 2 · FAIL: a tail")
    assert "claims: 1 PASS, 0 FAIL (1 of the 1 PASS sound" in md and "measurements: 0 PASS, 1 FAIL" in md
    assert claims.ClaimRow("t", "p", "t", "m", True, kind="measurement").sound


def test_decide_on_synthetic_cis():
    assert claims.decide(0.96, 0.99, 0.95) == "PASS"
    assert claims.decide(0.90, 0.94, 0.95) == "FAIL"
    assert claims.decide(0.93, 0.97, 0.95) == "INCONCLUSIVE"  # the CI straddles the threshold
    assert claims.decide(0.95, 0.97, 0.95) == "PASS"  # the lower end on the threshold counts as above
    assert claims.decide(-0.5, -0.1, 0.0, above=False) == "PASS"  # a slope below 0
    assert claims.decide(0.1, 0.5, 0.0, above=False) == "FAIL"
    assert claims.decide(-0.3, 0.2, 0.0, above=False) == "INCONCLUSIVE"
    with pytest.raises(ValueError):
        claims.decide(1.0, 0.0, 0.5)
    assert claims.combine(["PASS", "PASS"]) == "PASS"
    assert claims.combine(["PASS", "INCONCLUSIVE"]) == "INCONCLUSIVE"
    assert claims.combine(["INCONCLUSIVE", "FAIL"]) == "FAIL"
    assert claims.combine(["PASS", "finding"]) == "finding"


def test_verdicts_counted_per_kind_and_exit_status_fails_only_on_fail():
    cf = claims.Counterfactual("JSQ(2)", "0.0", False)
    near = claims.Counterfactual("JSQ(d-1)", "0.97", True, near=True)
    rows = [claims.ClaimRow("a", "p", "t", "m", True, counterfactuals=(cf, near), taus=20.0),
            claims.ClaimRow("b", "p", "t", "m", False, outcome="INCONCLUSIVE", threshold=">= 0.95"),
            claims.ClaimRow("c", "p", "t", "m", False, outcome="finding"),
            claims.ClaimRow("i", "p", "t", "m", True, kind="identity")]
    c = claims.counts(rows)
    assert c["claim"] == {"PASS": 1, "FAIL": 0, "INCONCLUSIVE": 1, "finding": 1, "criterion after data": 0}
    assert c["identity"]["PASS"] == 1
    assert rows[0].sound  # a near wrong model that passes is the row's resolution, not unsoundness
    assert not claims.exit_failed(rows)
    assert claims.exit_failed(rows + [claims.ClaimRow("d", "p", "t", "m", False)])
    md = claims_table.to_markdown(rows)
    assert "1 INCONCLUSIVE" in md and "1 findings" in md and ">= 0.95" in md and "near: JSQ(d-1)" in md
    data = json.loads(claims_table.to_json(rows))
    assert [r["verdict"] for r in data] == ["PASS", "INCONCLUSIVE", "finding", "PASS"]
    assert data[1]["threshold"] == ">= 0.95"


def test_claim_specs_read_their_thresholds_from_parameters():
    from qlib.studies import families, mixing
    assert all(isinstance(s, claims.ClaimSpec) for s in families.CLAIMS.values())
    assert all(isinstance(s, claims.ClaimSpec) for s in mixing.CLAIMS.values())
    for title, m in runner.STUDIES.items():
        specs = getattr(m, "CLAIMS", {})
        if not isinstance(specs, dict):
            continue
        for spec in specs.values():
            if not isinstance(spec, claims.ClaimSpec):  # a study with its own claim table
                continue
            for mode in ("full", "smoke"):
                values = spec.threshold_values(m.PARAMETERS[mode])  # KeyError if a threshold is not there
                assert len(values) == len(spec.thresholds), (title, spec.key)


def test_to_dataframe_one_row_per_table_row():
    """issue 20, item 9: the claims table as a DataFrame, numbered as in the markdown."""
    cf = claims.Counterfactual("JSQ(2)", "0.0", False)
    rows = [claims.ClaimRow("k = 2", "d=10", "2", "0.99", True, "modal max == k", counterfactuals=(cf,)),
            claims.ClaimRow("sum = lam", "p", "lam", "lam", True, "<= 5 SE", kind="identity")]
    df = claims_table.to_dataframe(rows)
    assert list(df.number) == [1, 2] and list(df.verdict) == ["PASS", "PASS"]
    assert list(df.wrong_models) == [1, 0] and df.wrong_models_failing[0] == 1 and bool(df.sound[0])
    assert df.columns[0] == "number" and "counterfactuals" not in df
    assert len(claims_table.to_dataframe([])) == 0


def test_residuals_at_round_off_print_the_same_on_every_cpu():
    from qlib.claims import residual_text

    assert residual_text(4.4e-16) == residual_text(2.2e-16) == residual_text(-3e-13) == "< 1e-12"
    assert residual_text(1.423) == "1.4e+00" and residual_text(2.5e-9) == "2.5e-09"
