"""The power of the claim rows (issue 41): a PASS row counts as sound only if a far wrong model fails it
and the d′ for which JSQ(d′) at the same point would pass it (qlib.power) exclude d/2 and 2d.

The published table (figures/claims.json) is walked row by row, and every computed d′ range is
recomputed from the row's published inputs under the thresholds of the code as it is now: loosening a
threshold (say row 5's model error back to the bound alone) fails here before the table is regenerated."""

from __future__ import annotations

import json
import re

import pytest

from qlib import claims, claims_table, power
from qlib.config import ROOT
from qlib.runner import power as runner_power

TABLE = ROOT / "figures" / "claims.json"
#: the criteria sharpened into predictions by issue 41: JSQ(d x 0.75) and JSQ(d x 1.25) must fail them too
PREDICTIONS = ("max_length.most_at_k", "max_length.boundary", "families.most_at_k")


def _rows() -> list[dict]:
    return json.loads(TABLE.read_text())


def test_dpass_contains_and_excludes():
    p = power.DPass(100, low=60, high=140, method="m")
    assert p.computed and p.excludes_far and not p.contains(50) and p.contains(100)
    assert not power.DPass(100, low=50, high=140).excludes_far  # d/2 is in
    assert not power.DPass(100, low=96, high=200).excludes_far  # 2d is in
    assert not power.DPass(101, low=50, high=150).excludes_far  # d/2 = 50.5
    none = power.DPass(None, why="no d")
    assert not none.computed and none.excludes_far and "not computed: no d" in none.text()


def test_a_claim_whose_d_range_holds_d_over_2_is_not_sound():
    far = claims.Counterfactual("JSQ(2)", "0", False)
    row = claims.ClaimRow("c", "p", "t", "m", True, counterfactuals=(far,), taus=20.0,
                          power=power.DPass(100, low=96, high=104))
    assert row.sound
    wide = claims.ClaimRow("c", "p", "t", "m", True, counterfactuals=(far,), taus=20.0,
                           power=power.DPass(100, low=14, high=171))
    assert not wide.sound
    untold = claims.ClaimRow("c", "p", "t", "m", True, counterfactuals=(far,), taus=20.0,
                             power=power.DPass(None, why="a mixing time"))
    assert untold.sound  # no range computed: the far wrong models alone decide


def test_the_scan_finds_every_band_a_bisection_missed():
    """Row 16's criterion at its point (issue 47): JSQ(22) passes as well as JSQ(96..104). A bisection
    around d (issue 41's pass_range) saw only the band around d; the scan of every d′ finds both, and
    the far band makes the row unsound."""
    c = power.CRITERIA["families.most_at_k"]
    x = dict(d=100, n=100_000, one_minus_lam=0.00316228, k=2, half=6.2212e-05, c=0.316228)
    t = dict(slack=2.0, model_error=0.01)
    bands = power.pass_bands(lambda dd: c.passes(dd, x, t), 100)
    assert bands == ((22, 22), (96, 104))
    p = power.DPass(100, low=96, high=104, bands=bands)
    assert p.far_bands == ((22, 22),) and not p.excludes_far and "a far band (22)" in p.text()
    assert power.DPass(100, low=96, high=104, bands=((96, 104),)).excludes_far


def test_the_neighbour_levels_exclude_the_far_band():
    """Issue 47: with the fractions at k-1 and k+1 judged too, row 16's pass set is the band around d."""
    from qlib.studies import families

    t = families.PARAMETERS["full"]["claims"]
    c = power.CRITERIA["families.most_at_k"]
    x = dict(d=100, n=100_000, one_minus_lam=0.00316228, k=2, half=6.2212e-05, c=0.316228,
             halves=[6.2212e-05, 6.2212e-05, 6.2212e-05])
    assert power.pass_bands(lambda dd: c.passes(dd, x, t), 100) == ((96, 104),)


