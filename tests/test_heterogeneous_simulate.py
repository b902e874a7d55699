"""Tests for qlib.heterogeneous.simulate: agreement with the exact solution, exact event
probabilities (cut points and idle ranks, down to single random words), reproducibility across
kernels, chunks and devices, bit-identity with the numba loop, exact continuation, validation."""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import qlib.heterogeneous as H
from qlib.stats import replica_mean, z_score

ROOT = Path(__file__).resolve().parent.parent
WORKED_LAM, WORKED_MUS = 3.0, np.array([3.0, 2.0, 1.0])
LAM5, MUS5 = 6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5])
FIELDS = ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals")


def assert_same_state(a: H.ChainState, b: H.ChainState):
    for f in H.ChainState._fields:
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=f)


# ----------------------------------------------------------------------------- SplitMix64 by hand
M64 = (1 << 64) - 1
GOLDEN, M1, M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * M1) & M64
    z = ((z ^ (z >> 27)) * M2) & M64
    return z ^ (z >> 31)


def _unshift(y: int, s: int) -> int:
    x = y
    for _ in range(64 // s + 1):
        x = y ^ (x >> s)
    return x


def unmix64(w: int) -> int:
    z = _unshift(w, 31)
    z = _unshift((z * pow(M2, -1, 1 << 64)) & M64, 27)
    return _unshift((z * pow(M1, -1, 1 << 64)) & M64, 30)


def state_drawing(word: int, which: int) -> int:
    """A SplitMix64 state whose next step draws ``word`` as its first (which=1) or second word."""
    return (unmix64(word) - which * GOLDEN) & M64


def first_word(state: int) -> int:
    return mix64((state + GOLDEN) & M64)


def test_splitmix_inverse():
    rng = np.random.default_rng(0)
    for w in [0, 1, M64, *map(int, rng.integers(0, 2**63, 20, dtype=np.uint64))]:
        assert mix64(unmix64(w)) == w
        s = state_drawing(w, 2)
        assert mix64((s + 2 * GOLDEN) & M64) == w


# ----------------------------------------------------------------------------- against the exact solution
SIM_CASES = [(WORKED_LAM, WORKED_MUS), (LAM5, MUS5)]


@pytest.mark.parametrize("policy", ["random", "longest_idle"])
@pytest.mark.parametrize("case", range(len(SIM_CASES)))
def test_simulation_agrees_with_exact(policy, case):
    lam, mus = SIM_CASES[case]
    r = H.simulate(lam, mus, steps=200_000, replicas=24, seed=11 + case, burn_in=2_000, policy=policy)
    P = H.busy_probabilities(lam, mus)
    assert np.all(z_score(r.estimate("busy_fraction"), P, floor=1e-12) < 5)
    assert np.all(z_score(r.estimate("throughput"), mus * P, floor=1e-12) < 5)
    assert z_score(r.estimate("mean_queue"), H.mean_queue_length(lam, mus), floor=1e-12) < 5
    assert z_score(r.estimate("wait_fraction"), H.wait_probability(lam, mus), floor=1e-12) < 5
    # the test can fail: a 2% perturbation of the truth is far outside the error bars
    assert np.any(z_score(r.estimate("busy_fraction"), P * 1.02) > 5)


@pytest.mark.parametrize("n,kernel", [(50, "bits"), (70, "bits"), (20, "array")])
def test_many_servers_agree_with_exact(n, kernel):
    """n >= 50 on the bits kernel (one and two 64-bit mask words), and the array kernel."""
    mus = np.geomspace(10.0, 1.0, n)
    lam = 0.9 * mus.sum()
    r = H.simulate(lam, mus, steps=60_000, replicas=16, seed=n, burn_in=3_000, kernel=kernel)
    P = H.busy_probabilities(lam, mus)
    est = r.estimate("busy_fraction")
    assert np.all(z_score(est, P, floor=1e-12) < 5)
    assert z_score(r.estimate("mean_queue"), H.mean_queue_length(lam, mus), floor=1e-12) < 5
    assert np.any(z_score(est, P * 1.02) > 5)


def test_fastest_policy_differs_and_matches_its_generator():
    lam, mus = WORKED_LAM, WORKED_MUS
    r = H.simulate(lam, mus, steps=100_000, replicas=16, seed=5, burn_in=1_000, policy="fastest")
    est = r.estimate("busy_fraction")
    assert np.all(z_score(est, H.busy_probabilities(lam, mus)) > 10)
    assert np.all(z_score(est, H.fastest_busy_probabilities(lam, mus), floor=1e-12) < 5)


def test_slowest_policy_matches_its_generator_and_breaks_claim_2():
    """Arrivals join the slowest idle server: the simulation matches that policy's generator
    solve (5 SE over 16 replicas) and not Cabral's law, and it violates claim 2 the way the
    exact law does (mu_1 P_1 = 1.0743 < mu_2 P_2 = 1.1405 at lam = 3, mus = (3, 2, 1)), with
    the simulated difference's 95% CI below 0: the counterfactual fails where it should."""
    lam, mus = WORKED_LAM, WORKED_MUS
    r = H.simulate(lam, mus, steps=100_000, replicas=16, seed=6, burn_in=1_000, policy="slowest")
    P = H.slowest_busy_probabilities(lam, mus)
    est, thr = r.estimate("busy_fraction"), r.estimate("throughput")
    assert np.all(z_score(est, P, floor=1e-12) < 5)
    assert np.all(z_score(thr, mus * P, floor=1e-12) < 5)
    assert np.all(z_score(est, H.busy_probabilities(lam, mus)) > 10)
    assert mus[0] * P[0] < mus[1] * P[1]
    diff = replica_mean(r.throughput[:, 0] - r.throughput[:, 1])
    assert diff.mean + diff.halfwidth() < 0
    assert abs(diff.mean - (mus[0] * P[0] - mus[1] * P[1])) < 5 * diff.stderr


def test_slowest_policy_ties_and_input_order_match_the_generator():
    """Unsorted rates with a tie: the kernel's slowest-first order (ties to the lower input
    index) is the generator's, server by server (swapping the tied servers would be > 10 SE)."""
    lam, mus = 4.0, np.array([2.0, 1.0, 2.0, 0.5, 1.5])
    r = H.simulate(lam, mus, steps=60_000, replicas=16, seed=12, burn_in=1_000, policy="slowest")
    P = H.slowest_busy_probabilities(lam, mus)
    est = r.estimate("busy_fraction")
    assert np.all(z_score(est, P, floor=1e-12) < 5)
    swapped = P[[2, 1, 0, 3, 4]]
    assert z_score(est, swapped)[0] > 10 and P[0] > P[2]


@pytest.mark.parametrize("kernel", ["bits", "array"])
@pytest.mark.parametrize("policy", ["fastest", "slowest"])
def test_first_idle_policies_join_the_fastest_or_slowest_idle_server(kernel, policy):
    """One arrival (first word 0) into chosen busy sets: it joins the fastest / slowest idle server."""
    lam, mus = 6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5, 1.0])
    rng = np.random.default_rng(1)
    busy = rng.random((40, mus.size)) < 0.5
    busy[0] = False
    busy[1] = [True, True, True, True, True, False]
    states = [state_drawing(0, 1)] * busy.shape[0]
    r = _run_one_step(lam, mus, states, busy, np.zeros(busy.shape[0]), kernel, policy=policy)
    key = -mus if policy == "fastest" else mus
    for i in range(busy.shape[0]):
        idle = np.flatnonzero(~busy[i])
        joined = np.flatnonzero(r.state.busy[i] & ~busy[i])
        if idle.size:
            best = idle[np.lexsort((idle, key[idle]))[0]]  # by rate, ties to the lower index
            assert joined.tolist() == [best]
        else:
            assert r.state.queue[i] == 1


