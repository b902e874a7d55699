"""qlib.claims: the claims table and its registry of studies."""

import importlib
import json

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
