"""qlib.studies.max_length (notebook 01): equilibrium profiles, the slider function, the sweeps,
the study's shape and claim rows.

Oracles: the fluid fixed point and asymptotic formulas (closed forms), the exact small-n
stationary law (``exact_tail_fraction``), the M/M/1 law (d = 1), a brute-force search for the
fluid finite-n maximum. Statistical comparisons use 5 standard errors over replicas at fixed seeds.
"""

import math

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib.studies import max_length as eq
from qlib.supermarket import regime

Z = 5.0
TOL = eq.PARAMETERS["smoke"]["claims"]["profile"]["tolerance"]


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QLIB_FIGURES", str(tmp_path / "figures"))


def test_profile_view_against_closed_forms():
    v = eq.profile_view(1e-3, 200, 10_000)
    lam, d = 1 - 1e-3, 200
    assert v.k == 2 == sm.predicted_max_length(d, lam)
    s = lam ** ((d ** np.arange(v.levels.size + 1) - 1.0) / (d - 1))
    np.testing.assert_allclose(v.fluid, s[:-1] - s[1:], atol=1e-12)
    np.testing.assert_allclose(v.asymptotic[:4], [1e-3, 1e-3 * d, 1 - 1e-3 * d, math.exp(-1e-3 * d**2)])
    assert np.all(np.isnan(v.asymptotic[4:]))
    assert v.refined.sum() == pytest.approx(1.0, abs=1e-9)
    # the refined profile tends to the fluid one as n grows
    far = eq.profile_view(1e-3, 200, 4 * 10**9)
    np.testing.assert_allclose(far.refined, far.fluid, atol=1e-7)
    assert v.boundary_distance == pytest.approx(sm.boundary_distance(d, lam))


@pytest.mark.parametrize("kw,name", [(dict(one_minus_lam=0.0, d=10, n=100), "one_minus_lam"),
                                      (dict(one_minus_lam=0.1, d=1, n=100), "d"),
                                      (dict(one_minus_lam=0.1, d=10, n=0), "n")])
def test_profile_view_bad_input(kw, name):
    with pytest.raises(ValueError, match=name):
        eq.profile_view(**kw)


def test_fluid_max_length_brute_force():
    for n, d, lam in [(10**4, 2, 0.9), (10**4, 1000, 0.9), (10**6, 10, 0.99), (50, 3, 0.5)]:
        s = sm.fluid_fixed_point(d, lam, 40)
        assert regime.fluid_max_length(n, d, lam) == max(i for i in range(41) if n * s[i] >= 0.5)
    # d = 1: geometric tail lam^i
    assert regime.fluid_max_length(1000, 1, 0.5) == max(i for i in range(40) if 1000 * 0.5**i >= 0.5)
    with pytest.raises(ValueError, match="lam"):
        regime.fluid_max_length(100, 2, 1.5)


def test_interactive_run_shapes_seed_and_coverage():
    a = eq.interactive_run(0.1, 300, 1000, max_steps=6e4, replicas=8, seed=1, progress=False)
    b = eq.interactive_run(0.1, 300, 1000, max_steps=6e4, replicas=8, seed=1, progress=False)
    v = eq.profile_view(0.1, 300, 1000)
    assert a.p.shape == v.fluid.shape
    np.testing.assert_array_equal(a.p, b.p)  # same seed, same numbers
    # k = 1 far from the boundary ((1-lam) d = 30): the longest queue has length 1 nearly always
    assert a.max_dist[1] > 0.95 and v.k == 1
    # the idle fraction is 1 - lam = 0.1 exactly in equilibrium: within 5 SE of the run, and a
    # near wrong model (lam 5% higher: 1 - lam = 0.055) fails the same tolerance
    assert a.p[0] == pytest.approx(0.1, abs=Z * a.p_se[0])
    assert abs(a.p[0] - (1 - 0.9 * 1.05)) > Z * a.p_se[0]
    # it says how much it ran: tau = 1 here, so 6e4 steps (3e4 burn-in) are ~16 tau measured
    # (< the 20 tau cap)
    assert a.taus == pytest.approx(3e4 / (v.tau * 1.9 * 1000))
    with pytest.raises(ValueError, match="max_steps"):
        eq.interactive_run(0.1, 300, 1000, max_steps=0)


