"""The exact small-n stationary law (qlib.supermarket.exact) against independent oracles.

Oracles: a plain reference solve written here (states as tuples in a dict, one Python loop per
state, one sparse LU: the original direct solver of this module, extended by the spread cap),
the closed forms of d = 1 (n independent M/M/1 queues: P(length >= i) = lam^i and
P(max <= l) = (1 - lam^(l+1))^n), the identity E[u_1] = lam n with its bound in the truncated
chain, convergence under growing caps, and a long simulation by the count-chain engine (an
independent code) with a 5-SE tolerance over 16 replicas.
"""

from __future__ import annotations

import math
from itertools import combinations_with_replacement

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import qlib.supermarket as sm
from qlib.supermarket import exact as E

Z = 5.0


# --------------------------------------------------------------------------- reference solve

def _g(u: int, n: int, d: int, replacement: bool) -> float:
    if replacement:
        return (u / n) ** d
    return math.comb(u, d) / math.comb(n, d)


def reference_law(n, d, lam, cap, spread_cap=None, replacement=True):
    """Stationary law on sorted length tuples with max <= cap and max - min <= spread_cap.

    Transitions that would leave the box are dropped. Returns (states, pi, boundary) where
    boundary[s] says whether a transition with positive rate was dropped at s.
    """
    W = cap if spread_cap is None else spread_cap
    states = [tuple(sorted(c)) for c in combinations_with_replacement(range(cap + 1), n)
              if max(c) - min(c) <= W]
    index = {s: j for j, s in enumerate(states)}
    rows, cols, vals = [], [], []
    boundary = np.zeros(len(states), bool)
    for j, s in enumerate(states):
        for length in sorted(set(s)):
            u_l = sum(a >= length for a in s)
            u_next = sum(a >= length + 1 for a in s)
            moves = [(length + 1, lam * n * (_g(u_l, n, d, replacement) - _g(u_next, n, d, replacement)))]
            if length >= 1:
                moves.append((length - 1, float(s.count(length))))
            for new, rate in moves:
                if rate <= 0:
                    continue
                t = list(s)
                t[t.index(length)] = new
                t = tuple(sorted(t))
                if t in index:
                    rows.append(j)
                    cols.append(index[t])
                    vals.append(rate)
                else:
                    boundary[j] = True
    S = len(states)
    Q = sp.csr_matrix((vals, (rows, cols)), shape=(S, S))
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    A = Q.T.tolil()
    e = index[(0,) * n]
    A[e, :] = 0.0
    A[e, e] = 1.0
    b = np.zeros(S)
    b[e] = 1.0
    pi = spla.spsolve(A.tocsc(), b)
    return states, pi / pi.sum(), boundary


def reference_summary(n, d, lam, cap, spread_cap=None, replacement=True):
    states, pi, boundary = reference_law(n, d, lam, cap, spread_cap, replacement)
    L = np.array(states)
    tail = np.array([(pi * (L >= i).sum(axis=1)).sum() / n for i in range(cap + 1)])
    max_law = np.bincount(L.max(axis=1), weights=pi, minlength=cap + 1)
    return tail, max_law, float(pi[boundary].sum())


def box_summary(n, d, lam, cap, spread_cap, replacement, solver):
    box = E.Box(n, d, lam, replacement, cap, spread_cap)
    if solver == "direct":
        x, res, _ = E.solve_direct(box)
    else:
        x, res, _ = E.solve_iterative(box, None, 1e-13, 5000)
    tail = np.array([(x * (box.A >= i).sum(axis=1)).sum() / n for i in range(cap + 1)])
    max_law = np.bincount(box.M, weights=x, minlength=cap + 1)
    return tail, max_law, float(x[box.boundary].sum()), res, box.S


# --------------------------------------------------------------------------- the truncated chain

CASES = [  # n, d, lam, replacement, cap, spread cap
    (1, 1, 0.6, True, 12, 12), (2, 2, 0.8, True, 14, 5), (3, 2, 0.8, True, 10, 4),
    (3, 2, 0.7, False, 9, 9), (4, 3, 0.7, False, 7, 3), (4, 4, 0.9, False, 9, 2),
    (4, 2, 0.85, True, 8, 8), (5, 2, 0.6, True, 6, 3), (3, 1, 0.5, True, 8, 5),
]