# Digests of main's arrays at commit 23ddb1c (before "slowest" existed), recorded there with
# _digest below: the streams of the existing policies must not change.
MAIN_DIGESTS = {
    (5, "random", "bits"): "bf59e3ae3f0ff69b9161", (5, "random", "array"): "bf59e3ae3f0ff69b9161",
    (5, "longest_idle", "bits"): "ce33dee48cdb59ec1adc", (5, "longest_idle", "array"): "ce33dee48cdb59ec1adc",
    (5, "fastest", "bits"): "3d5755770804ec3846d4", (5, "fastest", "array"): "3d5755770804ec3846d4",
    (70, "random", "bits"): "4f621c57555f05176b2b", (70, "fastest", "bits"): "49a4bf7af95fbc39cace",
    (20, "longest_idle", "array"): "3bcec68f6368cbde6a4b",
}


def _digest(r: H.SimulationResult) -> str:
    """SHA-256 (first 20 hex digits) of the run's integer counters and final state."""
    h = hashlib.sha256()
    for a in (
        np.rint(r.busy_fraction * r.steps),
        np.rint(r.throughput * r.time[:, None]),
        np.rint(r.mean_queue * r.steps),
        r.arrivals,
        np.rint(np.nan_to_num(r.wait_fraction) * r.arrivals),
        r.state.rng,
        r.state.busy,
        r.state.queue,
        r.state.idle_order if r.state.idle_order is not None else np.zeros(0),
    ):
        a = np.asarray(a)
        h.update(np.ascontiguousarray(a if a.dtype == np.uint64 else a.astype(np.int64)).tobytes())
    return h.hexdigest()[:20]


