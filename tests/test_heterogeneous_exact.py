"""Tests for qlib.heterogeneous.exact: the product-form solution against oracles and exact
rationals, Cabral's claims and identities, pair_margins, and input validation."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qlib.heterogeneous as H
import qlib.heterogeneous.relaxation as relax

WORKED_LAM, WORKED_MUS = 3.0, np.array([3.0, 2.0, 1.0])


def random_instance(rng, n):
    mus = np.exp(rng.uniform(-2.5, 2.5, n))
    return rng.uniform(0.02, 0.98) * mus.sum(), mus


# ----------------------------------------------------------------------------- exact solution
@pytest.mark.parametrize("seed", range(12))
def test_closed_form_matches_generator_solve(seed):
    rng = np.random.default_rng(seed)
    n = 1 + seed % 8
    lam, mus = random_instance(rng, n)
    sets, ps, qd = H.generator_solve(lam, mus)
    np.testing.assert_allclose(H.busy_probabilities(lam, mus), H.marginals_from_sets(sets, ps),
                               rtol=0, atol=1e-10)
    assert abs(H.wait_probability(lam, mus) - ps[-1]) < 1e-10
    assert abs(H.mean_queue_length(lam, mus) - np.arange(qd.size) @ qd) < 1e-9
    # the product-form oracle agrees with the generator too
    s2, p2 = H.stationary_distribution(lam, mus)
    np.testing.assert_allclose(p2, ps, rtol=0, atol=1e-10)


def test_joint_probabilities_match_brute_force():
    rng = np.random.default_rng(7)
    lam, mus = random_instance(rng, 6)
    sets, p = H.stationary_distribution(lam, mus)
    J = H.joint_probabilities(lam, mus)
    S = sets.astype(float)
    np.testing.assert_allclose(J.both_busy, np.einsum("s,si,sj->ij", p, S, S), atol=1e-13)
    np.testing.assert_allclose(J.busy_idle, np.einsum("s,si,sj->ij", p, S, 1 - S), atol=1e-13)
    np.testing.assert_allclose(J.both_idle, np.einsum("s,si,sj->ij", p, 1 - S, 1 - S), atol=1e-13)


def test_worked_example():
    P = H.busy_probabilities(WORKED_LAM, WORKED_MUS)
    np.testing.assert_allclose(P, [0.44286, 0.51429, 0.64286], atol=5e-6)
    np.testing.assert_allclose(P, [31 / 70, 36 / 70, 45 / 70], rtol=1e-13)


@pytest.mark.parametrize("seed", range(5))
def test_work_conservation(seed):
    rng = np.random.default_rng(100 + seed)
    lam, mus = random_instance(rng, int(rng.integers(1, 40)))
    assert abs(H.effective_rates(lam, mus).sum() - lam) < 1e-12 * lam * len(mus)


def _exact_busy_fraction(lam, mus):
    """P_j in exact rational arithmetic, straight from the product form (oracle for stability)."""
    lam = Fraction(lam)
    x = [lam / Fraction(m) for m in mus]
    n = len(x)
    rho = lam / sum(Fraction(m) for m in mus)

    def esp(xs):
        e = [Fraction(1)] + [Fraction(0)] * len(xs)
        for v in xs:
            for k in range(len(e) - 1, 0, -1):
                e[k] += v * e[k - 1]
        return e

    fact = [1]
    for i in range(1, n + 1):
        fact.append(fact[-1] * i)
    w = [Fraction(fact[n - k]) for k in range(n)] + [1 / (1 - rho)]
    e = esp(x)
    Z = sum(wk * ek for wk, ek in zip(w, e))
    idle = []
    for j in range(n):
        ej = esp(x[:j] + x[j + 1:])
        idle.append(sum(w[k] * ej[k] for k in range(n)) / Z)
    return np.array([float(1 - i) for i in idle]), np.array([float(i) for i in idle])


@pytest.mark.parametrize("rho", [0.05, 0.6, 0.995])
def test_log_space_matches_exact_rationals(rho):
    mus = np.geomspace(1000.0, 1.0, 30)  # three orders of magnitude
    lam = rho * mus.sum()
    busy, idle = _exact_busy_fraction(lam, mus)
    np.testing.assert_allclose(H.busy_probabilities(lam, mus), busy, rtol=1e-11)
    np.testing.assert_allclose(H.idle_probabilities(lam, mus), idle, rtol=1e-9)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.999])
def test_500_servers_finite_and_ordered(rho):
    rng = np.random.default_rng(5)
    mus = 10 ** rng.uniform(0, 3, 500)  # rates spanning three orders of magnitude
    lam = rho * mus.sum()
    P, Q = H.busy_probabilities(lam, mus), H.idle_probabilities(lam, mus)
    assert np.all(np.isfinite(P)) and np.all(np.isfinite(Q))
    assert np.all((P > 0) & (P <= 1)) and np.all(Q > 0)
    o = np.argsort(-mus)  # fastest first: busy least, idle most
    assert np.all(np.diff(P[o]) >= 0)
    assert np.all(np.diff(Q[o]) < 0)
    assert np.all(np.diff((mus * P)[o]) < 0)
    np.testing.assert_allclose(P + Q, 1, atol=1e-14)
    assert abs(mus @ P / lam - 1) < 1e-12


# ----------------------------------------------------------------------------- claims (property test)
rates = st.lists(st.floats(0.05, 50.0, allow_nan=False), min_size=2, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mus=rates, rho=st.floats(0.01, 0.99))
def test_claims_and_identities(mus, rho):
    mus = np.array(mus)
    lam = rho * mus.sum()
    P = H.busy_probabilities(lam, mus)
    J = H.joint_probabilities(lam, mus)
    assert abs(mus @ P - lam) <= 1e-12 * lam * len(mus)
    for l in range(len(mus)):
        for m in range(len(mus)):
            if not mus[l] > mus[m] * (1 + 1e-9):
                continue
            # identities, with the joint probabilities computed independently
            assert mus[l] * P[l] - mus[m] * P[m] == pytest.approx(
                (mus[l] - mus[m]) * J.both_busy[l, m], abs=1e-12 * mus[l])
            assert P[m] - P[l] == pytest.approx((1 - mus[m] / mus[l]) * J.busy_idle[m, l], abs=1e-12)
            # the three claims, strict (both joint probabilities are positive)
            assert J.both_busy[l, m] > 0 and J.busy_idle[m, l] > 0
            # P_l < P_m; where the exact gap (1 - mu_m/mu_l) P(m busy, l idle) is below
            # rounding, P_l may exceed P_m by rounding only, never by more
            gap = (1 - mus[m] / mus[l]) * J.busy_idle[m, l]
            assert P[l] < P[m] or (gap < 1e-13 and P[l] - P[m] <= 1e-13), (P[l], P[m], gap)
            assert mus[l] * P[l] > mus[m] * P[m]
            assert mus[m] / mus[l] * P[m] < P[l] <= P[m]




# ----------------------------------------------------------------------------- exact rationals
def _esp(xs):
    e = [Fraction(1)] + [Fraction(0)] * len(xs)
    for v in xs:
        for k in range(len(e) - 1, 0, -1):
            e[k] += v * e[k - 1]
    return e


def _exact_joint(lam, mus):
    """P_j, P(l and m busy) and P(m busy, l idle) in exact rational arithmetic, summing the
    product form over every busy set (n <= 8)."""
    import itertools
    import math

    lam = Fraction(lam)
    mu = [Fraction(float(m)) for m in mus]
    n = len(mu)
    rho = lam / sum(mu)
    x = [lam / m for m in mu]
    weight = {}
    for k in range(n + 1):
        for S in itertools.combinations(range(n), k):
            w = Fraction(math.factorial(n - k))
            for j in S:
                w *= x[j]
            if k == n:
                w /= 1 - rho  # the whole queue
            weight[frozenset(S)] = w
    Z = sum(weight.values())
    P = [sum(w for S, w in weight.items() if j in S) / Z for j in range(n)]
    both = {(l, m): sum(w for S, w in weight.items() if l in S and m in S) / Z
            for l in range(n) for m in range(n)}
    busy_idle = {(m, l): sum(w for S, w in weight.items() if m in S and l not in S) / Z
                 for l in range(n) for m in range(n)}
    return P, both, busy_idle, mu


MARGIN_CASES = [
    (3.0, [3.0, 2.0, 1.0]),
    (0.01 * 6.0, [3.0, 2.0, 1.0]),  # light load
    (0.999 * 6.0, [3.0, 2.0, 1.0]),  # heavy load
    (2.0, [1.0 + 3e-9, 1.0 + 2e-9, 1.0 + 1e-9, 1.0]),  # rates differing by 1e-9 relative
    (0.5 * 104.0, [100.0, 1.0, 1.0 - 1e-9, 1.0, 1.0 + 1e-9]),  # one fast server among slow ones
    (0.9 * 10.5, [5.0, 2.5, 1.5, 1.0, 0.5]),
]


@pytest.mark.parametrize("case", range(len(MARGIN_CASES)))
def test_pair_margins_match_exact_rationals(case):
    lam, mus = MARGIN_CASES[case]
    P, both, busy_idle, mu = _exact_joint(lam, mus)
    pm = H.pair_margins(lam, np.array(mus), pairs="all")
    distinct = len(set(mus))
    assert pm.pairs == sum(1 for a in mus for b in mus if a > b) and pm.pairs >= distinct - 1
    for i, (l, m) in enumerate(zip(pm.fast, pm.slow)):
        assert mus[l] > mus[m]
        want = {
            "busy_margin": P[m] - P[l],
            "effective_rate_margin": mu[l] * P[l] - mu[m] * P[m],
            "band_margin": P[l] - mu[m] / mu[l] * P[m],
            "both_busy": both[l, m],
            "busy_idle": busy_idle[m, l],
        }
        for name, exact in want.items():
            assert exact > 0  # the claims hold exactly here
            got = getattr(pm, name)[i]
            assert abs(got - float(exact)) <= 1e-12 * float(exact), (name, l, m, got, float(exact))
    assert pm.holds().all()


def test_pair_margins_adjacent_pairs_in_rate_order_skip_ties():
    mus = np.array([1.0, 4.0, 2.0, 2.0, 8.0])
    pm = H.pair_margins(3.0, mus)  # rate order 8, 4, 2, 2, 1: servers 4, 1, 2, 3, 0
    assert list(zip(pm.fast.tolist(), pm.slow.tolist())) == [(4, 1), (1, 2), (3, 0)]  # tie (2, 3) skipped
    assert pm.holds().all()


def test_pair_margins_agree_with_joint_probabilities():
    rng = np.random.default_rng(3)
    mus = np.exp(rng.uniform(-2, 2, 25))
    lam = 0.8 * mus.sum()
    pm = H.pair_margins(lam, mus, pairs="all")
    J = H.joint_probabilities(lam, mus)
    np.testing.assert_allclose(pm.both_busy, J.both_busy[pm.fast, pm.slow], rtol=1e-11)
    np.testing.assert_allclose(pm.busy_idle, J.busy_idle[pm.slow, pm.fast], rtol=1e-11)
    P = H.busy_probabilities(lam, mus)
    l, m = pm.fast, pm.slow
    np.testing.assert_allclose(pm.busy_margin, P[m] - P[l], rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(pm.effective_rate_margin, mus[l] * P[l] - mus[m] * P[m], rtol=1e-8, atol=1e-13)
    assert pm.pairs == 25 * 24 // 2 and pm.holds().all()


@pytest.mark.parametrize("rho", [0.01, 0.5, 0.999])
def test_pair_margins_signs_at_1000_servers_with_near_equal_rates(rho):
    """n = 1000 rates differing by 1e-9 relative: every margin is positive (the claims hold), and
    the joint probabilities match the equal-rate closed form P(l, m busy) = E[K(K-1)]/(n(n-1))."""
    n = 1000
    mus = 1.0 + 1e-9 * np.arange(n)[::-1]
    lam = rho * mus.sum()
    pm = H.pair_margins(lam, mus)
    assert pm.pairs == n - 1 and pm.holds().all()
    c = H.busy_count_distribution(rho * n, np.ones(n))  # the equal-rate law of the number busy, same rho
    k = np.arange(n + 1)
    both = (c * k * (k - 1)).sum() / (n * (n - 1))
    busy_idle = (c * k * (n - k)).sum() / (n * (n - 1))
    np.testing.assert_allclose(pm.both_busy, both, rtol=1e-5)
    np.testing.assert_allclose(pm.busy_idle, busy_idle, rtol=1e-5)
    # each margin is (1e-9 relative rate gap) x (that joint probability)
    rel = (mus[pm.fast] - mus[pm.slow]) / mus[pm.fast]
    np.testing.assert_allclose(pm.busy_margin / rel, busy_idle, rtol=1e-5)
    np.testing.assert_allclose(pm.band_margin / rel, both, rtol=1e-5)


def test_pair_margins_one_fast_server_among_slow_ones():
    mus = np.array([50.0] + [1.0] * 199 + [1.0 - 1e-12])
    pm = H.pair_margins(0.9 * mus.sum(), mus)
    assert list(zip(pm.fast.tolist(), pm.slow.tolist())) == [(0, 1), (199, 200)]
    assert pm.holds().all()


# ----------------------------------------------------------------------------- validation
EXACT_FUNCTIONS = [
    H.busy_probabilities, H.idle_probabilities, H.effective_rates, H.busy_count_distribution,
    H.wait_probability, H.mean_queue_length, H.mean_number_in_system, H.joint_probabilities,
    H.pair_margins, H.stationary_distribution, H.generator_solve, H.fastest_busy_probabilities,
    H.slowest_busy_probabilities, H.relaxation_time, H.queue_gap, H.step_probabilities,
]
BAD_MUS = [[True, True], ["1", "2"], [1.0, True], np.array([True, False]), "12", 3.0, [[1.0, 2.0]], [],
           [1.0, float("nan")], [1.0, -1.0], [1.0, 0.0], [1.0, float("inf")], [1.0 + 1j, 2.0], None]


@pytest.mark.parametrize("fn", EXACT_FUNCTIONS, ids=lambda f: f.__name__)
def test_every_function_rejects_non_real_rates(fn):
    for mus in BAD_MUS:
        with pytest.raises(ValueError, match="mus"):
            fn(1.0, mus)
    for lam in (True, "1", None, float("nan"), 0.0, -1.0, 3.0, 4.0):
        with pytest.raises(ValueError, match="lam"):
            fn(lam, [1.0, 2.0])
    fn(1.0, [1, 2])  # integers are real numbers
    fn(np.float32(1.0), np.array([1, 2], dtype=np.int64))


def test_huge_solves_rejected_before_allocating():
    with pytest.raises(ValueError, match="mus.*GiB"):
        H.busy_probabilities(1.0, np.ones(10**6))
    with pytest.raises(ValueError, match="pairs"):
        H.pair_margins(1.0, [1.0, 2.0], pairs="some")
    with pytest.raises(ValueError, match="queue_cap"):
        H.generator_solve(1.0, [1.0, 2.0], queue_cap=-1)
    with pytest.raises(ValueError, match="queue_cap.*GiB"):
        H.generator_solve(1.0, [1.0, 2.0], queue_cap=10**15)


def test_marginals_from_sets_validates():
    sets, p = H.stationary_distribution(3.0, [3.0, 2.0, 1.0])
    np.testing.assert_allclose(H.marginals_from_sets(sets, p), H.busy_probabilities(3.0, [3.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="sets"):
        H.marginals_from_sets(sets.astype(int), p)
    with pytest.raises(ValueError, match="probs"):
        H.marginals_from_sets(sets, p[:-1])


def test_oracle_limits():
    with pytest.raises(ValueError, match="mus"):
        H.stationary_distribution(1.0, np.ones(13))
    with pytest.raises(ValueError, match="policy"):
        H.generator_solve(1.0, [1.0, 2.0], policy="longest_idle")


# ----------------------------------------------------------------------------- routing counterfactuals
def _exact_busy_by_policy(lam, mus, policy):
    """P_j in exact rationals for routing ``policy``, from the model's rules (not the product
    form): the chain censored to q = 0 over the 2^n busy sets, solved by Gaussian elimination;
    the queue rides on the all-busy set, pi(all, q) = pi(all, 0) rho^q."""
    lam = Fraction(lam)
    mu = [Fraction(float(m)) for m in mus]
    n, N = len(mu), 1 << len(mu)
    rho = lam / sum(mu)
    order = sorted(range(n), key=lambda j: (-mu[j] if policy == "fastest" else mu[j], j))
    R = [[Fraction(0)] * N for _ in range(N)]
    for s in range(N):
        idle = [j for j in range(n) if not s >> j & 1]
        if idle and policy == "random":
            for j in idle:
                R[s][s | 1 << j] += lam / len(idle)
        elif idle:
            j = next(j for j in order if not s >> j & 1)
            R[s][s | 1 << j] += lam
        for j in range(n):
            if s >> j & 1:
                R[s][s & ~(1 << j)] += mu[j]
    A = [[R[t][s] if t != s else -sum(R[s]) for t in range(N)] for s in range(N)]  # pi R = 0
    A[0], b = [Fraction(1)] * N, [Fraction(1)] + [Fraction(0)] * (N - 1)
    for c in range(N):
        p = next(r for r in range(c, N) if A[r][c] != 0)
        A[c], A[p], b[c], b[p] = A[p], A[c], b[p], b[c]
        for r in range(N):
            if r != c and A[r][c] != 0:
                f = A[r][c] / A[c][c]
                A[r] = [x - f * y for x, y in zip(A[r], A[c])]
                b[r] -= f * b[c]
    pi = [b[i] / A[i][i] for i in range(N)]
    pi[N - 1] /= 1 - rho
    Z = sum(pi)
    return [sum(pi[s] for s in range(N) if s >> j & 1) / Z for j in range(n)]


@pytest.mark.parametrize("policy", ["random", "fastest", "slowest"])
@pytest.mark.parametrize("lam,mus", [(3.0, [3.0, 2.0, 1.0]), (4.0, [2.0, 1.0, 2.0, 0.5, 1.5])])
def test_generator_solve_matches_exact_rationals_for_each_routing(policy, lam, mus):
    """Unsorted rates with a tie in the second case: ties go to the lower input index."""
    exact = np.array([float(p) for p in _exact_busy_by_policy(lam, mus, policy)])
    sets, ps, _ = H.generator_solve(lam, mus, policy=policy)
    np.testing.assert_allclose(H.marginals_from_sets(sets, ps), exact, rtol=1e-12)
    fn = {"random": H.busy_probabilities, "fastest": H.fastest_busy_probabilities,
          "slowest": H.slowest_busy_probabilities}[policy]
    np.testing.assert_allclose(fn(lam, mus), exact, rtol=1e-12)
    assert abs(np.dot(mus, exact) - lam) < 1e-12 * lam  # work conservation, whatever the routing


def test_slowest_worked_example_breaks_claim_2():
    """lam = 3, mus = (3, 2, 1), slowest idle first: P = (53/148, 211/370, 581/740) exactly,
    mu P = (1.0743, 1.1405, 0.7851): the fast server is still busy least (claim 1 holds), but
    it does less work than the middle one (claim 2 fails), and P_1 < (mu_2/mu_1) P_2 (the lower
    end of claim 3 fails). Fastest idle first, for contrast: mu P = (1.6678, 0.9113, 0.4209),
    claim 2 holds and claim 1 fails."""
    P = _exact_busy_by_policy(3.0, [3.0, 2.0, 1.0], "slowest")
    assert P == [Fraction(53, 148), Fraction(211, 370), Fraction(581, 740)]
    got = H.slowest_busy_probabilities(WORKED_LAM, WORKED_MUS)
    np.testing.assert_allclose(got, [53 / 148, 211 / 370, 581 / 740], rtol=1e-13)
    work = WORKED_MUS * got
    np.testing.assert_allclose(work, [1.0743243243, 1.1405405405, 0.7851351351], rtol=1e-10)
    assert work[0] < work[1]  # claim 2 fails for the pair (1, 2)
    assert got[0] < got[1] < got[2]  # claim 1 holds
    assert got[0] < WORKED_MUS[1] / WORKED_MUS[0] * got[1]  # lower end of claim 3 fails
    fast = WORKED_MUS * H.fastest_busy_probabilities(WORKED_LAM, WORKED_MUS)
    np.testing.assert_allclose(fast, [1.6677786499, 0.9113029827, 0.4209183673], rtol=1e-9)
    assert np.all(np.diff(fast) < 0)  # claim 2 holds under "fastest" ...
    P_f = fast / WORKED_MUS
    assert P_f[0] > P_f[1]  # ... and claim 1 fails


# ----------------------------------------------------------------------------- relaxation time
def _dense_generator(lam, mus, policy, cap):
    """The truncated generator, dense, built from the model's rules with its own state
    enumeration (busy sets as frozensets, or the idle list as a tuple for "longest_idle";
    the queue 1..cap on the all-busy state; arrivals at q = cap are dropped)."""
    import itertools

    n = len(mus)
    if policy == "longest_idle":
        keys = [t for k in range(n + 1) for t in itertools.permutations(range(n), k)]
    else:
        keys = [frozenset(c) for k in range(n + 1) for c in itertools.combinations(range(n), k)]
    states = [(key, 0) for key in keys] + [(None, q) for q in range(1, cap + 1)]
    index = {s: i for i, s in enumerate(states)}
    order = sorted(range(n), key=lambda j: (-mus[j] if policy == "fastest" else mus[j], j))
    all_busy = () if policy == "longest_idle" else frozenset(range(n))
    Q = np.zeros((len(states), len(states)))
    for (key, q), i in index.items():
        out = []
        if key is None:  # all busy, q waiting
            out.append(((key, q + 1), lam) if q < cap else None)
            out.append(((all_busy, 0) if q == 1 else (None, q - 1), sum(mus)))
        elif policy == "longest_idle":
            out.append(((key[1:], 0), lam) if key else ((None, 1), lam) if cap else None)
            out += [((key + (j,), 0), mus[j]) for j in range(n) if j not in key]
        else:
            idle = [j for j in range(n) if j not in key]
            if not idle:
                out.append(((None, 1), lam) if cap else None)
            elif policy == "random":
                out += [((key | {j}, 0), lam / len(idle)) for j in idle]
            else:
                out.append(((key | {next(j for j in order if j not in key)}, 0), lam))
            out += [((key - {j}, 0), mus[j]) for j in key]
        for t in out:
            if t is not None:
                Q[i, index[t[0]]] += t[1]
    return Q - np.diag(Q.sum(axis=1))


def _dense_gap(Q):
    ev = np.linalg.eigvals(-Q)
    ev = np.delete(ev, np.argmin(np.abs(ev)))
    return float(ev.real.min())


@pytest.mark.parametrize("policy", H.POLICIES)
@pytest.mark.parametrize("lam,mus", [(1.0, [3.0, 2.0, 1.0]), (1.5, [4.0, 1.0, 2.5, 0.7])])
def test_relaxation_time_matches_a_dense_eigen_solve(policy, lam, mus):
    """Light load, where the gap is an isolated eigenvalue below the queue's part of the spectrum
    (checked): the truncated gap of the sparse and dense paths equals a dense eigen-solve of an
    independently built generator, and relaxation_time equals its inverse."""
    mus = np.array(mus)
    raw = _dense_gap(_dense_generator(lam, mus, policy, 24))  # (raw -Q is ill-conditioned: keep K small)
    assert raw < 0.9 * H.queue_gap(lam, mus)
    both = [relax._truncated_gap(lam, mus, policy, 24, dense=dense) for dense in (True, False)]
    assert both[0] == pytest.approx(both[1], rel=1e-11)  # every eigenvalue vs shift-invert near 0
    assert both[0] == pytest.approx(raw, rel=1e-7)
    assert H.relaxation_time(lam, mus, policy=policy) == pytest.approx(1 / raw, rel=1e-7)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_relaxation_time_of_mm1(rho):
    """n = 1 is the M/M/1 queue, gap (sqrt(mu) - sqrt(lam))^2; its truncation to K + 1
    customers has the closed-form gap lam + mu - 2 sqrt(lam mu) cos(pi / (K + 2))."""
    mu = 2.0
    lam = rho * mu
    for policy in H.POLICIES:
        assert H.relaxation_time(lam, [mu], policy=policy) == pytest.approx(
            1 / (math.sqrt(mu) - math.sqrt(lam)) ** 2, rel=1e-12)
    for K in (5, 40, 600):
        want = lam + mu - 2 * math.sqrt(lam * mu) * math.cos(math.pi / (K + 2))
        for policy, dense in (
            ("random", K < 100),
            ("random", False),
            ("fastest", K < 100),
            ("fastest", False),
        ):
            assert relax._truncated_gap(lam, np.array([mu]), policy, K, dense=dense) == pytest.approx(
                want, rel=1e-9
            )


@pytest.mark.parametrize("policy", ["random", "slowest"])
def test_heavy_load_gap_is_the_queues(policy):
    """At rho = 0.8 the truncated gaps decrease to queue_gap from above like 1/K^2 (the M/M/1
    continuum; no eigenvalue below it), so relaxation_time = 1/queue_gap. The dense solve of
    the independent generator agrees with the truncated gap at K = 40."""
    mus = np.array([3.0, 2.0, 1.0])
    lam = 0.8 * mus.sum()
    gq = H.queue_gap(lam, mus)
    assert relax._truncated_gap(lam, mus, policy, 40) == pytest.approx(
        _dense_gap(_dense_generator(lam, mus, policy, 40)), rel=1e-8)
    caps = [100, 200, 400, 800]
    excess = np.array([relax._truncated_gap(lam, mus, policy, K) - gq for K in caps])
    assert np.all(excess > 0) and np.all(np.diff(excess) < 0)
    np.testing.assert_allclose(excess[:-1] / excess[1:], 4.0, rtol=0.1)
    assert H.relaxation_time(lam, mus, policy=policy) == pytest.approx(1 / gq, rel=1e-12)


def test_relaxation_time_bounds_limits_and_scaling():
    mus = np.geomspace(10.0, 1.0, 6)
    S = mus.sum()
    # never below the queue's own relaxation time, 1/queue_gap
    for rho in (0.05, 0.3, 0.6, 0.9):
        for policy in H.POLICIES:
            assert H.relaxation_time(rho * S, mus, policy=policy) >= (1 - 1e-12) / H.queue_gap(rho * S, mus)
    # variational bound: the indicator of "j busy" has Dirichlet form mu_j P(j busy, no queue),
    # so gap <= mu_j P(j busy, q = 0) / (P_j (1 - P_j)) for every j (reversible "random")
    for lam, m in ((3.0, np.array([3.0, 2.0, 1.0])), (0.2 * S, mus)):
        sets, p = H.stationary_distribution(lam, m)
        p0 = p.copy()
        p0[sets.all(axis=1)] *= 1 - lam / m.sum()  # the all-busy set without a queue
        P = H.busy_probabilities(lam, m)
        bound = m * (p0 @ sets) / (P * (1 - P))
        assert 1 / H.relaxation_time(lam, m) <= bound.min() * (1 + 1e-9)
    # light-load limit: every busy server just finishes, the slowest last: tau -> 1/min(mu)
    m = np.array([3.0, 2.0, 0.5])
    for policy in ("random", "fastest", "slowest"):
        assert H.relaxation_time(1e-7, m, policy=policy) == pytest.approx(2.0, rel=1e-5)
    # time scale: rates x c make the chain c times faster
    assert H.relaxation_time(7.3 * 3.0, 7.3 * m) == pytest.approx(H.relaxation_time(3.0, m) / 7.3, rel=1e-10)
    # heavy load: the queue's 1/queue_gap, increasing in rho; light load: not monotone (the slow
    # server's own busy/idle flips dominate and arrivals speed them up)
    heavy = [H.relaxation_time(r * S, mus) for r in (0.6, 0.7, 0.8, 0.9, 0.95)]
    assert np.all(np.diff(heavy) > 0)
    np.testing.assert_allclose(heavy, [1 / H.queue_gap(r * S, mus) for r in (0.6, 0.7, 0.8, 0.9, 0.95)],
                               rtol=1e-12)
    assert H.relaxation_time(0.05 * S, mus) > H.relaxation_time(0.3 * S, mus)
    # longest idle has the same stationary law as random but not the same chain; at light load
    # its idle order mixes only through two customers in service at once: tau ~ c / lam^2
    assert H.relaxation_time(0.3 * S, mus, policy="longest_idle") > 1.2 * H.relaxation_time(0.3 * S, mus)
    m = np.array([3.0, 2.0, 1.0])
    t3, t4 = (H.relaxation_time(lam, m, policy="longest_idle") * lam**2 for lam in (1e-3, 1e-4))
    assert t3 == pytest.approx(t4, rel=0.01) and H.relaxation_time(1e-4, m) < 2.0


def test_log_stationary_product_form_equals_the_solve():
    """The weights that symmetrise the generator: product form == censored-chain solve."""
    lam, mus = 2.0, np.array([4.0, 1.0, 2.5, 0.7])
    a = relax._log_stationary_q0(lam, mus, "random")
    b = relax._log_stationary_q0(lam, mus, "random", solve=True)
    np.testing.assert_allclose(a - a[0], b - b[0], atol=1e-11)


def test_relaxation_time_validates():
    with pytest.raises(ValueError, match=r"mus must have at most 12 servers.*n = 13.*lower bound"):
        H.relaxation_time(1.0, np.ones(13))
    with pytest.raises(ValueError, match=r"at most 7 servers.*'longest_idle'.*n = 8"):
        H.relaxation_time(1.0, np.ones(8), policy="longest_idle")
    with pytest.raises(ValueError, match="policy"):
        H.relaxation_time(1.0, [1.0, 2.0], policy="shortest")
    for fn in (H.relaxation_time, H.queue_gap, H.slowest_busy_probabilities):
        with pytest.raises(ValueError, match="lam"):
            fn(3.0, [1.0, 2.0])
        with pytest.raises(ValueError, match="mus"):
            fn(1.0, [1.0, -2.0])


@pytest.mark.parametrize("policy", ["random", "fastest", "slowest"])
@pytest.mark.parametrize("rho", [0.3, 0.7, 0.95])
def test_aggregated_queue_solve_equals_the_truncated_generator(policy, rho):
    """The default (exact, all-busy block aggregated) and the directly truncated generator agree."""
    mus = np.array([3.0, 2.0, 1.0, 0.5, 2.5])
    lam = rho * mus.sum()
    _, p1, q1 = H.generator_solve(lam, mus, policy=policy)
    cap = int(np.ceil(np.log(1e-16) / np.log(rho)))
    _, p2, q2 = H.generator_solve(lam, mus, policy=policy, queue_cap=cap)
    np.testing.assert_allclose(p1, p2, atol=1e-13)
    m = min(q1.size, q2.size)
    np.testing.assert_allclose(q1[:m], q2[:m], atol=1e-13)
    assert abs(p1.sum() - 1) < 1e-12 and abs(q1.sum() - 1) < 1e-12
