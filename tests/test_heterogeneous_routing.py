"""The near wrong routing rules of the heterogeneous simulator: idle server j with probability
proportional to mu_j^gamma (policy "mu_power"), against the exact law of that rule."""

from __future__ import annotations

import numpy as np
import pytest

import qlib.heterogeneous as het
from qlib.heterogeneous import marginals_from_sets
from qlib.studies.who_works_the_most import geometric_rates, routed_stationary

Z = 5.0


@pytest.mark.parametrize("gamma", [0.0, 0.25, -1.0])
def test_mu_power_routing_matches_its_own_exact_law(gamma):
    mus = geometric_rates(4, 10.0)
    lam = 0.5 * mus.sum()
    sets, p = routed_stationary(lam, mus, gamma)
    exact = marginals_from_sets(sets, p)
    r = het.simulate(lam, mus, steps=200_000, replicas=16, seed=7, burn_in=5_000, policy="mu_power",
                     routing_exponent=gamma)
    est = r.estimate("busy_fraction")
    assert np.all(np.abs(est.mean - exact) <= Z * est.stderr), (est.mean, exact)
    if gamma != 0.0:  # and it is not uniform routing: the same run fails the uniform law
        uni = het.busy_probabilities(lam, mus)
        assert np.max(np.abs(est.mean - uni) / est.stderr) > Z


def test_mu_power_is_validated():
    mus = [3.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="routing_exponent"):
        het.simulate(3.0, mus, steps=10, policy="mu_power")
    with pytest.raises(ValueError, match="routing_exponent"):
        het.simulate(3.0, mus, steps=10, routing_exponent=0.5)
    with pytest.raises(ValueError, match="array kernel"):
        het.simulate(3.0, mus, steps=10, policy="mu_power", routing_exponent=0.5, kernel="bits")
