"""simulate and simulate_many against exact oracles: small-n exact solve, M/M/1 at d = 1,
E[u_1] = lam n, the second identity E[u_2] = lam n E[(u_1/n)^d], the fluid fixed point at
large n; and their bookkeeping (seeds, batches, level growth, trajectories, initial states,
continuation, many points as one kernel), checked exactly.

Tolerances are multiples of the run's own standard error (over replicas), at fixed seeds, so
each test can fail and none flakes: with 5 SE and >= 24 replicas a correct engine fails a
given comparison with probability < 1e-4, and the seeds are fixed.
"""


import numpy as np
import pytest

import qlib.supermarket as sm
from qlib import stats
from qlib.supermarket import chain

Z = 5.0

def assert_within(est: stats.Estimate, exact, *, z=Z, floor=1e-5, what=""):
    # floor: a level of probability < 1e-5 is rarely visited in ~1e6 replica-steps, so its
    # SE is 0 there; the floor is far below every level that carries the claims.
    exact = np.asarray(exact, dtype=float)
    m = min(est.mean.size, exact.size)
    mean, se, ex = est.mean[:m], est.stderr[:m], exact[:m]
    bad = np.abs(mean - ex) > z * se + floor
    assert not bad.any(), (f"{what}: levels {np.nonzero(bad)[0]} off: mean {mean[bad]}, exact {ex[bad]}, "
                           f"se {se[bad]}")


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("n,d,lam", [(2, 2, 0.6), (3, 2, 0.8), (4, 3, 0.7), (3, 3, 0.5)])
def test_matches_exact_small_n(n, d, lam, replacement):
    exact = sm.exact_tail_fraction(n, d, lam, 8, replacement=replacement)
    r = sm.simulate(n, d, lam, steps=120_000, replicas=32, seed=11, burn_in=2_000,
                    replacement=replacement, levels=10)
    est = r.tail_fraction_estimate()
    assert_within(est, exact, what=f"n={n} d={d} lam={lam} replacement={replacement}")
    # long enough to see a 3% error at length 2, the first tail the routing moves (E[u_1] = lam n
    # for every rule): 5 SE < 3% of it
    assert Z * est.stderr[2] < 0.03 * exact[2], (est.stderr[2], exact[2])
    # and the near wrong models JSQ(d - 1), JSQ(d + 1) and lam +- 5% fail the same tolerance
    wrong = [(d + 1, lam)] + ([(d - 1, lam)] if d > 1 else []) + [(d, lam * 1.05), (d, lam * 0.95)]
    for dw, lw in wrong:
        if not replacement and dw > n:
            continue
        other = sm.exact_tail_fraction(n, dw, lw, 8, replacement=replacement)
        assert np.any(np.abs(est.mean[:9] - other) > Z * est.stderr[:9] + 1e-5), (dw, lw)
    # the comparison has teeth: the other sampling mode is distinguishable where they differ
    if not replacement and d <= n:
        other = sm.exact_tail_fraction(n, d, lam, 8, replacement=True)
        assert np.any(np.abs(est.mean[:9] - other) > Z * est.stderr[:9])


def test_d1_is_independent_mm1_queues():
    lam = 0.7
    r = sm.simulate(50, 1, lam, steps=100_000, replicas=24, seed=3, burn_in=20_000, initial="fluid")
    est = r.tail_fraction_estimate()
    assert_within(est, lam ** np.arange(est.mean.size), what="M/M/1")
    # near wrong models: JSQ(2) (its n = oo law, s_i = lam^(2^i - 1)) and lam +- 5%
    i = np.arange(est.mean.size)
    for wrong in (lam ** (2.0**i - 1), (lam * 1.05) ** i, (lam * 0.95) ** i):
        assert np.any(np.abs(est.mean - wrong) > Z * est.stderr + 1e-5)


