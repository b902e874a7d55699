"""Tests for qlib.heterogeneous: exact solution vs oracles, Cabral's claims, the simulator."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qlib.heterogeneous as H
from qlib.stats import z_score

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
            assert P[l] < P[m] or (P[m] - P[l]) < 1e-13  # gap may sit below rounding
            assert mus[l] * P[l] > mus[m] * P[m]
            assert mus[m] / mus[l] * P[m] < P[l] <= P[m]


# ----------------------------------------------------------------------------- simulation
SIM_CASES = [(WORKED_LAM, WORKED_MUS), (6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5]))]


@pytest.mark.parametrize("policy", ["random", "longest_idle"])
@pytest.mark.parametrize("case", range(len(SIM_CASES)))
def test_simulation_agrees_with_exact(policy, case):
    lam, mus = SIM_CASES[case]
    r = H.simulate(lam, mus, events=200_000, replicas=24, seed=11 + case, burn_in=2_000, policy=policy)
    P = H.busy_probabilities(lam, mus)
    assert np.all(z_score(r.estimate("busy_fraction"), P, floor=1e-12) < 5)
    assert np.all(z_score(r.estimate("throughput"), mus * P, floor=1e-12) < 5)
    assert z_score(r.estimate("mean_queue"), H.mean_queue_length(lam, mus), floor=1e-12) < 5
    assert z_score(r.estimate("wait_fraction"), H.wait_probability(lam, mus), floor=1e-12) < 5
    # the test can fail: a 2% perturbation of the truth is far outside the error bars
    assert np.any(z_score(r.estimate("busy_fraction"), P * 1.02) > 5)


def test_fastest_policy_differs_and_matches_its_generator():
    lam, mus = WORKED_LAM, WORKED_MUS
    r = H.simulate(lam, mus, events=100_000, replicas=16, seed=5, burn_in=1_000, policy="fastest")
    est = r.estimate("busy_fraction")
    assert np.all(z_score(est, H.busy_probabilities(lam, mus)) > 10)
    assert np.all(z_score(est, H.fastest_busy_probabilities(lam, mus), floor=1e-12) < 5)


@pytest.mark.parametrize("policy", ["random", "longest_idle", "fastest"])
def test_same_seed_same_arrays_and_replica_independence(policy):
    lam, mus = 6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5])
    kw = dict(events=3_000, seed=42, burn_in=100, policy=policy, chunk=700)
    a = H.simulate(lam, mus, replicas=200, **kw)
    b = H.simulate(lam, mus, replicas=200, **kw)
    few = H.simulate(lam, mus, replicas=3, **kw)  # padded to a multiple of the devices
    arr = H.simulate(lam, mus, replicas=3, kernel="array", **kw)  # the general (n, R) kernel
    for name in ("busy_fraction", "throughput", "mean_queue", "wait_fraction"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        np.testing.assert_array_equal(getattr(few, name), getattr(a, name)[:3])
        np.testing.assert_array_equal(getattr(arr, name), getattr(a, name)[:3])
    c = H.simulate(lam, mus, replicas=3, **{**kw, "seed": 43})
    assert not np.array_equal(c.busy_fraction, a.busy_fraction[:3])


def test_chunking_and_kernels_do_not_change_results():
    """Chunk boundaries (where the lazily accumulated counters are closed) change nothing, and
    the bitmask kernel equals the general one, for every policy, with burn-in."""
    lam, mus = 6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5])
    for policy in ("random", "longest_idle", "fastest"):
        kw = dict(events=2_500, replicas=3, seed=4, burn_in=333, policy=policy)
        a = H.simulate(lam, mus, chunk=1 << 16, **kw)
        b = H.simulate(lam, mus, chunk=97, **kw)
        c = H.simulate(lam, mus, chunk=97, kernel="array", **kw)
        for name in ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            np.testing.assert_array_equal(getattr(a, name), getattr(c, name))


SHARD_CASES = r"""
import numpy as np
import qlib.heterogeneous as H


