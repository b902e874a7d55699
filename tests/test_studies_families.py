"""qlib.studies.families: the scaling families, their hypotheses, verdicts and figures (smoke mode)."""

import math

import numpy as np
import pytest

from qlib import claims
from qlib.studies import families as F
from qlib.supermarket import regime


def test_family_points_and_gamma():
    assert regime.family_point(10_000, 0.75, 0.5) == (10_000, 100, 1 - 1e-3)
    assert regime.gamma(0.75, 0.5) == pytest.approx(0.0)
    assert regime.gamma(0.5, 0.4) == pytest.approx(0.4)
    assert regime.gamma(0.8, 0.35) == pytest.approx(1 - 1.6 + 0.7)  # k = 3
    h = regime.family_hypotheses(10_000, 39, 1 - 1e-2, 0.5, 0.4, c_max=0.5, gamma_min=0.0)
    assert h["H0"] and h["H1"] and h["H2"] and h["H3"] and h["k"] == 2
    assert h["buffer_over_excursion"] == pytest.approx((1e4 * 1e-4 * 39) ** 0.5)  # n^(gamma/2)
    assert not regime.family_hypotheses(10_000, 100, 1 - 1e-3, 0.75, 0.5, c_max=0.5, gamma_min=0.0)["H3"]


def test_full_parameters_cover_the_issue():
    fams = F.PARAMETERS["full"]["families"]
    k2_pos = [n for n, f in fams.items() if math.ceil(f["alpha"] / f["beta"]) == 2
              and regime.gamma(f["alpha"], f["beta"]) > 0]
    assert len(k2_pos) >= 3
    assert any(abs(regime.gamma(f["alpha"], f["beta"])) < 1e-12 for f in fams.values())
    assert any(regime.gamma(f["alpha"], f["beta"]) < 0 for f in fams.values())
    assert any(math.ceil(f["alpha"] / f["beta"]) == 3 for f in fams.values())
    for f in fams.values():
        assert min(f["ns"]) >= 1_000
    assert F.PARAMETERS["full"]["burn_taus"] >= 20 and F.PARAMETERS["full"]["batch_taus"] >= 10
    for spec in F.CLAIMS.values():
        for m in spec.wrong_models:
            assert m in F.WRONG_MODELS


def test_slope_ci_on_synthetic_data():
    ns = np.array([1e3, 1e4, 1e5])
    q = np.array([0.5, 0.05, 0.005])
    b, lo, hi = F.slope_ci(ns, q, q * 0.9, q * 1.1, boot=500, seed=1)
    assert b == pytest.approx(-1.0, abs=1e-9) and lo < -0.9 and hi < 0
    flat = np.array([0.3, 0.3, 0.3])
    b, lo, hi = F.slope_ci(ns, flat, flat - 0.2, flat + 0.2, boot=500, seed=1)
    assert lo < 0 < hi  # straddles: INCONCLUSIVE
    assert claims.decide(lo, hi, 0.0, above=False) == "INCONCLUSIVE"


