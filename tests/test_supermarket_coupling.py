"""The monotone coupling and the mixing-time estimators against exact oracles.

Oracles: the exact pair chain for n <= 3 (meeting-time law and marginal laws, built from the
chain's level rule with exact interval lengths), the exact stationary law
(exact_tail_fraction), simulate, and identities (order, sandwich, L1 of
counts = L1 of sorted lengths). Tolerances are 5 standard errors of the run (or a derived
concentration bound), at fixed seeds.
"""

import math

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib import stats
from qlib.supermarket import counts_all_at, counts_from_lengths
from qlib.supermarket import coupling as C

Z = 5.0
LEVELS = 14  # one level count for every small-n run: one compile


def _mcdiarmid(size: int, delta: float = 1e-7) -> float:
    # the empirical TV moves by <= 1/size per sample: P(dev > t) <= exp(-2 t^2 size)
    return math.sqrt(math.log(1 / delta) / (2 * size))


# --------------------------------------------------------------------------- exact meeting law

@pytest.mark.parametrize(
    "n,d,lam,top,replacement,R", [(3, 2, 0.6, 3, True, 4000), (2, 2, 0.6, 3, False, 1000)]
)
def test_meeting_time_law_matches_exact_pair_chain(n, d, lam, top, replacement, R):
    # cap 8: arrivals beyond length 8 are lost in the oracle; this moves E[T] by < 0.1 here
    # (cap 10 gives 51.09 against 51.01), far below 5 SE of the simulated mean (~3).
    ex = C.exact_coupling(n, d, lam, bottom=[n], top=counts_all_at(n, top), steps=400, cap=8,
                          replacement=replacement)
    T = C.meeting_times(n, d, lam, replicas=R, seed=3, top_length=top, max_steps=10**6, levels=LEVELS,
                        replacement=replacement)
    assert np.all(np.isfinite(T))
    se = T.std(ddof=1) / math.sqrt(R)
    assert abs(T.mean() - ex.mean) < Z * se, (T.mean(), ex.mean, se)
    for t in (10, 30, 60, 120, 250):
        p = ex.survival[t]
        assert abs(np.mean(T > t) - p) < Z * math.sqrt(p * (1 - p) / R) + 1e-3, t
    # teeth: a different lam gives a distinguishable mean
    other = C.exact_coupling(n, d, lam - 0.2, bottom=[n], top=counts_all_at(n, top), steps=0, cap=7,
                             replacement=replacement)
    assert abs(T.mean() - other.mean) > Z * se


def test_marginal_laws_and_tv_match_exact():
    n, d, lam, top, R = 3, 2, 0.6, 3, 4000
    ex = C.exact_coupling(n, d, lam, bottom=[n], top=counts_all_at(n, top), steps=64, cap=8)
    p = C.coupled_paths(n, d, lam, ["empty", counts_all_at(n, top)], steps=64, replicas=R, seed=5,
                        record_every=4, levels=LEVELS)
    # exact stationary law of u_1 (number of busy queues) from the exact CTMC solve
    counts, pi = sm.exact_stationary(n, d, lam, 12)
    pi_u1 = np.bincount(counts[:, 1], weights=pi, minlength=n + 1)
    for f, t in enumerate(p.times):
        for c, law in ((0, ex.bottom_law[t]), (1, ex.top_law[t])):
            emp = np.bincount(p.counts[c, :, f, 1], minlength=n + 1) / R
            assert np.all(np.abs(emp - law) < Z * np.sqrt(law * (1 - law) / R) + 1e-3), (t, c, emp, law)
        # the TV estimator against the exact TV of the top chain's u_1 law at step t
        exact_tv = 0.5 * np.abs(ex.top_law[t] - pi_u1).sum()
        est = C.tv_distance(p.counts[1, :, f, 1], pi_u1, reference_is_pmf=True)
        tol = C.tv_noise_floor(ex.top_law[t], R) + _mcdiarmid(R)
        assert abs(est - exact_tv) < tol, (t, est, exact_tv, tol)
    # d_TV(t) <= P(T_meet > t) (for u_1 of the top start): the coupling inequality, exactly
    tv_all = 0.5 * np.abs(ex.top_law - pi_u1[None]).sum(axis=1)
    assert np.all(tv_all <= ex.survival + 1e-9)


# --------------------------------------------------------------------------- order, sandwich

def _middle_start(n, R, top, seed):
    rng = np.random.default_rng(seed)
    rows = [counts_from_lengths(np.append(rng.integers(0, top + 1, size=n), top)[:n]) for _ in range(R)]
    L = max(len(r) for r in rows)
    return np.stack([np.pad(r, (0, L - len(r))) for r in rows])


