"""The project's autocorrelation estimator against a series of known tau, at the studies' own designs.

The series is an AR(1) (a sampled Ornstein-Uhlenbeck process: exponential autocorrelation, which
is what the linear-noise view predicts for N in the regime, rho(tau_fluid) = e^-1) whose tau_int is
the linear-noise tau_int(N) of family A at n = 3e3 (2.87 n d steps), sampled as the design samples
N. The estimator is :func:`qlib.supermarket.fluctuations.estimate_from_series` (Sokal's window,
each replica's own mean, replica mean with a Student-t interval), the same as the in-regime mixing
study used (there with c = 5). The verdict is the tau row's own (qlib.claims.decide_band on tau_hat/tau within
1 +- tau_tol):

- the old design (qlib.studies.mixing_regime PARAMETERS["full"]: 8 replicas x 10 n d^(k-1) steps,
  1000 frames): FAIL, the estimate is about a quarter of the truth (0.26 here);
- the new design (qlib.studies.fluctuations PARAMETERS["full"]["tau"]: 32 replicas x 400 predicted
  tau_int, 50 frames per tau_int, Sokal's window c = 3): PASS (30 of 30 seeds tried; at 32 x 200
  with c = 5, 13 of 30 were INCONCLUSIVE).
"""

import math

import numpy as np
from scipy.signal import lfilter

import qlib.supermarket as sm
from qlib.claims import decide_band
from qlib.studies.fluctuations.parameters import PARAMETERS as NEW
from qlib.studies.mixing_regime.parameters import PARAMETERS as OLD
from qlib.supermarket.fluctuations import estimate_from_series

#: family A at n = 3e3 (lam = 1 - n^-0.5, d = floor(n^0.4)): k = 2
POINT = (3000, 24, 1 - 3000**-0.5)


def ar1(replicas: int, frames: int, a: float, rng) -> np.ndarray:
    """Stationary AR(1) rows x_t = a x_(t-1) + sqrt(1 - a^2) e_t, x_0 ~ N(0, 1)."""
    e = rng.standard_normal((replicas, frames)) * math.sqrt(1 - a * a)
    e[:, 0] = rng.standard_normal(replicas)
    return lfilter([1.0], [1.0, -a], e, axis=1)


def verdict(replicas: int, frames: int, every: float, tau_steps: float, seed: int,
            window: float) -> tuple[str, float, tuple]:
    """The tau row's verdict for the estimator (Sokal's ``window``) on an AR(1) of tau_int
    ``tau_steps`` sampled every ``every`` steps: (verdict, mean ratio, 95% CI of the ratio)."""
    a = math.exp(-2.0 * every / tau_steps)  # exponential rho(t) = e^(-2t/tau_int)
    truth = every * (1 + a) / (1 - a)  # Sokal's tau of the sampled series, in steps (~ tau_steps)
    x = ar1(replicas, frames, a, np.random.default_rng(seed))
    _, tau = estimate_from_series(x, every, window=window)
    lo, hi = (float(v) / truth for v in tau.interval(0.95))
    tol = NEW["full"]["claims"]["tau_tol"]
    return decide_band(lo, hi, 1 - tol, 1 + tol), float(tau.mean) / truth, (lo, hi)


def test_old_design_fails_new_design_passes():
    ln = sm.linear_noise(*POINT)
    scale = POINT[0] * POINT[1]  # n d^(k-1), k = 2
    assert 2.5 < ln.tau_int_steps / scale < 3.5
    P = OLD["full"]
    steps, frames = P["iact_length"] * scale, P["iact_frames"]
    old, old_ratio, old_ci = verdict(P["replicas"], frames, steps / frames, ln.tau_int_steps, seed=1,
                                     window=NEW["full"]["old_design"]["window"])
    assert old == "FAIL", (old_ratio, old_ci)
    assert old_ratio < 0.4  # about a quarter: the run holds ~3.5 tau_int

    D = NEW["full"]
    every = ln.tau_int_steps / D["frames_per_tau"]
    frames = int(D["tau"]["tau_per_replica"] * D["frames_per_tau"])
    assert D["tau"]["replicas"] * D["tau"]["tau_per_replica"] >= 100  # issue 40: >= 100 tau_int per point
    new, new_ratio, new_ci = verdict(D["tau"]["replicas"], frames, every, ln.tau_int_steps, seed=2,
                                     window=D["tau"]["window"])
    assert new == "PASS", (new_ratio, new_ci)
