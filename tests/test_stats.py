"""The error bars themselves: coverage of replica and batch-means intervals."""

import numpy as np
import pytest
from scipy import stats as st
from scipy.signal import lfilter

from qlib import stats


def test_interval_matches_scipy():
    x = np.random.default_rng(0).normal(3, 2, size=30)
    est = stats.replica_mean(x)
    lo, hi = est.interval(0.9)
    ref = st.t.interval(0.9, 29, loc=x.mean(), scale=st.sem(x))
    np.testing.assert_allclose([lo, hi], ref, rtol=1e-12)


def test_replica_interval_coverage():
    rng = np.random.default_rng(1)
    hits = 0
    trials = 2000
    for _ in range(trials):
        lo, hi = stats.replica_mean(rng.exponential(size=20)).interval(0.95)
        hits += lo <= 1.0 <= hi
    # exponential data: t-intervals undercover a little; binomial SE of the rate is 0.005
    assert 0.91 < hits / trials < 0.97


def test_batch_means_coverage_on_ar1():
    rng = np.random.default_rng(2)
    phi, hits, trials = 0.9, 0, 300
    for _ in range(trials):
        e = rng.normal(size=20_000)
        e[0] /= np.sqrt(1 - phi**2)  # start in the stationary law
        x = lfilter([1.0], [1.0, -phi], e)
        lo, hi = stats.batch_means(x, batches=20).interval(0.95)
        hits += lo <= 0.0 <= hi
    assert 0.90 < hits / trials <= 0.99  # correlated data, still honest


def test_bad_arguments():
    with pytest.raises(ValueError, match="replicas"):
        stats.replica_mean(np.ones(1))
    with pytest.raises(ValueError, match="batches"):
        stats.batch_means(np.ones(10), batches=1)
    with pytest.raises(ValueError, match="level"):
        stats.replica_mean(np.ones(3)).interval(1.5)


def test_fit_power_law_rejects_unmet_replicas():
    with pytest.raises(ValueError, match="samples"):
        stats.fit_power_law([1, 2], [[1.0, np.inf], [2.0, 3.0]])


def test_fit_power_law_recovers_known_exponent():
    x = np.array([1e2, 1e3, 1e4, 1e5])
    exact = 3.0 * x[:, None] ** 1.25 * np.ones((4, 8))
    f = stats.fit_power_law(x, exact)
    assert abs(f.exponent - 1.25) < 1e-10 and abs(f.prefactor - 3.0) < 1e-8
    rng = np.random.default_rng(2)
    noisy = 3.0 * x[:, None] ** 1.25 * rng.gamma(25, 1 / 25, size=(4, 16))  # mean-1 noise, 20% sd
    f = stats.fit_power_law(x, noisy)
    assert f.ci[0] < 1.25 < f.ci[1] and f.ci[1] - f.ci[0] < 0.1


def test_g_test_matches_scipy_and_pools_small_cells():
    import scipy.stats

    obs = np.array([30, 52, 18, 0, 0])
    p = np.array([0.3, 0.5, 0.18, 0.015, 0.005])
    g = stats.g_test(obs, p)
    # the last two cells (expected 1.5 and 0.5) are pooled into one
    want = scipy.stats.power_divergence([30, 52, 18, 0], 100 * np.array([0.3, 0.5, 0.18, 0.02]),
                                        lambda_="log-likelihood")
    assert g.cells == 4 and g.dof == 3
    assert abs(g.G - want.statistic) < 1e-9 and abs(g.p_value - want.pvalue) < 1e-9
    assert stats.g_test(np.array([25, 75]), np.array([0.25, 0.75])).G == 0.0
    with pytest.raises(ValueError, match="probability vector"):
        stats.g_test(np.array([1, 2]), np.array([0.5, 0.6]))


def test_wilson_interval_covers_at_its_level():
    rng = np.random.default_rng(0)
    p, n = 0.07, 200
    k = rng.binomial(n, p, size=4000)
    lo, hi = stats.wilson_interval(k, n)
    cover = np.mean((lo <= p) & (p <= hi))
    assert 0.93 < cover < 0.97  # 95% nominal; 4000 trials give SE 0.0034
    lo0, hi0 = stats.wilson_interval(0, 64)
    assert lo0 == 0.0 and 0.04 < hi0 < 0.07  # about 3.8/64 for zero successes


def test_integrated_autocorrelation_time_of_ar1():
    """AR(1) with coefficient phi has tau = (1 + phi) / (1 - phi); white noise has 1."""
    from qlib.stats import integrated_autocorrelation_time

    rng = np.random.default_rng(0)
    for phi in (0.0, 0.5, 0.9):
        e = rng.standard_normal((16, 20_000))
        x = np.zeros_like(e)
        for t in range(1, e.shape[1]):
            x[:, t] = phi * x[:, t - 1] + e[:, t]
        tau = integrated_autocorrelation_time(x)
        exact = (1 + phi) / (1 - phi)
        assert abs(tau.mean() - exact) < 4 * tau.std(ddof=1) / 4 + 0.02 * exact
    with pytest.raises(ValueError, match="series"):
        integrated_autocorrelation_time(np.zeros(10))
