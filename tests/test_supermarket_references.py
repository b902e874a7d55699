"""Independent references for the count chain (issue 22, item 2).

Each test here checks the kernel against something that shares none of its float code:

- **Reference chains, bit for bit.** ``benchmarks/numba_supermarket.python_chain`` (plain
  Python, written to the kernel's semantics: the same two SplitMix64 words per step, the same
  event and level rules) and, below, a chain in exact rational arithmetic (an arrival joins the
  largest i with U < g(u_i), decided with integers; A from ``fractions``), run side by side with
  ``simulate`` from the same seeds: the same counts and the same time sums, bit for bit, for both
  sampling rules and through both forms of the fast step (narrow groups, and wide groups that use
  the one-hot update).
- **An exact per-step transition oracle** at n <= 4, d <= 3, both sampling rules: for every
  state with levels 0..4, the words that lead to each next state are found by bisection on the
  (monotone) map word -> level of the kernel's own event and level functions, so the
  probability of every next state is known exactly, and compared with g(u_i) - g(u_(i+1)) for an
  arrival and (u_i - u_(i+1))/n for a departure.
- **The arrival threshold at its boundary words**: word A - 1 is an arrival and word A is
  not, and A = round(2^64 lam/(1+lam)) exactly, at lam whose 2^64 lam/(1+lam) has a fractional
  part on either side of 1/2.
"""

from __future__ import annotations

import functools
import sys
from fractions import Fraction
from math import comb
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import qlib.supermarket as sm
from qlib.supermarket import chain as K

TWO64 = 2**64
MASK64 = TWO64 - 1
GOLDEN = 0x9E3779B97F4A7C15

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import numba_supermarket as NS  # noqa: E402  (plain Python part only: numba is not needed)

sys.path.pop(0)


# --------------------------------------------------------------------------- an exact reference chain

def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _replica_state(seed: int, r: int, stream: int = 0) -> int:
    """qlib._rng.replica_states, in Python integers (independent of the library's code)."""
    s = _mix(((seed & MASK64) * GOLDEN + stream) & MASK64)
    return _mix((_mix(s ^ _mix((r + 1) & MASK64)) + GOLDEN) & MASK64)


def exact_threshold(lam: float | None = None, one_minus_lam: float | None = None) -> int:
    """round(2^64 p), p = lam/(1+lam), halves up, from the float given (written independently)."""
    lam_q = 1 - Fraction(one_minus_lam) if one_minus_lam is not None else Fraction(lam)
    x = lam_q / (1 + lam_q) * TWO64
    return (2 * x.numerator + x.denominator) // (2 * x.denominator)


def g_exact(u: int, n: int, d: int, replacement: bool) -> Fraction:
    """P(all d sampled queues have length >= i) when u of n queues do."""
    if replacement:
        return Fraction(u, n) ** d
    return Fraction(comb(u, d), comb(n, d))


def exact_chain(n, d, lam, *, steps, replicas, seed, levels, replacement, one_minus_lam=None):
    """The count chain in exact arithmetic: (counts (R, L+1), sum_u (R, L+1), sum_busy (R, L+1)).

    Arrival iff word 1 < A; it joins the largest i with U < g(u_i), U = (word 2 + 1/2)/2^64,
    decided exactly: (2 w + 1) den(g) < 2^65 num(g). Departure: rank floor(w n / 2^64), the
    queue at length #{i >= 1: u_i > rank} loses a customer.
    """
    A = exact_threshold(lam, one_minus_lam)
    # g = num(u)/den as integers, so that the compare is exact
    if replacement:
        den = n**d
        num = functools.lru_cache(maxsize=None)(lambda u: u**d)
    else:
        den = comb(n, d)
        num = functools.lru_cache(maxsize=None)(lambda u: comb(u, d))
    U, SU, SB = [], [], []
    for r in range(replicas):
        s = _replica_state(seed, r)
        u = [n] + [0] * levels
        su, sb = [0] * (levels + 1), [0] * (levels + 1)
        for _ in range(steps):
            s = (s + GOLDEN) & MASK64
            w1 = _mix(s)
            s = (s + GOLDEN) & MASK64
            w2 = _mix(s)
            if w1 < A:
                lhs = (2 * w2 + 1) * den
                lvl = 0
                while lvl < levels and lhs < (num(u[lvl + 1]) << 65):
                    lvl += 1
                assert lvl < levels, "raise levels"
                u[lvl + 1] += 1
            else:
                rank = (w2 * n) >> 64
                lvl = 0
                while lvl < levels and u[lvl + 1] > rank:
                    lvl += 1
                if lvl:
                    u[lvl] -= 1
            for j in range(levels + 1):
                su[j] += u[j]
                sb[j] += u[j] > 0
        U.append(u)
        SU.append(su)
        SB.append(sb)
    return np.array(U), np.array(SU), np.array(SB)


