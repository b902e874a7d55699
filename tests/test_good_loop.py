"""The good loop (benchmarks/good_loop.py, good_loop.c) simulates the supermarket chain.

The peer of benchmarks/bench_good_loop.py is only a fair peer if it does the same work: here it
is checked against the exact stationary law (both sampling rules, fixed seeds, a 4-SE tolerance
from the run's own replica spread), and the same check rejects a near wrong model (the table of
d + 1 choices), so it can fail. The C loop and the numba loop give the same bits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import good_loop as G  # noqa: E402
import good_loop_c as GC  # noqa: E402

from qlib.supermarket import exact_tail_fraction  # noqa: E402

N, D, LAM, LEVELS = 4, 2, 0.8, 6  # levels compared; the loop carries CAP
CAP = 30
Z_MAX = 4.0  # fixed before the run: |mean - exact| / SE over the replicas, every level


def _z(tail: np.ndarray, exact: np.ndarray) -> np.ndarray:
    x = tail[:, 1:LEVELS + 1]
    se = x.std(axis=0, ddof=1) / np.sqrt(x.shape[0])
    return np.abs(x.mean(axis=0) - exact[1:]) / np.maximum(se, 1e-12)


@pytest.mark.parametrize("replacement", [True, False])
def test_time_averages_match_the_exact_law(replacement):
    exact = exact_tail_fraction(N, D, LAM, LEVELS, replacement=replacement)
    r = G.simulate(N, D, LAM, steps=100_000, burn_in=2_000, replicas=32, seed=7, replacement=replacement,
                   threads=1, levels=CAP)
    z = _z(r["tail_fraction"], exact)
    assert z.max() < Z_MAX, (z, r["tail_fraction"].mean(axis=0), exact)
    # the same criterion has the power to reject a near wrong model: d + 1 choices
    wrong = G.simulate(N, D + 1, LAM, steps=100_000, burn_in=2_000, replicas=32, seed=7,
                       replacement=replacement, threads=1, levels=CAP)
    assert _z(wrong["tail_fraction"], exact).max() > 3 * Z_MAX


def _pair(replicas, sums, replacement, threads_a, threads_b, other):
    n, d, lam, steps = 50, 3, 0.9, 3_000
    pw, p64 = G.power_table(n, d, replacement), G.arrival_threshold(lam)
    out = []
    for adv, threads in ((G.advance, threads_a), (other, threads_b)):
        st, u = G.xoshiro_states(11, replicas), G.empty_counts(n, replicas)
        s = adv(st, u, pw, p64, n, steps, sums=sums, threads=threads)
        out.append((st, u, s))
    return out


@pytest.mark.parametrize("sums", [True, False])
def test_prange_gives_the_serial_bits(sums):
    (sa, ua, xa), (sb, ub, xb) = _pair(5, sums, True, 1, 2, G.advance)
    assert np.array_equal(sa, sb) and np.array_equal(ua, ub)
    if sums:
        assert all(np.array_equal(p, q) for p, q in zip(xa, xb))


def test_sums_do_not_change_the_chain():
    pw, p64 = G.power_table(50, 3), G.arrival_threshold(0.9)
    runs = []
    for sums in (True, False):
        st, u = G.xoshiro_states(3, 4), G.empty_counts(50, 4)
        G.advance(st, u, pw, p64, 50, 2_000, sums=sums, threads=1)
        runs.append((st, u))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
    assert runs[0][1][:, 1].max() > 0  # it moved


@pytest.mark.skipif(GC.compiler() is None, reason="no C compiler")
@pytest.mark.parametrize("sums,replacement", [(True, True), (False, True), (True, False)])
def test_c_loop_gives_the_numba_bits(sums, replacement):
    (sa, ua, xa), (sb, ub, xb) = _pair(3, sums, replacement, 1, 2, GC.advance)
    assert np.array_equal(sa, sb) and np.array_equal(ua, ub)
    if sums:
        assert all(np.array_equal(p, q) for p, q in zip(xa, xb))


def test_level_cap_and_bad_input_are_loud():
    pw, p64 = G.power_table(10, 2), G.arrival_threshold(0.99)
    st, u = G.xoshiro_states(0, 2), G.empty_counts(10, 2, levels=1)
    with pytest.raises(RuntimeError, match="level cap"):
        G.advance(st, u, pw, p64, 10, 5_000, threads=1)
    with pytest.raises(ValueError, match="n must be"):
        G.advance(st, u, pw, p64, 0, 10, threads=1)
    with pytest.raises(ValueError, match="d must be"):
        G.power_table(3, 5, replacement=False)