@pytest.mark.parametrize("n", [30, 10**6])
def test_order_sandwich_and_meeting_consistency(n):
    d, lam, top, R, steps = 3, 0.9, 4, 16, 6000
    mid = _middle_start(n, R, top, seed=1) if n < 1000 else {"counts": np.array([n, n // 2, n // 3, 7, 3])}
    p = C.coupled_paths(n, d, lam, ["empty", mid, counts_all_at(n, top)], steps=steps, replicas=R, seed=7,
                        levels=LEVELS)
    lo, md, hi = p.counts
    assert np.all(lo <= md) and np.all(md <= hi), "order broken"
    D = C.l1_distance(hi, lo)  # (R, frames): excess customers of the top chain
    assert np.all(np.diff(D, axis=1) <= 0), "excess customers increased"
    met = np.all(lo == hi, axis=-1)
    assert np.all(met == (D == 0))
    # once met, every start in between has coalesced too, and they stay together
    assert np.all(np.all(md == lo, axis=-1)[met])
    assert np.all(np.diff(met.astype(int), axis=1) >= 0)
    first = np.where(met.any(axis=1), np.argmax(met, axis=1), np.inf)
    T = C.meeting_times(n, d, lam, replicas=R, seed=7, top_length=top, max_steps=steps, levels=LEVELS)
    np.testing.assert_array_equal(T, first)  # same streams, same draws: the same meeting steps
    if n < 1000:
        assert np.isfinite(T).sum() >= R // 2  # the comparison has content


def test_replica_independent_of_batch_and_reproducible():
    kw = dict(top_length=4, max_steps=3000, levels=LEVELS)
    a = C.meeting_times(30, 3, 0.9, replicas=16, seed=7, **kw)
    b = C.meeting_times(30, 3, 0.9, replicas=4, seed=7, **kw)
    np.testing.assert_array_equal(a[:4], b)
    # the tracked level count only changes speed, never a result (chunks rerun on growth)
    np.testing.assert_array_equal(b, C.meeting_times(30, 3, 0.9, replicas=4, seed=7, top_length=4,
                                                     max_steps=3000, levels=5))
    c = C.meeting_times(30, 3, 0.9, replicas=4, seed=8, **kw)
    assert not np.array_equal(b, c)
    assert np.all(np.isinf(C.meeting_times(30, 3, 0.9, replicas=4, seed=7, top_length=4, max_steps=10,
                                           levels=LEVELS)))


# --------------------------------------------------------------------------- marginals are the chain

def test_each_marginal_is_the_supermarket_chain():
    # small n: the time average of each coupled chain against the exact stationary law
    n, d, lam, R = 3, 2, 0.7, 16
    p = C.coupled_paths(n, d, lam, ["empty", counts_all_at(n, 4)], steps=32_000, replicas=R, seed=9,
                        record_every=16, levels=LEVELS)
    exact = sm.exact_tail_fraction(n, d, lam, 6, tol=1e-9)  # truncation << 1e-9 << 5 SE
    burn = 125
    for c in range(2):
        est = stats.replica_mean(p.counts[c, :, burn:, :7].mean(axis=1) / n)
        assert np.all(np.abs(est.mean - exact) <= Z * est.stderr + 1e-9), (c, est.mean, exact)
    # larger n: against the engine's simulate (independent runs; combined SE)
    n, d, lam = 40, 3, 0.9
    p = C.coupled_paths(n, d, lam, ["empty", counts_all_at(n, 4)], steps=32_000, replicas=R, seed=10,
                        record_every=16, levels=LEVELS)
    r = sm.simulate(n, d, lam, steps=32_000, replicas=R, seed=11, burn_in=4000, levels=LEVELS)
    ref = r.tail_fraction_estimate()
    for c in range(2):
        est = stats.replica_mean(p.counts[c, :, 250:, :6].mean(axis=1) / n)
        se = np.hypot(est.stderr, ref.stderr[:6])
        assert np.all(np.abs(est.mean - ref.mean[:6]) <= Z * se + 1e-9), (c, est.mean, ref.mean[:6])


# --------------------------------------------------------------------------- estimators

def test_l1_of_counts_is_l1_of_sorted_lengths():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a, b = rng.integers(0, 9, size=20), rng.integers(0, 9, size=20)
        want = np.abs(np.sort(a) - np.sort(b)).sum()
        assert C.l1_distance(counts_from_lengths(a), counts_from_lengths(b)) == want
    assert C.l1_distance(counts_all_at(7, 0), counts_all_at(7, 4)) == 28


def test_tv_distance_known_answers():
    rng = np.random.default_rng(1)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    q = np.array([0.25, 0.25, 0.25, 0.25])
    R = 20_000
    x = rng.choice(4, size=R, p=p)
    exact = 0.5 * np.abs(p - q).sum()  # 0.2
    est = C.tv_distance(x, q, reference_is_pmf=True)
    assert abs(est - exact) < C.tv_noise_floor(p, R) + _mcdiarmid(R)
    # against a reference sample, many rows at once (replicas last)
    y = rng.choice(4, size=(3, R), p=q)
    est2 = C.tv_distance(y, x)
    assert np.all(np.abs(est2 - exact) < C.tv_noise_floor(p, R, R) + 2 * _mcdiarmid(R))
    # the same law: only the noise floor is left
    z = rng.choice(4, size=R, p=p)
    assert C.tv_distance(z, x) < C.tv_noise_floor(p, R, R) + 2 * _mcdiarmid(R)
    # disjoint supports: TV = 1 exactly; grouping into cells never increases the TV
    assert C.tv_distance(np.full(100, 5), np.full(50, 2)) == 1.0
    w = rng.poisson(30, size=R)
    v = rng.poisson(33, size=R)
    assert C.tv_distance(w, v, bins=5) <= C.tv_distance(w, v) + 1e-12
    with pytest.raises(ValueError, match="reference"):
        C.tv_distance(x, [0.5, 0.6], reference_is_pmf=True)


def test_validation_errors_before_compile():
    with pytest.raises(ValueError, match="lam"):
        C.meeting_times(10, 2, 1.2, replicas=2, seed=0, top_length=3, max_steps=10)
    with pytest.raises(ValueError, match="top_length"):
        C.meeting_times(10, 2, 0.5, replicas=2, seed=0, top_length=-1, max_steps=10)
    with pytest.raises(ValueError, match="max_steps"):
        C.meeting_times(10, 2, 0.5, replicas=2, seed=0, top_length=3, max_steps=0)
    with pytest.raises(ValueError, match="replicas"):
        C.meeting_times(10, 2, 0.5, replicas=0, seed=0, top_length=3, max_steps=10)
    with pytest.raises(ValueError, match="lower start"):
        C.meeting_times(
            10, 2, 0.5, replicas=2, seed=0, top_length=1, max_steps=10, bottom=counts_all_at(10, 2)
        )
    with pytest.raises(ValueError, match="multiple"):
        C.coupled_paths(10, 2, 0.5, ["empty"], steps=10, replicas=2, seed=0, record_every=3)
    with pytest.raises(ValueError, match="starts"):
        C.coupled_paths(10, 2, 0.5, "empty", steps=10, replicas=2, seed=0)
    with pytest.raises(ValueError, match="n must"):
        C.exact_coupling(9, 2, 0.5, bottom=[9], top=[9, 9], steps=1)


def test_meeting_times_many_is_a_loop_of_single_calls():
    points = [(30, 3, 0.9), (20, 2, 0.8), (50, 5, 0.95)]
    tl, ms, seeds = [4, 3, 5], [3000, 8000, 500], [7, 1, 2]
    many = C.meeting_times_many(points, replicas=6, seeds=seeds, top_length=tl, max_steps=ms)
    for j, p in enumerate(points):
        single = C.meeting_times(*p, replicas=6, seed=seeds[j], top_length=tl[j], max_steps=ms[j])
        np.testing.assert_array_equal(many[j], single)
    assert np.isfinite(many[1]).sum() >= 3 and np.isinf(many[2]).any()  # met and not met, both present
    # unordered starts, one per point
    bottoms = ["fluid", "empty"]
    tops = [np.array([30, 30, 20, 10]), counts_all_at(20, 3)]
    many = C.meeting_times_many(
        points[:2], replicas=4, top_length=0, max_steps=5000, bottom=bottoms, top=tops, ordered=False
    )
    for j, p in enumerate(points[:2]):
        single = C.meeting_times(*p, replicas=4, seed=j, top_length=0, max_steps=5000, bottom=bottoms[j],
                                 top=tops[j], ordered=False)
        np.testing.assert_array_equal(many[j], single)
    with pytest.raises(ValueError, match=r"points\[1\].*lam"):
        C.meeting_times_many([(30, 3, 0.9), (30, 3, 1.0)], replicas=2, top_length=3, max_steps=10)
    with pytest.raises(ValueError, match="max_steps"):
        C.meeting_times_many(points, replicas=2, top_length=3, max_steps=[10, 10])


def test_coupling_takes_one_minus_lam():
    kw = dict(replicas=4, seed=7, top_length=4, max_steps=3000)
    np.testing.assert_array_equal(
        C.meeting_times(30, 3, 0.75, **kw), C.meeting_times(30, 3, one_minus_lam=0.25, **kw)
    )
    a = C.coupled_paths(
        30, 3, 0.75, ["empty", counts_all_at(30, 3)], steps=200, replicas=2, seed=1, record_every=10
    )
    b = C.coupled_paths(
        30,
        3,
        None,
        ["empty", counts_all_at(30, 3)],
        steps=200,
        replicas=2,
        seed=1,
        record_every=10,
        one_minus_lam=0.25,
    )
    np.testing.assert_array_equal(a.counts, b.counts)
    many = C.meeting_times_many(
        [(30, 3), (20, 2)], one_minus_lam=[0.25, 0.2], replicas=4, top_length=4, max_steps=3000
    )
    np.testing.assert_array_equal(
        many[0], C.meeting_times(30, 3, one_minus_lam=0.25, replicas=4, seed=0, top_length=4, max_steps=3000)
    )
    with pytest.raises(ValueError, match="max_steps"):
        C.meeting_times(30, 3, 0.9, replicas=10**6, seed=0, top_length=4, max_steps=2**62)


def test_default_top_is_never_read_as_queue_lengths():
    """With n queues and a top at length n - 1 the default top (n counts of n) is also a vector of
    n queue lengths; it must be taken as counts (it once raised "initial is ambiguous")."""
    T = C.meeting_times(5, 2, 0.7, replicas=2, seed=0, top_length=4, max_steps=10**6)
    assert np.all(np.isfinite(T))
