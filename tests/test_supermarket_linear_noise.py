"""The linear-noise view (qlib.supermarket.linear_noise) against the refined mean field, closed
forms, a second method, and simulation.

- it reads the refined mean field's own W and 1/n covariance term (an independent order-1 and
  order-2 call), and tau_fluid is the refined relaxation time;
- d = 1 (n independent M/M/1 queues, linear drift: the view is exact): Var(N) = n lam/(1-lam)^2
  and int rho = (1 + lam)/(1 - lam)^2 (the M/M/1 asymptotic variance 2 lam (1 + lam)/(1 - lam)^4);
- tau_int two ways: the resolvent 2 1^T (-A)^-1 W 1 / 1^T W 1 against 2 x the numerical integral
  of the autocorrelation function n 1^T e^(At) W 1 (expm per lag, adaptive quadrature);
- simulation at two moderate points, k = 2 (n = 500, d = 5, lam = 0.9) and k = 3 (n = 300,
  d = 4, lam = 0.97), 16 replicas x 200 predicted tau_int each (3200 tau_int in all), fixed
  seeds: the refined SD(N) and the predicted tau_int(N) lie inside the run's 95% CIs, and the
  same view at JSQ(d/2) (a wrong model) lies outside both.
- bad input raises ValueError naming the parameter, before anything is computed.
"""

import importlib
import math

import numpy as np
import pytest
from scipy.integrate import quad

import qlib.supermarket as sm
from qlib.supermarket.fluctuations import measure_fluctuations
from qlib.supermarket.refined import refined_mean_field

ln_module = importlib.import_module("qlib.supermarket.linear_noise")  # the module, not the function


@pytest.mark.parametrize("d,lam,n", [(4, 0.97, 300), (10, 0.99, 3000), (2, 0.8, 100)])
def test_reads_the_refined_covariance(d, lam, n):
    ln = sm.linear_noise(n, d, lam)
    r1 = refined_mean_field(d, lam, order=1)
    r2 = refined_mean_field(d, lam, order=2)
    W, B = r1.covariance, r2.covariance2
    assert ln.var_N_lna == pytest.approx(n * W.sum(), rel=1e-12)
    assert ln.var_N == pytest.approx(n * W.sum() + B.sum(), rel=1e-12)
    assert ln.sd_N == pytest.approx(math.sqrt(n * W.sum() + B.sum()), rel=1e-12)
    np.testing.assert_allclose(ln.sd_u_lna**2, n * np.diag(W), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ln.sd_u**2, n * np.diag(W) + np.diag(B), rtol=1e-10, atol=1e-10)
    assert ln.tau_fluid == pytest.approx(sm.relaxation_time(d, lam), rel=1e-12)
    assert ln.tau_fluid_steps == pytest.approx(n * (1 + lam) * ln.tau_fluid, rel=1e-12)
    assert ln.tau_int_steps == pytest.approx(n * (1 + lam) * ln.tau_int, rel=1e-12)
    assert ln.order2_ratio == pytest.approx(abs(B.sum()) / (n * W.sum()), rel=1e-12)


@pytest.mark.parametrize("lam", [0.5, 0.7])
def test_d1_is_mm1_exactly(lam):
    """d = 1: N is a sum of n independent M/M/1 queue lengths."""
    n = 1000
    ln = sm.linear_noise(n, 1, lam)
    assert ln.var_N_lna == pytest.approx(n * lam / (1 - lam) ** 2, rel=1e-9)
    assert ln.var_N == pytest.approx(ln.var_N_lna, rel=1e-9)  # no 1/n term: the drift is linear
    assert ln.tau_int / 2 == pytest.approx((1 + lam) / (1 - lam) ** 2, rel=1e-9)
    # A is tridiagonal Toeplitz on L levels: slowest rate 1 + lam - 2 sqrt(lam) cos(pi/(L+1)), which
    # tends to the M/M/1 gap (1 - sqrt(lam))^2 as L grows
    L = ln.jacobian.shape[0]
    slowest = 1 + lam - 2 * math.sqrt(lam) * math.cos(math.pi / (L + 1))
    assert ln.tau_fluid == pytest.approx(1 / slowest, rel=1e-6)


