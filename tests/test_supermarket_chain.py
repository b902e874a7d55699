"""The chain kernel (qlib.supermarket.chain): the fast block-drawn kernel against the plain step,
bit for bit; the level-cap rule; the public API against golden outputs.

The plain step (draw one word, sum the hits for the level, one-hot update) is the definition
of the chain. The fast kernel draws a block of steps at once and updates groups of lanes with
the prefix-mask form; any difference in a count, a random state, an overflow flag or a time
sum is a bug, so every comparison here is exact. The exact-oracle tests of
test_supermarket_simulation.py and test_supermarket_coupling.py check that this chain is the
supermarket model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from qlib import _rng
from qlib.supermarket import chain as K
from qlib.supermarket.point import Point

DATA = Path(__file__).resolve().parent / "data"


def _plain_run(u0, rng0, params, steps, active, replacement):
    """``steps`` plain steps of the active lanes; returns (u, rng, overflow, sum_u, sum_busy)."""
    with jax.enable_x64(True):
        p = K.LaneParams(*(jnp.asarray(a) for a in params))
        act = jnp.asarray(active)

        @jax.jit
        def run(u, rng):
            def body(_, c):
                st, su, sb = c
                new, _ = K.step(st, p, replacement)
                # an inactive lane does not move (nor does its random state)
                new = K.ChainState(jnp.where(act, new.rng, st.rng), jnp.where(act[None, None], new.u, st.u),
                                   jnp.where(act, new.overflow, st.overflow))
                return new, su + new.u[0].astype(jnp.int64), sb + (new.u[0] > 0).astype(jnp.int64)

            st = K.ChainState(rng, u, jnp.zeros(rng.shape, bool))
            z = jnp.zeros(u.shape[1:], jnp.int64)
            return jax.lax.fori_loop(0, steps, body, (st, z, z))

        st, su, sb = run(jnp.asarray(u0), jnp.asarray(rng0))
        return tuple(np.asarray(a) for a in (st.u, st.rng, st.overflow, su, sb))


def _lanes(chains: int, replacement: bool):
    """Two parameter points x 8 lanes, non-trivial starting counts, one lane inactive."""
    points = [(50, 3, 0.9), (17, 2, 0.7)]
    params = K.lane_params(points, [8, 8])
    L = 6
    u0 = np.zeros((chains, L + 1, 16), np.uint32)
    u0[:, 0, :8], u0[:, 0, 8:] = 50, 17
    u0[0, 1:4, :5] = [[30, 20, 45, 10, 0], [10, 5, 30, 0, 0], [2, 5, 1, 0, 0]]
    u0[0, 1:3, 8:13] = [[17, 9, 3, 0, 12], [4, 1, 0, 0, 5]]
    if chains == 2:
        u0[1] = np.maximum(u0[0], u0[0, :1] * (np.arange(L + 1)[:, None] <= 2))  # an upper chain
    with jax.enable_x64(True):
        rng0 = np.asarray(_rng.replica_states(3, jnp.arange(16))).astype(np.uint64)
    active = np.ones(16, bool)
    active[7] = False
    return u0, rng0, params, active


@pytest.mark.parametrize("loop_bytes", [1024, 10**6])  # groups of 1-2 lanes, and all lanes at once
@pytest.mark.parametrize("replacement,table", [(True, True), (False, True), (False, False)],
                         ids=["with", "without-table", "without-log-g"])
@pytest.mark.parametrize("chains", [1, 2])
def test_fast_kernel_equals_plain_step(chains, replacement, table, loop_bytes, monkeypatch):
    # without replacement: the exact threshold tables (the default where they fit), and the carried
    # log g the kernel falls back to when they do not (TABLE_BYTES = 0 forces it)
    monkeypatch.setattr(K, "small_loop_bytes", lambda: loop_bytes)
    if not table:
        monkeypatch.setattr(K, "TABLE_BYTES", 0)
    u0, rng0, params, active = _lanes(chains, replacement)
    steps = 3000  # > one block at these widths, and not a multiple of one
    drv = K.ChainDriver(u0, rng0, params, replacement=replacement, levels=6, progress=False, total=steps,
                        desc="test")
    assert (drv.table is not None) == (table and not replacement)
    out = drv.run(1234, observe="sums", active=drv.mask(active))
    out2 = drv.run(steps - 1234, observe="sums", active=drv.mask(active))
    u, rng, ovf, su, sb = _plain_run(u0, rng0, params, steps, active, replacement)
    assert not ovf.any() and drv.levels == 6  # no growth here: the cap was high enough
    np.testing.assert_array_equal(drv.counts(), u)
    np.testing.assert_array_equal(drv.rng(), rng)
    np.testing.assert_array_equal(drv.lanes_of(out["sum_u"] + out2["sum_u"]), su)
    np.testing.assert_array_equal(drv.lanes_of(out["sum_busy"] + out2["sum_busy"]), sb)
    assert np.all(np.diff(u.astype(np.int64), axis=1) <= 0)  # the state stayed a valid count vector
    assert rng[7] == rng0[7] and np.array_equal(u[..., 7], u0[..., 7])  # the inactive lane did not move
    if jax.default_backend() == "cpu":  # the group width follows XLA:CPU's small-loop threshold
        g = K.group_width(drv.per_device, 6, chains, "sums", drv.integer)
        assert (g == drv.per_device) if loop_bytes > 10**5 else (g <= 2)


def test_draw_block_rows_are_successive_draws():
    with jax.enable_x64(True):
        p = K.LaneParams(*(jnp.asarray(a)
                           for a in K.lane_params([(1000, 10, 0.95), (2**32 - 1, 2, 0.5)], [2, 1])))
        rng = _rng.replica_states(7, jnp.arange(3))
        for replacement in (True, False):
            block = K.draw_block(rng, p, 9, replacement)
            r = rng
            for k in range(9):
                r, ev = K.draw(r, p, replacement)
                for a, b in zip(ev, (x[k] if x is not None else None for x in block)):
                    if a is not None:
                        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            np.testing.assert_array_equal(np.asarray(r),
                                          np.asarray(_rng.advance(rng, 18)))  # two words a step


def test_level_cap_rule():
    assert [K.grown(L) for L in (2, 4, 8, 9, 20)] == [6, 8, 12, 13, 30]
    assert K.final_levels(5, 3) == 5 and K.final_levels(5, 5) == 5
    assert K.final_levels(5, 6) == 9 and K.final_levels(5, 10) == 13 and K.final_levels(2, 7) == 10


def test_overflow_grows_the_cap_and_reruns_the_chunk():
    # n = 10, lam = 0.95 from empty with a cap of 2: queues pass length 2 almost at once
    _, rng0, _, _ = _lanes(1, True)
    params = K.lane_params([(10, 2, 0.95)], [16])
    u0 = np.zeros((1, 2, 16), np.uint32)
    u0[0, 0] = 10
    small = K.ChainDriver(u0, rng0, params, replacement=True, levels=2, progress=False, total=1, desc="t")
    big = K.ChainDriver(u0, rng0, params, replacement=True, levels=30, progress=False, total=1, desc="t")
    a = small.run(5000, observe="sums")
    b = big.run(5000, observe="sums")
    assert small.levels > 2
    w = small.levels + 1
    np.testing.assert_array_equal(small.counts(), big.counts()[:, :w])
    np.testing.assert_array_equal(small.lanes_of(a["sum_u"]), big.lanes_of(b["sum_u"])[:w])
    assert np.all(big.counts()[:, w:] == 0)
    assert K.final_levels(2, int(small.peak().max())) == small.levels


def test_the_cap_grows_exactly_when_an_arrival_would_pass_it():
    # one queue from length 5 under a cap of 6 levels, one step at a time: while its length is
    # <= 6 the cap stays 6 (length 6 fits); the first arrival at length 6 would pass it, so the
    # cap grows then (to grown(6)) and the customer is kept
    params = K.lane_params([Point.simulation(1, 1, one_minus_lam=2.0**-43)], [1])
    _, rng0, _, _ = _lanes(1, True)
    u0 = np.ones((1, 6, 1), np.uint32)  # u_0..u_5 = 1: length 5
    drv = K.ChainDriver(u0, rng0[:1], params, replacement=True, levels=6, progress=False, total=1, desc="t")
    seen6 = False
    for _ in range(5000):
        drv.run(1, observe="seen")
        length = int(drv.counts()[0, 1:, 0].sum())
        if length <= 6:
            assert drv.levels == 6, (length, drv.levels)
            seen6 |= length == 6
        else:
            assert length == 7 and drv.levels == K.grown(6)
            break
    assert seen6 and drv.levels == K.grown(6)


def test_public_api_matches_golden_outputs():
    """simulate, meeting_times and coupled_paths reproduce tests/data/supermarket_golden.npz bit
    for bit (83 arrays over R = 1, 3, 64, burn-in, batches, trajectories, level growth, no
    replacement, n = 2^32 - 1, d = 1, per-replica starts, ordered/unordered meetings, paths).

    A change of any number here is a change of the streams: regenerate the file on purpose
    (tests/data/make_supermarket_golden.py) and say so (benchmarks/README.md)."""
    sys.path.insert(0, str(DATA))
    try:
        import make_supermarket_golden as G
    finally:
        sys.path.remove(str(DATA))
    ref = np.load(DATA / "supermarket_golden.npz")
    new = G.generate()
    assert set(new) == set(ref.files)
    for k in ref.files:
        assert new[k].dtype == ref[k].dtype, k
        np.testing.assert_array_equal(new[k], ref[k], err_msg=k)


# ------------------------------------------------------------------ exact event probabilities (issue 13)
#
# Each test below checks an integer threshold or probability of the chain directly, against
# the exact value, where sampling could not resolve it; each names what the old kernel (one
# word per step, 32 bits for the event, the uniform and the rank) gave instead.

from fractions import Fraction  # noqa: E402

TWO64 = 2**64


def _jx(f, *args):
    with jax.enable_x64(True):
        return np.asarray(jax.jit(f)(*(jnp.asarray(a) for a in args)))


@pytest.mark.parametrize("eps", [1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12])
def test_simulated_one_minus_lam_is_the_requested_one(eps):
    # given as one_minus_lam: carried exactly; |error| <= 2^-63 absolute, so <= 2^-63/eps relative
    lam_eff, eps_eff = K.simulated_lam(K.arrival_threshold(one_minus_lam=eps))
    assert abs(eps_eff / Fraction(eps) - 1) <= Fraction(2) ** -63 / Fraction(eps) * 2
    assert abs(eps_eff / Fraction(eps) - 1) < 1e-6
    # given as a float lam: the simulated lam is that float's own value to 2^-63 (|dlam| <= 2^-52)
    lam = 1.0 - eps
    lam_eff, eps_eff = K.simulated_lam(K.arrival_threshold(lam))
    assert abs(lam_eff - Fraction(lam)) <= Fraction(2) ** -62
    assert abs(eps_eff / (1 - Fraction(lam)) - 1) < 1e-6
    # the old 32-bit threshold floor(2^32 lam/(1+lam)): +86% at 1 - lam = 1e-9, always rounded up
    p_old = Fraction(int(4294967296.0 * lam / (1.0 + lam)), 2**32)
    eps_old = (1 - 2 * p_old) / (1 - p_old)
    if eps <= 1e-9:
        assert eps_old / Fraction(eps) - 1 > 0.5


def test_departure_rank_has_probability_one_over_n_at_the_top():
    n = 2**32 - 1
    rank = lambda w: _jx(lambda w, n: K.departure_rank(w, n), np.uint64(w), np.uint64(n))  # noqa: E731
    w0 = -(-(n - 1) * TWO64 // n)  # the first word of the top rank n - 1
    assert rank(w0 - 1) == n - 2 and rank(w0) == n - 1 and rank(TWO64 - 1) == n - 1 and rank(0) == 0
    freq = Fraction(TWO64 - w0, TWO64)
    assert abs(freq - Fraction(1, n)) <= Fraction(1, TWO64)  # 1/n up to 2^-64 (old: 2/2^32, +100%)
    # and every rank is floor(w n / 2^64) exactly
    w = np.random.default_rng(0).integers(0, 2**63, size=4096, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    got = _jx(lambda w, n: K.departure_rank(w, n), w, np.full(w.shape, n, np.uint64))
    assert all(int(g) == (int(x) * n) >> 64 for g, x in zip(got, w))


def _threshold(w, n, d):
    f = lambda w, n, d: K.join_threshold(K.uniform_log(w), n, d)  # noqa: E731
    return _jx(f, np.asarray(w, np.uint64), np.asarray(n, np.uint64), np.asarray(d, np.float64))


def _last_word_below(n, d, v):
    """The largest word whose arrival threshold is < v (the threshold is non-decreasing in w)."""
    lo, hi = 0, TWO64 - 1  # threshold(lo) < v <= threshold(hi)
    assert _threshold(lo, n, d) < v <= _threshold(hi, n, d)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _threshold(mid, n, d) < v else (lo, mid)
    return lo


@pytest.mark.parametrize("u", [1, 2])
def test_arrival_joins_the_top_queues_with_the_exact_probability(u):
    # n = 1e5, d = 2, u_1 = u busy queues: an arrival joins one of them iff U < (u/n)^d, i.e.
    # iff the threshold x = floor(n U^(1/d)) is < u. Old: probability 0 at u = 1, +16% at u = 2.
    n, d = 10**5, 2
    w = _last_word_below(n, d, u)
    p = Fraction(w + 1, TWO64)
    exact = Fraction(u, n) ** d
    assert abs(p / exact - 1) < 1e-8, (float(p), float(exact))


@pytest.mark.parametrize("n", [1, 2, 10, 3 * 10**9, 2**32 - 1])
def test_arrival_threshold_never_reaches_n(n):
    # x <= n - 1 means an arrival into an all-busy state joins a queue of length >= 1: the
    # counts never exceed n. Old: floor(n exp(log U / d)) rounded to n for d >= ~1e9.
    words = np.array([0, 1, 2**53, 2**63 - 1, 2**63, TWO64 - 2**11, TWO64 - 2, TWO64 - 1], dtype=np.uint64)
    for d in (1, 2, 7, 10**9, 10**18, 2**63 - 1):
        x = _threshold(words, np.full(words.shape, n, np.uint64), np.full(words.shape, d, np.float64))
        assert np.all((0 <= x) & (x <= n - 1)), (n, d, x)
    U_old = (4294967295 + 0.5) / 4294967296.0  # the old largest uniform
    assert np.floor(n * np.exp(np.log(U_old) / 1e9)) == n  # what the old kernel did


def test_without_replacement_log_binomial_is_consistent_and_accurate():
    # log g(u) = log C(u, d)/C(n, d): g(n) = 1 exactly (every arrival into a full level passes
    # it), and accurate to 1e-12 absolute near u = n at n = 3e9, d = 7, where the old host and
    # JAX lgamma disagreed by ~1e-5 (u_1 exceeded n).
    import math

    n, d = 3 * 10**9, 7
    us = np.array([n, n - 1, n - 1000, n // 2, 10 * d, d], np.float64)
    with jax.enable_x64(True):
        f = jax.jit(lambda u, n, d: K.log_falling(u, d) - K.log_falling(n, d))
        got = np.asarray(f(jnp.asarray(us), jnp.float64(n), jnp.float64(d)))
    assert got[0] == 0.0
    for u, g in zip(us.astype(np.int64), got):
        k = n - int(u)  # log((u-j)/(n-j)) = log1p(-k/(n-j)): accurate for small k, else as a difference
        exact = math.fsum(math.log1p(-k / (n - j)) if 2 * k < n else math.log(int(u) - j) - math.log(n - j)
                          for j in range(d))
        assert abs(g - exact) <= 1e-12 * max(1.0, abs(exact)), (u, g, exact)
    # the hit rule: with all queues busy an arrival joins a busy queue (level 1), even at the
    # largest uniform; with one idle queue that uniform joins it (g(n - 1) < U)
    params = K.lane_params([(n, d, 0.9)], [1])
    with jax.enable_x64(True):
        p = K._with_norm(K.LaneParams(*(jnp.asarray(a) for a in params)))
        ev = K.Events(jnp.array([True]), jnp.array([0], jnp.uint32),
                      K.uniform_log(jnp.array([TWO64 - 1], jnp.uint64)))
        for u1, want in ((n, 1), (n - 1, 0)):
            u = jnp.asarray(np.array([[[n], [u1], [0]]], np.uint32))
            assert np.asarray(K.level(u, ev, p, False)).tolist() == [[want]], u1


def test_uniform_log_is_accurate_from_near_0_to_near_1():
    # log U, U = (w + 1/2)/2^64, in basic float64 operations (no libm log): relative error a
    # few ulp where U < 1/2 and where 1 - U < 2^-20, absolute 2^-52 in between
    from decimal import Decimal, getcontext

    getcontext().prec = 50
    rng = np.random.default_rng(1)
    w = np.concatenate([np.array([0, 1, 2, 2**20, 2**53, 2**63 - 1, 2**63, 2**64 - 2**44 - 1, 2**64 - 2**44,
                                  2**64 - 2**30, 2**64 - 2, 2**64 - 1], dtype=np.uint64),
                        rng.integers(0, 2**63, 2000, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
                        np.uint64(TWO64 - 1) - rng.integers(0, 2**50, 500, dtype=np.uint64)])
    got = _jx(K.uniform_log, w)
    for wi, g in zip(w.tolist(), got):
        exact = float(((Decimal(wi) + Decimal("0.5")) / Decimal(TWO64)).ln())
        tol = 4e-16 * abs(exact) if (wi < 2**63 or wi >= 2**64 - 2**44) else 2.3e-16
        assert abs(g - exact) <= tol, (wi, g, exact)


def test_unrolled_only_where_the_loop_is_one_kernel(monkeypatch):
    """The step loop is unrolled for small groups only when XLA:CPU compiles small loops into one
    kernel (raised threshold): unrolled without it, the body runs op by op (4x slower)."""
    from qlib.supermarket import loop

    raised = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=65536"
    monkeypatch.setenv("XLA_FLAGS", raised)
    assert [loop.unroll_steps(g) for g in (1, 32, 64)] == [4, 4, 1]
    monkeypatch.setenv("XLA_FLAGS", "")
    assert [loop.unroll_steps(g) for g in (1, 32, 64)] == [1, 1, 1]


def test_few_lanes_of_one_chain_run_one_lane_per_group(monkeypatch):
    # issue 43: below ONE_LANE_GROUPS_BELOW lanes per device (one chain, the integer step, the loop
    # one kernel) each lane is its own group; elsewhere the widest group whose loop fits
    if jax.default_backend() != "cpu":
        pytest.skip("group widths are chosen for XLA:CPU")
    raised = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=65536"
    monkeypatch.setenv("XLA_FLAGS", raised)
    below = K.ONE_LANE_GROUPS_BELOW
    assert [K.group_width(w, 6, 1, "sums", True) for w in (1, 2, below // 2)] == [1, 1, 1]
    assert K.group_width(below, 6, 1, "sums", True) == below
    assert K.group_width(4, 6, 2, "meet", True) == 4  # two chains: as before
    assert K.group_width(4, 6, 1, "sums", False) == 4  # the carried log g: as before
    monkeypatch.setenv("XLA_FLAGS", "")  # the loop is not one kernel: the widest group that fits 1024 bytes
    assert K.group_width(4, 6, 1, "sums", True) == 2
