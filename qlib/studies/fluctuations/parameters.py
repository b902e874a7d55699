"""The parameters of the fluctuations study (issue 40), per mode: the point sets, the design of the
stationary runs in units of the *predicted* tau_int(N), and the claim thresholds.

The design is sized by the linear-noise view (:func:`qlib.supermarket.linear_noise`), not by
n d^(k-1): the old design of the in-regime mixing study (10 n d^(k-1) steps per replica, 1000
frames, 8 replicas) holds about three tau_int per replica, where Sokal's estimator returns about a
quarter of the truth (tests/test_studies_fluctuations.py shows it on an AR(1) series of known tau).
"""

from __future__ import annotations

from typing import Any

#: The thresholds of the rows, committed before the runs that judge them (issue 40):
#: ``sd_tol``: SD(N)/SD_pred(N) PASSES when every in-regime point's 95% CI lies within 1 +- sd_tol, FAILS
#: when one CI lies wholly outside (SD_pred: sqrt(n 1^T W 1 + 1^T covariance2 1), the linear-noise
#: variance with its 1/n term); ``tau_tol``: the same for tau_int(N)/tau_int,LNA(N) (Sokal's
#: 1 + 2 sum rho, in jump steps); ``hypotheses``: a point is in the regime (its row a claim) when H0-H3
#: hold at it: on a family the families study's H0-H3 (qlib.studies.families.compute.hypotheses:
#: k = ceil(alpha/beta), c = (1-lam) d^(k-1) <= c_max, the fluid maximum is k, gamma > gamma_min), on
#: the sweep the in-regime mixing study's (qlib.studies.mixing.parameters.hypotheses: c <= c_max,
#: buffer n (1-lam)^2 d^(k-1) >= buffer_min); outside, the same ratio is a finding.
CLAIM_THRESHOLDS = dict(
    sd_tol=0.10,
    tau_tol=0.15,
    hypotheses=dict(c_max=0.5, gamma_min=0.0, buffer_min=10.0),
)

#: Families A-C (inside H0-H3 from about n = 3e3) and D, E, K3 (outside: findings): (alpha, beta), with
#: lam = 1 - n^-alpha, d = floor(n^beta), as in the families study; the in-regime sweep of the mixing
#: study (n = 2e5, 1 - lam = 7e-4); the mixing family is family A at n = 3e3..1e5 (its points are A's).
_FAMILIES = {
    "A": dict(alpha=0.5, beta=0.4, ns=[1_000, 3_000, 10_000, 30_000, 100_000]),
    "B": dict(alpha=0.6, beta=0.45, ns=[1_000, 3_000, 10_000, 30_000, 100_000]),
    "C": dict(alpha=0.65, beta=0.5, ns=[1_000, 3_000, 10_000, 30_000, 100_000]),
    "D": dict(alpha=0.75, beta=0.5, ns=[1_000, 3_000, 10_000]),
    "E": dict(alpha=0.8, beta=0.5, ns=[1_000, 3_000]),
    "K3": dict(alpha=0.8, beta=0.35, ns=[1_000, 3_000]),
}

#: Every parameter of the study, per mode. Full mode is the long tier only
#: (``python -m qlib results-long --only fluctuations``): each point is one entry of results/long.
#: ``sd``: the SD(N) design, ``replicas`` x ``tau_per_replica`` predicted tau_int(N) (800 in all: on an
#: AR(1) series at this design SD(N) about the pooled mean is within 1% of the truth with a 95% CI of
#: about +-3.5%, against sd_tol = 10%); ``tau``: the tau_int(N) design, 32 x 400 = 12800 predicted
#: tau_int per point with Sokal's window c = ``window`` = 3 (the variance of the estimate grows with
#: the window; for the exponential rho the linear-noise view predicts, c = 3 truncates e^-6 of it):
#: on an AR(1) series at this design the estimate is within 1% of the truth with a 95% CI of about
#: +-5%, against tau_tol = 15% (32 x 200 at c = 5 left 13 of 30 seeds INCONCLUSIVE), at the points
#: whose n is at most ``n_max`` (every in-regime point would cost ~1e13 replica-steps, beyond one
#: session here); ``frames_per_tau``: frames per predicted tau_int; ``burn_tau``: burn-in from the
#: fluid point, in fluid relaxation times (about twice issue 42's meeting time tau_fluid ln SD(N));
#: ``old_design``: the in-regime mixing study's design (steps per replica in n d^(k-1), frames, Sokal's
#: window), on which the old estimator is run as a wrong model of the tau row; ``near``: the near
#: wrong models whose prediction each row is also compared with (its resolution).
PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": {
        # family A at n = 1e3 is the cheapest point inside H0-H3 (the rows then have one point to judge)
        "families": {"A": dict(alpha=0.5, beta=0.4, ns=[1_000]), "K3": dict(alpha=0.8, beta=0.35, ns=[300])},
        "sweep": dict(n=2000, one_minus_lam=0.01, ds=[12]),
        "sd": dict(replicas=4, tau_per_replica=10.0),
        "tau": dict(replicas=4, tau_per_replica=20.0, window=3.0, n_max=1_000),
        "frames_per_tau": 20,
        "burn_tau": 20.0,
        "old_design": dict(length=10.0, frames=1000, window=5.0),
        "near": ["d-1"],
        "claims": CLAIM_THRESHOLDS,
        "stream": "fluctuations/smoke",
    },
    "full": {
        "families": _FAMILIES,
        "sweep": dict(n=200_000, one_minus_lam=7e-4, ds=[140, 245, 428]),
        "sd": dict(replicas=16, tau_per_replica=50.0),
        "tau": dict(replicas=32, tau_per_replica=400.0, window=3.0, n_max=3_000),
        "frames_per_tau": 50,
        "burn_tau": 20.0,
        "old_design": dict(length=10.0, frames=1000, window=5.0),
        "near": ["d-1"],
        "claims": CLAIM_THRESHOLDS,
        "stream": "fluctuations",
    },
}