@pytest.mark.parametrize("case", MAIN_DIGESTS, ids=str)
def test_existing_policies_streams_unchanged(case):
    n, policy, kernel = case
    mus = MUS5 if n == 5 else np.geomspace(4.0, 1.0, n)
    lam = LAM5 if n == 5 else 0.9 * mus.sum()
    r = H.simulate(lam, mus, steps=3000, replicas=4, seed=17, burn_in=50, policy=policy, kernel=kernel)
    assert _digest(r) == MAIN_DIGESTS[case]


# ----------------------------------------------------------------------------- exact event probabilities
def _shares(lam, mus):
    rates = [Fraction(lam)] + [Fraction(float(m)) for m in mus]
    total = sum(rates)
    return [r / total for r in rates]


PROB_CASES = {
    "worked": (3.0, [3.0, 2.0, 1.0]),
    "rho = 1 - 1e-12": ((1 - 1e-12) * 6.0, [3.0, 2.0, 1.0]),
    "rho = 1 - 1e-10": ((1 - 1e-10) * 6.0, [3.0, 2.0, 1.0]),
    "share near 2^-40": (1.0, [1.0, 2.0**-38, 1.0]),  # mu share (4/3) 2^-40 of Lambda ~ 3
    "lam near 2^-40": (1.01 * 2.0**-40, [0.5, 0.5]),
    "1e-6 beside 1e3": (900.0, [1e3, 1e-6]),
}


@pytest.mark.parametrize("name", PROB_CASES)
@pytest.mark.parametrize("policy", ["random", "fastest", "slowest"])
def test_step_probabilities_are_exact_to_2_pow_minus_64(name, policy):
    """The simulated probability of every event is within 2^-64 of the exact share of the float
    inputs (the 32-bit scheme was off by up to 2^-33 and dropped shares below 2^-33 entirely)."""
    lam, mus = PROB_CASES[name]
    p = H.step_probabilities(lam, mus, policy=policy)
    exact = _shares(lam, mus)
    assert sum(p) == 1 and all(q.denominator <= 2**64 for q in p)
    for q, e in zip(p, exact):
        assert abs(q - e) <= Fraction(1, 2**64)
        assert abs(q - e) <= e * Fraction(1, 2**24)  # the stated relative accuracy
    # 1 - rho as simulated: relative error <= 2^-23 (the 32-bit scheme made rho >= 1 - 4.7e-10 exactly 1)
    sim_mu = sum(p[1:])
    sim_one_minus_rho = (sim_mu - p[0]) / sim_mu
    one_minus_rho = (sum(exact[1:]) - exact[0]) / sum(exact[1:])
    assert abs(sim_one_minus_rho / one_minus_rho - 1) <= Fraction(1, 2**23)


