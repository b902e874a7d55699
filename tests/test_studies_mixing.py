"""Fits and studies of the mixing time (qlib.supermarket.mixing): power-law fit, drain time
against the fluid limit, the good-set fraction, the slider callback.

Tolerances are 5 standard errors of the run (or a derived concentration bound), at fixed seeds.
"""

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib import stats
from qlib.supermarket import mixing as M

Z = 5.0
LEVELS = 14  # one level count for every small-n run: one compile


def test_fit_power_law_rejects_bad_samples():
    with pytest.raises(ValueError, match="samples"):
        M.fit_power_law([1, 2], [[1.0, np.inf], [2.0, 3.0]])


def test_fit_power_law_recovers_known_exponent():
    x = np.array([1e2, 1e3, 1e4, 1e5])
    exact = 3.0 * x[:, None] ** 1.25 * np.ones((4, 8))
    f = M.fit_power_law(x, exact)
    assert abs(f.exponent - 1.25) < 1e-10 and abs(f.prefactor - 3.0) < 1e-8
    rng = np.random.default_rng(2)
    noisy = 3.0 * x[:, None] ** 1.25 * rng.gamma(25, 1 / 25, size=(4, 16))  # mean-1 noise, 20% sd
    f = M.fit_power_law(x, noisy)
    assert f.ci[0] < 1.25 < f.ci[1] and f.ci[1] - f.ci[0] < 0.1


def test_drain_time_matches_fluid_limit():
    # all queues at k+1 = 3 (d=5, lam=0.9): the excess drains at net rate ~ (1-lam) n
    n, d, lam = 2000, 5, 0.9
    fl = M.fluid_drain_time(d, lam)
    T = M.drain_times(n, d, lam, replicas=8, seed=4) / M.steps_per_time(n, lam)
    est = stats.replica_mean(T)
    frame = 3 * fl / 400
    # 5 SE + one recording frame + 5% for the finite-n (O(1/sqrt n)) correction
    assert abs(est.mean - fl) < Z * est.stderr + frame + 0.05 * fl, (est.mean, fl)
    k = sm.predicted_max_length(d, lam)
    assert est.mean * M.steps_per_time(n, lam) > n * (lam * d) ** (k - 1)  # the lower bound


def test_good_set_fraction_monotone_in_eps():
    g = M.good_set_fraction(200, 3, 0.8, eps=[0.0, 0.05, 0.2, 1.0], windows=3, window_steps=4000,
                            replicas=4, seed=0, record_every=20)
    f = g["frac"]
    assert f.shape == (4, 4, 3)
    assert np.all(np.diff(f, axis=0) >= 0) and np.all(f[-1] == 1.0) and np.all(f[0] == 0.0)


def test_explore_slider_callback():
    x = M.explore(30, 3, 0.9, replicas=16, seed=7, frames=50, levels=LEVELS)
    assert x["k"] == 3 and np.all(np.isfinite(x["T"]))
    # the pair's L1 distance starts at (k+1) customers per queue and reaches 0 once all have met
    assert x["l1"][0] == x["k"] + 1 and x["l1"][-1] == 0.0
    assert np.all(np.diff(x["l1"]) <= 0)
    with pytest.raises(ValueError, match="d must"):
        M.explore(30, 1, 0.9)
