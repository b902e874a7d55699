"""qlib.studies.mixing (notebook 02): the measurements (good and bad starts, uncoupled chains, the
TV lower bound, good-set exits), the study's shape and its claim rows.

Oracles: the exact stationary law (stationary samples), exact limiting cases of each measurement
(a stationary start has crossed at once; eps = 0 leaves at once, eps = 1 never), and the relation
between a measurement and the coupling functions it wraps.
"""

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib import stats
from qlib.studies import mixing as study
from qlib.supermarket import regime

LEVELS = 14


def test_family_point_and_scales():
    n, d, lam = regime.family_point(10_000, 0.75, 0.5)
    assert (n, d) == (10_000, 100) and lam == pytest.approx(1 - 1e-3)
    assert regime.reference_time(n, d, lam) == pytest.approx(2 * 100 * n * np.log(n))
    assert regime.lower_time(n, d, lam) == pytest.approx(n * lam * 100)


def test_stationary_samples_have_the_exact_mean():
    n, d, lam = 4, 2, 0.8
    y = study.stationary_samples([(n, d, lam)], replicas=256, seeds=[3])[0]
    ex = sm.exact_tail_fraction(n, d, lam, 6)
    est = stats.replica_mean(np.pad(y, ((0, 0), (0, max(0, 7 - y.shape[1]))))[:, :7] / n)  # levels 0..6
    assert np.all(np.abs(est.mean - ex) <= 5 * est.stderr + 1e-9)


def test_top_start_times_are_the_bottom_top_meeting_times():
    pts = [(50, 3, 0.8), (100, 5, 0.9)]
    T = study.top_start_times(pts, replicas=8, seeds=[1, 2], max_steps=[10**7, 10**7])
    for (n, d, lam), s, t in zip(pts, [1, 2], T):
        k = int(sm.predicted_max_length(d, lam))
        np.testing.assert_array_equal(t, sm.meeting_times(n, d, lam, replicas=8, seed=s, top_length=k + 1,
                                                          max_steps=10**7))


def test_good_start_meets_and_uncoupled_chains_do_not():
    pt = (300, 5, 0.9)
    good = study.good_start_times([pt], replicas=8, seeds=[5], max_steps=[10**7])[0]
    assert np.all(np.isfinite(good))
    apart = study.uncoupled_times([pt], replicas=8, seeds=[5], max_steps=[int(3 * good.max())])[0]
    assert np.all(np.isinf(apart))  # independent chains of 300 queues never sit in the same state
    tiny = study.uncoupled_times([(2, 2, 0.5)], replicas=8, seeds=[5], max_steps=[20_000], frames=2000)[0]
    assert np.all(np.isfinite(tiny))  # with 2 queues they do, often: the test can tell the two apart


def test_event_crossing_limits():
    kw = dict(replicas=64, seed=4, horizon_taus=4.0, frames=20, threshold=0.25)
    s = study.event_crossing(300, 5, 0.9, start="stationary", **kw)
    assert float(s["crossing"]) == 0.0  # started at the answer: no time is needed
    g = study.event_crossing(300, 5, 0.9, start="displaced", **kw)
    assert float(g["crossing"]) > 0 and g["p"][0] > 0.9  # the displaced start has more customers
    assert abs(float(g["pi_A"]) - 0.5) < 0.1 and abs(g["p"][-1] - float(g["pi_A"])) < 0.25
    # samples drawn once and passed in give the same numbers as drawing them inside
    y = study.stationary_samples([(300, 5, 0.9)], replicas=64, seeds=[study.sample_seed(4)],
                                 burn_taus=20.0)[0]
    g2 = study.event_crossing(300, 5, 0.9, start="displaced", samples=y, **kw)
    assert all(np.array_equal(g[key], g2[key]) for key in g)


def test_good_set_exits_limits():
    pts = [(200, 3, 0.8)]
    # the two limits of the bookkeeping: eps = 1 contains every state (inf: never left), eps = 0
    # none but the fluid point, so every chain is out at the first recorded frame
    never = study.good_set_exits(pts, eps=1.0, horizon_taus=2.0, replicas=4, seeds=[1])[0]
    assert np.all(np.isinf(never))
    at_once = study.good_set_exits(pts, eps=0.0, horizon_taus=2.0, replicas=4, seeds=[1], frames=50)[0]
    first_frame = max(1, int(2.0 * study.relaxation_time(3, 0.8) * study.steps_per_time(200, 0.8) / 50))
    np.testing.assert_array_equal(at_once, np.full(4, float(first_frame)))


@pytest.fixture(scope="module")
def smoke(fresh_cache):
    return study.run("smoke", progress=False)


