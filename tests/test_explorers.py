"""qlib.explorers: the sliders' NumPy theory gives the numbers of the library functions it
replaces (the refined mean field's JAX derivatives, the study's profile_view), and the widget
explorers redraw in place."""

import numpy as np
import pytest

from qlib import explorers as E
from qlib.supermarket import refined_mean_field

POINTS = [(0.01, 10, 10_000), (1e-3, 100, 100_000), (1e-4, 2, 100), (0.05, 1000, 10**7), (1e-3, 31, 3000)]


@pytest.mark.parametrize("d,lam", [(2, 0.9), (3, 0.99), (10, 0.999), (100, 0.999)])
def test_refined_profile_equals_the_refined_mean_field(d, lam):
    r = refined_mean_field(d, lam, order=2)
    f = E.refined_profile(d, lam)
    np.testing.assert_allclose(f.s, r.fixed_point, rtol=1e-14, atol=0)
    # round-off scaled by the largest term (A_1 = 0 exactly; both sides give it to ~1e-16 of max|A|)
    np.testing.assert_allclose(f.v, r.correction, rtol=1e-8, atol=1e-12 * np.abs(r.correction).max())
    np.testing.assert_allclose(f.a, r.correction2, rtol=1e-6, atol=1e-12 * np.abs(r.correction2).max())
    assert f.tau == pytest.approx(r.relaxation_time, rel=1e-10)
    for n in (100, 10**4):
        np.testing.assert_allclose(f.tail_fraction(n), r.tail_fraction(n), rtol=1e-8, atol=1e-14)


def test_pure_derivatives_match_finite_differences():
    x, lam, d = np.array([0.8, 0.4, 0.05]), 0.9, 4
    F1, Q1 = E.pure_derivatives(x, lam, d, 1)

    def drift(y):
        full = np.concatenate([[1.0], y, [0.0]])
        g = full**d
        return lam * (g[:-2] - g[1:-1]) - (full[1:-1] - full[2:]), lam * (g[:-2] - g[1:-1]) + (
            full[1:-1] - full[2:]
        )

    h = 1e-6
    for j in range(3):
        e = np.eye(3)[j] * h
        (fp, qp), (fm, qm) = drift(x + e), drift(x - e)
        np.testing.assert_allclose(F1[:, j], (fp - fm) / (2 * h), atol=1e-8)
        np.testing.assert_allclose(Q1[:, j], (qp - qm) / (2 * h), atol=1e-8)
    F2, _ = E.pure_derivatives(x, lam, d, 2)
    assert F2[0, 0] == pytest.approx(-lam * 12 * 0.8**2) and F2[1, 0] == pytest.approx(lam * 12 * 0.8**2)
    assert not E.pure_derivatives(x, lam, 2, 3)[0].any()  # x^2 has no third derivative


