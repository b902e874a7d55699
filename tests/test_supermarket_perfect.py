"""Coupling from the past (qlib.supermarket.perfect) against the exact law of the bounded model.

The G-test's threshold is fixed here, before any run: a sampler passes at p > 1e-3 and the
deliberately biased one (the state at which forward coupling meets, a classic wrong "perfect"
sampler) must fail at p < 1e-3, at the same seeds and sample sizes. The seeds are fixed, so the
test cannot flake.
"""

from __future__ import annotations

import numpy as np
import pytest

from qlib import _rng, stats
from qlib.supermarket import chain as K
from qlib.supermarket import exact_equilibrium, perfect_samples
from qlib.supermarket.exact import exact_stationary
from qlib.supermarket.perfect import coalescence_lower_bound, forward_meeting_states, state_law

P_PASS = 1e-3  # fixed before the runs: pass at p > P_PASS, the biased sampler must give p < P_PASS
SAMPLES = 20_000

# n = 2..6, both sampling rules, light to heavy load, capacities 2..5
POINTS = [(2, 3, 0.95, 5, True), (3, 2, 0.8, 4, True), (4, 2, 0.9, 3, False), (6, 3, 0.7, 2, True)]
# the quick suite runs one point (without replacement: the log-binomial path); make validate all
EXACTNESS = [pytest.param(*p, marks=() if i == 2 else pytest.mark.validation) for i, p in enumerate(POINTS)]


def _g_test(counts: np.ndarray, n: int, d: int, lam: float, L: int, replacement: bool):
    """G-test of the empirical law of count vectors against the exact law of the bounded chain."""
    C, pi = exact_stationary(n, d, lam, L, replacement=replacement)
    return stats.g_test(state_law(counts, C), pi)


@pytest.mark.parametrize("n,d,lam,L,replacement", EXACTNESS)
def test_perfect_samples_follow_the_exact_stationary_law(n, d, lam, L, replacement):
    r = perfect_samples(n, d, lam, capacity=L, replicas=SAMPLES, seed=11, replacement=replacement)
    g = _g_test(r.counts, n, d, lam, L, replacement)
    assert g.p_value > P_PASS, g
    assert np.all(r.coalescence_steps >= coalescence_lower_bound(n, L))
    # the exact loss probability lies within 5 SE of the samples' estimate
    e = exact_equilibrium(n, d, lam, capacity=L, replacement=replacement)
    mean, se = r.loss_probability
    assert abs(mean - e.loss_probability) <= 5 * se + 1e-12


@pytest.mark.parametrize("n,d,lam,L,replacement", [EXACTNESS[1], pytest.param(*POINTS[2])])
def test_the_forward_meeting_state_fails_the_same_test(n, d, lam, L, replacement):
    counts = forward_meeting_states(n, d, lam, capacity=L, replicas=SAMPLES, seed=11, replacement=replacement)
    g = _g_test(counts, n, d, lam, L, replacement)
    assert g.p_value < P_PASS, f"the biased sampler passed: {g}"


def test_bottom_stays_below_top_at_every_step_and_meets_at_the_sample():
    n, d, lam, L, R = 5, 2, 0.85, 4, 64
    r = perfect_samples(n, d, lam, capacity=L, replicas=R, seed=5)
    T = int(r.coalescence_steps.max())
    import jax
    import jax.numpy as jnp

    with jax.enable_x64(True):
        u = np.zeros((2, L + 1, R), np.uint32)
        u[:, 0] = n
        u[1, 1:] = n
        with np.errstate(over="ignore"):
            rng = r.start_states - np.uint64(2 * T) * np.uint64(_rng.GOLDEN)
        p = K.LaneParams(*(jnp.asarray(a) for a in K.lane_params([(n, d, lam)], [R])))
        st = K.ChainState(jnp.asarray(rng), jnp.asarray(u), jnp.zeros(R, jnp.int64))
        step = jax.jit(lambda s: K.step(s, p, True)[0])
        for _ in range(T):
            st = step(st)
            uu = np.asarray(st.u)
            assert np.all(uu[0] <= uu[1])
    # every replica coalesced from its own T <= the largest, so from T too (monotonicity)
    assert np.array_equal(np.asarray(st.u)[0].T.astype(np.int64), r.counts)
    assert np.array_equal(np.asarray(st.u)[1].T.astype(np.int64), r.counts)
    # the words the result reports are the ones the chain consumed at times -1 and 0
    w = r.words(3, [-1, 0])
    s3 = np.uint64(r.start_states[3])
    with np.errstate(over="ignore"):
        want = [_rng.mix64_np(s3 + np.uint64(k % 2**64) * np.uint64(_rng.GOLDEN)) for k in (-3, -2, -1, 0)]
    assert [int(x) for x in w.ravel()] == [int(x) for x in want]


def test_samples_do_not_depend_on_the_replica_count(run_on_devices):
    a = perfect_samples(4, 2, 0.9, capacity=3, replicas=40, seed=9)
    b = perfect_samples(4, 2, 0.9, capacity=3, replicas=7, seed=9)
    assert np.array_equal(a.counts[:7], b.counts)
    assert np.array_equal(a.coalescence_steps[:7], b.coalescence_steps)
    code = """
from qlib.supermarket import perfect_samples
r = perfect_samples(4, 2, 0.9, capacity=3, replicas=40, seed=9)
out = {"counts": r.counts, "T": r.coalescence_steps}
"""
    one, two = run_on_devices(1, code), run_on_devices(2, code)
    assert np.array_equal(one["counts"], a.counts) and np.array_equal(two["counts"], a.counts)
    assert np.array_equal(two["T"], a.coalescence_steps)


