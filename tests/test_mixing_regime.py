"""The in-regime mixing study (qlib.studies.mixing_regime): its design inside H0-H3, certified
starts, the verdict logic on synthetic meeting times (a wrong model fails it), the smoke run, and
full mode reading only the long tier."""

import dataclasses

import numpy as np
import pytest

from qlib.claims import VERDICTS
from qlib.studies import mixing_regime as mr
from qlib.studies.mixing_regime.claims import CLAIMS, d_sweep_rows, optimal_rows, predicted_rows
from qlib.studies.mixing_regime.compute import RegimePoints
from qlib.supermarket import regime
from qlib.supermarket.mixing_law import predicted_meeting_time
from qlib.supermarket.regime import family_point


def test_the_full_design_is_inside_the_hypotheses():
    P = mr.PARAMETERS["full"]
    C = P["claims"]
    ds = P["d_sweep"]
    lam = 1 - ds["one_minus_lam"]
    assert max(ds["ds"]) / min(ds["ds"]) >= 3
    for d in ds["ds"]:
        assert regime.inside(regime.hypotheses(ds["n"], d, lam, **C["hypotheses"]))
        assert mr.design_holds(ds["n"], d, lam, **C["design"])
    fam = P["family"]
    assert (
        sum(
            regime.inside(regime.hypotheses(*family_point(n, fam["alpha"], fam["beta"]), **C["hypotheses"]))
            for n in fam["ns"]
        )
        >= 3
    )


def test_hypotheses_fail_outside():
    # the old sweep (n = 3000, 1-lam = 1e-3, d = 100): n (1-lam)^2 d = 0.3 < 10, outside H3
    h = regime.hypotheses(3000, 100, 1 - 1e-3, **mr.CLAIM_THRESHOLDS["hypotheses"])
    assert not h["H3"] and not regime.inside(h)
    assert not mr.design_holds(3000, 400, 1 - 1e-3, **mr.CLAIM_THRESHOLDS["design"])  # (1-lam) d = 0.4


def test_certified_samples_burn_three_times_the_largest_meeting_time():
    s = mr.certified_samples(
        (300, 5, 0.9), replicas=4, seed=3, cap=10**7, burn_factor=3.0, record=(2000, 100)
    )
    assert bool(s["certified"]) and np.all(np.isfinite(s["T_bt"]))
    assert int(s["burn"]) == int(np.ceil(3.0 * s["T_bt"].max()))
    assert s["N"].shape == (4, 100) and s["counts"].shape[0] == 4
    assert np.all(s["counts"][:, 0] == 300)


def _points(ds, T, n=200_000, lam=1 - 7e-4):
    T = np.asarray(T, dtype=float)
    P = len(ds)
    z = np.zeros(P)
    return RegimePoints(
        n=np.full(P, n),
        d=np.asarray(ds),
        lam=np.full(P, lam),
        burn=z + 1,
        certified=z == 0,
        iact_steps=z,
        T_bt=T,
        T=T,
        iact_N=T,
        iact_uk=T,
        missing=z != 0,
    )


def _result(sweep, fixed, jsq2, family=None, family_jsq2=None):
    P = mr.PARAMETERS["full"]
    H = P["claims"]["hypotheses"]
    fam = family or _points([2, 2, 2], np.ones((3, 4)))
    return mr.RegimeResult(
        mode="full",
        parameters=P,
        sweep=sweep,
        fixed=fixed,
        family=fam,
        sweep_jsq2=jsq2,
        family_jsq2=family_jsq2 or fam,
        hyp_sweep=[
            regime.hypotheses(int(sweep.n[j]), int(d), float(sweep.lam[j]), **H)
            for j, d in enumerate(sweep.d)
        ],
        hyp_family=[
            regime.hypotheses(int(n), int(d), float(lam), **H) for n, d, lam in zip(fam.n, fam.d, fam.lam)
        ],
    )


@pytest.mark.parametrize("exponent, verdict", [(None, "PASS"), (0.0, "FAIL"), (2.0, "FAIL")])
def test_d_sweep_verdict_fails_a_wrong_exponent(exponent, verdict):
    """Judged against T_pred's own exponent at the design's points (issue 42): T in proportion to
    T_pred passes, a time flat in d or growing as d^2 fails; the row stays a finding while it is
    judged on the pilot data that suggested T_pred, and says its verdict."""
    ds = np.array([140, 245, 428])
    rng = np.random.default_rng(0)
    pred = np.array([predicted_meeting_time(200_000, int(d), 1 - 7e-4).steps for d in ds])
    shape = pred if exponent is None else ds.astype(float) ** exponent
    T = shape[:, None] * 1e6 / shape[0] * np.exp(0.05 * rng.standard_normal((3, 32)))
    flat = 1e8 * np.exp(0.05 * rng.standard_normal((3, 32)))
    row = d_sweep_rows(
        _result(_points(ds, T), _points(ds, flat), _points(ds, np.full((3, 2), np.inf))),
        CLAIMS["d_scaling_regime"],
    )[0]
    assert row.verdict == "finding" and f"it reads {verdict} against it" in row.claim
    assert all(not c.passed for c in row.counterfactuals)  # d held fixed (exponent 0) and JSQ(2) (never met)


