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
from qlib.supermarket.refined import relaxation_time

Z = 5.0


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
        assert eq.fluid_max_length(n, d, lam) == max(i for i in range(41) if n * s[i] >= 0.5)
    # d = 1: geometric tail lam^i
    assert eq.fluid_max_length(1000, 1, 0.5) == max(i for i in range(40) if 1000 * 0.5**i >= 0.5)
    with pytest.raises(ValueError, match="lam"):
        eq.fluid_max_length(100, 2, 1.5)


def test_relaxation_time_mm1():
    # d = 1: the drift is linear (tridiagonal, M/M/1 generator); its slowest rate is
    # (1 - sqrt(lam))^2 as the truncation grows (the M/M/1 spectral gap).
    lam = 0.5
    assert 1.0 / relaxation_time(1, lam) == pytest.approx((1 - math.sqrt(lam)) ** 2, rel=0.05)
    assert relaxation_time(100, 0.999) > relaxation_time(100, 0.99)


def test_run_equilibrium_and_summarize_against_exact():
    n, d, lam = 3, 2, 0.7
    res = eq.run_equilibrium(n, d, lam, time=4000.0, burn_in_time=50.0, replicas=16, seed=3)
    s = eq.summarize(res, 6)
    ex7 = sm.exact_tail_fraction(n, d, lam, 7, tol=1e-11)
    exact = ex7[:7]
    bad = np.abs(s.tail - exact) > Z * s.tail_se + 1e-9
    assert not bad.any(), (s.tail, exact, s.tail_se)
    p_exact = ex7[:7] - ex7[1:]
    assert np.all(np.abs(s.p - p_exact) <= Z * s.p_se + 1e-9)
    assert s.max_dist.sum() <= 1.0 + 1e-12  # cut at level 6; all levels sum to one
    assert eq.summarize(res, res.levels).max_dist.sum() == pytest.approx(1.0)
    assert int(s.modal_max) == int(np.argmax(s.max_dist))
    # the exact maximum law of 3 queues is not concentrated: the mode is >= 2
    assert int(s.modal_max) >= 2


def test_interactive_run_shapes_and_seed():
    a = eq.interactive_run(0.1, 300, 1000, max_steps=2e4, replicas=2, seed=1, progress=False)
    b = eq.interactive_run(0.1, 300, 1000, max_steps=2e4, replicas=2, seed=1, progress=False)
    v = eq.profile_view(0.1, 300, 1000)
    a, b = a.summary, b.summary
    assert a.p.shape == v.fluid.shape
    np.testing.assert_array_equal(a.p, b.p)  # same seed, same numbers
    # k = 1 far from the boundary ((1-lam) d = 30): every queue has length <= 1, max == 1
    assert int(a.modal_max) == 1 == v.k
    assert a.p[0] == pytest.approx(0.1, abs=Z * a.p_se[0] + 0.02)
    with pytest.raises(ValueError, match="max_steps"):
        eq.interactive_run(0.1, 300, 1000, max_steps=0)


def test_max_length_map_tiny_and_cached(monkeypatch):
    kw = dict(one_minus_lam=[0.1, 0.01], d=[300, 10], n=1000, taus=1.0, min_time=2.0, max_time=4.0,
              replicas=2, seed=0, progress=False)
    out = eq.max_length_map(**kw)
    assert out.k.shape == (2, 2)
    assert [[int(x) for x in r] for r in out.k] == [[sm.predicted_max_length(d, 1 - e) for d in (300, 10)]
                                                    for e in (0.1, 0.01)]
    assert out.modal_max[0, 0] == 1  # far from the boundary, large d
    # the cache returns the same arrays without simulating again
    monkeypatch.setattr(eq, "run_equilibrium", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    again = eq.max_length_map(**kw)
    np.testing.assert_array_equal(again.modal_max, out.modal_max)


def test_finite_n_sweep_tiny():
    out = eq.finite_n_sweep(100, 0.999, [1000], level=3, taus=1.0, max_steps=3e5, replicas=2, seed=1,
                            progress=False)
    r = sm.refined_mean_field(100, 0.999)
    assert out.refined[0] == pytest.approx(r.fixed_point[3] + r.correction[3] / 1000)
    assert float(out.fluid) == pytest.approx(0.999 ** ((100**3 - 1) / 99))
    assert out.tail[0] > 10 * float(out.fluid)  # the finite-n effect is huge at n = 1e3


def test_sweep_bad_input():
    with pytest.raises(ValueError, match="one_minus_lam"):
        eq.max_length_map([1.5], [10], 100)
    with pytest.raises(ValueError, match="n must"):
        eq.concentration_sweep(0.75, 0.5, [1])
    with pytest.raises(ValueError, match="time"):
        eq.run_equilibrium(10, 2, 0.5, time=-1.0)


def test_profile_view_figure_runs():
    import matplotlib

    matplotlib.use("Agg")
    from qlib.plots import max_length as P

    v = eq.profile_view(1e-2, 10, 1000)
    run = eq.interactive_run(1e-2, 10, 1000, max_steps=2e4, replicas=2, seed=1, progress=False)
    fig = P.profile_view_figure(v, run)
    assert fig.axes[0].get_yscale() == "log"


def test_study_shape_and_smoke_claim_rows():
    """The study's shape: both modes' parameters in one place, run() -> typed result, claim rows
    from that result. In smoke mode the claims' own runs are the small ones, and still pass."""
    assert set(eq.PARAMETERS) == {"full", "smoke"}
    assert set(eq.PARAMETERS["full"]) == set(eq.PARAMETERS["smoke"])
    with pytest.raises(ValueError, match="mode"):
        eq.run("quick")
    result = eq.run("smoke", progress=False)
    assert isinstance(result, eq.MaxLengthResult) and isinstance(result.map, eq.MapSweep)
    rows = eq.claim_rows(result)
    assert len(rows) >= 9
    assert sum(r.claim.startswith("max queue length concentrates") for r in rows) >= 4
    failed = [(r.claim, r.parameters, r.theory, r.measured) for r in rows if not r.passed]
    assert not failed, failed