def _sums(r):
    """(counts, sum_u, sum_busy) of a simulate result, the sums recovered exactly as integers."""
    su = np.rint(r.tail_fraction * float(r.steps * r.n)).astype(np.int64)
    busy = np.cumsum(r.max_length_distribution[:, ::-1], axis=1)[:, ::-1]
    sb = np.rint(busy * r.steps).astype(np.int64)
    sb[:, 0] = np.where(r.counts[:, 0] > 0, r.steps, 0)
    return r.counts, su, sb


REF_POINTS = [  # (n, d, lam, replacement, steps, replicas)
    (7, 2, 0.8, True, 2500, 4),
    (4, 3, 0.9, True, 2500, 4),
    (1000, 10, 0.95, True, 1500, 2),
    (2**32 - 1, 3, 0.9, True, 1500, 2),
    (5, 3, 0.9, False, 2500, 4),
    (12, 4, 0.7, False, 2000, 4),
    (3, 2, 0.8, False, 2500, 4),
]


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("n,d,lam,replacement,steps,replicas,table",
                         [p + (True,) for p in REF_POINTS] + [p + (False,) for p in REF_POINTS if not p[3]])
def test_kernel_equals_exact_reference_chain(n, d, lam, replacement, steps, replicas, table, wide,
                                             monkeypatch):
    # wide: one group of 16 lanes, i.e. >= 8 lanes per device, so the fast step sums the hits
    # and applies the one-hot update; narrow: groups of 1-2 lanes, the prefix-difference update.
    # Without replacement, table=False forces the carried log g (no threshold tables)
    if not table:
        monkeypatch.setattr(K, "TABLE_BYTES", 0)
    if wide:
        monkeypatch.setattr(K, "small_loop_bytes", lambda: 10**6)
        replicas = 16
        steps = min(steps, 600)
    levels = 10
    r = sm.simulate(n, d, lam, steps=steps, replicas=replicas, seed=5, levels=levels, replacement=replacement)
    u, su, sb = exact_chain(n, d, lam, steps=steps, replicas=replicas, seed=5, levels=r.levels,
                            replacement=replacement)
    cu, csu, csb = _sums(r)
    np.testing.assert_array_equal(cu, u)
    np.testing.assert_array_equal(csu, su)
    np.testing.assert_array_equal(csb, sb)


@pytest.mark.parametrize("n,d,lam,steps,replicas", [(7, 2, 0.8, 3000, 3), (50, 5, 0.95, 3000, 2),
                                                    (2**32 - 1, 2, 0.9, 2000, 2)])
def test_kernel_equals_benchmarks_python_chain(n, d, lam, steps, replicas):
    # the plain-Python loop of benchmarks/numba_supermarket.py (replacement only), bit for bit
    ref = NS.python_chain(n, d, lam, steps=steps, replicas=replicas, seed=3, levels=12, burn_in=200)
    r = sm.simulate(n, d, lam, steps=steps, replicas=replicas, seed=3, levels=12, burn_in=200)
    L = r.levels + 1
    np.testing.assert_array_equal(r.counts, ref["counts"][:, :L])
    np.testing.assert_array_equal(r.tail_fraction, ref["tail_fraction"][:, :L])
    np.testing.assert_array_equal(r.max_length_distribution, ref["max_length_distribution"][:, :L])
    assert not ref["counts"][:, L:].any()


# --------------------------------------------------------------------------- the exact transition oracle

L_ORACLE = 4