@pytest.mark.parametrize("solver", ["direct", "iterative"])
@pytest.mark.parametrize("n,d,lam,rep,cap,W", CASES)
def test_truncated_chain_matches_reference(n, d, lam, rep, cap, W, solver):
    # the same truncated box (including dropped transitions at the spread cap) solved by the
    # module's vectorised generator and each of its solvers, and by the plain reference
    ref_tail, ref_max, ref_mass = reference_summary(n, d, lam, cap, W, rep)
    tail, max_law, mass, res, S = box_summary(n, d, lam, cap, W, rep, solver)
    assert S == E.box_states(n, cap, W) == len(reference_law(n, d, lam, cap, W, rep)[0])
    assert res < 1e-12
    np.testing.assert_allclose(tail, ref_tail, rtol=0, atol=1e-11)
    np.testing.assert_allclose(max_law, ref_max, rtol=0, atol=1e-11)
    assert abs(mass - ref_mass) < 1e-11
    if W < cap and n > 1:
        assert mass > 1e-6  # the spread cap really bites in these cases


@pytest.mark.parametrize(
    "n,d,lam,rep,cap", [(3, 2, 0.8, True, 8), (4, 3, 0.7, False, 7), (2, 1, 0.5, True, 9)]
)
def test_exact_stationary_matches_reference(n, d, lam, rep, cap):
    states, pi, _ = reference_law(n, d, lam, cap, None, rep)
    counts, x = sm.exact_stationary(n, d, lam, cap, replacement=rep)
    L = np.array(states)
    ref = np.array([(pi * (L >= i).sum(axis=1)).sum() for i in range(cap + 1)])
    assert counts.shape == (len(states), cap + 1) and x.shape == (len(states),)
    np.testing.assert_allclose((x[:, None] * counts).sum(axis=0), ref, rtol=0, atol=1e-11)


@pytest.mark.parametrize("n,d,lam,rep", [(2, 2, 0.6, True), (3, 2, 0.8, True), (3, 2, 0.8, False),
                                         (4, 3, 0.7, False), (3, 3, 0.5, True), (4, 2, 0.6, True)])
def test_equilibrium_matches_reference_direct_solve(n, d, lam, rep):
    # the full oracle (caps grown until the boundary mass < tol) against the reference direct
    # solve on a plain length cap far beyond (its own truncation below 1e-13)
    ex = sm.exact_equilibrium(n, d, lam, levels=8, replacement=rep, tol=1e-12)
    cap = {2: 60, 3: 44, 4: 26}[n] if lam >= 0.8 or n == 2 else {3: 24, 4: 20}[n]
    ref_tail, ref_max, ref_mass = reference_summary(n, d, lam, cap, None, rep)
    assert ref_mass < 1e-12
    np.testing.assert_allclose(ex.tail_fraction, ref_tail[:9], rtol=0, atol=1e-9)
    m = min(len(ref_max), len(ex.max_length_distribution))
    np.testing.assert_allclose(ex.max_length_distribution[:m], ref_max[:m], rtol=0, atol=1e-9)
    assert ex.truncation_mass < 1e-12 and ex.residual < 1e-12
    # the legacy entry point gives the same numbers
    np.testing.assert_allclose(sm.exact_tail_fraction(n, d, lam, 8, replacement=rep, tol=1e-12),
                               ex.tail_fraction, rtol=0, atol=1e-14)


# --------------------------------------------------------------------------- closed forms, identities