def test_every_pass_row_counted_sound_can_fail():
    """Walk every claim row: one that reads PASS and is counted sound must have a far wrong model that
    fails it, and its d′ range, where computed, must exclude d/2 and 2d, both as published and as the
    thresholds of the code give it now (recomputed from the row's published inputs)."""
    bad = []
    for i, r in enumerate(_rows(), 1):
        if r["kind"] != "claim" or r["verdict"] != "PASS" or not r["sound"]:
            continue
        far = [c for c in r["counterfactuals"] if not c["near"]]
        if not any(not c["passed"] for c in far):
            bad.append(f"row {i}: no far wrong model fails it")
        p = r.get("power") or {}
        if p.get("low") is None:
            continue
        d, now = p["d"], runner_power.recompute(p)
        if now is None:
            bad.append(f"row {i}: JSQ(d) itself fails its criterion in the theory under today's thresholds")
            now = (0, 0)
        now_bands = runner_power.recompute_bands(p)
        for where, bands in (("published", r["d_pass_bands"]), ("recomputed", now_bands)):
            for lo, hi in bands:
                if lo <= d / 2 or hi >= 2 * d:
                    bad.append(f"row {i} ({where}): a band of d′ [{lo}, {hi}] reaches d/2 or 2d (d = {d})")
        for where, (lo, hi) in (("published", r["d_pass_range"]), ("recomputed", now)):
            if p["criterion"] in PREDICTIONS:
                for x in (round(0.75 * d), round(1.25 * d)):
                    if lo <= x <= hi:
                        bad.append(f"row {i} ({where}): its d′ range [{lo}, {hi}] contains d′ = {x} "
                                   "(d ± 25%)")
    assert not bad, "\n".join(bad)


def test_every_judged_prediction_row_carries_its_range():
    """Every claim row judged by a criterion of qlib.power.CRITERIA carries its d′ range in claims.json,
    and the published range is the one the code computes now (nothing regenerated by hand)."""
    seen = set()
    for i, r in enumerate(_rows(), 1):
        p = r.get("power") or {}
        if r["kind"] == "claim":
            assert "d_pass_range" in r and p, f"row {i} says nothing of its d′ range"
        if p.get("criterion"):
            seen.add(p["criterion"])
            assert r["d_pass_range"] == list(runner_power.recompute(p)), f"row {i}"
            assert r["d_pass_bands"] == [list(b) for b in runner_power.recompute_bands(p)], f"row {i}"
    assert seen == set(power.CRITERIA)


def test_the_summary_lines_count_what_claims_json_holds():
    """claims.md's and the README's summary line agree with claims.json: claims, identities, measurements
    and sanity checks counted apart, and the sound PASS rows in the sense above."""
    rows = _rows()
    passing = [r for r in rows if r["kind"] == "claim" and r["verdict"] == "PASS"]
    sound = sum(r["sound"] for r in passing)
    for path in (ROOT / "figures" / "claims.md", ROOT / "README.md"):
        line = next(x for x in path.read_text().splitlines() if x.startswith("claims: "))
        assert f"({sound} of the {len(passing)} PASS sound" in line, path
        for kind, name in claims_table.KIND_NAMES.items():
            n = sum(r["kind"] == kind and r["verdict"] == "PASS" for r in rows)
            if any(r["kind"] == kind for r in rows):
                assert re.search(rf"{name}: {n} PASS", line), (path, name)


@pytest.mark.parametrize("key", sorted(power.CRITERIA))
def test_each_criterion_names_its_thresholds(key):
    import importlib

    c = power.CRITERIA[key]
    claims_p = importlib.import_module(c.module).PARAMETERS["full"]["claims"]
    assert isinstance(c.thresholds(claims_p), dict)


def test_the_lam_range_is_found_to_its_precision():
    import math

    lo, hi = power.lam_range(lambda f: abs(math.log(f)) <= 0.1)
    assert lo == pytest.approx(math.exp(-0.1), rel=2e-3) and hi == pytest.approx(math.exp(0.1), rel=2e-3)
    assert power.lam_range(lambda f: f > 2) is None
    assert power.lam_range(lambda f: True) == (1 / power.LAM_FACTOR, power.LAM_FACTOR)
