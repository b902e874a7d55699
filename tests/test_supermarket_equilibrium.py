"""estimate_equilibrium: certified burn-in, batch means, sequential stopping, against exact oracles.

The oracle is the exact stationary law (``exact_equilibrium``), so every tolerance comes from the
estimate's own 95% CI (widened to about 5 standard errors), at fixed seeds.
"""

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib import stats
from qlib.supermarket.equilibrium import default_level, estimate_equilibrium, estimate_equilibrium_many

WIDEN = 5 / 1.96  # a 95% half-width is ~1.96 SE; compare within ~5 SE


def _within(est_mean, low, high, exact, floor=2e-5):
    half = (high - low) / 2
    return np.abs(est_mean - exact) <= WIDEN * half + floor


@pytest.mark.parametrize("n,d,lam,replacement", [(4, 2, 0.8, True), (5, 2, 0.7, False)])
def test_matches_the_exact_stationary_law(n, d, lam, replacement):
    e = estimate_equilibrium(n, d, lam, rel_error=0.03, seed=1, replacement=replacement)
    ex = sm.exact_equilibrium(n, d, lam, levels=e.levels, replacement=replacement, tol=1e-9)
    # compare where the stationary mass is >= 1e-3: rarer levels are visited in too few batches for
    # a Student-t interval (their batch means are mostly 0); that limit is stated in the docstring
    L = int(np.nonzero(ex.tail_fraction >= 1e-3)[0][-1])
    assert e.converged and e.relative_halfwidth <= 0.03
    assert np.all(
        _within(e.tail_fraction[: L + 1], e.ci_low[: L + 1], e.ci_high[: L + 1], ex.tail_fraction[: L + 1])
    )
    assert np.all(
        _within(
            e.queue_length_distribution[: L + 1],
            e.length_ci_low[: L + 1],
            e.length_ci_high[: L + 1],
            ex.queue_length_distribution[: L + 1],
        )
    )
    m = min(L, ex.max_length_distribution.size - 1)
    assert np.all(_within(e.max_length_distribution[:m + 1], e.max_ci_low[:m + 1], e.max_ci_high[:m + 1],
                          ex.max_length_distribution[:m + 1], floor=1e-3))
    # the CIs are not vacuous: the wrong d is outside them somewhere
    wrong = sm.exact_tail_fraction(n, d + 1, lam, L, replacement=replacement)
    assert not np.all(_within(e.tail_fraction[:L + 1], e.ci_low[:L + 1], e.ci_high[:L + 1], wrong))
    # the record of what was done
    assert e.relaxation_times == pytest.approx(
        e.batches * e.batch_steps / (e.relaxation_time * (1 + lam) * n)
    )
    assert e.burn_in > 0 and ("coupling" in e.burn_in_method or "tau" in e.burn_in_method)


def test_sequential_stops_when_precise_and_is_reproducible():
    a = estimate_equilibrium(4, 2, 0.8, rel_error=0.2, seed=3)
    b = estimate_equilibrium(4, 2, 0.8, rel_error=0.2, seed=3)
    np.testing.assert_array_equal(a.tail_fraction, b.tail_fraction)
    tight = estimate_equilibrium(4, 2, 0.8, rel_error=0.05, seed=3)
    assert a.converged and tight.converged
    assert tight.batches > a.batches and tight.relative_halfwidth <= 0.05
    capped = estimate_equilibrium(4, 2, 0.8, rel_error=0.001, seed=3, max_steps=4 * a.batch_steps)
    assert not capped.converged and capped.batches <= 4


def test_many_points_equal_single_calls():
    pts = [(4, 2, 0.8), (5, 3, 0.7)]
    many = estimate_equilibrium_many(pts, rel_error=0.2, seeds=[7, 8], burn_in="tau")
    for p, s, e in zip(pts, [7, 8], many):
        one = estimate_equilibrium(*p, rel_error=0.2, seed=s, burn_in="tau")
        np.testing.assert_array_equal(one.tail_fraction, e.tail_fraction)
        assert one.batches == e.batches


def test_burn_in_choice_is_recorded():
    tau = estimate_equilibrium(4, 2, 0.8, rel_error=0.2, seed=1, burn_in="tau")
    assert "20 tau" in tau.burn_in_method
    assert tau.burn_in == int(np.ceil(20 * tau.relaxation_time * 1.8 * 4))
    coupled = estimate_equilibrium(4, 2, 0.8, rel_error=0.2, seed=1, burn_in="coupling")
    assert coupled.burn_in_method.startswith("coupling")