def test_from_empty_run_approaches_the_fluid_trajectory():
    n, R = 2000, 4
    r = eq.from_empty_run(n, 5, 0.9, taus=3.0, points=30, replicas=R, seed=2)
    assert r.sim.shape == r.fluid.shape and r.t.size == 30
    # the replica mean of u_i/n follows the fluid ODE from empty to 5 SE, SE <= sqrt(1/4)/sqrt(n R)
    # (the sd of a fraction of n queues, at most binomial; measured max deviation 0.019 here)
    tol = Z * 0.5 / np.sqrt(n * R)
    assert np.max(np.abs(r.sim[:, 1:4] - r.fluid[:, 1:4])) < tol
    # the near wrong models d = 4 and d = 6 (their fluid ODEs from empty) fail the same tolerance
    s0 = np.zeros(r.fluid.shape[1])
    s0[0] = 1.0
    for d_wrong in (4, 6):
        wrong = sm.fluid_trajectory(d_wrong, 0.9, r.t, s0)
        assert np.max(np.abs(r.sim[:, 1:4] - wrong[:, 1:4])) > tol, d_wrong


def _fake(max_dist, p=None, n=10**4, d=20, lam=0.998):
    L1 = len(max_dist)
    p = np.zeros(L1) if p is None else np.asarray(p, float)
    z = lambda a: np.asarray(a, float)[None]  # noqa: E731
    return eq.Estimates(n=np.array([n]), d=np.array([d]), lam=np.array([lam]),
                        k=np.array([sm.predicted_max_length(d, lam)]), tail=z(np.zeros(L1)),
                        tail_low=z(np.zeros(L1)), tail_high=z(np.zeros(L1)), p=z(p), p_low=z(p - 0.001),
                        p_high=z(p + 0.001), max_dist=z(max_dist), max_low=z(np.asarray(max_dist) - 0.02),
                        max_high=z(np.asarray(max_dist) + 0.02), taus=np.array([20.0]),
                        burn_taus=np.array([20.0]), replicas=np.array([8]),
                        relative_halfwidth=np.array([0.1]), converged=np.array([True]))


def test_the_criteria_can_fail():
    ok, _, _ = eq.max_verdict(_fake([0, 0, 0, 0.95, 0.05, 0]), 0, 3, 0.9)
    assert ok == "PASS"  # CI 0.93 to 0.97, wholly above 0.9
    bad, _, _ = eq.max_verdict(_fake([0, 0, 0, 0.5, 0.5, 0]), 0, 3, 0.9)
    assert bad == "FAIL"
    unsure, _, _ = eq.max_verdict(_fake([0, 0, 0, 0.91, 0.09, 0]), 0, 3, 0.9)
    assert unsure == "INCONCLUSIVE"  # CI 0.89 to 0.93 straddles 0.9
    fp = sm.fluid_fixed_point(20, 0.998, 4)
    exact = fp[:-1] - fp[1:]
    ok, _, _ = eq.profile_verdict(_fake([0] * 6, np.append(exact, 0)), 0, 20, 0.998, 3, TOL)
    assert ok
    off = np.append(exact, 0) * np.array([1, 1.2, 1, 1, 1])  # length 1 off by 20%
    bad, _, _ = eq.profile_verdict(_fake([0] * 6, off), 0, 20, 0.998, 3, TOL)
    assert not bad


@pytest.fixture(scope="module")
def smoke(fresh_cache):
    return eq.run("smoke", progress=False)


