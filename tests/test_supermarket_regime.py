"""qlib.supermarket.regime: the hypotheses H0-H3 in one form."""

from qlib.supermarket import regime


def test_failing_names_the_hypotheses_that_fail_in_order():
    # n (1-lam)^2 d = 0.3 < 10 at n = 3000, 1-lam = 1e-3, d = 100: outside H3 only
    h = regime.hypotheses(3000, 100, 1 - 1e-3, c_max=0.5, buffer_min=10.0)
    assert regime.failing(h) == ["H3"] and not regime.inside(h)
    h = regime.hypotheses(100_000, 100, 1 - 100_000 ** -0.5, c_max=0.5, buffer_min=10.0)
    assert regime.failing(h) == [] and regime.inside(h)
    assert regime.HYPOTHESES == tuple(k for k in h if k.startswith("H"))
    # the family form shares the keys: a family on a boundary (alpha/beta = 1) fails H0
    f = regime.family_hypotheses(*regime.family_point(10_000, 0.5, 0.5), 0.5, 0.5, c_max=0.5, gamma_min=0.0)
    assert "H0" in regime.failing(f)