def test_1_minus_rho_1e_12_keeps_its_digits():
    lam, mus = (1 - 1e-12) * 6.0, [3.0, 2.0, 1.0]
    p = H.step_probabilities(lam, mus)
    sim = float((sum(p[1:]) - p[0]) / sum(p[1:]))
    exact = (6.0 - lam) / 6.0  # exact in floats (Sterbenz)
    assert abs(sim / exact - 1) < 2e-7


def _run_one_step(lam, mus, states, busy, queue, kernel, policy="random"):
    """Run one step from the given chain states; returns the result."""
    R, n = busy.shape
    order = None
    if policy == "longest_idle":
        order = np.where(busy, -1, np.cumsum(~busy, axis=1) - 1)
    init = H.ChainState(rng=np.array(states, dtype=np.uint64), busy=busy, queue=np.asarray(queue, np.int64),
                        idle_order=order)
    return H.simulate(lam, mus, steps=1, initial=init, policy=policy, kernel=kernel)


@pytest.mark.parametrize("kernel", ["bits", "array"])
@pytest.mark.parametrize("name", ["worked", "rho = 1 - 1e-12", "share near 2^-40", "1e-6 beside 1e3"])
def test_kernels_cut_the_event_word_at_the_exact_points(kernel, name):
    """Single random words on both sides of every cut point: the kernel makes exactly the event
    whose interval holds the word. All servers busy, no queue: an arrival waits (queue 1), a
    potential completion at j frees j. A server whose share is below 2^-33 owns ~2^25 words
    now (none with 32-bit thresholds), and is freed by the first of them."""
    lam, mus = PROB_CASES[name]
    n = len(mus)
    p = H.step_probabilities(lam, mus)
    cuts = list(itertools.accumulate(int(q * 2**64) for q in p))[:-1]  # C_0 .. C_{n-1} (Python ints)
    words, want = [0], [-1]  # -1: arrival
    for j, c in enumerate(cuts):
        words += [int(c) - 1, int(c)]
        want += [j - 1, j]
    words.append(M64)
    want.append(n - 1)
    states = [state_drawing(w, 1) for w in words]
    R = len(words)
    r = _run_one_step(lam, mus, states, np.ones((R, n), bool), np.zeros(R), kernel)
    for i, j in enumerate(want):
        if j < 0:
            assert r.state.queue[i] == 1 and r.state.busy[i].all() and r.arrivals[i] == 1
        else:
            expect = np.ones(n, bool)
            expect[j] = False
            np.testing.assert_array_equal(r.state.busy[i], expect, err_msg=f"word {words[i]:#x}")
            assert r.state.queue[i] == 0 and r.arrivals[i] == 0
    # and the stream goes on from the second word of that step
    assert [int(s) for s in r.state.rng] == [(s + 2 * GOLDEN) & M64 for s in states]