@pytest.mark.parametrize("n,lam", [(1, 0.8), (3, 0.5), (4, 0.6)])
def test_d1_is_independent_mm1_queues(n, lam):
    ex = sm.exact_equilibrium(n, 1, lam, levels=10, tol=1e-11)
    i = np.arange(11)
    np.testing.assert_allclose(ex.tail_fraction, lam ** i, rtol=0, atol=1e-10)
    ell = np.arange(ex.length_cap + 1)
    np.testing.assert_allclose(ex.queue_length_distribution, (1 - lam) * lam ** ell, rtol=0, atol=1e-10)
    cdf = (1 - lam ** (ell + 1)) ** n  # P(max <= l): the maximum of n independent geometrics
    np.testing.assert_allclose(np.cumsum(ex.max_length_distribution), cdf, rtol=0, atol=1e-10)


@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-10])
@pytest.mark.parametrize("n,d,lam,rep", [(3, 2, 0.9, True), (5, 2, 0.8, True), (4, 2, 0.9, False)])
def test_busy_fraction_identity_within_truncation_bound(n, d, lam, rep, tol):
    # E[u_1] = lam n exactly; the truncated chain misses it by at most the boundary mass
    ex = sm.exact_equilibrium(n, d, lam, levels=4, replacement=rep, tol=tol)
    assert ex.truncation_mass < tol
    assert abs(ex.identity_error) <= ex.truncation_mass + 1e-12
    assert ex.identity_error == pytest.approx(ex.tail_fraction[1] - lam, abs=1e-15)


@pytest.mark.parametrize("n,d,lam,rep", [(3, 2, 0.9, True), (5, 2, 0.85, True), (4, 3, 0.9, False)])
def test_distributions_are_consistent(n, d, lam, rep):
    ex = sm.exact_equilibrium(n, d, lam, replacement=rep, tol=1e-10)
    p, pmax, tail = ex.queue_length_distribution, ex.max_length_distribution, ex.tail_fraction
    assert p.shape == pmax.shape == tail.shape == (ex.length_cap + 1,)
    assert abs(p.sum() - 1) < 1e-12 and abs(pmax.sum() - 1) < 1e-12
    assert np.all(p >= 0) and np.all(pmax >= 0)
    np.testing.assert_allclose(np.cumsum(p[::-1])[::-1], tail, rtol=0, atol=1e-12)
    # u_l >= 1 iff max >= l, and 1 <= u_l <= n there: E[u_l]/n <= P(max >= l) <= E[u_l]
    p_ge = np.cumsum(pmax[::-1])[::-1]
    assert np.all(tail <= p_ge + 1e-12) and np.all(p_ge <= n * tail + 1e-12)
    # JSQ(d) is not d = 1: the maximum is much more concentrated than the maximum of n
    # independent M/M/1 queues, P(max <= l) = (1 - lam^(l+1))^n
    mm1 = np.diff((1 - lam ** np.arange(ex.length_cap + 2)) ** n, prepend=0.0)
    assert pmax.max() > mm1.max() + 0.05


def test_convergence_under_growing_caps():
    # successive boxes agree to within the boundary mass of the smaller one
    n, d, lam = 4, 2, 0.9
    runs = [sm.exact_equilibrium(n, d, lam, levels=10, tol=t) for t in (1e-4, 1e-6, 1e-8, 1e-11)]
    best = runs[-1]
    for r in runs[:-1]:
        assert (r.length_cap, r.spread_cap) <= (best.length_cap, best.spread_cap)
        assert np.abs(r.tail_fraction - best.tail_fraction).max() < 10 * r.truncation_mass
    errs = [np.abs(r.tail_fraction - best.tail_fraction).max() for r in runs[:-1]]
    assert errs[0] > errs[1] > errs[2]
    # and within one call the caps grew (several rounds) and the last change is reported
    assert best.rounds >= 2 and math.isfinite(best.cap_change)


@pytest.mark.parametrize("args,kw", [((2, 2, 0.999, 3), {}), ((4, 2, 0.9, 8), {"replacement": False})])
def test_former_slow_cases(args, kw):
    # these took 90 s and 150 s with the old +2 cap growth; now seconds
    ex = sm.exact_equilibrium(*args[:3], levels=args[3], **kw)
    assert ex.truncation_mass < 1e-10 and ex.residual < 1e-10
    assert abs(ex.identity_error) <= ex.truncation_mass + 1e-12
    assert ex.rounds <= 14  # geometric growth: the old +2 steps took thousands of boxes here
    np.testing.assert_allclose(sm.exact_tail_fraction(*args, **kw), ex.tail_fraction, atol=1e-15)


