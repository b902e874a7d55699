"""The heterogeneous simulator's event cut points against their exact formula (issue 22).

C_j = round(2^64 (lam + mu_0 + ... + mu_(j-1)) / Lambda), halves up, written here independently
in exact rationals; the simulated step probabilities are the differences of these integers.
A shift of every cut point by one word moves each probability by at most 2^-64, below what
``test_step_probabilities_are_exact_to_2_pow_minus_64`` can see; here the integers themselves
are compared.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import qlib.heterogeneous as H

CASES = [
    (3.0, [3.0, 2.0, 1.0], "random"), (3.0, [3.0, 2.0, 1.0], "fastest"), (3.0, [3.0, 2.0, 1.0], "slowest"),
    ((1 - 1e-12) * 6.0, [3.0, 2.0, 1.0], "random"), (1.0, [1.0, 2.0**-38, 1.0], "random"),
    (900.0, [1e3, 1e-6], "slowest"), (6.0, [0.5, 4.0, 1.0, 2.5, 1.5], "random"),
] + [(float(r) * 7.3, list(np.random.default_rng(s).uniform(0.1, 3.0, 5)), "random")
     for s, r in enumerate([0.1, 0.37, 0.5, 0.77, 0.93])]


def exact_cuts(lam, mus, order):
    rates = [Fraction(lam)] + [Fraction(float(mus[j])) for j in order]
    total = sum(rates)
    out, cum = [], Fraction(0)
    for r in rates[:-1]:
        cum += r
        x = cum * 2**64 / total
        out.append((2 * x.numerator + x.denominator) // (2 * x.denominator))
    return out


@pytest.mark.parametrize("case", range(len(CASES)))
def test_cut_points_are_the_exact_rounded_cumulative_shares(case):
    lam, mus, policy = CASES[case]
    mus = np.asarray(mus, float)
    order = {"fastest": np.argsort(-mus, kind="stable"), "slowest": np.argsort(mus, kind="stable")}.get(
        policy, np.arange(mus.size))
    p = H.step_probabilities(lam, mus, policy=policy)
    kernel_order = [0] + [1 + int(j) for j in order]  # the cut points follow the kernel's server order
    cum, cuts = 0, []
    for k in kernel_order[:-1]:
        cum += p[k]
        assert (cum * 2**64).denominator == 1
        cuts.append(int(cum * 2**64))
    assert cuts == exact_cuts(lam, mus, order)
