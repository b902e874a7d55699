"""Level-flow sums of the kernel and the near wrong models of qlib.supermarket.variants.

- the flow sums equal the exact stationary E[g(u_i)] of small chains (exact solve), with and
  without replacement, within 5 SE of the run;
- they are bit-identical however the replicas are batched, split into batches, run beside other
  points, continued, or sharded over devices, and turning them on changes no other number;
- JSQ(d) passes the level-flow identity within 5 SE at every level, and every near wrong model
  FAILs it (beyond 5 SE at some level) at a fixed seed and a fixed point.
Every tolerance is in units of the run's own standard error; the seeds are fixed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib.supermarket import variants as VV
from qlib.supermarket.exact import exact_stationary

Z = 5.0  # the pre-set criterion, in standard errors


def _g(u, n, d, replacement):
    if replacement:
        return (u / n) ** d
    return np.array([math.comb(int(x), d) / math.comb(n, d) for x in np.ravel(u)]).reshape(np.shape(u))


@pytest.mark.parametrize("replacement", [True, False])
def test_flow_sums_match_the_exact_stationary_law(replacement):
    n, d, lam, cap = 3, 2, 0.7, 14
    counts, pi = exact_stationary(n, d, lam, cap, replacement=replacement)
    exact = np.array([pi @ _g(counts[:, i], n, d, replacement) for i in range(4)])
    r = sm.simulate(n, d, lam, steps=300_000, burn_in=2_000, replicas=16, seed=11, replacement=replacement,
                    flows=True)
    est = sm_stats(r.flow_fraction[:, :4])
    assert r.flow_fraction[0, 0] == 1.0  # g(u_0) = g(n) = 1 exactly
    assert np.all(np.abs(est[0][1:] - exact[1:]) <= Z * est[1][1:]), (est, exact)
    assert np.all(est[1][1:] > 0)  # the criterion can fail: the SE is finite and positive
    # and so does the identity it feeds: E[u_j/n] = lam E[g(u_{j-1})]
    res = r.level_flow_residual()
    assert np.all(np.abs(res.mean[:3]) <= Z * res.stderr[:3])


def sm_stats(x):
    return x.mean(0), x.std(0, ddof=1) / math.sqrt(x.shape[0])


def test_flow_sums_are_bit_identical_however_the_run_is_cut():
    kw = dict(steps=6000, seed=5, levels=4, flows=True)
    r8 = sm.simulate(40, 3, 0.9, replicas=8, **kw)
    r3 = sm.simulate(40, 3, 0.9, replicas=3, **kw)
    r1 = sm.simulate(40, 3, 0.9, replicas=1, **kw)
    np.testing.assert_array_equal(r3.flow_fraction, r8.flow_fraction[:3])
    np.testing.assert_array_equal(r1.flow_fraction, r8.flow_fraction[:1])
    many = sm.simulate_many([(40, 3, 0.9), (25, 2, 0.8)], steps=[6000, 1500], replicas=3, seeds=[5, 6],
                            levels=4, flows=True)
    np.testing.assert_array_equal(many[0].flow_fraction, r3.flow_fraction)
    # batches sum to the whole run exactly (integer sums), and a continued run adds up
    b = sm.simulate(40, 3, 0.9, replicas=3, batches=4, **kw)
    np.testing.assert_array_equal(b.flow_fraction, r3.flow_fraction)
    np.testing.assert_allclose(b.batch_flow_fraction.mean(1), b.flow_fraction, rtol=1e-14)
    half = sm.simulate(40, 3, 0.9, replicas=3, **{**kw, "steps": 3000})
    rest = sm.simulate(40, 3, 0.9, replicas=3, steps=3000, initial=half, flows=True)
    w = max(half.levels, rest.levels, r3.levels) + 1
    pad = lambda a: np.pad(a, ((0, 0), (0, w - a.shape[1])))  # noqa: E731
    np.testing.assert_allclose((pad(half.flow_fraction) + pad(rest.flow_fraction)) / 2, pad(r3.flow_fraction),
                               rtol=1e-14)
    # flows change no other number
    plain = sm.simulate(40, 3, 0.9, replicas=3, steps=6000, seed=5, levels=4)
    for f in ("tail_fraction", "max_length_distribution", "counts", "state"):
        np.testing.assert_array_equal(getattr(plain, f), getattr(r3, f), err_msg=f)
    assert plain.flow_fraction is None


CHILD = """
import qlib.supermarket as sm
out = {}
for R in (1, 3):
    r = sm.simulate(40, 3, 0.9, steps=4000, seed=5, levels=8, replicas=R, flows=True, batches=2)
    out[f"R{R}.flow"], out[f"R{R}.bflow"] = r.flow_fraction, r.batch_flow_fraction
    v = sm.simulate(40, 3, 0.9, steps=4000, seed=5, levels=8, replicas=R, flows=True, variant="tie_longer")
    out[f"R{R}.tie"], out[f"R{R}.tie_counts"] = v.flow_fraction, v.counts