def _states(n: int, L: int):
    """Every count vector u_0 = n >= u_1 >= ... >= u_L with u_L = 0 (no arrival overflows)."""
    out = []

    def rec(prefix):
        if len(prefix) == L:
            out.append(prefix + [0])
            return
        for v in range(prefix[-1], -1, -1):
            rec(prefix + [v])

    rec([n])
    return out


def _kernel_level_fn(replacement: bool, table: bool = False):
    """The kernel's event map and level on every lane; ``table``: without replacement, the arrivals'
    integer thresholds from the exact threshold tables (the fast kernel's events), else log U."""
    @jax.jit
    def fn(u, w1, w2, n, d, thr, tab):
        p = K._with_norm(K.LaneParams(n, d, thr, jnp.zeros(n.shape, jnp.float64)))
        ev = K._events(w1, w2, p, replacement, table=tab if table else None)
        assert (ev.log_u is None) == (replacement or table)
        lvl = K.level(u, ev, p, replacement or table)
        return ev.arrival, lvl, K.apply(u, ev, lvl)
    return fn


CASES = [(n, d) for n in (1, 2, 3, 4) for d in (1, 2, 3)]


@pytest.mark.parametrize("replacement,table", [(True, False), (False, False), (False, True)],
                         ids=["with", "without-log-u", "without-table"])