def test_burn_in_length_and_per_point_caps():
    e = estimate_equilibrium(4, 2, 0.8, rel_error=0.2, seed=1, burn_in="tau", burn_taus=5.0)
    assert "5 tau" in e.burn_in_method and e.burn_in == int(np.ceil(5 * e.relaxation_time * 1.8 * 4))
    # rel_error 1e-9 is not reached: each point stops at its own cap, in whole batches
    caps = [3, 5]
    many = estimate_equilibrium_many(
        [(4, 2, 0.8), (6, 2, 0.8)],
        rel_error=1e-9,
        seeds=[1, 2],
        burn_in="tau",
        tau=1.0,
        max_steps=[c * int(np.ceil(20 * 1.8 * n)) for c, n in zip(caps, (4, 6))],
    )
    assert [m.batches for m in many] == caps and not any(m.converged for m in many)
    with pytest.raises(ValueError, match="max_steps"):
        estimate_equilibrium_many([(4, 2, 0.8), (6, 2, 0.8)], max_steps=[10, 10, 10])


def test_fixed_batches_and_a_foreign_clock():
    e = estimate_equilibrium_many([(4, 1, 0.8)], batches=3, tau=2.0, seeds=[1])[0]
    assert e.batches == 3 and e.relaxation_time == 2.0
    assert e.batch_steps == int(np.ceil(20 * 2.0 * 1.8 * 4))


def test_default_level_and_bad_input():
    assert default_level(10**5, 100, 0.999) == 3  # k + 1: the fluid puts 4 queues there
    assert default_level(10**4, 300, 0.9) == 1  # k: nothing above
    with pytest.raises(ValueError, match="rel_error"):
        estimate_equilibrium(4, 2, 0.8, rel_error=0.0)
    with pytest.raises(ValueError, match="burn_in"):
        estimate_equilibrium(4, 2, 0.8, burn_in="guess")
    with pytest.raises(ValueError, match="replicas"):
        estimate_equilibrium(4, 2, 0.8, replicas=1)
    with pytest.raises(ValueError, match="lam"):
        estimate_equilibrium(4, 2, 1.2)


def test_a_short_run_from_the_fluid_point_reads_low_and_the_estimate_does_not():
    """At lam = 0.999, d = 100, n = 1000 the tail at length 3 is carried by slow excursions: a run
    started at the fluid fixed point (whose s_3 is 4e-5) and measured for 4.4 relaxation times
    reads it several times too low; the estimate (from empty, 20 tau burn-in, batches of 20 tau)
    does not. The two 95% intervals are disjoint."""
    from qlib.supermarket.theory import steps_per_time

    n, d, lam = 1000, 100, 0.999
    e = sm.estimate_equilibrium(n, d, lam, rel_error=0.25, level=3, seed=1, burn_in="tau")
    assert e.converged and e.relaxation_times >= 40 - 1e-6
    per_tau = sm.relaxation_time(d, lam) * steps_per_time(n, lam)
    short = sm.simulate(n, d, lam, steps=int(4.4 * per_tau), burn_in=int(per_tau), replicas=8, seed=2,
                        initial="fluid")
    st = stats.replica_mean(short.tail_fraction[:, 3])
    lo, hi = st.interval()
    assert hi < e.ci_low[3], (float(st.mean), float(hi), e.ci_low[3], e.tail_fraction[3])
    assert e.tail_fraction[3] > 3 * float(st.mean)


def test_progress_shows_the_precision_target_not_the_step_budget(monkeypatch):
    """issue 20, item 7: the bar counts points toward rel_error (share of the needed batches),
    with the worst relative half-width and the target beside it; it ends at every point done."""
    from qlib.supermarket import equilibrium as EQ

    calls = []

    class Bar:
        def __init__(self, total, **kw):
            self.n, self.total, self.kw = 0.0, total, kw
            calls.append(self)
            self.postfix = []

        def update(self, k):
            self.n += k

        def set_postfix(self, **kw):
            self.postfix.append(kw)

        def close(self):
            pass

    monkeypatch.setattr(EQ._progress, "progress_bar", lambda total, **kw: Bar(total, **kw))
    e = EQ.estimate_equilibrium_many([(30, 3, 0.8), (40, 2, 0.7)], rel_error=0.2, replicas=2, burn_in="tau",
                                     progress=True)
    (bar,) = calls
    assert bar.total == 2 and bar.kw["unit"] == "point"
    assert bar.n == pytest.approx(2.0)
    assert all(p["target"] == "0.2" for p in bar.postfix) and bar.postfix[-1]["worst"] == "done"
    assert all(x.converged for x in e) or bar.postfix[-1]["round"] >= 1


def test_to_dataframe_one_row_per_level():
    """issue 20, item 9."""
    e = sm.estimate_equilibrium(30, 3, 0.8, batches=3, replicas=2, burn_in="tau", progress=False)
    df = e.to_dataframe()
    assert list(df.level) == list(range(e.levels + 1))
    np.testing.assert_array_equal(df.tail_fraction, e.tail_fraction)
    np.testing.assert_array_equal(df.tail_fraction_ci_low, e.ci_low)
    assert (df.n == 30).all() and (df.converged == e.converged).all()