def test_a_budget_that_cannot_be_met_is_refused_before_running():
    with pytest.raises(ValueError, match="max_steps = 99 cannot be met.*n L = 100"):
        perfect_samples(25, 2, 0.9, capacity=4, replicas=3, max_steps=99)
    with pytest.raises(ValueError, match="capacity must be an integer"):
        perfect_samples(25, 2, 0.9, capacity=0, replicas=3)
    with pytest.raises(ValueError, match="max_steps = 700: 0 of 3 replicas coalesced from T <= 700"):
        perfect_samples(100, 2, 0.99, capacity=6, replicas=3, max_steps=700, seed=1)


def test_capacity_driver_loses_exactly_the_arrivals_at_a_full_queue():
    """One chain under the driver's bounded mode against plain steps: same counts, and the lost
    arrivals counted are the steps where an arrival touched level L."""
    import jax
    import jax.numpy as jnp

    n, d, lam, L, R, steps = 3, 2, 0.95, 2, 8, 500
    p = K.lane_params([(n, d, lam)], [R])
    u0 = np.zeros((1, L + 1, R), np.uint32)
    u0[0, 0] = n
    rng0 = _rng.replica_states_np(4, np.arange(R))
    drv = K.ChainDriver(u0, rng0, p, replacement=True, levels=L, progress=False, total=steps, desc="",
                        capacity=True)
    drv.run(steps, observe="seen")
    got_u, got_lost = drv.counts(), drv.lost()
    drv.close()
    with jax.enable_x64(True):
        pj = K.LaneParams(*(jnp.asarray(a) for a in p))
        st = K.ChainState(jnp.asarray(rng0), jnp.asarray(u0), jnp.zeros(R, jnp.int64))
        lost = np.zeros(R, np.int64)
        step = jax.jit(lambda s: K.step(s, pj, True))
        for _ in range(steps):
            before = st.overflow
            st, lvl = step(st)
            lost += np.asarray(st.overflow - before)
    assert np.array_equal(got_u, np.asarray(st.u).astype(np.int64))
    assert np.array_equal(got_lost, lost) and lost.sum() > 0


def test_bounded_simulation_matches_the_exact_law_and_a_capacity_off_by_one_does_not():
    """simulate(capacity=L) against exact_equilibrium(capacity=L) within 5 SE at every level and for
    the loss probability; the same run at capacity L - 1 is off by far more than 5 SE."""
    import qlib.supermarket as sm

    n, d, lam, L = 4, 2, 0.9, 3
    e = sm.exact_equilibrium(n, d, lam, capacity=L)
    z = {}
    for cap in (L, L - 1):
        r = sm.simulate(n, d, lam, steps=200_000, burn_in=2_000, replicas=16, seed=1, capacity=cap)
        assert r.capacity == cap and r.levels == cap and r.lost_arrivals.shape == (16,)
        est = stats.replica_mean(r.tail_fraction)
        zt = (est.mean[1:] - e.tail_fraction[1: cap + 1]) / est.stderr[1:]
        loss = stats.replica_mean(r.loss_probability)
        z[cap] = np.r_[zt, (loss.mean - e.loss_probability) / loss.stderr]
    assert np.all(np.abs(z[L]) < 5), z[L]
    assert np.max(np.abs(z[L - 1])) > 5, z[L - 1]
    with pytest.raises(ValueError, match="longer than capacity"):
        sm.simulate(n, d, lam, steps=10, initial=[3, 3, 3, 3], capacity=2)
    with pytest.raises(ValueError, match="capacity"):
        sm.simulate(n, d, lam, steps=10, capacity=0)


def test_a_perfect_start_needs_no_burn_in_and_agrees_with_the_exact_law():
    import qlib.supermarket as sm

    n, d, lam, L = 4, 2, 0.9, 3
    e = sm.exact_equilibrium(n, d, lam, capacity=L)
    r = sm.estimate_equilibrium(n, d, lam, capacity=L, start="perfect", rel_error=0.02, replicas=8, seed=3)
    assert r.burn_in == 0 and r.start == "perfect" and r.burn_in_method.startswith("perfect")
    assert np.all(
        (r.ci_low[1:] <= e.tail_fraction[1 : L + 1])
        | (np.abs(r.tail_fraction[1:] - e.tail_fraction[1 : L + 1]) <= 2 * (r.ci_high[1:] - r.ci_low[1:]))
    )
    with pytest.raises(ValueError, match="start"):
        sm.estimate_equilibrium(n, d, lam, start="fluid")


def test_bounded_meeting_times_close_on_lost_arrivals_too():
    import qlib.supermarket as sm

    T = sm.meeting_times(4, 2, 0.9, replicas=64, seed=1, top_length=3, max_steps=10**6, capacity=3)
    assert np.all(np.isfinite(T)) and np.all(T >= 4 * 3)  # the n L floor
    with pytest.raises(ValueError, match="top_length must be <= capacity"):
        sm.meeting_times(4, 2, 0.9, replicas=4, seed=1, top_length=5, max_steps=10, capacity=3)