def shard_cases():
    lam, mus = 6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5])
    out = {}
    for policy, kernel in (("random", "bits"), ("longest_idle", "bits"), ("fastest", "bits"),
                           ("random", "array")):
        r = H.simulate(lam, mus, events=3_000, replicas=3, seed=42, burn_in=100,
                       policy=policy, chunk=700, kernel=kernel)
        for f in ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals"):
            out[f"{policy}.{kernel}.{f}"] = getattr(r, f)
    return out
"""
exec(SHARD_CASES)


def _shard_child(devices: int, path) -> dict:
    """shard_cases() in a fresh process with ``devices`` host devices (fixed at JAX start)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("QLIB_HOST_DEVICES", "XLA_FLAGS")}
    env.update(XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(root) + os.pathsep + env.get("PYTHONPATH", ""))
    code = SHARD_CASES + (f"import sys, jax\nassert jax.device_count() == {devices}\n"
                          "np.savez(sys.argv[1], **shard_cases())\n")
    p = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_one_device_equals_many_devices_bit_for_bit(tmp_path):
    """Replicas sharded over several host devices (3 replicas padded to a multiple of them)
    give exactly the arrays of one device: each replica's stream depends only on (seed, r).
    This process runs on all its devices; a child runs on 1 (or on 2 if we have only one)."""
    import jax

    here = shard_cases()
    other = 1 if jax.device_count() > 1 else 2
    there = _shard_child(other, tmp_path / "child.npz")
    assert here.keys() == there.keys() and len(here) == 20
    for k in here:
        np.testing.assert_array_equal(here[k], there[k], err_msg=k)


def test_many_servers_use_general_kernel():
    mus = np.geomspace(5, 1, 40)
    r = H.simulate(0.7 * mus.sum(), mus, events=2_000, replicas=2, policy="longest_idle")
    assert r.busy_fraction.shape == (2, 40) and np.all(np.isfinite(r.busy_fraction))


def test_numba_reference_is_bit_identical():
    ref = pytest.importorskip("qlib.heterogeneous.reference")
    lam, mus = 6.0, np.array([0.5, 4.0, 1.0, 2.5, 1.5])
    for policy in ("random", "longest_idle", "fastest"):
        kw = dict(events=4_000, replicas=4, seed=9, burn_in=77, policy=policy)
        a = H.simulate(lam, mus, **kw)
        b = ref.simulate_reference(lam, mus, **kw)
        np.testing.assert_array_equal(np.rint(a.busy_fraction * 4_000), b["busy"])
        np.testing.assert_array_equal(np.rint(a.throughput * a.time[:, None]), b["done"])
        np.testing.assert_array_equal(np.rint(a.mean_queue * 4_000), b["q"])


# ----------------------------------------------------------------------------- bad input
BAD = [
    (dict(lam=0.0), "lam"), (dict(lam=-1.0), "lam"), (dict(lam=6.0), "lam"), (dict(lam=7.0), "lam"),
    (dict(lam=float("nan")), "lam"), (dict(mus=[3.0, 0.0, 1.0]), "mus"), (dict(mus=[3.0, -2.0, 1.0]), "mus"),
    (dict(mus=[]), "mus"), (dict(mus=[3.0, float("nan"), 1.0]), "mus"), (dict(mus=[[3.0, 2.0, 1.0]]), "mus"),
    (dict(mus=3.0), "mus"), (dict(events=0), "events"), (dict(events=2.5), "events"),
    (dict(burn_in=-1), "burn_in"), (dict(replicas=0), "replicas"), (dict(policy="shortest"), "policy"),
    (dict(seed=-1), "seed"),
]


@pytest.mark.parametrize("bad,name", BAD)
def test_bad_input_raises(bad, name):
    kw = dict(lam=3.0, mus=[3.0, 2.0, 1.0], events=10, replicas=1, burn_in=0, policy="random", seed=0) | bad
    lam, mus = kw.pop("lam"), kw.pop("mus")
    with pytest.raises(ValueError, match=name):
        H.simulate(lam, mus, **kw)
    if name in ("lam", "mus"):
        with pytest.raises(ValueError, match=name):
            H.busy_probabilities(lam, mus)


def test_oracle_limits():
    with pytest.raises(ValueError, match="mus"):
        H.stationary_distribution(1.0, np.ones(13))
    with pytest.raises(ValueError, match="policy"):
        H.generator_solve(1.0, [1.0, 2.0], policy="longest_idle")
