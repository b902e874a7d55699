"""What the notebook's sliders call: exact quantities for (number of servers, spread, load).

Kept here, not in the notebook, so it is unit-tested and the notebook stays thin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qlib import _validate
from qlib.heterogeneous.exact import (busy_probabilities, fastest_busy_probabilities,
                                      mean_queue_length, wait_probability)

INFORMED_MAX_N = 10  # the informed ("fastest") policy has no product form: generator solve, 2^n states


def geometric_rates(n: int, spread: float) -> np.ndarray:
    """n service rates from ``spread`` down to 1, geometrically spaced (fastest first)."""
    n = _validate.integer("n", n, low=1)
    spread = _validate.real("spread", spread, low=1.0, low_open=False)
    return np.geomspace(spread, 1.0, n) if n > 1 else np.array([1.0])


@dataclass(frozen=True)
class Profile:
    """Exact stationary quantities for one (n, spread, rho); servers fastest first."""

    n: int
    spread: float
    rho: float
    lam: float
    mus: np.ndarray
    busy: np.ndarray  # P_j, uninformed (random idle server)
    work: np.ndarray  # mu_j P_j
    wait: float
    mean_queue: float
    informed_busy: np.ndarray | None  # P_j when customers join the fastest idle server (n <= 10)

    @property
    def informed_work(self) -> np.ndarray | None:
        return None if self.informed_busy is None else self.mus * self.informed_busy

    def band_ok(self) -> bool:
        """(mu_m/mu_l) P_m <= P_l <= P_m for every pair with mu_l > mu_m."""
        P, m = self.busy, self.mus
        L, M = np.triu_indices(self.n, 1)  # l before m, so mu_l >= mu_m
        strict = m[L] > m[M]
        return bool(np.all((P[L] <= P[M])[strict]) and np.all((m[M] / m[L] * P[M] <= P[L])[strict]))


def profile(n: int, spread: float, rho: float, *, informed: bool = True) -> Profile:
    """Exact profile for ``n`` servers with rates ``geometric_rates(n, spread)`` at load ``rho``."""
    mus = geometric_rates(n, spread)
    rho = _validate.real("rho", rho, low=0.0, high=1.0)
    lam = rho * float(mus.sum())
    P = busy_probabilities(lam, mus)
    inf = fastest_busy_probabilities(lam, mus) if informed and mus.size <= INFORMED_MAX_N else None
    return Profile(n=mus.size, spread=float(spread), rho=rho, lam=lam, mus=mus, busy=P, work=mus * P,
                   wait=wait_probability(lam, mus), mean_queue=mean_queue_length(lam, mus),
                   informed_busy=inf)


LOADS = (0.3, 0.6, 0.9)


@dataclass(frozen=True)
class FigureData:
    """Everything the notebook's static figures show (one call computes it)."""

    profiles: list
    sims: list
    informed_sim: object


def figure_data(smoke: bool = False, *, n: int = 6, spread: float = 10.0, loads=LOADS,
                seed: int = 3, events: int | None = None, replicas: int | None = None) -> FigureData:
    """Exact profiles at several loads plus simulations (random policy, and the informed one).

    ``events`` steps per replica (default 20 000 when ``smoke``, else 500 000) after a burn-in
    of events // 20; ``replicas`` independent copies (default 8 when ``smoke``, else 32).
    """
    from qlib.heterogeneous.simulate import simulate

    events = (20_000 if smoke else 500_000) if events is None else events
    replicas = (8 if smoke else 32) if replicas is None else replicas
    profs, sims = [], []
    for i, rho in enumerate(loads):
        p = profile(n, spread, rho)
        profs.append(p)
        sims.append(simulate(p.lam, p.mus, steps=events, replicas=replicas, seed=seed + i,
                             burn_in=events // 20))
    p = profs[-1]
    inf = simulate(p.lam, p.mus, steps=events, replicas=replicas, seed=seed + 100,
                   burn_in=events // 20, policy="fastest")
    return FigureData(profs, sims, inf)


def simulate_profile(n: int, spread: float, rho: float, *, events: int = 200_000,
                     replicas: int = 16, seed: int = 0):
    """The notebook's "simulate" button: a simulation at the sliders' parameters."""
    from qlib.heterogeneous.simulate import simulate

    mus = geometric_rates(n, spread)
    return simulate(rho * mus.sum(), mus, steps=events, replicas=replicas, seed=seed, burn_in=events // 20)