def test_smoke_run_rows_and_figures(fresh_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("QLIB_FIGURES", str(tmp_path))
    r = F.run("smoke", progress=False)
    assert [f.name for f in r.families] == list(F.PARAMETERS["smoke"]["families"])
    rows = F.claim_rows(r)
    assert all(row.verdict in claims.VERDICTS for row in rows)
    for f, row in zip(r.families, rows):
        if f.gamma <= 0:
            assert row.verdict == "finding"  # outside the hypotheses: never a PASS
        assert row.threshold
    a = r.family("A")
    assert a.wrong and all(e.n[0] == a.ns[-1] for e in a.wrong.values())
    assert a.sd.sd.shape == (a.ns.size, F.PARAMETERS["smoke"]["sd"]["replicas"]) and np.all(a.sd.sd > 0)
    md = F.findings_markdown(r)
    assert md.count("\n| ") == sum(f.ns.size for f in r.families)  # one table row per point
    import matplotlib.pyplot as plt

    from qlib.plots import families as pf
    for fig in (pf.concentration_families_figure(r), pf.family_map_figure(r), pf.buffer_figure(r)):
        plt.close(fig)


def test_the_design_is_the_default_and_the_long_tier(monkeypatch):
    # the long tier's n belong to the design whatever the scale; they are computed by make results-long only
    for s in ("1", "10"):
        monkeypatch.setenv("QLIB_SCALE", s)
        assert F.family_ns("full", "A") == [1_000, 3_000, 10_000, 30_000, 100_000]
        assert F.family_ns("full", "K3") == F.PARAMETERS["full"]["families"]["K3"]["ns"]
    for name, ns in F.PARAMETERS["full"]["long"]["ns"].items():
        assert min(ns) > max(F.PARAMETERS["full"]["families"][name]["ns"])  # the largest n is a long one
    assert F.long_read_only("full") and not F.long_read_only("smoke")


def test_deciding_n_extrapolates_the_fitted_slope():
    from qlib.studies.families.claims import deciding_n

    ns = np.array([1e3, 1e4, 1e5])
    # P(max != k) = 0.5 (n/1e3)^-1: it reaches (1 - 0.95)/2 = 0.025 at n = 2e4
    assert deciding_n(ns, 0.5 * (ns / 1e3) ** -1.0, 0.95) == pytest.approx(2e4, rel=1e-9)
    assert math.isnan(deciding_n(ns, np.full(3, 0.3), 0.95))  # flat: nothing decides it


@pytest.fixture
def long_smoke(tiers, monkeypatch):
    """Smoke families with one long-tier point (family A at n = 2000) and private result tiers."""
    from qlib.studies.families import compute as FC

    P = FC.PARAMETERS["smoke"]
    monkeypatch.setitem(P, "families", {"A": P["families"]["A"]})
    monkeypatch.setitem(P, "long", dict(P["long"], ns={"A": [2_000]}))
    return FC


def test_long_points_are_read_from_results_long_and_never_computed(long_smoke, monkeypatch):
    from qlib import results
    from qlib.results import cache
    from qlib.runner import long

    FC = long_smoke
    monkeypatch.setattr(FC, "long_read_only", lambda mode: True)  # as full mode outside the long run
    r = FC.run("smoke", progress=False)
    a = r.family("A")
    assert list(a.ns) == [300, 1_000] and a.missing[0][0] == 2_000 and not a.wrong
    row = F.claim_rows(r)[0]
    assert row.verdict == "INCONCLUSIVE" and "make results-long ONLY=families" in row.measured
    assert "A: **missing** n = 2000: missing: run `make results-long" in F.long_points_markdown(r)
    assert FC.long_cost("smoke") > 0
    with pytest.raises(cache.NotStored):  # the local cache was not filled either: nothing computed
        with cache.stored_only("long"):
            FC._estimates_and_sd("smoke", "A", [regime.family_point(2_000, 0.5, 0.4)], 1, progress=False)

    # the long run computes it (and the wrong models at the new largest n), point by point
    monkeypatch.setattr(FC, "long_read_only", lambda mode: results.write_tier() != "long")
    long.run_long([("families", lambda: FC.run("smoke", progress=False))], scale=1.0,
                     out=lambda *a, **k: None)
    # (the default points land there too here: this test's results/default is empty)
    at = sorted(e.stem.name.split("-")[0] for e in results.entries("long")
                if e.record()["params"]["point"][0] == 2_000)
    assert at == ["families_A", "families_sd_A", "families_wrong_A_jsq2"]
    assert FC.long_cost("smoke") == 0.0

    monkeypatch.setattr(FC, "long_read_only", lambda mode: True)
    r = FC.run("smoke", progress=False)
    a = r.family("A")
    assert list(a.ns) == [300, 1_000, 2_000] and not a.missing and list(a.wrong) == ["jsq2"]
    assert a.provenance.startswith("results/long: 3 entries")
    assert a.provenance in F.claim_rows(r)[0].parameters and a.provenance in F.long_points_markdown(r)

    # other code (new random streams) makes them stale: the row says so and computes nothing
    import qlib.supermarket.chain as K

    monkeypatch.setattr(K, "STREAM_VERSION", K.STREAM_VERSION + 1)
    with pytest.warns(results.ResultsWarning):
        r = FC.run("smoke", progress=False)
    a = r.family("A")
    assert a.missing == ((2_000, "stale: rerun `make results-long ONLY=families`"),)
    assert F.claim_rows(r)[0].verdict == "INCONCLUSIVE"


def test_summary_is_the_summary_table(fresh_cache):
    """summary(result) is summary_table(result) as a DataFrame: one row per (family, n), same values."""
    result = F.run("smoke", progress=False)
    df, table = F.summary(result), F.summary_table(result)
    assert len(df) == len(table) == sum(f.ns.size for f in result.families)
    assert list(df.columns) == list(table[0])
    for i, row in enumerate(table):
        assert df.iloc[i].to_dict() == row
    f = result.families[0]
    assert df.p_k[0] == f.p_k(0)[0] and df.frac_k[0] == f.est.p[0, f.k]
