"""qlib.studies.who_works_the_most (notebook 03): the slider function and the study's shape."""

import numpy as np
import pytest

from qlib.studies import who_works_the_most as study
from qlib.studies.who_works_the_most import compute


def test_profile_for_sliders():
    p = study.profile(6, 20.0, 0.8)
    assert p.n == 6 and p.mus[0] == pytest.approx(20) and p.mus[-1] == pytest.approx(1)
    assert abs(p.work.sum() - p.lam) < 1e-12 * p.lam
    assert np.all(np.diff(p.busy) > 0) and np.all(np.diff(p.work) < 0) and p.band_ok()
    # informed customers make the fastest server the busiest
    assert p.informed_busy[0] > p.busy[0]
    assert study.profile(40, 100.0, 0.5).informed_busy is None
    with pytest.raises(ValueError, match="rho"):
        study.profile(3, 2.0, 1.0)
    with pytest.raises(ValueError, match="spread"):
        study.profile(3, 0.5, 0.5)


def test_family_rates():
    assert np.allclose(study.family_rates("geometric", 3), [10, np.sqrt(10), 1])
    near = study.family_rates("nearly equal", 4, gap=1e-6)
    assert np.all(np.diff(near) == pytest.approx(-1e-6)) and near[-1] == 1.0
    one = study.family_rates("one fast", 4, spread=10.0)
    assert one[0] == 10.0 and np.all(np.abs(one[1:] - 1) < 1e-5)


def test_the_grid_criterion_can_fail():
    """The grid counts violations: informed routing (exact) violates claim 1 where uniform does not."""
    g = study.claims_grid([3, 5], [0.3, 0.9])
    assert g.pairs.sum() > 0 and g.violations1.sum() == g.violations2.sum() == g.violations3.sum() == 0
    fastest, slowest = g.informed_rule == 0, g.informed_rule == 1
    assert g.informed_violations1[fastest].sum() > 0 and g.informed_violations2[slowest].sum() > 0
    assert g.identity_residual.max() < 1e-12


def test_study_shape_and_smoke_claim_rows(fresh_cache, monkeypatch):
    assert set(study.PARAMETERS) == {"full", "smoke"}
    result = study.run("smoke", progress=False)
    # every simulation is a cache entry: a second run reads them back, the same bits
    monkeypatch.setattr(compute, "simulate",
                        lambda *a, **k: pytest.fail("simulated again instead of reading the cache"))
    again = study.run("smoke", progress=False)
    for c, c2 in zip(result.cases, again.cases):
        assert list(c.runs) == list(c2.runs)
        for rule, r in c.runs.items():
            for f in ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals", "time"):
                np.testing.assert_array_equal(getattr(r, f), getattr(c2.runs[rule], f), err_msg=f"{rule} {f}")
            assert (r.lam, r.policy, r.steps, r.burn_in, r.seed) == (c2.runs[rule].lam, c2.runs[rule].policy,
                                                                    c2.runs[rule].steps,
                                                                     c2.runs[rule].burn_in,
                                                                    c2.runs[rule].seed)
    assert len(result.profiles) == len(result.sims) == len(study.PARAMETERS["smoke"]["figures"]["loads"])
    rows = study.claim_rows(result)
    claims = [r for r in rows if r.kind == "claim"]
    # claims 1 and 2 by simulation at n = 6 and n = 50, and longest idle = random at each: claim 3
    # is claims 1 and 2 together (counted once), the exact grid is an evaluation of the closed form
    assert len(claims) == 6 and all(r.counterfactuals for r in claims)
    assert not any("3." in r.claim.split(" ")[0] for r in rows)
    # the n = 6 simulation rows pass, and every far wrong model fails them even at smoke size
    for r in claims[:3]:
        far = [c for c in r.counterfactuals if not c.near]
        assert r.passed and far and not any(c.passed for c in far), (r.claim, r.measured)
    # the mu^gamma routing rules ride along as near wrong models, with their SE distance
    for r in claims[:2]:
        near = [c for c in r.counterfactuals if c.near]
        assert len(near) == 4 and all(c.se_distance is not None and c.se_distance >= 0 for c in near)
    assert all(r.passed for r in rows if r.kind == "identity")
    sym = next(r for r in rows if r.claim.startswith("identity of symmetric routing"))
    assert sym.passed and not sym.counterfactuals[0].passed  # routing proportional to mu breaks it


def test_routing_proportional_to_mu_power_zero_is_uniform():
    mus = study.geometric_rates(4, 10.0)
    lam = 0.6 * mus.sum()
    sets, p = study.routed_stationary(lam, mus, 0.0)
    from qlib.heterogeneous import busy_probabilities, marginals_from_sets
    np.testing.assert_allclose(marginals_from_sets(sets, p), busy_probabilities(lam, mus), rtol=1e-10)
    assert study.swap_residual(lam, mus, 0.0) < 1e-12 < 1e-3 < study.swap_residual(lam, mus, 0.25)


def test_summary_is_the_exact_profiles(fresh_cache):
    """summary(result): one row per load and server, values equal to the result's profiles."""
    result = study.run("smoke", progress=False)
    df = study.summary(result)
    assert list(df.columns) == list(study.SUMMARY_COLUMNS)
    assert len(df) == sum(p.n for p in result.profiles)
    for p in result.profiles:
        sub = df[df.rho == p.rho]
        assert np.array_equal(sub.busy, p.busy) and np.array_equal(sub.work,
                                                                   p.work) and np.array_equal(sub.mu, p.mus)
        assert np.array_equal(sub.informed_busy, p.informed_busy)
        assert sub.busiest_uniform.sum() == 1
        assert sub.server[sub.busiest_uniform].item() == np.argmax(p.busy) + 1