@pytest.mark.parametrize("kernel", ["bits", "array"])
def test_kernels_pick_the_idle_rank_floor_w2_k_over_2_pow_64(kernel):
    """Second words on both sides of every rank boundary ceil(i 2^64 / k): an arrival that finds
    k idle servers joins the r-th idle one, r = floor(w2 k / 2^64), so each rank has 2^64/k
    words (to one word): probability 1/k within 2^-64. The first word is whatever the state
    gives; the cases where it is an arrival (about half: rho = 0.99) are checked."""
    lam, mus = 0.99 * 7.0, np.ones(7)
    c0 = int(H.step_probabilities(lam, mus)[0] * 2**64)
    idle_sets = [np.arange(7), np.array([1, 4, 6]), np.array([5])]
    checked = 0
    for idle in idle_sets:
        k = idle.size
        words = [0, M64] + [w for i in range(1, k) for w in (-(-(i << 64) // k) - 1, -(-(i << 64) // k))]
        states = [state_drawing(w, 2) for w in words]
        arrival = [first_word(s) < c0 for s in states]
        busy = np.ones((len(words), 7), bool)
        busy[:, idle] = False
        r = _run_one_step(lam, mus, states, busy, np.zeros(len(words)), kernel)
        for i, w in enumerate(words):
            if not arrival[i]:
                continue  # a potential completion (or a no-op at an idle server): not about ranks
            rank = (w * k) >> 64
            joined = np.flatnonzero(r.state.busy[i] & ~busy[i])
            assert joined.tolist() == [idle[rank]], (k, hex(w))
            checked += 1
    assert checked >= 8


# ----------------------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("policy", ["random", "longest_idle", "fastest", "slowest"])
def test_same_seed_same_arrays_and_replica_independence(policy):
    kw = dict(steps=3_000, seed=42, burn_in=100, policy=policy, chunk=700)
    a = H.simulate(LAM5, MUS5, replicas=200, **kw)
    b = H.simulate(LAM5, MUS5, replicas=200, **kw)
    few = H.simulate(LAM5, MUS5, replicas=3, **kw)  # padded to a multiple of the devices
    arr = H.simulate(LAM5, MUS5, replicas=3, kernel="array", **kw)  # the general (n, R) kernel
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        np.testing.assert_array_equal(getattr(few, name), getattr(a, name)[:3])
        np.testing.assert_array_equal(getattr(arr, name), getattr(a, name)[:3])
    assert_same_state(arr.state, few.state)
    c = H.simulate(LAM5, MUS5, replicas=3, **{**kw, "seed": 43})
    assert not np.array_equal(c.busy_fraction, a.busy_fraction[:3])


@pytest.mark.parametrize("n", [5, 70])
def test_chunking_and_kernels_do_not_change_results(n):
    """Chunk boundaries (where the lazily accumulated counters are closed and the stamps
    rebased) change nothing, and the bits kernel equals the array kernel, for every policy."""
    mus = MUS5 if n == 5 else np.geomspace(4.0, 1.0, n)
    lam = 0.8 * mus.sum()
    for policy in ("random", "longest_idle", "fastest", "slowest"):
        kw = dict(steps=2_500, replicas=3, seed=4, burn_in=333, policy=policy)
        a = H.simulate(lam, mus, chunk=1 << 16, **kw)
        b = H.simulate(lam, mus, chunk=97, **kw)
        c = H.simulate(lam, mus, chunk=97, kernel="array", **kw)
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            np.testing.assert_array_equal(getattr(a, name), getattr(c, name))
        assert_same_state(a.state, b.state)
        assert_same_state(a.state, c.state)


SHARD_CODE = """
import qlib.heterogeneous as H
lam, mus = 6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5])
out = {}
for policy, kernel in (("random", "bits"), ("longest_idle", "bits"), ("fastest", "bits"),
                       ("slowest", "bits"), ("random", "array"), ("longest_idle", "array")):
    r = H.simulate(lam, mus, steps=3_000, replicas=3, seed=42, burn_in=100, policy=policy, chunk=700,
                   kernel=kernel)
    for f in ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals"):
        out[f"{policy}.{kernel}.{f}"] = getattr(r, f)
    out[f"{policy}.{kernel}.rng"] = r.state.rng
    out[f"{policy}.{kernel}.busy"] = r.state.busy
    out[f"{policy}.{kernel}.queue"] = r.state.queue
"""


def test_one_device_equals_two_devices_bit_for_bit(run_on_devices):
    """Replicas sharded over two host devices (3 replicas padded to 4) give exactly the arrays of
    one device: each replica's stream depends only on (seed, r)."""
    one = run_on_devices(1, SHARD_CODE)
    two = run_on_devices(2, SHARD_CODE)
    assert one.keys() == two.keys() and len(one) == 48
    for k in one:
        np.testing.assert_array_equal(one[k], two[k], err_msg=k)


def _numba_reference():
    pytest.importorskip("numba")
    import sys

    if "numba_heterogeneous" not in sys.modules:  # numba's cache needs it importable by name
        spec = importlib.util.spec_from_file_location("numba_heterogeneous",
                                                      ROOT / "benchmarks" / "numba_heterogeneous.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["numba_heterogeneous"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["numba_heterogeneous"]


@pytest.mark.parametrize("n,policy,kernel", [
    (5, "random", "bits"), (5, "longest_idle", "bits"), (5, "fastest", "bits"),
    (5, "random", "array"), (5, "longest_idle", "array"), (5, "fastest", "array"),
    (5, "slowest", "bits"), (5, "slowest", "array"),
    (70, "random", "bits"), (70, "fastest", "bits"), (70, "slowest", "bits"), (20, "longest_idle", "array"),
    (70, "random", "array"),
])
def test_numba_reference_is_bit_identical(n, policy, kernel):
    ref = _numba_reference()
    mus = MUS5 if n == 5 else np.geomspace(4.0, 1.0, n)
    lam = LAM5 if n == 5 else 0.9 * mus.sum()
    steps = 4_000
    kw = dict(steps=steps, replicas=4, seed=9, burn_in=77, policy=policy)
    a = H.simulate(lam, mus, kernel=kernel, **kw)
    b = ref.simulate_reference(lam, mus, **kw)
    np.testing.assert_array_equal(np.rint(a.busy_fraction * steps), b["busy"])
    np.testing.assert_array_equal(np.rint(a.throughput * a.time[:, None]), b["done"])
    np.testing.assert_array_equal(np.rint(a.mean_queue * steps), b["q"])
    np.testing.assert_array_equal(a.arrivals, b["arrivals"])
    np.testing.assert_array_equal(np.rint(a.wait_fraction * a.arrivals), b["waits"])
    assert b["waits"].sum() > 0  # the queue was used


# ----------------------------------------------------------------------------- continuation
@pytest.mark.parametrize(
    "policy,kernel",
    [
        ("random", "bits"),
        ("longest_idle", "bits"),
        ("fastest", "bits"),
        ("slowest", "bits"),
        ("random", "array"),
        ("longest_idle", "array"),
    ],
)
def test_continuing_a_run_is_exact(policy, kernel):
    """T steps then T more == 2T in one call: the same final state bit for bit, and time averages
    that combine into the whole (to rounding)."""
    lam, mus = 0.95 * MUS5.sum(), MUS5
    T, kw = 3_001, dict(policy=policy, kernel=kernel)
    whole = H.simulate(lam, mus, steps=2 * T, replicas=5, seed=8, burn_in=500, **kw)
    first = H.simulate(lam, mus, steps=T, replicas=5, seed=8, burn_in=500, **kw)
    second = H.simulate(lam, mus, steps=T, initial=first, chunk=123, **kw)
    assert_same_state(second.state, whole.state)
    assert second.seed == 8 and second.replicas == 5
    assert np.any(whole.state.queue > 0) and not np.array_equal(first.state.busy, whole.state.busy)
    for name in ("busy_fraction", "throughput", "mean_queue"):
        np.testing.assert_allclose((getattr(first, name) + getattr(second, name)) / 2, getattr(whole, name),
                                   rtol=1e-13, atol=0)
    np.testing.assert_array_equal(first.arrivals + second.arrivals, whole.arrivals)
    waits = np.rint(first.wait_fraction * first.arrivals) + np.rint(second.wait_fraction * second.arrivals)
    np.testing.assert_allclose(waits / whole.arrivals, whole.wait_fraction, rtol=1e-13)
    # continuing on the other kernel gives the same numbers too
    other = (
        "array" if kernel == "bits" else ("bits" if policy != "longest_idle" or mus.size <= 16 else "array")
    )
    third = H.simulate(lam, mus, steps=T, initial=first, policy=policy, kernel=other)
    assert_same_state(third.state, whole.state)


@pytest.mark.parametrize("policy", ["random", "longest_idle"])
def test_result_round_trips_through_its_arrays(tmp_path, policy):
    """arrays() -> npz -> from_arrays() gives the same result (what the sweep cache stores), and a
    run continued from it goes on exactly as from the original."""
    r = H.simulate(LAM5, MUS5, steps=2_000, replicas=3, seed=4, burn_in=100, policy=policy)
    np.savez(tmp_path / "r.npz", **r.arrays())
    with np.load(tmp_path / "r.npz") as z:  # no pickles: plain arrays only
        back = H.SimulationResult.from_arrays({k: z[k] for k in z.files})
    for f in ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals", "time", "mus"):
        np.testing.assert_array_equal(getattr(back, f), getattr(r, f), err_msg=f)
        assert getattr(back, f).dtype == np.asarray(getattr(r, f)).dtype, f
    assert (back.lam, back.policy, back.steps, back.burn_in, back.seed) == (
        r.lam,
        r.policy,
        r.steps,
        r.burn_in,
        r.seed,
    )
    assert_same_state(back.state, r.state)
    assert (back.state.idle_order is None) == (policy != "longest_idle")
    assert_same_state(H.simulate(LAM5, MUS5, steps=500, initial=back, policy=policy).state,
                      H.simulate(LAM5, MUS5, steps=500, initial=r, policy=policy).state)
    unseeded = H.simulate(LAM5, MUS5, steps=10, initial=r.state, policy=policy)
    assert unseeded.seed is None and H.SimulationResult.from_arrays(unseeded.arrays()).seed is None
    top = H.simulate(LAM5, MUS5, steps=10, replicas=2, seed=2**64 - 1, policy=policy)  # the largest seed
    assert H.SimulationResult.from_arrays(top.arrays()).seed == 2**64 - 1


def test_continuation_must_match_replicas_policy_and_servers():
    r = H.simulate(LAM5, MUS5, steps=100, replicas=3, seed=1)
    H.simulate(LAM5, MUS5, steps=10, initial=r, replicas=3)  # matching count is fine
    with pytest.raises(ValueError, match="replicas"):
        H.simulate(LAM5, MUS5, steps=10, initial=r, replicas=4)
    with pytest.raises(ValueError, match="policy"):
        H.simulate(LAM5, MUS5, steps=10, initial=r, policy="fastest")
    with pytest.raises(ValueError, match="policy"):
        H.simulate(LAM5, MUS5, steps=10, initial=r.state, policy="longest_idle")
    with pytest.raises(ValueError, match="mus"):
        H.simulate(3.0, [3.0, 2.0, 1.0], steps=10, initial=r)
    with pytest.raises(ValueError, match="seed"):
        H.simulate(LAM5, MUS5, steps=10, initial=r, seed=1)
    with pytest.raises(ValueError, match="initial"):
        H.simulate(LAM5, MUS5, steps=10, initial="empty")
    s = r.state
    with pytest.raises(ValueError, match="initial"):
        H.simulate(LAM5, MUS5, steps=10, initial=s._replace(queue=s.queue + 1))  # waiting beside idle servers
    li = H.simulate(LAM5, MUS5, steps=100, replicas=2, seed=1, policy="longest_idle").state
    bad = li.idle_order.copy()
    bad[bad >= 0] = 0
    with pytest.raises(ValueError, match="idle_order"):
        H.simulate(LAM5, MUS5, steps=10, initial=li._replace(idle_order=bad), policy="longest_idle")


def test_progress_bar_changes_nothing():
    kw = dict(steps=2_000, replicas=2, seed=3, chunk=500)
    a = H.simulate(LAM5, MUS5, **kw)
    b = H.simulate(LAM5, MUS5, progress=True, **kw)
    np.testing.assert_array_equal(a.busy_fraction, b.busy_fraction)


# ----------------------------------------------------------------------------- bad input
BAD = [
    (dict(lam=0.0), "lam"),
    (dict(lam=-1.0), "lam"),
    (dict(lam=6.0), "lam"),
    (dict(lam=7.0), "lam"),
    (dict(lam=float("nan")), "lam"),
    (dict(lam=True), "lam"),
    (dict(mus=[3.0, 0.0, 1.0]), "mus"),
    (dict(mus=[3.0, -2.0, 1.0]), "mus"),
    (dict(mus=[]), "mus"),
    (dict(mus=[3.0, float("nan"), 1.0]), "mus"),
    (dict(mus=[[3.0, 2.0, 1.0]]), "mus"),
    (dict(mus=3.0), "mus"),
    (dict(mus=[True, True, True]), "mus"),
    (dict(mus=["3", "2", "1"]), "mus"),
    (dict(steps=0), "steps"),
    (dict(steps=2.5), "steps"),
    (dict(steps=True), "steps"),
    (dict(burn_in=-1), "burn_in"),
    (dict(replicas=0), "replicas"),
    (dict(policy="shortest"), "policy"),
    (dict(seed=-1), "seed"),
    (dict(chunk=0), "chunk"),
    (dict(kernel="fast"), "kernel"),
    # resolvable range: shares of Lambda >= 2^-40, 1 - rho >= 2^-40
    (dict(lam=1e-13), "lam"),
    (dict(lam=6.0 * (1 - 1e-13)), "lam"),
    (dict(mus=[1e9, 1e-9, 1.0]), "mus"),
    # a year of compute, memory
    (dict(steps=2**60), "steps"),
    (dict(steps=10**15, replicas=10**3), "steps"),
    (dict(replicas=10**12), "replicas"),
]


@pytest.mark.parametrize("bad,name", BAD)
def test_bad_input_raises(bad, name):
    kw = dict(lam=3.0, mus=[3.0, 2.0, 1.0], steps=10, replicas=1, burn_in=0, policy="random", seed=0) | bad
    lam, mus = kw.pop("lam"), kw.pop("mus")
    with pytest.raises(ValueError, match=name):
        H.simulate(lam, mus, **kw)


def test_resolvable_range_messages_state_the_range():
    with pytest.raises(ValueError, match=r"mus.*2\^-40.*mus\[1\]"):
        H.simulate(1.0, [1e9, 1e-9], steps=10)  # 1e-9 beside 1e9: it never finished with 32 bits
    with pytest.raises(ValueError, match=r"lam must be <= \(1 - 2\^-40\) sum\(mus\)"):
        H.simulate(6.0 * (1 - 1e-13), [3.0, 2.0, 1.0], steps=10)
    with pytest.raises(ValueError, match=r"lam must be >= 2\^-40"):
        H.simulate(1e-13, [3.0, 2.0, 1.0], steps=10)
    # just inside the range is accepted
    H.simulate(6.0 * (1 - 1e-12), [3.0, 2.0, 1.0], steps=10)
    H.simulate(1.0, [1.0, 1.0, 2.0**-38], steps=10)  # share (4/3) 2^-40


def test_kernel_limits():
    with pytest.raises(ValueError, match="kernel"):
        H.simulate(10.0, np.ones(17), steps=10, policy="longest_idle", kernel="bits")
    r = H.simulate(0.7 * 40, np.ones(40), steps=2_000, replicas=2, policy="longest_idle")  # array kernel
    assert r.busy_fraction.shape == (2, 40) and np.all(np.isfinite(r.busy_fraction))


def test_to_dataframe_one_row_per_replica_and_server():
    """issue 20, item 9."""
    s = H.simulate(3.0, [3.0, 2.0, 1.0], steps=2000, replicas=2, seed=0)
    df = s.to_dataframe()
    assert len(df) == 2 * 3 and list(df.server) == [0, 1, 2, 0, 1, 2]
    np.testing.assert_array_equal(df.busy_fraction.to_numpy().reshape(2, 3), s.busy_fraction)
    np.testing.assert_array_equal(df.mu[:3], [3.0, 2.0, 1.0])
    assert (df.groupby("replica").mean_queue.nunique() == 1).all()