@pytest.mark.parametrize("d,lam", [(4, 0.97), (10, 0.99), (140, 1 - 7e-4), (2, 0.5)])
def test_tau_int_two_ways(d, lam):
    """The resolvent against 2 int_0^oo rho(t) dt, rho by expm per lag."""
    ln = sm.linear_noise(1000, d, lam)
    assert ln.autocorrelation(0.0) == pytest.approx(1.0, rel=1e-12)
    assert ln.autocovariance(0.0) == pytest.approx(ln.var_N_lna, rel=1e-12)
    T = 60 * ln.tau_fluid  # rho(T) ~ e^-60: the rest of the integral is nothing
    integral, err = quad(lambda t: float(ln.autocorrelation(t)), 0, T, limit=400, epsabs=0, epsrel=1e-10)
    assert 2 * integral == pytest.approx(ln.tau_int, rel=1e-7)
    # and at jump-step lags: the same function
    m = np.array([0.0, ln.tau_int_steps, 3 * ln.tau_int_steps])
    np.testing.assert_allclose(ln.autocorrelation_steps(m), ln.autocorrelation(m / ln.steps_per_time))
    assert np.all(np.diff(ln.autocorrelation(np.linspace(0, 5 * ln.tau_fluid, 20))) < 0)


def test_order1_is_the_leading_term():
    a, b = sm.linear_noise(300, 4, 0.97), sm.linear_noise(300, 4, 0.97, order=1)
    assert b.var_N == b.var_N_lna == pytest.approx(a.var_N_lna, rel=1e-12)
    assert b.tau_int == pytest.approx(a.tau_int, rel=1e-12) and math.isnan(b.order2_ratio)
    with pytest.raises(ValueError, match="order"):
        sm.linear_noise(300, 4, 0.97, order=3)


def test_without_replacement_shares_w():
    a, b = sm.linear_noise(200, 5, 0.9), sm.linear_noise(200, 5, 0.9, with_replacement=False)
    assert a.var_N_lna == b.var_N_lna and a.tau_int == b.tau_int
    assert a.var_N != b.var_N  # the 1/n term carries the without-replacement drift


@pytest.mark.parametrize("kwargs,name", [
    (dict(n=0, d=2, lam=0.5), "n"), (dict(n=2.5, d=2, lam=0.5), "n"), (dict(n=None, d=2, lam=0.5), "n"),
    (dict(n=10, d=0, lam=0.5), "d"), (dict(n=10, d=2, lam=1.0), "lam"),
    (dict(n=10, d=2, lam=float("nan")), "lam"),
    (dict(n=10, d=2, lam=0.5, with_replacement="no"), "with_replacement"),
    (dict(n=3, d=5, lam=0.5, with_replacement=False), "d"),
])
def test_bad_input_named_before_any_compute(kwargs, name, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("computed before validating")
    monkeypatch.setattr(ln_module, "refined_mean_field", boom)
    with pytest.raises(ValueError, match=name):
        sm.linear_noise(**kwargs)


def test_bad_lags():
    ln = sm.linear_noise(100, 2, 0.5)
    for bad in (-1.0, float("nan"), "x"):
        with pytest.raises(ValueError, match="t must be"):
            ln.autocorrelation(bad)


#: (n, d, lam, seed): k = 2 and k = 3; the wrong model is JSQ(d // 2)
SIM_POINTS = [(500, 5, 0.9, 40), (300, 4, 0.97, 41)]


@pytest.mark.parametrize("n,d,lam,seed", SIM_POINTS)
def test_against_simulation(n, d, lam, seed):
    """16 replicas x 200 predicted tau_int (3200 in all; ~40 M and ~100 M replica-steps)."""
    m = measure_fluctuations(n, d, lam, replicas=16, tau_per_replica=200, seed=seed)
    th = m.theory
    assert m.steps * 16 >= 200 * th.tau_int_steps
    lo, hi = m.sd_N.interval(0.95)
    assert lo <= th.sd_N <= hi, (lo, th.sd_N, hi)
    tlo, thi = m.tau_int_steps.interval(0.95)
    assert tlo <= th.tau_int_steps <= thi, (tlo, th.tau_int_steps, thi)
    # a wrong model must fall outside: the same view at JSQ(d // 2)
    wrong = sm.linear_noise(n, d // 2, lam)
    assert not lo <= wrong.sd_N <= hi
    assert not tlo <= wrong.tau_int_steps <= thi


@pytest.mark.parametrize("n,d,lam", [(300, 4, 0.97), (10_000, 39, 0.99), (200_000, 245, 1 - 7e-4)])
def test_slider_view_is_the_api_and_fast(n, d, lam):
    """qlib.supermarket.regime.fluctuation_view (NumPy, no compile) gives linear_noise's numbers, in
    < 250 ms."""
    import time

    from qlib.supermarket.regime import fluctuation_view

    ln = sm.linear_noise(n, d, lam)
    t = time.perf_counter()
    v = fluctuation_view(n, d, lam)
    assert time.perf_counter() - t < 0.25
    for f in ("var_N_lna", "var_N", "tau_int_steps", "tau_fluid_steps"):
        assert getattr(v, f) == pytest.approx(getattr(ln, f), rel=1e-8), f