def test_n10_light_load():
    # n = 10 in the normal suite: lam = 0.7, where tol = 1e-7 needs ~0.4M states
    ex = sm.exact_equilibrium(10, 2, 0.7, levels=8, tol=1e-7)
    assert ex.truncation_mass < 1e-7 and ex.residual <= 1e-10 and ex.solver == "iterative"
    assert abs(ex.identity_error) <= ex.truncation_mass
    assert ex.cap_change < 1e-5  # the previous caps already agreed closely
    # JSQ(2) at n = 10 lies between the fluid limit and independent queues
    fluid = sm.fluid_fixed_point(2, 0.7, 8)
    assert np.all(ex.tail_fraction[2:] > fluid[2:]) and np.all(ex.tail_fraction[2:] < 0.7 ** np.arange(2, 9))


# ~10 GB, minutes: make validate; test_n10_light_load is its quick twin (same solver path)
@pytest.mark.validation
def test_n10_issue_target():
    # issue 11 item 5: n = 10, lam = 0.9, levels 0..14 with the boundary mass below 1e-7
    # (17.6 million states, ~10 GB, ~100 s on a quiet core)
    ex = sm.exact_equilibrium(10, 2, 0.9, levels=14, tol=1e-7)
    assert ex.truncation_mass < 1e-7 and ex.residual <= 1e-10
    assert abs(ex.identity_error) <= ex.truncation_mass
    assert ex.rounds >= 2 and ex.cap_change < 1e-4
    # a box with 100x the boundary mass agrees to within that mass
    coarse = sm.exact_equilibrium(10, 2, 0.9, levels=14, tol=1e-5)
    assert coarse.states < ex.states
    assert np.abs(coarse.tail_fraction - ex.tail_fraction).max() < 10 * coarse.truncation_mass
    assert ex.tail_fraction[14] > 1e-5  # level 14 carries mass: the caps are not just the levels


def test_exact_oracle_itself_on_mm1_and_identity():
    # copied from tests/test_supermarket.py (the exact oracle's own checks belong here)
    # d = 1: the exact solve must reproduce P(length >= i) = lam^i.
    ex = sm.exact_tail_fraction(3, 1, 0.5, 6)
    np.testing.assert_allclose(ex, 0.5 ** np.arange(7), atol=1e-10)
    # E[u_1] = lam n holds exactly in any stationary law.
    for rep in (True, False):
        ex = sm.exact_tail_fraction(3, 2, 0.6, 5, replacement=rep)
        assert abs(ex[1] - 0.6) < 1e-10


# --------------------------------------------------------------------------- against simulation

def test_matches_long_simulation():
    # the exact law and the count-chain simulator are independent codes
    n, d, lam = 7, 2, 0.85
    ex = sm.exact_equilibrium(n, d, lam, levels=9, tol=1e-7)  # 1e-7 << the SE (>= 3e-4)
    # 16 replicas x 100,000 steps (about 7,700 mean service times each)
    r = sm.simulate(n, d, lam, steps=100_000, replicas=16, seed=21, burn_in=5_000, levels=12)
    est = r.tail_fraction_estimate()
    m = min(est.mean.size, 10)
    bad = np.abs(est.mean[:m] - ex.tail_fraction[:m]) > Z * est.stderr[:m] + 1e-5
    assert not bad.any(), (est.mean[:m], ex.tail_fraction[:m], est.stderr[:m])
    # the law of the longest queue, time-averaged per replica, where it is well sampled
    pm = r.max_length_distribution
    k = min(pm.shape[1], ex.max_length_distribution.size)
    mean, se = pm[:, :k].mean(axis=0), pm[:, :k].std(axis=0, ddof=1) / math.sqrt(pm.shape[0])
    seen = ex.max_length_distribution[:k] > 1e-3
    assert seen.sum() >= 6
    bad = seen & (np.abs(mean - ex.max_length_distribution[:k]) > Z * se)
    assert not bad.any(), (mean, ex.max_length_distribution[:k], se)
    # the check has teeth: JSQ(3) is distinguishable
    other = sm.exact_equilibrium(n, 3, lam, levels=9, tol=1e-7).tail_fraction
    assert np.any(np.abs(est.mean[:m] - other[:m]) > Z * est.stderr[:m])