@pytest.mark.parametrize("n,d,lam,steps", [(1000, 5, 0.9, 400_000), (3, 2, 0.8, 100_000)])
def test_mean_busy_fraction_is_lam(n, d, lam, steps):
    # Little/flow balance: E[u_1] = lam n, any n and d -- and any routing rule, so no d +- 1
    # model can fail it; its near wrong models are lam +- 5%. At n = 3 a departure-rank error
    # moves it by far more than 5 SE (at n = 1000 only by ~1e-3: the exact tests see that one).
    r = sm.simulate(n, d, lam, steps=steps, replicas=24, seed=5, burn_in=steps // 8, initial="fluid")
    est = stats.replica_mean(r.tail_fraction[:, 1])
    assert abs(est.mean - lam) < Z * est.stderr, (est.mean, est.stderr)
    for wrong in (lam * 1.05, lam * 0.95):
        assert abs(est.mean - wrong) > Z * est.stderr


def test_second_identity_from_snapshots():
    # E[u_2] = lam n E[(u_1/n)^d]: both sides from the same run (snapshots every 97 steps).
    n, d, lam = 200, 3, 0.85
    r = sm.simulate(n, d, lam, steps=200_000, replicas=24, seed=6, burn_in=20_000, initial="fluid",
                    record_every=97)
    lhs = r.trajectory[:, :, 2].mean(axis=1) / n
    rhs = lam * ((r.trajectory[:, :, 1] / n) ** d).mean(axis=1)
    est = stats.replica_mean(lhs - rhs)
    assert abs(est.mean) < Z * est.stderr


def test_large_n_stays_at_fluid_fixed_point():
    n, d, lam = 10**6, 10, 0.9
    r = sm.simulate(n, d, lam, steps=2_000_000, replicas=4, seed=7, initial="fluid")
    est = r.tail_fraction_estimate()
    fp = sm.fluid_fixed_point(d, lam, r.levels)
    # 5 SE plus the O(1/n) finite-n bias of the stationary mean (refined mean field), 20/n.
    dev = np.abs(est.mean - fp)
    assert np.all(dev < Z * est.stderr + 20 / n), (est.mean, fp)
    for dw in (d - 1, d + 1):  # near wrong models fail the same tolerance
        assert np.any(np.abs(est.mean - sm.fluid_fixed_point(dw, lam, r.levels)) > Z * est.stderr + 20 / n), (
            dw
        )
    assert np.all(np.abs(r.counts / n - fp) < 1e-2)



def test_same_seed_same_numbers_and_seed_matters():
    kw = dict(steps=20_000, replicas=3, burn_in=100, levels=8)
    a = sm.simulate(20, 3, 0.9, seed=42, **kw)
    b = sm.simulate(20, 3, 0.9, seed=42, **kw)
    c = sm.simulate(20, 3, 0.9, seed=43, **kw)
    for f in ("tail_fraction", "max_length", "counts", "max_length_distribution"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.tail_fraction, c.tail_fraction)


def test_replica_does_not_depend_on_batch_size():
    kw = dict(steps=10_000, seed=9, levels=8)
    one = sm.simulate(30, 2, 0.8, replicas=1, **kw)
    many = sm.simulate(30, 2, 0.8, replicas=7, **kw)
    np.testing.assert_array_equal(one.tail_fraction[0], many.tail_fraction[0])
    np.testing.assert_array_equal(one.counts[0], many.counts[0])
    assert not np.array_equal(many.tail_fraction[0], many.tail_fraction[1])


def test_level_cap_grows_instead_of_truncating():
    kw = dict(steps=30_000, replicas=4, seed=2)
    small = sm.simulate(10, 2, 0.95, levels=2, **kw)  # queues pass length 2 almost at once
    big = sm.simulate(10, 2, 0.95, levels=40, **kw)
    assert small.levels > 2
    m = small.levels + 1
    np.testing.assert_array_equal(small.tail_fraction, big.tail_fraction[:, :m])
    assert np.all(big.tail_fraction[:, m:] == 0)
    np.testing.assert_array_equal(small.max_length, big.max_length)


def test_batches_average_to_the_whole_run():
    r = sm.simulate(40, 3, 0.9, steps=30_000, replicas=2, seed=4, batches=6, levels=8)
    np.testing.assert_allclose(r.batch_tail_fraction.mean(axis=1), r.tail_fraction, rtol=1e-12)
    single = sm.simulate(40, 3, 0.9, steps=30_000, replicas=1, seed=4, batches=6, levels=8)
    est = single.tail_fraction_estimate()  # batch means for one replica
    assert est.dof == 5


def test_max_length_and_its_distribution_agree_with_trajectory():
    r = sm.simulate(25, 2, 0.9, steps=1_500, replicas=3, seed=8, record_every=1, levels=12)
    traj = r.trajectory  # (R, steps, L+1): the state after every step
    current_max = (traj[:, :, 1:] > 0).sum(axis=2)
    np.testing.assert_array_equal(r.max_length, current_max.max(axis=1))
    for i in range(r.levels + 1):
        np.testing.assert_allclose(
            r.max_length_distribution[:, i], (current_max == i).mean(axis=1), atol=1e-12
        )
    np.testing.assert_allclose(r.tail_fraction, traj.mean(axis=1) / r.n, rtol=1e-12)
    np.testing.assert_array_equal(r.counts, traj[:, -1])


def test_initial_states():
    n = 6
    q = np.array([0, 3, 1, 1, 0, 2])
    u = sm.counts_from_lengths(q)
    np.testing.assert_array_equal(u, [6, 4, 2, 1])
    a = sm.simulate(n, 2, 0.7, steps=2_000, initial=q, seed=1, levels=8)
    b = sm.simulate(n, 2, 0.7, steps=2_000, initial={"counts": u}, seed=1, levels=8)
    np.testing.assert_array_equal(a.tail_fraction, b.tail_fraction)
    np.testing.assert_array_equal(sm.counts_all_at(4, 2), [4, 4, 4])
    fluid = sm.initial_counts(10**5, 10, 0.95, "fluid")
    np.testing.assert_array_equal(fluid, np.rint(10**5 * sm.fluid_fixed_point(10, 0.95, fluid.size - 1)))
    with pytest.raises(ValueError, match="ambiguous"):
        sm.initial_counts(3, 2, 0.5, [3, 2, 1])  # counts of (3 >= 0, 2 >= 1, 1 >= 2) or lengths 3, 2, 1


def _step_moves(u, n, d, lam, replacement=True):
    """Per level i >= 1, the probabilities that one step raises u_i (an arrival joins length
    i - 1) and lowers it (a departure from length i), from the state u (levels 0..L)."""
    from math import comb

    m = len(u)  # levels 1..m: one above the start's top
    u = [int(x) for x in u] + [0, 0]
    p = lam / (1 + lam)
    g = (lambda x: (x / n) ** d) if replacement else (lambda x: comb(x, d) / comb(n, d) if x >= d else 0.0)
    up = np.array([p * (g(u[i - 1]) - g(u[i])) for i in range(1, m + 1)])
    down = np.array([(1 - p) * (u[i] - u[i + 1]) / n for i in range(1, m + 1)])
    return up, down


def test_huge_n_runs_and_keeps_exact_counts():
    # n = 1e9: 2e5 steps move the state by at most 2e-4 of n, so the per-step move
    # probabilities stay those of the start and the count changes are sums of i.i.d. steps:
    # each level's mean change over the replicas must be T (up - down) to 5 SE, and the near
    # wrong models (d + 1; lam 5% higher) must miss by more than that.
    n, d, lam, T, R = 10**9, 2, 0.9, 200_000, 4
    u0 = np.array([n, 8 * n // 10, n // 2, n // 5])
    r = sm.simulate(n, d, lam, steps=T, replicas=R, seed=1, initial={"counts": u0})
    assert r.counts[:, 0].tolist() == [n] * R
    assert np.all(np.diff(r.counts, axis=1) <= 0) and np.all(r.counts >= 0)
    top = np.pad(r.counts, ((0, 0), (0, max(0, u0.size + 1 - r.counts.shape[1]))))
    delta = (top[:, 1:u0.size + 1] - np.pad(u0, (0, 1))[1:]).mean(axis=0)
    up, down = _step_moves(u0, n, d, lam)
    se = np.sqrt(T * (up + down - (up - down) ** 2) / R)
    expect = T * (up - down)
    assert np.all(np.abs(delta - expect) < Z * se), (delta, expect, se)
    for wrong in (_step_moves(u0, n, d + 1, lam), _step_moves(u0, n, d, lam * 1.05)):
        assert np.any(np.abs(delta - T * (wrong[0] - wrong[1])) > Z * se)


BAD = [
    (dict(lam=0.0), "lam"), (dict(lam=1.0), "lam"), (dict(lam=1.5), "lam"), (dict(lam=-0.1), "lam"),
    (dict(lam=float("nan")), "lam"), (dict(lam=float("inf")), "lam"),
    (dict(d=0), "d"), (dict(d=-1), "d"), (dict(d=2.5), "d"), (dict(d=float("nan")), "d"),
    (dict(n=0), "n"), (dict(n=-5), "n"), (dict(n=float("nan")), "n"), (dict(n=2**33), "n"),
    (dict(steps=0), "steps"), (dict(steps=-1), "steps"), (dict(steps=1.5), "steps"),
    (dict(burn_in=-1), "burn_in"), (dict(replicas=0), "replicas"), (dict(seed=-1), "seed"),
    (dict(initial=np.zeros((2, 2, 2))), "initial"), (dict(initial="full"), "initial"),
    (dict(initial=[5, 6]), "initial"), (dict(n=3, d=5, replacement=False), "d"),
    (dict(replacement="no"), "replacement"), (dict(batches=0), "batches"),
]


@pytest.mark.parametrize("bad,name", BAD)
def test_bad_input_raises_before_compile(bad, name, monkeypatch):
    def no_compile(*a, **k):
        raise AssertionError("reached the jitted kernel")

    monkeypatch.setattr(chain, "_advance_fn", no_compile)
    kw = dict(n=10, d=2, lam=0.5, steps=100) | bad
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        sm.simulate(kw.pop("n"), kw.pop("d"), kw.pop("lam"), **kw)




# --------------------------------------------------------------------------- many points, continuation

RESULT_FIELDS = ("tail_fraction", "max_length", "max_length_distribution", "counts", "batch_tail_fraction",
                 "state", "trajectory")


def _same_result(a, b, what=""):
    for f in RESULT_FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if x is None or y is None:
            assert x is None and y is None, (what, f)
            continue
        assert x.dtype == y.dtype, (what, f)
        np.testing.assert_array_equal(x, y, err_msg=f"{what}: {f}")
    for f in ("n", "d", "lam", "steps", "burn_in", "seed", "replacement", "record_every", "levels"):
        assert getattr(a, f) == getattr(b, f), (what, f)


def test_burn_in_kernel_choice_changes_no_bit(monkeypatch):
    """A burn-in runs its own "seen" kernel when long, the measuring kernel when short
    (simulation.BURN_IN_KERNEL_WORK): the observer never touches the chain, so the two give the
    same result, bit for bit, also when the level cap grows during the burn-in."""
    from qlib.supermarket import simulation

    kw = dict(steps=3000, burn_in=4000, seed=3, replicas=3, batches=2, record_every=500, levels=2)
    calls = []
    run = chain.ChainDriver.run
    monkeypatch.setattr(
        chain.ChainDriver, "run", lambda self, *a, **k: calls.append(k.get("observe")) or run(self, *a, **k)
    )
    results = []
    for work in (0, 2**62):
        monkeypatch.setattr(simulation, "BURN_IN_KERNEL_WORK", work)
        calls.clear()
        results.append(sm.simulate(30, 3, 0.9, **kw))
        assert ("seen" in calls) == (work == 0), calls
    assert results[0].levels > 2  # the cap grew, within the burn-in already:
    assert sm.simulate(30, 3, 0.9, steps=1, burn_in=4000, seed=3, replicas=3, levels=2).levels > 2
    _same_result(results[0], results[1], "seen vs sums burn-in")


@pytest.mark.parametrize("replacement", [True, False])
def test_simulate_many_is_a_loop_of_simulate_calls(replacement):
    # different n, d, lam, run lengths and burn-ins; one point needs more levels than the others
    points = [(40, 3, 0.9), (25, 2, 0.8), (1000, 10, 0.95), (12, 4, 0.97)]
    steps, burn, seeds = [3000, 800, 2000, 5000], [100, 0, 500, 0], [4, 5, 6, 7]
    inits = ["fluid", "empty", {"counts": [1000, 900, 400]}, "empty"]
    kw = dict(replicas=3, batches=2, record_every=100, replacement=replacement)
    many = sm.simulate_many(points, steps=steps, burn_in=burn, seeds=seeds, initial=inits, **kw)
    assert len({r.levels for r in many}) > 1  # each point keeps its own level cap
    for j, p in enumerate(points):
        single = sm.simulate(*p, steps=steps[j], burn_in=burn[j], seed=seeds[j], initial=inits[j], **kw)
        _same_result(many[j], single, f"point {j}")
    # defaults: seeds 0, 1, ...; one initial state and one step count for all points
    many = sm.simulate_many(points[:2], steps=500, replicas=2, replacement=replacement)
    for j, p in enumerate(points[:2]):
        _same_result(many[j], sm.simulate(*p, steps=500, replicas=2, seed=j, replacement=replacement))


def test_simulate_many_validates_before_compile(monkeypatch):
    def no_compile(*a, **k):
        raise AssertionError("reached the jitted kernel")

    monkeypatch.setattr(chain, "_advance_fn", no_compile)
    ok = [(10, 2, 0.5), (20, 3, 0.7)]
    for kw, name in [(dict(points=[]), "points"), (dict(points=[(10, 2)]), r"points\[0\]"),
                     (dict(points=[(10, 2, 1.5)]), r"points\[0\].*lam"), (dict(steps=[10]), "steps"),
                     (dict(steps=[10, 0]), r"steps\[1\]"), (dict(seeds=[1]), "seeds"),
                     (dict(burn_in=[0, -1]), r"burn_in\[1\]"), (dict(initial=["empty", "full"]), "initial"),
                     (dict(replicas=0), "replicas"), (dict(batches=20), "batches")]:
        args = dict(points=ok, steps=10) | kw
        with pytest.raises(ValueError, match=name):
            sm.simulate_many(args.pop("points"), **args)


def test_continuing_a_run_is_exact():
    kw = dict(replicas=4, batches=3)
    a = sm.simulate(40, 3, 0.95, steps=3000, seed=2, levels=5, **kw)
    b = sm.simulate(40, 3, 0.95, steps=3000, initial=a, **kw)
    whole = sm.simulate(40, 3, 0.95, steps=6000, seed=2, batches=6, replicas=4)
    L = max(a.levels, b.levels, whole.levels) + 1
    pad = lambda x: np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, L - x.shape[-1])])  # noqa: E731
    # the same chains: final counts and random states as one run of 2T steps
    np.testing.assert_array_equal(pad(b.counts), pad(whole.counts))
    np.testing.assert_array_equal(b.state, whole.state)
    assert b.seed == 2
    # time averages combine into the whole (weights: the steps of each part)
    np.testing.assert_allclose((pad(a.tail_fraction) + pad(b.tail_fraction)) / 2, pad(whole.tail_fraction),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose((pad(a.max_length_distribution) + pad(b.max_length_distribution)) / 2,
                               pad(whole.max_length_distribution), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(
        np.concatenate([pad(a.batch_tail_fraction), pad(b.batch_tail_fraction)], axis=1),
        pad(whole.batch_tail_fraction),
        rtol=1e-13,
        atol=1e-15,
    )
    np.testing.assert_array_equal(np.maximum(a.max_length, b.max_length), whole.max_length)
    # and a continued grid point is its own continued call
    many = sm.simulate_many(
        [(40, 3, 0.95), (30, 2, 0.8)], steps=3000, initial=[a, "empty"], seeds=[2, 9], **kw
    )
    _same_result(many[0], b, "continued point")
    for bad, name in [
        (dict(n=41), "n"),
        (dict(d=2), "d"),
        (dict(lam=0.9), "lam"),
        (dict(replicas=3), "replicas"),
        (dict(replacement=False), "replacement"),
        (dict(seed=3), "seed"),
    ]:
        args = dict(n=40, d=3, lam=0.95, steps=10, replicas=4) | bad
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            sm.simulate(args.pop("n"), args.pop("d"), args.pop("lam"), initial=a, **args)


# --------------------------------------------------------------------------- the extremes (issue 13)

def _valid_counts(u, n):
    u = np.asarray(u)
    return bool(
        np.all(u[..., 0] == n) and np.all(u >= 0) and np.all(u <= n) and np.all(np.diff(u, axis=-1) <= 0)
    )


def test_huge_d_never_puts_a_customer_above_n():
    # The case: old kernel ended with u_1 = 11 > n = 10 and tail_fraction[1] = 1.08.
    r = sm.simulate(10, 10**18, 0.99, steps=200_000, replicas=4, seed=1, initial=[10, 10])
    assert _valid_counts(r.counts, 10) and r.tail_fraction.max() <= 1.0
    # d = oo in effect: every arrival joins a shortest queue (length m = #{i >= 1: u_i = n}),
    # i.e. the count that grows is u_{m+1}
    t = sm.simulate(
        10, 10**18, 0.99, steps=3000, replicas=2, seed=3, initial=[10, 10], record_every=1
    ).trajectory
    before, after = t[:, :-1], t[:, 1:]
    arrivals = after.sum(axis=-1) > before.sum(axis=-1)
    m = (before[..., 1:] == 10).sum(axis=-1)
    grown = np.argmax(after - before, axis=-1)
    assert arrivals.sum() > 1000 and np.all(grown[arrivals] == m[arrivals] + 1)


@pytest.mark.parametrize("n,d,replacement", [(2**32 - 1, 10**9, True), (2**32 - 1, 10**18, True),
                                             (2**32 - 1, 10**9, False), (3 * 10**9, 7, False),
                                             (2**32 - 1, 2**63 - 1, True)])
def test_counts_stay_in_zero_n_at_the_extremes(n, d, replacement):
    # from all queues busy (the state where a wrong arrival level lands above n), with lam
    # close to 1 so that arrivals into a full level are frequent; every recorded state valid
    r = sm.simulate(n, d, one_minus_lam=1e-3, steps=20_000, replicas=4, seed=2, initial=[n, n, n // 2],
                    replacement=replacement, record_every=50)
    assert _valid_counts(r.trajectory, n) and _valid_counts(r.counts, n)
    assert np.all(r.tail_fraction <= 1.0)
    # the dynamics, not only the range: nearly every queue stays busy (u_1 ~ n), so every
    # departure is real and the customers change by (#arrivals - #departures), mean T (2p - 1)
    # per replica; lam 5% lower must miss by more than 5 SE
    T, R = 20_000, 4
    u0 = np.array([n, n, n // 2])
    change = (r.counts[:, 1:].sum(axis=1) - u0[1:].sum()).astype(float)
    p = (1 - 1e-3) / (2 - 1e-3)
    se = np.sqrt(T * (1 - (2 * p - 1) ** 2) / R)
    assert abs(change.mean() - T * (2 * p - 1)) < Z * se, change
    p_wrong = 0.95 * (1 - 1e-3) / (1 + 0.95 * (1 - 1e-3))
    assert abs(change.mean() - T * (2 * p_wrong - 1)) > Z * se
    # an arrival joins a queue of length 2 with probability g(u_2) ~ 2^-d: never at d >= 1e9,
    # about 1/128 of arrivals at d = 7 (d +- 1 doubles or halves it)
    u3 = r.counts[:, 3].sum() if r.counts.shape[1] > 3 else 0
    if d >= 10**9:
        assert u3 == 0
    else:
        rate = lambda dd: R * T * p * 2.0**-dd  # noqa: E731  # expected u_3 at the end (its departures are few)
        assert abs(u3 - rate(d)) < Z * np.sqrt(rate(d)) + 0.05 * rate(d), (u3, rate(d))
        assert all(abs(u3 - rate(dd)) > Z * np.sqrt(rate(d)) for dd in (d - 1, d + 1))


def test_lam_resolution_and_largest_d_are_checked(monkeypatch):
    def no_compile(*a, **k):
        raise AssertionError("reached the jitted kernel")

    monkeypatch.setattr(chain, "_advance_fn", no_compile)
    for kw, name in [
        (dict(lam=1e-14), "lam"),
        (dict(lam=1 - 2**-50), "lam"),
        (dict(one_minus_lam=1e-14), "one_minus_lam"),
        (dict(lam=0.5, one_minus_lam=0.5), "lam"),
        (dict(), "lam"),
        (dict(lam=0.5, d=10**400), "d"),
        (dict(lam=0.5, d=2**63), "d"),
        (dict(one_minus_lam=-0.1), "one_minus_lam"),
    ]:
        kw = dict(d=2) | kw
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            sm.simulate(10, kw.pop("d"), steps=10, **kw)
    # one_minus_lam given both ways is the same chain when the float lam holds it exactly
    monkeypatch.undo()
    a = sm.simulate(30, 3, 0.75, steps=3000, replicas=2, seed=4)
    b = sm.simulate(30, 3, one_minus_lam=0.25, steps=3000, replicas=2, seed=4)
    np.testing.assert_array_equal(a.tail_fraction, b.tail_fraction)
    assert b.one_minus_lam == 0.25 and b.lam == 0.75


def test_d1_near_lam_1_has_a_level_cap_bounded_by_the_steps():
    # old: the cap followed log(1e-3)/log(lam): 6.9 million levels at 1 - lam = 1e-6 (122 s for
    # 2000 steps) and a MemoryError at 1e-9. A queue cannot grow by more than one per step.
    u0 = sm.initial_counts(10, 1, None, "empty", one_minus_lam=1e-6)
    assert sm.simulation.default_levels(1, None, u0, 2000, one_minus_lam=1e-6) <= 2 + 2000
    for eps in (1e-6, 1e-9):
        r = sm.simulate(10, 1, one_minus_lam=eps, steps=2000, replicas=2, seed=1)
        assert r.levels <= 2 + 2000 and _valid_counts(r.counts, 10)


def test_runs_that_cannot_fit_or_finish_are_refused_before_compile(monkeypatch):
    from qlib import _validate

    def no_compile(*a, **k):
        raise AssertionError("reached the jitted kernel")

    monkeypatch.setattr(chain, "_advance_fn", no_compile)
    with pytest.raises(ValueError, match=r"\bsteps\b.*years"):
        sm.simulate(10, 2, 0.5, steps=2**70)
    # the fluid start at d = 1 has log(2n)/(1 - lam) levels: 7.6e9 here (old: a MemoryError)
    with pytest.raises(ValueError, match=r"\binitial\b.*GiB"):
        sm.simulate(1000, 1, one_minus_lam=1e-9, steps=10, initial="fluid")
    # 50 batches x 10^6 replicas on a machine with 4 GiB: refused before the run (old: a
    # MemoryError after minutes)
    monkeypatch.setattr(_validate, "available_memory", lambda: 4 * 2**30)
    with pytest.raises(ValueError, match=r"\bbatches\b.*GiB"):
        sm.simulate(1000, 10, 0.95, steps=100, replicas=10**6, batches=50)
    with pytest.raises(ValueError, match=r"\brecord_every\b.*GiB"):
        sm.simulate(1000, 10, 0.95, steps=10**5, replicas=10**4, record_every=1)


def test_level_growth_is_checked_against_memory(monkeypatch):
    from qlib import _validate

    # n = 10, lam = 0.95 from a cap of 2: the first growth (to 6 levels) needs more than the
    # (pretended) memory left, so the run stops with a ValueError naming levels
    per_level = sm.simulation._bytes_per_level(4, 1, 0, False)[0]
    monkeypatch.setattr(_validate, "available_memory", lambda: int(4 * per_level))
    with pytest.raises(ValueError, match=r"\blevels\b.*grows to 6"):
        sm.simulate(10, 2, 0.95, steps=30_000, replicas=4, seed=2, levels=2)


def test_to_dataframe_is_tidy():
    """issue 20, item 9: one row per (replica, level), the point's parameters as columns."""
    r = sm.simulate(50, 3, 0.9, steps=5000, replicas=3, seed=2)
    df = r.to_dataframe()
    assert len(df) == r.replicas * (r.levels + 1)
    assert set(df[["n", "d", "lam", "replacement"]].drop_duplicates().itertuples(index=False)) == {
        (50, 3, 0.9, True)
    }
    row = df[(df.replica == 1) & (df.level == 2)].iloc[0]
    assert row.tail_fraction == r.tail_fraction[1, 2] and row.counts == r.counts[1, 2]
    assert row.max_length_probability == r.max_length_distribution[1, 2]
    np.testing.assert_allclose(df.groupby("replica").queue_length_fraction.sum(), 1.0)


@pytest.mark.parametrize("every,burn,batches", [(1, 0, 1), (3, 7, 2), (5, 10, 3)])
def test_trajectory_is_the_counts_of_the_continued_chain(every, burn, batches):
    """issue 20, item 8: frames recorded inside the kernel are the counts a step-by-step
    continuation reaches, bit for bit (burn-in, batch ends and level growth in between)."""
    steps = 30 * every
    r = sm.simulate(20, 2, 0.95, steps=steps, burn_in=burn, replicas=3, seed=4, record_every=every,
                    batches=batches, levels=2)
    plain = sm.simulate(20, 2, 0.95, steps=steps, burn_in=burn, replicas=3, seed=4, batches=batches, levels=2)
    np.testing.assert_array_equal(r.tail_fraction, plain.tail_fraction)
    np.testing.assert_array_equal(r.batch_tail_fraction, plain.batch_tail_fraction)
    np.testing.assert_array_equal(r.counts, plain.counts)
    cur = sm.simulate(20, 2, 0.95, steps=burn, replicas=3, seed=4) if burn else None
    for f in range(r.trajectory.shape[1]):
        cur = sm.simulate(20, 2, 0.95, steps=every, replicas=3, **({"initial": cur} if cur else {"seed": 4}))
        L = min(cur.counts.shape[1], r.trajectory.shape[2])
        np.testing.assert_array_equal(r.trajectory[:, f, :L], cur.counts[:, :L])
        assert not r.trajectory[:, f, L:].any() and not cur.counts[:, L:].any()


def test_trajectories_of_points_with_different_burn_ins():
    """Points whose record points do not line up still each match their own simulate call."""
    pts = [(20, 2, 0.9), (30, 3, 0.8)]
    many = sm.simulate_many(pts, steps=[40, 60], burn_in=[3, 10], replicas=2, seeds=[1, 2], record_every=4)
    for p, st, bi, sd, m in zip(pts, [40, 60], [3, 10], [1, 2], many):
        one = sm.simulate(*p, steps=st, burn_in=bi, replicas=2, seed=sd, record_every=4)
        np.testing.assert_array_equal(m.trajectory, one.trajectory)
