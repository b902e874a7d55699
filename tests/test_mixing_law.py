"""qlib.supermarket.predicted_meeting_time: T_pred = tau_fluid (ln SD(N) + C) from the linear-noise
view, and its input checks."""

import math

import pytest

from qlib.supermarket import linear_noise, predicted_meeting_time


def test_the_law_is_tau_fluid_times_ln_sd():
    t = predicted_meeting_time(200_000, 140, 1 - 7e-4)
    ln = linear_noise(200_000, 140, 1 - 7e-4)
    assert t.k == 2 and t.constant == 0.0
    assert t.steps == pytest.approx(ln.tau_fluid_steps * math.log(ln.sd_N_lna), rel=1e-12)
    assert t.tau_fluid_steps == pytest.approx(200_000 * (2 - 7e-4) * ln.tau_fluid, rel=1e-12)
    c = predicted_meeting_time(200_000, 140, 1 - 7e-4, constant=1.0)
    assert c.steps - t.steps == pytest.approx(t.tau_fluid_steps, rel=1e-9)


def test_at_k3_the_relaxation_grows_as_d_squared():
    """At fixed c = (1-lam) d^2 the fluid relaxation time in model time grows about as d^2 at k = 3
    (and as d at k = 2): what the k = 3 row tells apart."""
    a = predicted_meeting_time(250_000, 47, 1 - 0.299 / 47**2)
    b = predicted_meeting_time(250_000, 94, 1 - 0.299 / 94**2)
    assert a.k == b.k == 3
    ratio = (b.tau_fluid_steps / b.n) / (a.tau_fluid_steps / a.n)
    assert 2.0**1.6 < ratio < 2.0**2.4


@pytest.mark.parametrize("kw, name", [(dict(n=0), "n"), (dict(lam=1.0), "lam"), (dict(d=0), "d"),
                                      (dict(constant=float("nan")), "constant")])
def test_bad_input_names_the_parameter(kw, name):
    args = dict(n=1000, d=10, lam=0.9) | kw
    with pytest.raises(ValueError, match=name):
        predicted_meeting_time(**args)
