"""qlib.studies.fluctuations (issue 40): the smoke run, rows that can fail, and the stored numbers
recomputed.

- the smoke run's rows: a PASS is never possible from its tiny design's CIs alone, so the checks are
  structural (verdicts from VERDICTS, thresholds rendered from claims) plus rows that must FAIL: the
  SD(N) measured at family A n = 1e3 scaled by 1.3 (a variance off by 1.69) and tau_int scaled by 0.5
  (what the old design returns is a quarter) fail their bands; the far wrong predictions (JSQ(d/2),
  the scale sqrt(n lam)/(1-lam)) fail on a result whose measured numbers are the predictions;
- tau_int recomputed from the stored autocovariance equals the estimator on the series;
- summary's ratios are the result's.
"""

import dataclasses

import numpy as np
import pytest
from scipy.signal import lfilter

from qlib.stats import integrated_autocorrelation_time
from qlib.studies import fluctuations as study
from qlib.studies.fluctuations.compute import autocovariance, sokal_from_autocovariance


@pytest.fixture(scope="module")
def result(fresh_cache):
    return study.run("smoke", progress=False)


def _with(result, fn):
    return dataclasses.replace(result, points=[fn(p) if p.inside else p for p in result.points])


def test_rows_render_and_have_verdicts(result):
    from test_claim_specs import numbers_not_from_claims

    rows = study.claim_rows(result)
    assert [r.kind for r in rows] == ["claim", "claim", "measurement"]
    assert rows[2].verdict == "finding"
    assert numbers_not_from_claims(rows, study.PARAMETERS["smoke"]) == []
    assert result.inside(), "the smoke design has a point inside H0-H3"


def test_rows_pass_on_the_prediction_and_fail_on_wrong_numbers(result):
    """Measured = predicted (a tight fake): PASS, with the far wrong predictions failing; measured
    off by the factors above: FAIL."""
    rng = np.random.default_rng(0)

    def exact(p):
        return dataclasses.replace(p, sd=p.pred["sd"] * (1 + 0.01 * rng.standard_normal(16)),
                                   tau=p.pred["tau"] * (1 + 0.01 * rng.standard_normal(16)))

    rows = study.claim_rows(_with(result, exact))
    assert rows[0].verdict == "PASS" and rows[1].verdict == "PASS"
    for r in rows[:2]:
        far = [c for c in r.counterfactuals if not c.near]
        assert far and not any(c.passed for c in far), r.counterfactuals
    assert rows[0].sound and rows[1].sound

    def off(p):
        q = exact(p)
        return dataclasses.replace(q, sd=q.sd * 1.3, tau=q.tau * 0.5)

    rows = study.claim_rows(_with(result, off))
    assert rows[0].verdict == "FAIL" and rows[1].verdict == "FAIL"


def test_tau_from_the_stored_autocovariance_is_the_estimator():
    """On an AR(1) of tau_int 19 samples, whose window (c = 3) closes near lag 60 < the 600 lags kept."""
    x = lfilter([1.0], [1.0, -0.9], np.random.default_rng(1).standard_normal((3, 4000)), axis=1)
    acov = autocovariance(x, 600)
    np.testing.assert_allclose(sokal_from_autocovariance(acov, 3.0),
                               integrated_autocorrelation_time(x, window=3.0), rtol=1e-12)


def test_summary_quotes_the_result(result):
    s = study.summary(result)
    assert len(s) == len(result.points)
    for row, p in zip(s.itertuples(), result.points):
        assert row.sd_ratio == pytest.approx(np.mean(p.sd) / p.pred["sd"])
        assert row.sd_pred == pytest.approx(p.pred["sd"])


def test_cost_is_the_design():
    c = study.cost("full")
    assert c["tau"] > 0 and c["sd"] > c["tau"]
    assert study.long_cost("full") == pytest.approx(c["sd"] + c["tau"])


def test_figures_draw_every_measured_point(result):
    import matplotlib

    matplotlib.use("Agg")
    from qlib.plots.fluctuations import acf_figure, sd_figure

    fig = sd_figure(result)
    measured = sum(p.sd is not None for p in result.points)
    assert len(fig.axes[0].containers) == measured  # one error bar per measured point
    fig = acf_figure(result)
    assert sum(p.acf is not None for p in result.points) >= 1
    assert len(fig.axes[0].lines) >= 3
