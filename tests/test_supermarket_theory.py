"""The mean-field theory of the supermarket model: the fluid fixed point in closed form, the
fluid ODE converging to it, the predicted maximum k on integer ratios, the asymptotic profile,
and input validation.
"""

import math

import numpy as np
import pytest

import qlib.supermarket as sm

def test_fluid_trajectory_converges_to_fixed_point():
    for rep, kw in ((True, {}), (False, {"n": 500})):
        s0 = np.array([1.0, 0, 0, 0, 0, 0])
        tr = sm.fluid_trajectory(5, 0.9, [0, 1, 300], s0, replacement=rep, **kw)
        fp = sm.fluid_fixed_point(5, 0.9, 5, replacement=rep, **kw)
        np.testing.assert_allclose(tr[-1], fp, atol=1e-7)
        assert np.abs(tr[1] - fp).max() > 1e-2  # it started away from the fixed point


def test_fluid_fixed_point_closed_form():
    d, lam = 7, 0.93
    s = sm.fluid_fixed_point(d, lam, 5)
    i = np.arange(6)
    np.testing.assert_allclose(s, lam ** ((float(d) ** i - 1) / (d - 1)), rtol=1e-12)
    np.testing.assert_allclose(sm.fluid_drift(s[1:], d, lam), 0, atol=1e-14)


def test_predicted_max_length_exact_on_integer_ratio():
    assert sm.predicted_max_length(10, 0.99) == 2
    assert sm.predicted_max_length(10, 0.999) == 3
    assert sm.predicted_max_length(10, 0.95) == 2
    assert sm.predicted_max_length(100, 0.999) == 2
    assert sm.predicted_max_length(2, 0.75) == 2
    assert sm.predicted_max_length(2, 0.76) == 3
    assert sm.predicted_max_length(1, 0.5) == math.inf
    assert sm.boundary_distance(10, 0.99) < 1e-12


def test_asymptotic_profile_sums_sensibly():
    p = sm.asymptotic_profile(100, 0.999)
    np.testing.assert_allclose(p[:3], [1e-3, 0.1, 0.9], rtol=1e-9)


@pytest.mark.parametrize("call", [
    lambda: sm.fluid_fixed_point(0, 0.5, 3), lambda: sm.fluid_fixed_point(2, 1.0, 3),
    lambda: sm.predicted_max_length(2, float("nan")), lambda: sm.exact_tail_fraction(0, 2, 0.5, 3),
    lambda: sm.fluid_trajectory(2, 0.5, [0, 1], [0.5, 0.2]), lambda: sm.fluid_fixed_point(2, 0.5, 3, replacement=False),
])
def test_theory_functions_reject_bad_input(call):
    with pytest.raises(ValueError):
        call()