# --------------------------------------------------------------------------- bad input

def _no_build(*a, **k):
    raise AssertionError("reached the state-space build")


BAD = [
    (dict(tol=0), "tol"), (dict(tol=float("nan")), "tol"), (dict(tol=-1), "tol"),
    (dict(tol=0.5), "tol"), (dict(tol=float("inf")), "tol"), (dict(tol="1e-3"), "tol"),
    (dict(tol=1e-16), "tol"), (dict(n=0), "n"), (dict(n=E.MAX_N + 1), "n"), (dict(n=2.5), "n"),
    (dict(d=0), "d"), (dict(d=1.5), "d"), (dict(lam=0.0), "lam"), (dict(lam=1.0), "lam"),
    (dict(lam=float("nan")), "lam"), (dict(replacement="yes"), "replacement"),
    (dict(d=5, replacement=False), "d"), (dict(levels=-1), "levels"), (dict(levels=1.5), "levels"),
    (dict(max_states=0), "max_states"), (dict(max_iter=0), "max_iter"), (dict(solver="lu"), "solver"),
    (dict(n=2, levels=10**8), "levels"),  # the first box alone is too big
]


@pytest.mark.parametrize("bad,name", BAD)
def test_bad_input_raises_before_building(bad, name, monkeypatch):
    monkeypatch.setattr(E, "Box", _no_build)
    kw = dict(n=4, d=2, lam=0.5, levels=3) | bad
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        sm.exact_equilibrium(kw.pop("n"), kw.pop("d"), kw.pop("lam"), **kw)


@pytest.mark.parametrize("bad,name", [(dict(tol=0), "tol"), (dict(tol=float("nan")), "tol"),
                                      (dict(tol=-1), "tol"), (dict(levels=-2), "levels"),
                                      (dict(n=0), "n")])
def test_tail_fraction_rejects_bad_input(bad, name, monkeypatch):
    monkeypatch.setattr(E, "Box", _no_build)
    kw = dict(n=2, d=2, lam=0.8, levels=3) | bad
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        sm.exact_tail_fraction(kw.pop("n"), kw.pop("d"), kw.pop("lam"), kw.pop("levels"), **kw)


@pytest.mark.parametrize("bad,name", [(dict(cap=0), "cap"), (dict(cap=2.5), "cap"), (dict(lam=2), "lam"),
                                      (dict(n=12, cap=40), "cap")])
def test_exact_stationary_rejects_bad_input(bad, name, monkeypatch):
    monkeypatch.setattr(E, "Box", _no_build)
    kw = dict(n=3, d=2, lam=0.5, cap=6) | bad
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        sm.exact_stationary(kw.pop("n"), kw.pop("d"), kw.pop("lam"), kw.pop("cap"), **kw)


def test_state_limit_raises_before_the_big_box(monkeypatch):
    # n = 10 at lam = 0.9 needs millions of states: with max_states = 1e5 the growth stops
    # with a ValueError, and no box beyond the limit is ever built
    built = []
    real = E.Box

    def counting_box(n, d, lam, rep, C, W):
        built.append(E.box_states(n, C, W))
        return real(n, d, lam, rep, C, W)

    monkeypatch.setattr(E, "Box", counting_box)
    with pytest.raises(ValueError, match=r"\bmax_states\b"):
        sm.exact_equilibrium(10, 2, 0.9, levels=14, tol=1e-7, max_states=100_000)
    assert built and max(built) <= 100_000


def test_iteration_limit_raises():
    with pytest.raises(ValueError, match=r"\bmax_iter\b"):
        sm.exact_equilibrium(5, 2, 0.9, levels=6, tol=1e-10, max_iter=2, solver="iterative")