def test_study_shape_and_rows(smoke):
    """Both modes' parameters in one place; run() -> typed result; claim rows from it, each claim
    with a counterfactual and the relaxation times it covers; the idle fraction is an identity."""
    assert set(eq.PARAMETERS) == {"full", "smoke"}
    assert set(eq.PARAMETERS["full"]) == set(eq.PARAMETERS["smoke"])
    with pytest.raises(ValueError, match="mode"):
        eq.run("quick")
    assert isinstance(smoke, eq.MaxLengthResult) and isinstance(smoke.max, eq.Estimates)
    assert smoke.max.n.size == 3 and smoke.max_wrong.n.size == sum(map(len,
                                                                       eq.PARAMETERS["smoke"]["max"]["wrong_d"]))
    rows = eq.claim_rows(smoke)
    claims = [r for r in rows if r.kind == "claim"]
    assert len(claims) >= 6 and all(r.counterfactuals for r in claims)
    assert all(r.taus is None or r.taus >= 10 for r in rows)
    # the identities: the asymptotic formula's error (algebra of the fluid, issue 41) and E[u_1] = lam n
    assert [r.kind for r in rows].count("identity") == 2 and [r.kind for r in rows].count("measurement") == 1
    # smoke runs are tiny, but the identity E[u_1] = lam n holds at any size
    assert [r for r in rows if r.kind == "identity" and "idle" in r.claim][0].passed
    # every run started from empty and burnt in for 20 tau
    assert np.all(smoke.max.burn_taus >= 19.9)
    assert np.all(smoke.sweep.taus >= eq.PARAMETERS["smoke"]["batch_taus"] - 0.1)


def test_claim_rows_run_their_criterion_on_near_wrong_models(smoke):
    """Rows 1-5 run their own criterion on the near wrong models of PARAMETERS["near"] and state
    their resolution; eta-greedy routing (1% of arrivals to a uniform sampled queue) makes queues
    of length 2 at the k = 1 point, so row 1 rejects it at any size."""
    W = eq.PARAMETERS["smoke"]["near"]
    assert list(smoke.max_near) == W["max"] and list(smoke.profile_near) == W["profile"]
    assert list(smoke.sweep_near) == W["sweep"]
    assert all(e.n.size == smoke.max.n.size for e in smoke.max_near.values())
    # each near model runs on the model's clock (the model's tau sizes its steps) with its own d
    assert np.array_equal(smoke.sweep_near["d-1"].d, smoke.sweep.d - 1)
    assert np.allclose(smoke.sweep_near["d-1"].taus, W["batch_taus"] * W["batches"],
                       rtol=0.1)  # the model's tau
    rows = eq.claim_rows(smoke)
    for r in rows[:5]:
        near = [c for c in r.counterfactuals if c.near]
        assert near and r.resolution.startswith("tells apart")
    eta = [c for c in rows[0].counterfactuals if c.near and c.model.startswith("eta-greedy")]
    assert len(eta) == 1 and not eta[0].passed and "eta-greedy" in rows[0].resolution.split(";")[0]
    for r in rows[5:]:  # the rows that run no near model say what their evidence rests on
        if r.kind == "claim":
            assert not any(c.near for c in r.counterfactuals)


def test_figures_draw_from_the_result_even_with_empty_levels(smoke):
    """Every figure of the study draws from the result; a level with no queues (p = -0.0, its CI a
    rounding error below the clipped value of the log axis) must not give negative error bars."""
    import dataclasses

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from qlib.plots import max_length as P

    sw = smoke.sweep
    p, hi = sw.p.copy(), sw.p_high.copy()
    p[:, 3:], hi[:, 3:] = -0.0, 1e-12  # every level above k = 2
    odd = dataclasses.replace(smoke, sweep=dataclasses.replace(sw, p=p, p_high=hi))
    for fig in (P.regime_map_figure(odd), P.profiles_figure(odd), P.concentration_figure(odd),
                P.finite_n_figure(odd)):
        assert fig.axes
        plt.close(fig)


