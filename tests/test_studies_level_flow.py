"""The level-flow study: claim points read from the studies, smoke rows with their near variants."""

from __future__ import annotations

import numpy as np

from qlib import runner
from qlib.studies import level_flow as study
from qlib.studies import max_length
from qlib.supermarket.variants import NEAR


def test_claim_points_cover_every_simulated_claim_point_once():
    pts = study.claim_points("full")
    got = [p for _, p in pts]
    assert len(got) == len(set(got))  # each point once
    for p in max_length.PARAMETERS["full"]["max"]["points"]:
        assert tuple(p) in got
    assert tuple(max_length.PARAMETERS["full"]["profile"]["point"]) in got
    assert any(label.startswith("mixing") for label, _ in pts)
    assert study in runner.STUDIES.values()


def test_smoke_rows_record_every_near_variant_with_its_se_distance():
    result = study.run("smoke", progress=False)
    rows = study.claim_rows(result)
    assert len(rows) == len(result.points) == study.PARAMETERS["smoke"]["max_points"]
    for r, _L in zip(rows, result.levels):
        assert r.kind == "identity" and r.measured.startswith("JSQ(d): Z_j/SE")
        assert len(r.counterfactuals) == len(NEAR) and all(c.near for c in r.counterfactuals)
        for c in r.counterfactuals:
            assert c.se_distance is not None
            assert c.passed == (c.se_distance <= study.PARAMETERS["smoke"]["claims"]["threshold"])
    # the verdict is the stated criterion on the model's own residuals
    z = result.z(result.model[0], 0)
    assert z.size == result.levels[0] and rows[0].passed == bool(np.all(np.abs(z) <= 5.0))
    assert any(not c.passed for c in rows[0].counterfactuals)  # at least one variant is told apart even here
    # summary(result): one row per point, the largest |Z_j|/SE of the model and of each near model
    df = study.summary(result)
    assert len(df) == len(result.points) and list(df.columns[-len(NEAR):]) == list(NEAR)
    assert df.model[0] == float(np.max(np.abs(z)))
    assert [df[v][0] for v in NEAR] == [c.se_distance for c in rows[0].counterfactuals]
