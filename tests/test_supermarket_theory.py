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


@pytest.mark.parametrize(
    "call",
    [
        lambda: sm.fluid_fixed_point(0, 0.5, 3),
        lambda: sm.fluid_fixed_point(2, 1.0, 3),
        lambda: sm.predicted_max_length(2, float("nan")),
        lambda: sm.exact_tail_fraction(0, 2, 0.5, 3),
        lambda: sm.fluid_trajectory(2, 0.5, [0, 1], [0.5, 0.2]),
        lambda: sm.fluid_fixed_point(2, 0.5, 3, replacement=False),
    ],
)
def test_theory_functions_reject_bad_input(call):
    with pytest.raises(ValueError):
        call()


# ------------------------------------------------------------------------ validation and 1 - lam (issue 13)


@pytest.mark.parametrize("call,name", [
    (lambda: sm.fluid_drift(np.array([0.5, 0.2]), 2, 5.0), "lam"),
    (lambda: sm.fluid_drift(np.array([0.5, 0.2]), 0, 0.5), "d"),
    (lambda: sm.fluid_drift(np.array([0.5, 0.2]), 2, float("nan")), "lam"),
    (lambda: sm.fluid_drift(np.array([0.5, np.nan]), 2, 0.5), "s"),
    (lambda: sm.all_sampled_at_least([0.5], 0), "d"),
    (lambda: sm.all_sampled_at_least([1.5], 2), "s"),
    (lambda: sm.all_sampled_at_least([np.nan], 2), "s"),
    (lambda: sm.all_sampled_at_least([0.5], 2, replacement=False), "n"),
    (lambda: sm.fluid_trajectory(2, 0.5, [0, 1], [1.0, 0.2], rtol=-1), "rtol"),
    (lambda: sm.fluid_trajectory(2, 0.5, [0, 1], [1.0, 0.2], atol=0), "atol"),
    (lambda: sm.predicted_max_length(2**63, 0.5), "d"),
    (lambda: sm.predicted_max_length(10, 0.5, one_minus_lam=0.5), "lam"),
    (lambda: sm.predicted_max_length(10, one_minus_lam=0.0), "one_minus_lam"),
    (lambda: sm.fluid_fixed_point(10, one_minus_lam=0.1), "levels"),
])
def test_theory_functions_validate_like_simulate(call, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()


def test_theory_takes_one_minus_lam_exactly():
    # 1 - 1e-12 as a float lam holds 1 - lam = 9.99978e-13: k reads 13 instead of 12
    assert sm.predicted_max_length(10, one_minus_lam=1e-12) == 12
    assert sm.predicted_max_length(10, 1 - 1e-12) == 13
    assert sm.predicted_max_length(10, one_minus_lam=1e-13) == 13
    assert sm.boundary_distance(10, one_minus_lam=1e-12) < 1e-12 < sm.boundary_distance(10, 1 - 1e-12)
    assert sm.predicted_max_length(2**63 - 1, one_minus_lam=1e-3) == 1
    # s_12 = lam^((10^12 - 1)/9) at 1 - lam = 1e-12: from 1 - lam itself to 1e-13, while the
    # float lam is off by 1e-5 relative
    s = sm.fluid_fixed_point(10, one_minus_lam=1e-12, levels=13)
    exact = math.exp(math.log1p(-1e-12) * (10**12 - 1) / 9)
    assert abs(s[12] / exact - 1) < 1e-13
    assert abs(sm.fluid_fixed_point(10, 1 - 1e-12, 13)[12] / exact - 1) > 1e-6
    # lam >= 1/2: both ways give the same numbers
    np.testing.assert_allclose(
        sm.fluid_fixed_point(3, 0.75, 6), sm.fluid_fixed_point(3, one_minus_lam=0.25, levels=6), rtol=1e-13
    )
    p = sm.asymptotic_profile(100, one_minus_lam=1e-3)
    np.testing.assert_allclose(p[:3], [1e-3, 0.1, 0.9], rtol=1e-12)


def test_fluid_trajectory_is_cpu_independent_and_accurate():
    """The explicit solver uses no BLAS (its bits do not depend on the CPU) and is as accurate as
    its tolerance: against a much tighter solve, and a stiff problem still solves (via LSODA)."""
    from qlib.supermarket import theory

    s0 = np.zeros(8)
    s0[0] = 1.0
    t = np.linspace(1.0, 300.0, 50)
    tight = sm.fluid_trajectory(10, 0.99, t, s0, rtol=1e-13, atol=1e-15)
    assert np.abs(sm.fluid_trajectory(10, 0.99, t, s0) - tight).max() < 1e-8
    calls = []
    y = theory._dormand_prince(lambda y: calls.append(1) or -y, np.ones(2), [1.0, 2.0], 1e-10, 1e-14)
    assert np.allclose(y, np.exp(-np.array([[1.0, 1.0], [2.0, 2.0]])), rtol=1e-8)
    assert theory._dormand_prince(lambda y: -1e6 * y, np.ones(1), [10.0], 1e-9, 1e-12, max_steps=50) is None
    stiff = sm.fluid_trajectory(10**5, 0.9, [0.5, 3.0], np.array([1.0, 0.9, 0.5]))
    assert np.all(np.isfinite(stiff)) and np.all(np.diff(stiff[:, 1]) < 0)
    x = np.array([0.3, 0.9, 1.0, 0.0])
    assert np.allclose(theory._power(x, 10), x**10, rtol=1e-14, atol=0) and theory._power(x, 1) is x