def test_findings_render_from_the_result_and_max_rows_use_the_preset_threshold(smoke):
    md = eq.findings_markdown(smoke)
    assert md.count("\n- ") == 4 and "P(max = k)" in md
    rows = eq.claim_rows(smoke)
    p_min = eq.PARAMETERS["smoke"]["claims"]["max"]["p_min"]
    for r in rows[:3]:
        assert f">= {p_min:g}" in r.threshold
        # outside H1 (c = (1-lam) d^(k-1) > 0.5, e.g. k = 3 at d = 30, 1-lam = 1e-3) a row is a finding
        outside = "outside H1" in r.parameters
        assert r.verdict == "finding" if outside else r.verdict in ("PASS", "FAIL", "INCONCLUSIVE")


def test_long_points_join_from_their_scale(monkeypatch):
    monkeypatch.delenv("QLIB_SCALE", raising=False)
    assert 10_000 not in eq.family_sizes("full")
    assert len(eq.sweep_points("full")) == len(eq.PARAMETERS["full"]["sweep"]["ns"])
    monkeypatch.setenv("QLIB_SCALE", "2")
    assert 10_000 in eq.family_sizes("full")
    assert len(eq.sweep_points("full")) == len(eq.PARAMETERS["full"]["sweep"]["ns"]) + 1


def test_finite_n_design_is_the_default_and_the_long_tier(monkeypatch):
    # n = 1e4 and 1e5 belong to the long tier whatever the scale (computed by make results-long only)
    for s in ("1", "10"):
        monkeypatch.setenv("QLIB_SCALE", s)
        assert eq.finite_n_sizes("full") == [1_000, 3_000, 10_000, 100_000]
    assert eq.finite_n_sizes("smoke") == eq.PARAMETERS["smoke"]["finite_n"]["ns"]


def test_summary_is_the_numbers_of_the_result(smoke):
    """summary(result): one row per max, family and finite-n point, values equal to the result's."""
    df = eq.summary(smoke)
    assert list(df.columns) == list(eq.SUMMARY_COLUMNS)
    by = {s: df[df.set == s].reset_index(drop=True) for s in ("max", "family", "finite_n")}
    assert len(df) == smoke.max.n.size + smoke.family.n.size + smoke.finite_n.n.size
    mx = smoke.max
    for j in range(mx.n.size):
        k = int(mx.k[j])
        row = by["max"].iloc[j]
        assert (row.n, row.d, row.k) == (int(mx.n[j]), int(mx.d[j]), k)
        assert (row.p_max_k, row.p_max_k_low, row.p_max_k_high) == (mx.max_dist[j, k], mx.max_low[j, k],
                                                                    mx.max_high[j, k])
    f = smoke.family
    assert np.array_equal(by["family"].fraction_at_k, [f.p[j, int(f.k[j])] for j in range(f.n.size)])
    fn, fl, lv = smoke.finite_n, float(smoke.refined[0, 0]), eq.PARAMETERS["smoke"]["finite_n"]["level"]
    assert np.allclose(by["finite_n"].tail_over_fluid, fn.tail[:, lv] / fl, rtol=0, atol=0)
    assert np.array_equal(by["finite_n"].refined_order_2, smoke.refined[:, 2] / fl)
    assert by["finite_n"].p_max_k.isna().all() and by["max"].tail_over_fluid.isna().all()


def test_near_models_a_mode_runs_are_the_rows_wrong_models():
    """PARAMETERS[mode]["near"] chooses which of a spec's wrong models a mode runs: never another."""
    for mode in ("smoke", "full"):
        W = eq.PARAMETERS[mode]["near"]
        for tag, key in (("max", "max"), ("profile", "profile"), ("sweep", "most_at_k")):
            assert set(W[tag]) <= set(eq.CLAIMS[key].wrong_models), (mode, tag)
    assert list(eq.PARAMETERS["full"]["near"]["max"]) == [w for w in eq.CLAIMS["max"].wrong_models
                                                          if w not in ("jsq1", "jsq2")]


def test_every_row_threshold_is_rendered_from_parameters_claims(smoke):
    """Each number in a smoke row's pre-set threshold is a value under PARAMETERS["smoke"]["claims"]."""
    from test_claim_specs import numbers_not_from_claims

    assert numbers_not_from_claims(eq.claim_rows(smoke), eq.PARAMETERS["smoke"]) == []
