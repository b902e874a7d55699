"""Sampling without replacement's exact thresholds (issue 43): the table T(u) and the arrival's x.

An arrival of value word w joins level i iff U = (w + 1/2)/2^64 < g(u_i) = C(u_i, d)/C(n, d). The
kernel decides it as w < T(u_i) with the integer table T, and computes x = max{u < n: T(u) <= w}
with the draw. Both are checked here against Python integers and fractions, word for word; the
transition oracle (tests/test_supermarket_references.py) checks the resulting step.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from qlib.supermarket import events as E

TWO64 = 2**64
POINTS = [(1, 1), (2, 1), (2, 2), (3, 2), (4, 3), (12, 4), (50, 5), (100, 100), (1000, 10), (999, 500),
          (5000, 7)]


def _exact_T(u: int, n: int, d: int) -> int:
    """#{w in [0, 2^64): (w + 1/2)/2^64 < C(u, d)/C(n, d)} by fractions (independent of the kernel)."""
    g = Fraction(comb(u, d), comb(n, d))
    # w < 2^64 g - 1/2  <=>  w <= ceil(2^64 g - 1/2) - 1
    return min(TWO64, max(0, -(-(2 * TWO64 * g - 1) // 2)))


@pytest.mark.parametrize("n,d", [(1, 1), (3, 2), (4, 3), (12, 4), (50, 5), (60, 60), (200, 13)])
def test_threshold_table_is_the_exact_count_of_words(n, d):
    T = E.threshold_table(n, d)
    want = [_exact_T(u, n, d) for u in range(n + 1)]
    assert [int(t) for t in T[:n]] == want[:n]
    assert want[n] == TWO64 and int(T[n]) == TWO64 - 1  # T(n) = 2^64, stored capped (u = n is masked)
    assert np.all(np.diff(T.astype(object)) >= 0) and not T[:d].any()


@pytest.mark.parametrize("bad", [("d", 0, 5), ("d", 6, 5), ("d", 2, 0)])
def test_threshold_table_rejects_d_outside_1_to_n(bad):
    _, d, n = bad
    with pytest.raises(ValueError, match="d must be"):
        E.threshold_table(n, d)


def _words(n: int, T: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Random words and every boundary word T(u), T(u) - 1 (the words where x changes), 0 and 2^64 - 1."""
    w = np.random.default_rng(seed).integers(0, TWO64, size=count, dtype=np.uint64)
    edges = np.concatenate([T[:n], np.maximum(T[:n], 1) - 1])
    return np.concatenate([w, edges, np.array([0, TWO64 - 1], np.uint64)])


def _x(w: np.ndarray, n: int, d: int) -> np.ndarray:
    with jax.enable_x64(True):
        tab = jnp.asarray(E.threshold_table(n, d))[:, None]
        wj = jnp.asarray(w)[:, None]
        x = E.table_threshold(E.uniform_log(wj), wj, tab, jnp.full((1,), n, jnp.uint64),
                              jnp.full((1,), float(d)))
    return np.asarray(x)[:, 0]


@pytest.mark.parametrize("n,d", POINTS)
def test_table_threshold_is_the_exact_inverse(n, d):
    T = np.asarray(E.threshold_table(n, d))
    w = _words(n, T, 20_000, n * 7 + d)
    want = np.searchsorted(T[:n], w, side="right") - 1  # max{u < n: T(u) <= w}
    np.testing.assert_array_equal(_x(w, n, d), want)


@pytest.mark.parametrize("n,d", [(3, 2), (50, 5), (1000, 10)])
@pytest.mark.parametrize("off", [-3, 2, 40])
def test_a_wrong_guess_still_gives_the_exact_inverse(n, d, off, monkeypatch):
    # the guess is only a guess: off by any amount, the check sends it to the bisection
    guess = E._threshold_guess
    monkeypatch.setattr(E, "_threshold_guess",
                        lambda lu, nn, dd: jnp.clip(guess(lu, nn, dd) + off, 0, n - 1))
    T = np.asarray(E.threshold_table(n, d))
    w = _words(n, T, 2_000, 1)
    np.testing.assert_array_equal(_x(w, n, d), np.searchsorted(T[:n], w, side="right") - 1)