def test_exact_per_step_transition_probabilities(replacement, table):
    cases = [(n, d) for n, d in CASES if replacement or d <= n]
    lanes = []  # (n, d, state, event, j): P(level >= j) for that event
    for n, d in cases:
        for s in _states(n, L_ORACLE):
            for arrival in (True, False):
                for j in range(1, L_ORACLE + 1):
                    lanes.append((n, d, s, arrival, j))
    W = len(lanes)
    lam = 0.6
    thr = exact_threshold(lam)
    u = np.array([s for _, _, s, _, _ in lanes], np.uint32).T[None]  # (1, L+1, W)
    n_arr = np.array([x[0] for x in lanes], np.uint64)
    d_arr = np.array([x[1] for x in lanes], np.float64)
    thr_arr = np.full(W, thr, np.uint64)
    w1 = np.array([0 if a else MASK64 for _, _, _, a, _ in lanes], np.uint64)  # an arrival / a departure
    j_arr = np.array([x[4] for x in lanes])
    fn = _kernel_level_fn(replacement, table)
    tab = np.zeros((max(n_arr) + 1, W), np.uint64)  # one column per lane (ChainDriver's layout)
    if table:
        for k, (n, d, _, _, _) in enumerate(lanes):
            tab[: n + 1, k] = K.threshold_table(n, d)

    def run(w2):
        with jax.enable_x64(True):
            a, lvl, nxt = fn(jnp.asarray(u), jnp.asarray(w1), jnp.asarray(np.array(w2, np.uint64)),
                             jnp.asarray(n_arr), jnp.asarray(d_arr), jnp.asarray(thr_arr), jnp.asarray(tab))
        return np.asarray(a), np.asarray(lvl)[0], np.asarray(nxt)[0]

    a, _, _ = run([0] * W)
    assert np.array_equal(a, w1 == 0), "word 1 = 0 must be an arrival and 2^64 - 1 a departure"
    # bisection: b_j = the first word 2 with level < j (the level is non-increasing in the word)
    lo, hi = np.zeros(W, object), np.full(W, TWO64, object)
    for _ in range(66):
        open_ = lo < hi
        if not open_.any():
            break
        mid = (lo + hi) // 2
        _, lvl, _ = run([min(int(m), MASK64) for m in mid])
        ge = lvl >= j_arr
        lo, hi = np.where(open_ & ge, mid + 1, lo), np.where(open_ & ~ge, mid, hi)
    assert not (lo < hi).any()
    lo = [int(x) for x in lo]
    b = {}
    for (n, d, s, arrival, j), x in zip(lanes, lo):
        b[(n, d, tuple(s), arrival, j)] = x
    # every next state, its exact probability
    checked = 0
    for (n, d, s, arrival, j), _x in zip(lanes, lo):
        if j != 1:
            continue
        bounds = [TWO64] + [b[(n, d, tuple(s), arrival, jj)] for jj in range(1, L_ORACLE + 1)] + [0]
        for i in range(L_ORACLE):  # the event touches length i: words in [b_(i+1), b_i)
            p = Fraction(bounds[i] - bounds[i + 1], TWO64)
            if arrival:
                want = g_exact(s[i], n, d, replacement) - g_exact(s[i + 1], n, d, replacement)
                tol = 2.0**-62 if table else 1e-12  # the table's boundaries: each within 2^-64
            else:
                want = Fraction(s[i] - s[i + 1], n) if i >= 1 else Fraction(n - s[1], n)
                tol = 2.0**-60  # each rank 1/n up to 2^-64 per boundary
            assert abs(p - want) <= tol, (f"n={n} d={d} rep={replacement} u={s} "
                                          f"{'arrival' if arrival else 'departure'} at length {i}: "
                                          f"P = {float(p):.15g}, exact {float(want):.15g}")
            checked += 1
    assert checked > 100
    if table:  # word for word the exact law: level >= j iff U = (w + 1/2)/2^64 < g(u_j), i.e. iff w < b_j
        for (n, d, s, arrival, j), x in zip(lanes, lo):
            if arrival:
                g = g_exact(s[j], n, d, False)
                # the number of words w with (2w + 1) < 2^65 g, independently of the kernel's table
                want = min(TWO64, max(0, -(-(g.numerator << 65) // g.denominator) // 2))
                assert x == want, (n, d, s, j, x, want)
    # and the next state from a word inside each interval: one customer moved at the right length
    probe_w2, want_next = [], []
    for (n, d, s, arrival, j), _x in zip(lanes, lo):
        i = j - 1  # the interval [b_(i+1), b_i) of length i
        top = TWO64 if i == 0 else b[(n, d, tuple(s), arrival, i)]
        bot = b[(n, d, tuple(s), arrival, i + 1)]
        if top <= bot:
            probe_w2.append(0)
            want_next.append(None)
            continue
        probe_w2.append((top - 1 + bot) // 2)
        nxt = list(s)
        if arrival:
            nxt[i + 1] += 1
        elif i >= 1:
            nxt[i] -= 1
        want_next.append(nxt)
    _, lvl, nxt = run(probe_w2)
    for k, want in enumerate(want_next):
        if want is not None:
            assert nxt[:, k].tolist() == want, (lanes[k], nxt[:, k].tolist(), want)
            assert lvl[k] == lanes[k][4] - 1


# --------------------------------------------------------------------------- the arrival threshold

def _lams_on_both_sides_of_a_half(count: int):
    """Floats lam whose 2^64 lam/(1+lam) has a fractional part below 1/2 and above 1/2."""
    rng = np.random.default_rng(22)
    below, above = [], []
    for lam in rng.uniform(1e-3, 1 - 1e-3, 400):
        x = Fraction(float(lam)) / (1 + Fraction(float(lam))) * TWO64
        frac = x - (x.numerator // x.denominator)
        (below if frac < Fraction(1, 2) else above).append(float(lam))
    assert len(below) >= count and len(above) >= count
    return below[:count] + above[:count]


@pytest.mark.parametrize("lam", _lams_on_both_sides_of_a_half(6) + [0.5, 0.9, 0.999, 2.0**-43, 1 - 2.0**-43])
def test_arrival_threshold_is_the_exact_rounding_and_cuts_at_its_word(lam):
    A = K.arrival_threshold(lam)
    assert A == exact_threshold(lam)
    p = Fraction(lam) / (1 + Fraction(lam))
    assert abs(Fraction(A, TWO64) - p) <= Fraction(1, 2 * TWO64)
    # boundary words: A - 1 is an arrival, A is not (the event compares word 1 < A)
    params = K.lane_params([(10, 2, lam)], [4])
    with jax.enable_x64(True):
        p_ = K.LaneParams(*(jnp.asarray(x) for x in params))
        w1 = jnp.asarray(np.array([A - 1, A, 0, MASK64], np.uint64))
        ev = K._events(w1, jnp.zeros(4, jnp.uint64), p_, True)
    assert np.asarray(ev.arrival).tolist() == [True, False, True, False]


@pytest.mark.parametrize("eps", [0.25, 1e-3, 1e-9, 3e-13])
def test_arrival_threshold_from_one_minus_lam_is_the_exact_rounding(eps):
    assert K.arrival_threshold(one_minus_lam=eps) == exact_threshold(one_minus_lam=eps)