@pytest.mark.parametrize("eps,d,n", POINTS)
def test_profile_view_equals_the_study_function(eps, d, n):
    from qlib.studies import max_length as study

    a, b = E.profile_view(eps, d, n), study.profile_view(eps, d, n)
    assert (a.k, a.d, a.n, a.fluid_max) == (b.k, b.d, b.n, b.fluid_max)
    assert a.lam == b.lam and a.boundary_distance == pytest.approx(b.boundary_distance, rel=1e-12)
    assert a.tau == pytest.approx(b.tau, rel=1e-10)
    np.testing.assert_array_equal(a.levels, b.levels)
    np.testing.assert_allclose(a.fluid, b.fluid, rtol=1e-12, atol=0)
    np.testing.assert_allclose(a.refined, b.refined, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(a.asymptotic, b.asymptotic, rtol=1e-12, equal_nan=True)


def test_bad_input_is_a_value_error_naming_the_parameter():
    with pytest.raises(ValueError, match="d"):
        E.profile_view(0.01, 1, 100)
    with pytest.raises(ValueError, match="one_minus_lam"):
        E.profile_view(1.5, 10, 100)
    with pytest.raises(ValueError, match="lam"):
        E.refined_profile(10, 1.0)


def test_mixing_scales():
    s = E.mixing_scales(1000, 10, 0.99)
    assert s["k"] == 2 and s["lower"] == pytest.approx(1000 * 9.9)
    assert s["upper"] == pytest.approx(2 * 10 * 1000 * np.log(1000)) and s["drain"] == pytest.approx(1.99e5)
    from qlib.supermarket import linear_noise

    ln = linear_noise(1000, 10, 0.99)
    assert s["tau_int"] == pytest.approx(ln.tau_int_steps, rel=1e-8)
    assert s["sd_N"] == pytest.approx(ln.sd_N, rel=1e-8)

    from qlib.supermarket import predicted_meeting_time

    assert s["predicted"] == pytest.approx(predicted_meeting_time(1000, 10, 0.99).steps, rel=1e-8)


def test_fmt_has_no_float_noise():
    assert E.fmt(1 - 0.09) == "0.91" and E.fmt(0.9099999999999999, 6) == "0.91"


def test_profile_explorer_redraws_in_place():
    pytest.importorskip("ipywidgets")
    calls = []

    def simulate(eps, d, n):
        calls.append((eps, d, n))
        p = E.profile_view(eps, d, n).refined
        return type("Run", (), dict(p=p, p_se=0 * p, taus=1.0, burn_taus=2.0))()

    x = E.ProfileExplorer(simulate=simulate)
    fig, png = x.canvas.fig, x.canvas.widget.value
    x.d.value = 30
    assert x.canvas.fig is fig and x.canvas.widget.value != png  # same figure, new picture
    assert "d = 30" in x.title.get_text()
    assert x.view.d == 30 and x.k_line.get_xdata()[0] == x.view.k
    np.testing.assert_allclose(x.fluid.get_ydata(), E.profile_view(x.eps.value, 30, int(x.n.value)).fluid)
    x.button.click()
    assert calls == [(x.eps.value, 30, int(x.n.value))] and len(x.sim.get_xdata()) > 0
    x.n.value = 1e5
    assert len(x.sim.get_xdata()) == 0  # a simulation of other parameters is removed


def test_servers_explorer_redraws_in_place():
    pytest.importorskip("ipywidgets")
    from qlib.studies.who_works_the_most import profile

    x = E.ServersExplorer()
    fig = x.canvas.fig
    x.r_w.value = 0.9
    assert x.canvas.fig is fig
    p = profile(6, 10.0, 0.9)
    np.testing.assert_allclose(x.busy.get_ydata(), p.busy[np.argsort(-p.mus, kind="stable")])  # fastest first
    x.n_w.value = 20
    assert len(x.inf.get_xdata()) == 0 and "n ≤ 10" in x.note.get_text()


def test_mixing_explorer_moves_the_scales_and_draws_a_simulation():
    pytest.importorskip("ipywidgets")
    ex = type(
        "Ex",
        (),
        dict(
            T=np.array([100.0, 300.0, 200.0]),
            times=np.array([0.0, 50.0, 100.0]),
            l1=np.array([1.0, 0.5, 0.1]),
        ),
    )()
    x = E.MixingExplorer(simulate=lambda n, d, lam: ex)
    x.d_w.value = 10
    s = E.mixing_scales(x.n_w.value, 10, x.lam_w.value)
    assert x.lines[x.ax, "upper"].get_xdata()[0] == pytest.approx(s["upper"])
    assert x.lines[x.ax, "tau_int"].get_xdata()[0] == pytest.approx(s["tau_int"])
    x.button.click()
    np.testing.assert_allclose(x.surv.get_xdata(), [1.0, 100.0, 200.0, 300.0])
    np.testing.assert_allclose(x.surv.get_ydata(), [1.0, 2 / 3, 1 / 3, 0.0])


def test_perfect_explorer_moves_the_prediction():
    pytest.importorskip("ipywidgets")
    from qlib.supermarket.theory import predicted_max_length

    x = E.PerfectExplorer()
    x.lam_w.value, x.d_w.value = 0.98, 2
    assert x.k_line.get_xdata()[0] == min(int(predicted_max_length(2, 0.98)), x.cap_w.value)
