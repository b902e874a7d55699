"""The plain queue-vector simulation (qlib.supermarket.direct) against the count chain: two
simulators that share no code agree within 5 combined standard errors.
"""

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib import stats

Z = 5.0


@pytest.mark.parametrize("replacement", [True, False])
def test_count_chain_matches_direct_queue_simulation(replacement):
    n, d, lam = 5, 2, 0.8
    direct = np.array([sm.direct_simulation(n, d, lam, steps=15_000, seed=s, burn_in=1_000,
                                            replacement=replacement, levels=6) for s in range(12)])
    chain = sm.simulate(n, d, lam, steps=60_000, replicas=32, seed=1, burn_in=1_000,
                        replacement=replacement, levels=10).tail_fraction[:, :7]
    a, b = stats.replica_mean(direct), stats.replica_mean(chain)
    diff_se = np.sqrt(a.stderr**2 + b.stderr**2)
    assert np.all(np.abs(a.mean - b.mean) <= Z * diff_se + 1e-12), (a.mean, b.mean, diff_se)


