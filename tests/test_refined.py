"""The refined mean field (Gast & Van Houdt 2017) against exact oracles.

- small-n exact stationary law (``exact_tail_fraction``): the refined value must be closer than
  the plain fluid fixed point (with and without replacement);
- d = 1 (independent M/M/1 queues): V = 0 and W_ii = lam^i (1 - lam^i) in closed form;
- the exact stationary identity E[u_j] = lam n E[(u_{j-1}/n)^d], expanded to order 1/n;
- the autodiff Jacobian against finite differences of ``theory.fluid_drift``.
All deterministic: no tolerance is statistical.
"""

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib.supermarket.refined import refined_mean_field

SMALL = [(3, 2, 0.7), (4, 2, 0.6), (3, 3, 0.8)]  # (exact solve of n = 5 with replacement takes minutes)


@pytest.mark.parametrize("n,d,lam", SMALL)
@pytest.mark.parametrize("replacement", [True, False])
def test_refined_beats_fluid_against_exact(n, d, lam, replacement):
    L = 6
    exact = sm.exact_tail_fraction(n, d, lam, L, replacement=replacement, tol=1e-11)
    r = refined_mean_field(d, lam, levels=L + 2, replacement=replacement)
    fluid = sm.fluid_fixed_point(d, lam, L, replacement=replacement, n=None if replacement else n)
    refined = r.tail_fraction(n)[: L + 1]
    err_fluid = np.abs(fluid - exact)[2:].sum()
    err_refined = np.abs(refined - exact)[2:].sum()
    assert err_refined < err_fluid, (err_refined, err_fluid)
    # level by level: never worse (at levels where s_i ~ 0 both are ~0 and tie)
    assert np.all(np.abs(refined - exact) <= np.abs(fluid - exact) + 1e-9)


def test_mm1_closed_form():
    # d = 1: linear drift, so V = 0; u_i is Binomial(n, lam^i) -> W_ii = lam^i (1 - lam^i).
    lam = 0.6
    r = refined_mean_field(1, lam, levels=60)  # truncation error ~ lam^60
    i = np.arange(21)
    np.testing.assert_allclose(r.correction, 0.0, atol=1e-10)
    np.testing.assert_allclose(np.diag(r.covariance)[1:21], (lam**i * (1 - lam**i))[1:], atol=1e-10)
    # and n Cov(u_i, u_j)/n^2 for i < j: E[1_i 1_j] - lam^i lam^j = lam^j (1 - lam^i)
    np.testing.assert_allclose(r.covariance[2, 5], lam**5 * (1 - lam**2), atol=1e-10)


@pytest.mark.parametrize("d,lam", [(2, 0.9), (5, 0.95), (100, 0.999)])
def test_order_1_over_n_identity(d, lam):
    # E[u_j]/n = lam E[(u_{j-1}/n)^d] exactly; expanding x = s + V/n + fluctuations of variance
    # W/n gives V_j = lam (d s^(d-1) V_{j-1} + d(d-1)/2 s^(d-2) W_{j-1,j-1}).
    r = refined_mean_field(d, lam)
    s, V, W = r.fixed_point, r.correction, r.covariance
    assert abs(V[1]) < 1e-9 * max(1.0, np.abs(V).max())  # E[u_1] = lam n for every n
    for j in range(2, r.levels + 1):
        rhs = lam * (d * s[j - 1] ** (d - 1) * V[j - 1] + d * (d - 1) / 2 * s[j - 1] ** (d - 2) * W[j - 1, j - 1])
        assert V[j] == pytest.approx(rhs, rel=1e-7, abs=1e-9)


def test_jacobian_against_finite_differences():
    d, lam = 3, 0.8
    r = refined_mean_field(d, lam, levels=8)
    x = r.fixed_point[1:]
    h = 1e-6
    J = np.stack([(sm.fluid_drift(x + h * e, d, lam) - sm.fluid_drift(x - h * e, d, lam)) / (2 * h)
                  for e in np.eye(x.size)], axis=1)
    np.testing.assert_allclose(r.jacobian, J, atol=1e-6)
    # the Lyapunov solution satisfies A W + W A^T + Q = 0 with Q diagonal, non-negative
    A, W = r.jacobian, r.covariance[1:, 1:]
    Q = -(A @ W + W @ A.T)
    assert np.allclose(Q, np.diag(np.diag(Q)), atol=1e-10) and np.all(np.diag(Q) >= -1e-12)


def test_refined_tends_to_fluid_and_finite_n_direction():
    r = refined_mean_field(100, 0.999)
    assert r.tail_fraction(10**12)[3] == pytest.approx(r.fixed_point[3], rel=1e-6)
    # at lam = 0.999, d = 100 the correction raises the tail at 3 (the finite-n effect)
    assert r.correction[3] > 0 and r.tail_fraction(10**5)[3] > 5 * r.fixed_point[3]
    p = r.queue_length_distribution(10**4)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("kw,name", [(dict(d=0, lam=0.5), "d"), (dict(d=2, lam=1.0), "lam"),
                                      (dict(d=2, lam=0.5, levels=0), "levels"),
                                      (dict(d=2, lam=0.5, replacement="yes"), "replacement")])
def test_bad_input(kw, name):
    with pytest.raises(ValueError, match=name):
        refined_mean_field(**kw)
    with pytest.raises(ValueError, match="n"):
        refined_mean_field(2, 0.5).tail_fraction(0)
