"""The who-works-the-most study's parameters, per mode, and the thresholds of its rows."""

from __future__ import annotations

from typing import Any

INFORMED_MAX_N = 10  # the informed rules have no product form: generator solve over 2^n busy sets
FAMILIES = ("geometric", "nearly equal", "one fast")

#: Every threshold a row is judged by, fixed before the run (both modes): ``z_max`` a simulated
#: number within this many standard errors of its exact value (and a near routing rule told apart
#: beyond it); ``residual_max`` an exact identity's largest residual.
CLAIM_THRESHOLDS: dict[str, float] = dict(z_max=5.0, residual_max=1e-9)

#: Every parameter of the study, per mode.
PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": {
        "figures": dict(n=6, spread=10.0, loads=(0.3, 0.6, 0.9)),
        "grid": dict(ns=[2, 3, 5, 10, 50], loads=[0.01, 0.5, 0.9, 0.999], spread=10.0, gap=1e-6),
        # the figures' three loads at n = 6, and n = 50 servers; every routing rule at each
        "sims": dict(cases=[(6, 10.0, 0.3), (6, 10.0, 0.6), (6, 10.0, 0.9), (50, 10.0, 0.7)], steps=50_000,
                     replicas=16, seed=2024, gammas=(0.25, -0.25, 0.1, -0.1)),
        "claims": CLAIM_THRESHOLDS,
    },
    "full": {
        "figures": dict(n=6, spread=10.0, loads=(0.3, 0.6, 0.9)),
        "grid": dict(ns=[2, 3, 4, 5, 6, 8, 10, 20, 50, 100, 200, 500, 1000],
                     loads=[0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999], spread=10.0, gap=1e-6),
        "sims": dict(cases=[(6, 10.0, 0.3), (6, 10.0, 0.6), (6, 10.0, 0.9), (50, 10.0, 0.7)], steps=1_000_000,
                     replicas=32, seed=2024, gammas=(0.25, -0.25, 0.1, -0.1)),
        "claims": CLAIM_THRESHOLDS,
    },
}
