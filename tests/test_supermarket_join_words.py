"""The join words of the count chain's arrival (qlib.supermarket.arrival): an arrival's word w
joins a length >= i iff w < T(u_i), T(u) = ceil(2^64 g(u) - 1/2), which is U < g(u) for
U = (w + 1/2)/2^64. T is computed in float64: checked here against exact integers (its stated
error), for monotonicity (the hits are a prefix), at its ends (T(0) = 0, T(n) = 2^64 - 1), and
by an exact per-step oracle for both sampling rules through the table (n <= TABLE_ENTRIES) and
through the formula the kernel evaluates above it; the table path and the formula path give
the same counts, random states and sums bit for bit.
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil, comb, log

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from qlib import _rng
from qlib.supermarket import arrival as A
from qlib.supermarket import chain as K

TWO64 = 2**64


def _g(u: int, n: int, d: int, replacement: bool) -> Fraction:
    return Fraction(u, n) ** d if replacement else Fraction(comb(u, d), comb(n, d))


def _exact(u: int, n: int, d: int, replacement: bool) -> int:
    """ceil(2^64 g(u) - 1/2) exactly (2^64 - 1 at g = 1)."""
    g = _g(u, n, d, replacement)
    if g == 1:
        return TWO64 - 1
    return ceil(g * TWO64 - Fraction(1, 2))


def _words(u, n, d, replacement):
    u = np.asarray(u, np.uint64)
    with jax.enable_x64(True):
        return np.asarray(A._table_words(u, np.full(u.shape, n, np.uint64), np.full(u.shape, d, np.float64),
                                         replacement)).astype(object)


def _bound(g: Fraction, replacement: bool) -> float:
    """The stated error of T: 4 (|log g| + 1) 2^-53 relative with replacement, 2e-12 without,
    plus one word."""
    if g == 0:
        return 0.0
    rel = 4 * (abs(log(g.numerator) - log(g.denominator)) + 1) * 2.0**-53 if replacement else 2e-12
    return rel * float(g) * 2.0**64 + 1


@pytest.mark.parametrize("replacement", [True, False])
def test_join_words_are_within_their_stated_error_of_the_exact_rounding(replacement):
    exact_hits = total = 0
    for n in (1, 2, 3, 7, 10, 33, 100, 1000):
        for d in (1, 2, 3, 5, 10, 31):
            if not replacement and d > n:
                continue
            us = list(range(n + 1))
            got = _words(us, n, d, replacement)
            for u, t in zip(us, got):
                want = _exact(u, n, d, replacement)
                assert abs(int(t) - want) <= _bound(_g(u, n, d, replacement), replacement), (n, d, u, int(t),
                                                                                             want)
                exact_hits += int(t) == want
                total += 1
    assert exact_hits > 0.05 * total  # small g are exact; near g = 1 float64 holds 53 bits of the 64


@pytest.mark.parametrize("replacement", [True, False])
def test_join_words_at_large_n_and_their_ends(replacement):
    n, d = 2**32 - 1, 7
    us = [0, 1, 6, 7, 8, 1000, n // 3, n // 2, n - 1000, n - 2, n - 1, n]
    got = _words(us, n, d, replacement)
    for u, t in zip(us, got):
        g = _g(u, n, d, replacement)
        want = TWO64 - 1 if g == 1 else ceil(g * TWO64 - Fraction(1, 2))
        assert abs(int(t) - want) <= _bound(g, replacement), (u, int(t), want)
    assert got[0] == 0 and got[-1] == TWO64 - 1
    if not replacement:
        assert got[2] == 0  # C(u, d) = 0 below d
    # every u < n leaves the word 2^64 - 2 (the largest an arrival compares) out: only u = n takes it
    assert got[-2] < TWO64 - 2


@pytest.mark.parametrize("replacement", [True, False])
def test_join_words_are_non_decreasing(replacement):
    # the kernel's prefix-difference update needs hits that are a prefix: T non-decreasing in u
    for n, d in ((1000, 10), (5000, 2), (2**20, 3), (3000, 2999), (10**4, 10**4 if replacement else 40)):
        t = _words(np.arange(n + 1), n, d, replacement).astype(np.uint64)
        assert np.all(t[1:] >= t[:-1]), (n, d)


# ---------------------------------------------------------------------- the exact per-step oracle, both paths

CASES = [(n, d) for n in (1, 2, 3, 4) for d in (1, 2, 3)]


def _states(n: int, L: int):
    out = []

    def rec(prefix):
        if len(prefix) == L:
            out.append(prefix + [0])
            return
        for v in range(prefix[-1], -1, -1):
            rec(prefix + [v])

    rec([n])
    return out


@pytest.mark.parametrize("path", ["table", "formula"])
@pytest.mark.parametrize("replacement", [True, False])
def test_exact_per_step_arrival_probabilities_through_table_and_formula(replacement, path):
    """For every state of n <= 4 with 4 levels, the words of an arrival that reach length >= j are
    found by bisection on the kernel's hits (carried join words from the table, or the formula);
    their share is g(u_j) up to 2^-52 relative, and the next state is the one-customer move."""
    L = 4
    lanes = [(n, d, s, j) for n, d in CASES if replacement or d <= n for s in _states(n, L)
             for j in range(1, L + 1)]
    W = len(lanes)
    u = np.array([s for _, _, s, _ in lanes], np.uint32).T[None]
    n_arr = np.array([x[0] for x in lanes], np.uint64)
    d_arr = np.array([x[1] for x in lanes], np.float64)
    table, offsets = A.join_table(n_arr, d_arr, replacement)
    j_arr = np.array([x[3] for x in lanes])

    @jax.jit
    def level_at(w2):
        p = A._with_norm(K.LaneParams(jnp.asarray(n_arr), jnp.asarray(d_arr),
                                      jnp.full(W, TWO64 - 1, jnp.uint64), jnp.zeros(W, jnp.float64)))
        ev = A._events(jnp.zeros(W, jnp.uint64), w2, p, replacement)  # word 1 = 0: an arrival
        uu = jnp.asarray(u)
        if path == "table":
            tc = jnp.take(jnp.asarray(table), jnp.asarray(offsets) + uu[:, 1:].astype(jnp.int64))
        else:
            tc = A.join_words(uu[:, 1:], p, replacement)
        c = A._hits(uu, ev, p, replacement, tc)
        lvl = jnp.sum(c, axis=1, dtype=jnp.int32)
        return lvl, K.apply(uu, ev, lvl)

    def run(w2):
        with jax.enable_x64(True):
            lvl, nxt = level_at(jnp.asarray(np.array([min(int(x), TWO64 - 1) for x in w2], np.uint64)))
        return np.asarray(lvl)[0], np.asarray(nxt)[0]

    lo, hi = np.zeros(W, object), np.full(W, TWO64, object)
    for _ in range(66):  # b_j = the first word with level < j (the level is non-increasing in the word)
        open_ = lo < hi
        if not open_.any():
            break
        mid = (lo + hi) // 2
        lvl, _ = run(mid)
        ge = lvl >= j_arr
        lo, hi = np.where(open_ & ge, mid + 1, lo), np.where(open_ & ~ge, mid, hi)
    for (n, d, s, j), b in zip(lanes, lo):
        g = Fraction(s[j], n) ** d if replacement else Fraction(comb(s[j], d), comb(n, d))
        p = Fraction(int(b), TWO64)
        assert abs(p - g) * TWO64 <= _bound(g, replacement) + 1, (n, d, s, j, float(p), float(g))
    # a word inside each length's interval moves one customer to that length + 1
    b = {(n, d, tuple(s), j): int(x) for (n, d, s, j), x in zip(lanes, lo)}
    probe, want = [], []
    for n, d, s, j in lanes:
        top = TWO64 if j == 1 else b[(n, d, tuple(s), j - 1)]
        bot = b[(n, d, tuple(s), j)]
        probe.append((top - 1 + bot) // 2 if top > bot else 0)
        nxt = list(s)
        nxt[j] += 1
        want.append(nxt if top > bot else None)
    lvl, nxt = run(probe)
    checked = 0
    for k, w in enumerate(want):
        if w is not None:
            assert nxt[:, k].tolist() == w and lvl[k] == lanes[k][3] - 1, (lanes[k], nxt[:, k].tolist(), w)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("chains", [1, 2])
def test_table_path_equals_formula_path(chains, replacement, monkeypatch):
    points = [(50, 3, 0.9), (17, 2, 0.7), (1000, 10, 0.95)]
    params = K.lane_params(points, [3, 3, 2])
    u0 = np.zeros((chains, 9, 8), np.uint32)
    u0[:, 0] = params.n.astype(np.uint32)
    u0[-1, 1:3] = u0[-1, :1] // 2  # the top chain starts half busy
    with jax.enable_x64(True):
        rng0 = np.asarray(_rng.replica_states(4, jnp.arange(8))).astype(np.uint64)

    def run():
        drv = K.ChainDriver(u0, rng0, params, replacement=replacement, levels=8, progress=False, total=4000,
                            desc="test")
        out = drv.run(4000, observe="sums")
        return drv, [drv.counts(), drv.rng(), out["sum_u"], out["sum_busy"]]

    tabled, a = run()
    monkeypatch.setattr(A, "TABLE_ENTRIES", 0)  # the bound forced low: every point above it
    formula, b = run()
    assert tabled.table is not None and formula.table is None
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