"""


def test_flow_sums_and_variants_are_the_same_on_two_devices(run_on_devices):
    one = run_on_devices(1, CHILD)
    two = run_on_devices(2, CHILD)
    assert one.keys() == two.keys() and len(one) == 8
    for k in one:
        np.testing.assert_array_equal(one[k], two[k], err_msg=k)
    np.testing.assert_array_equal(one["R1.flow"], one["R3.flow"][:1])


# --------------------------------------------------------------------------- variants fail the identity

POINT = (200, 5, 0.9)  # k = 2: the identity is checked at j = 1..3
RUN = dict(steps=400_000, burn_in=40_000, replicas=8, seed=2026, initial="fluid", flows=True)
LEVELS = 3


def _worst(r) -> float:
    est = r.level_flow_residual()
    z = est.mean[:LEVELS] / est.stderr[:LEVELS]
    return float(np.max(np.abs(z)))


def test_model_passes_the_identity_at_every_level():
    assert _worst(sm.simulate(*POINT, **RUN)) <= Z


@pytest.mark.parametrize("key", VV.NEAR_MODELS)
def test_every_near_variant_fails_the_identity(key):
    """Every wrong model of the registry that the identity rows run (a new one joins by its entry)."""
    variant = VV.WRONG_MODELS[key].kernel
    if variant == "eta_greedy":  # the identity rows pick eta per point; here one that the identity resolves
        variant = ("eta_greedy", 0.05)
    r = sm.simulate(*POINT, variant=variant, **RUN)
    assert r.variant == VV.name_of(variant)
    assert _worst(r) > Z, (variant, _worst(r))


def test_variants_are_validated():
    with pytest.raises(ValueError, match="variant"):
        sm.simulate(*POINT, steps=10, variant="nonsense")
    with pytest.raises(ValueError, match="parameter"):
        sm.simulate(*POINT, steps=10, variant="eta_greedy")
    with pytest.raises(ValueError, match="with-replacement"):
        sm.simulate(*POINT, steps=10, variant="tie_longer", replacement=False)
    with pytest.raises(ValueError, match=">= 1"):
        sm.simulate(20, 1, 0.5, steps=10, variant="jsq_d_minus_1")
    with pytest.raises(ValueError, match="flows"):
        sm.simulate(*POINT, steps=10, flows=1)
    # d_scale is d_offset by round(f d) - d: the same event map, so the same numbers
    a = sm.simulate(*POINT, steps=2000, seed=1, variant=("d_scale", 1.2), flows=True)
    b = sm.simulate(*POINT, steps=2000, seed=1, variant=("d_offset", 1), flows=True)
    np.testing.assert_array_equal(a.counts, b.counts)


def test_estimate_equilibrium_carries_the_flows_and_the_variant():
    e = sm.estimate_equilibrium(*POINT, batches=4, replicas=4, seed=3, flows=True, burn_in="tau",
                                burn_taus=2.0)
    assert e.flow_residual is not None and e.flow_residual.size == e.flow_fraction.size
    assert np.all(np.abs(e.flow_residual_in_se()[:LEVELS]) <= Z)
    assert np.all(e.flow_ci_low <= e.flow_fraction) and e.variant == "model"
    w = sm.estimate_equilibrium(*POINT, batches=4, replicas=4, seed=3, flows=True, burn_taus=2.0,
                                variant="jsq_d_minus_1")
    assert w.variant == "jsq_d_minus_1" and w.burn_in_method.startswith("2 tau")
    assert np.max(np.abs(w.flow_residual_in_se()[:LEVELS])) > Z