def test_study_shape_and_rows(smoke):
    assert set(study.PARAMETERS) == {"full", "smoke"}
    assert set(study.PARAMETERS["full"]) == set(study.PARAMETERS["smoke"])
    assert isinstance(smoke, study.MixingResult)
    by = study.claim_rows_by_key(smoke)
    rows = study.claim_rows(smoke)
    assert len(rows) == 9 and all(r.counterfactuals for r in rows)
    assert [len(by[k]) for k in study.CLAIMS] == [2, 1, 1, 2, 1, 2]  # rows 10, 13, 15 on both families
    # rows that hold for any chain are sanity checks, counted apart (issue 32)
    assert {r.kind for k in ("tail", "good_set") for r in by[k]} == {"check"}
    assert {r.kind for k in ("good_start", "bad_start", "d_scaling", "lower") for r in by[k]} == {"claim"}
    # the smoke points are outside H0-H3 (n (1-lam)^2 d^(k-1) < 10): no claim row reads PASS there
    assert all(r.verdict == "finding" for r in rows if r.kind == "claim")
    assert all("outside H0-H3" in r.claim for k in ("good_start", "d_scaling", "lower") for r in by[k])
    # the counterfactuals of the coupling rows fail in any mode: wrong models do not meet in time
    for r in by["good_start"] + by["bad_start"]:
        assert not any(c.passed for c in r.counterfactuals if not c.near)
    # the near wrong model JSQ(d-1) runs on the good-start rows, and their resolution says what
    # the row cannot tell apart (a growth exponent JSQ(d-1) shares)
    for r in by["good_start"]:
        near = [c for c in r.counterfactuals if c.near]
        assert [c.model.split(" in place")[0] for c in near] == ["JSQ(d-1)"]
        assert r.resolution.startswith("tells apart") and "JSQ(d-1)" in r.resolution
    assert not by["tail"][0].counterfactuals[0].passed  # uncoupled chains: no decay to measure
    # the drain term is of the order of the bound along the gamma = 0 family: row 11 is a finding
    assert by["bad_start"][0].verdict == "finding"
    md = study.findings_markdown(smoke)
    assert md.count("\n- ") >= 7


def test_d_scaling_is_judged_two_sided():
    class M:  # a d sweep whose meeting times grow like d^e (k = 2 at these points)
        def __init__(self, e):
            self.d = np.array([100, 141, 200, 283])
            self.lam = np.full(4, 1 - 1e-3)
            self.n = np.full(4, 3000)
            rng = np.random.default_rng(0)
            self.T = (self.d[:, None].astype(float) ** e) * rng.uniform(0.95, 1.05, (4, 16))
    tol = study.PARAMETERS["full"]["claims"]["d_exponent_tol"]
    assert study.d_exponent(M(1.0), None, tol)[0] == "PASS"
    assert study.d_exponent(M(0.0), None, tol)[0] == "FAIL"
    assert study.d_exponent(M(2.0), None, tol)[0] == "FAIL"  # above the band: two-sided


def test_explore_slider_callback():
    x = study.explore(30, 3, 0.9, replicas=16, seed=7, frames=50, levels=LEVELS)
    assert x.k == 3 and np.all(np.isfinite(x.T))
    # the pair's L1 distance starts at (k+1) customers per queue and reaches 0 once all have met
    assert x.l1[0] == x.k + 1 and x.l1[-1] == 0.0
    assert np.all(np.diff(x.l1) <= 0)
    with pytest.raises(ValueError, match="d must"):
        study.explore(30, 1, 0.9)


def test_summary_is_the_numbers_of_the_result(smoke):
    """summary(result): one row per point of each set, values equal to the result's fields."""
    df = study.summary(smoke)
    assert list(df.columns) == list(study.SUMMARY_COLUMNS)
    sizes = {name: getattr(smoke, name).n.size for name in
             ("good", "good_pos", "top", "d_sweep", "d_fixed", "lower", "lower_pos", "exits", "exits_pos")}
    assert df.set.value_counts().to_dict() == sizes
    g = df[df.set == "good"].reset_index(drop=True)
    T = smoke.good.T
    assert np.array_equal(g.n, smoke.good.n) and np.array_equal(g.d, smoke.good.d)
    for j in range(T.shape[0]):
        ok = np.isfinite(T[j])
        assert g.met[j] == ok.mean() and g.T_mean[j] == T[j][ok].mean()
        n, d, lam = int(smoke.good.n[j]), int(smoke.good.d[j]), float(smoke.good.lam[j])
        assert g.T_over_upper[j] == g.T_mean[j] / regime.reference_time(n, d, lam)
    lo = df[df.set == "lower"].reset_index(drop=True)
    assert np.array_equal(lo.crossing_good, smoke.lower.crossing_good)
    assert np.array_equal(lo.crossing_stationary, smoke.lower.crossing_stationary)
    assert lo.T_mean.isna().all() and g.crossing_good.isna().all()


def test_every_row_threshold_is_rendered_from_parameters_claims(smoke):
    """Each number in a smoke row's pre-set threshold is a value under PARAMETERS["smoke"]["claims"]."""
    from test_claim_specs import numbers_not_from_claims

    assert numbers_not_from_claims(study.claim_rows(smoke), study.PARAMETERS["smoke"]) == []