def _predicted_result(T, T_half, *, ns=(3000, 10_000, 30_000, 100_000)):
    """A RegimeResult whose predicted family holds meeting times ``T`` (4, R) and JSQ(d/2) ``T_half``."""
    pts = [family_point(int(n), 0.5, 0.4) for n in ns]
    H = mr.PARAMETERS["full"]["claims"]["hypotheses"]

    def at(points, T):
        P = len(points)
        return RegimePoints(
            n=np.array([p[0] for p in points]), d=np.array([p[1] for p in points]),
            lam=np.array([p[2] for p in points]), burn=np.ones(P), certified=np.ones(P, bool),
            iact_steps=np.zeros(P), T_bt=T, T=T, iact_N=T, iact_uk=T, missing=np.zeros(P, bool),
            lag1_N=np.zeros(P),
        )

    ds = np.array([140, 245, 428])
    sw = _points(ds, np.ones((3, 4)))
    base = _result(sw, sw, sw)
    return dataclasses.replace(
        base,
        predicted_family=at(pts, T),
        predicted_family_half=at(pts, T_half),
        hyp_predicted_family=[regime.hypotheses(*p, **H) for p in pts],
    )


@pytest.mark.parametrize("factor, drift, verdict",
                         [(1.0, 0.0, "PASS"), (2.0, 0.0, "FAIL"), (1.0, 0.5, "FAIL")])
def test_predicted_family_row_fails_a_wrong_time(factor, drift, verdict):
    """R = T_meet / T_pred: times at T_pred pass; twice T_pred, or a ratio growing as n^0.5, fail; the
    far wrong models (JSQ(d/2) at half T_pred, the scale 1/(1-lam)) fail it."""
    ns = np.array([3000, 10_000, 30_000, 100_000])
    pred = np.array([predicted_meeting_time(*family_point(int(n), 0.5, 0.4)).steps for n in ns])
    noise = np.exp(0.05 * np.random.default_rng(2).standard_normal((4, 32)))
    T = factor * (ns / ns[0])[:, None] ** drift * pred[:, None] * noise
    result = _predicted_result(T, 0.5 * pred[:, None] * noise[:, :8])
    row = predicted_rows(result, CLAIMS["predicted_family"])[0]
    assert row.verdict == verdict
    far = [c for c in row.counterfactuals if not c.near]
    assert far and all(not c.passed for c in far if "JSQ(d/2)" in c.model or "1/(1-lam)" in c.model)


def test_d_sweep_row_is_inconclusive_when_the_long_tier_lacks_a_point():
    ds = np.array([140, 245, 428])
    m = _points(ds, np.ones((3, 4)))
    m = RegimePoints(**{**m.__dict__, "missing": np.array([False, False, True])})
    row = d_sweep_rows(_result(m, m, m), CLAIMS["d_scaling_regime"])[0]
    assert row.verdict == "INCONCLUSIVE" and "make results-long" in row.measured


def test_nearly_optimal_fails_a_time_that_outgrows_the_upper_bound():
    ns = np.array([3000, 10_000, 30_000, 100_000])
    pts = [family_point(int(n), 0.5, 0.4) for n in ns]
    ref = np.array([mr.relaxation_scale(*p) for p in pts])
    rng = np.random.default_rng(1)
    base = dict(
        n=ns,
        d=np.array([p[1] for p in pts]),
        lam=np.array([p[2] for p in pts]),
        burn=np.ones(4),
        certified=np.ones(4, bool),
        iact_steps=np.ones(4),
        missing=np.zeros(4, bool),
    )
    noise = np.exp(0.05 * rng.standard_normal((4, 16)))
    good = RegimePoints(**base, T_bt=noise, T=2 * ref[:, None] * noise, iact_N=noise, iact_uk=noise)
    bad = RegimePoints(**base, T_bt=noise, T=(ns**0.5 * ref)[:, None] * noise, iact_N=noise, iact_uk=noise)
    ds = np.array([140, 245, 428])
    sw = _points(ds, np.ones((3, 4)))
    ok = optimal_rows(_result(sw, sw, sw, good, bad), CLAIMS["nearly_optimal"])[0]
    assert ok.verdict == "PASS" and not ok.counterfactuals[0].passed


def test_smoke_run_rows():
    r = mr.run("smoke", progress=False)
    rows = mr.claim_rows(r)
    # the iact rows withdrawn (issue 40); issue 42's family row added (k = 3: qlib.studies.k3, issue 46)
    assert len(rows) == 3 and all(x.verdict in VERDICTS for x in rows)
    assert not r.predicted_family.missing.any() and np.all(np.isfinite(r.predicted_family.T))
    assert not r.sweep.missing.any() and np.all(np.isfinite(r.sweep.T))
    df = mr.summary(r)
    assert len(df) == 3 + 3 + 2 and {"T/lower", "T/upper", "tau_N/(n d^(k-1))"} <= set(df.columns)


def test_full_mode_reads_the_long_tier_and_computes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("QLIB_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path / "cache"))
    r = mr.run("full", progress=False)
    assert r.sweep.missing.all() and r.family.missing.all()
    rows = mr.claim_rows(r)
    assert all(x.verdict == "INCONCLUSIVE" and mr.LONG_COMMAND in x.measured for x in rows)
