"""Study: who works the most? Heterogeneous servers and uninformed customers (notebook 03).

Claims (Cabral, arXiv:0706.0560; docs/models.md#heterogeneous-servers): in an M/M/n queue
whose arrivals join a uniformly random idle server, for any two servers with mu_l > mu_m:
P_l < P_m (the faster server is busy less often), yet mu_l P_l > mu_m P_m (it does more work);
indeed (mu_m/mu_l) P_m < P_l < P_m. Exact values come from the product form
(:func:`qlib.heterogeneous.busy_probabilities`); simulations (:func:`qlib.heterogeneous.simulate`)
check them, with longest-idle routing (same law) and informed customers (fastest idle) beside.

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS`, :func:`run`,
:func:`claim_rows`; figures in :mod:`qlib.plots.who_works_the_most`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from qlib import _validate
from qlib.claims import ClaimRow
from qlib.heterogeneous import (SimulationResult, busy_probabilities, fastest_busy_probabilities,
                                joint_probabilities, mean_queue_length, simulate, wait_probability)
from qlib.stats import replica_mean
from qlib.studies import check_mode

INFORMED_MAX_N = 10  # the informed ("fastest") policy has no product form: generator solve, 2^n states

#: Every parameter of the study, per mode: the figures' profiles at several loads and the
#: claims' own simulation (``claims``).
PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": {"figures": dict(n=6, spread=10.0, loads=(0.3, 0.6, 0.9), steps=20_000, replicas=8, seed=3),
              "claims": dict(n=5, spread=10.0, rho=0.7, steps=50_000, replicas=32, seed=2024)},
    "full": {"figures": dict(n=6, spread=10.0, loads=(0.3, 0.6, 0.9), steps=500_000, replicas=32, seed=3),
             "claims": dict(n=5, spread=10.0, rho=0.7, steps=1_000_000, replicas=32, seed=2024)},
}


def geometric_rates(n: int, spread: float) -> np.ndarray:
    """n service rates from ``spread`` down to 1, geometrically spaced (fastest first)."""
    n = _validate.integer("n", n, low=1)
    spread = _validate.real("spread", spread, low=1.0, low_open=False)
    return np.geomspace(spread, 1.0, n) if n > 1 else np.array([1.0])


@dataclass(frozen=True)
class Profile:
    """Exact stationary quantities for one (n, spread, rho); servers fastest first. Arrays (n,):
    ``mus``, ``busy`` (P_j, uninformed), ``work`` (mu_j P_j), ``informed_busy`` (P_j when
    customers join the fastest idle server; None for n > 10)."""

    n: int
    spread: float
    rho: float
    lam: float
    mus: np.ndarray
    busy: np.ndarray
    work: np.ndarray
    wait: float
    mean_queue: float
    informed_busy: np.ndarray | None

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


@dataclass(frozen=True)
class WhoWorksTheMostResult:
    """Everything notebook 03 and its claim rows show, for one ``mode``: one exact
    :class:`Profile` and one random-policy simulation per load of the figures, the informed
    simulation at the highest load, and the claims' random and longest-idle simulations."""

    mode: str
    parameters: dict
    profiles: list
    sims: list
    informed_sim: SimulationResult
    claims_sim: SimulationResult
    claims_longest_idle: SimulationResult


def run(mode: str = "full", *, progress: bool = True) -> WhoWorksTheMostResult:
    """Exact profiles at several loads, their simulations, and the claims' simulations."""
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    f, c = P["figures"], P["claims"]
    ev = f["steps"]
    profs, sims = [], []
    for i, rho in enumerate(f["loads"]):
        p = profile(f["n"], f["spread"], rho)
        profs.append(p)
        sims.append(simulate(p.lam, p.mus, steps=ev, replicas=f["replicas"], seed=f["seed"] + i,
                             burn_in=ev // 20, progress=progress))
    p = profs[-1]
    inf = simulate(p.lam, p.mus, steps=ev, replicas=f["replicas"], seed=f["seed"] + 100,
                   burn_in=ev // 20, policy="fastest", progress=progress)
    mus = geometric_rates(c["n"], c["spread"])
    lam = c["rho"] * mus.sum()
    cev = c["steps"]
    claims = [simulate(lam, mus, steps=cev, replicas=c["replicas"], seed=c["seed"] + j, burn_in=cev // 20,
                       policy=policy, progress=progress)
              for j, policy in enumerate(("random", "longest_idle"))]
    return WhoWorksTheMostResult(mode=mode, parameters=P, profiles=profs, sims=sims, informed_sim=inf,
                                 claims_sim=claims[0], claims_longest_idle=claims[1])


def simulate_profile(n: int, spread: float, rho: float, *, steps: int = 200_000,
                     replicas: int = 16, seed: int = 0) -> SimulationResult:
    """The notebook's "simulate" button: a simulation at the sliders' parameters."""
    mus = geometric_rates(n, spread)
    return simulate(rho * mus.sum(), mus, steps=steps, replicas=replicas, seed=seed, burn_in=steps // 20)


def _fmt(est, i=None):
    m, h = est.mean, est.halfwidth()
    if i is not None:
        m, h = m[i], h[i]
    return f"{float(m):.4f} ± {float(h):.4f}"


def _signed_row(claim, params, samples, exact, note):
    """Rows whose claim is 'this difference is > 0' for each adjacent pair (fastest pair shown)."""
    est = replica_mean(samples)
    lo, _ = est.interval()
    z = np.abs(est.mean - exact) / est.stderr
    ok = bool(np.all(lo > 0) and np.all(exact > 0) and np.all(z < 5))
    return ClaimRow(
        claim=claim, parameters=params,
        theory=f"{note} = {exact[0]:.4f} (all {len(exact)} adjacent pairs > 0)",
        measured=f"{_fmt(est, 0)}; min over pairs {est.mean.min():.4f}",
        passed=ok, criterion="every adjacent pair: 95% CI > 0 and |sim - exact| < 5 SE")


def claim_rows(result: WhoWorksTheMostResult) -> list[ClaimRow]:
    """The three claims, the identity sum_j mu_j P_j = lam, and longest-idle = random."""
    c = result.parameters["claims"]
    r = result.claims_sim
    mus, lam, N = r.mus, r.lam, c["n"]
    P = busy_probabilities(lam, mus)
    J = joint_probabilities(lam, mus)
    params = f"n={N}, mu={c['spread']:g}..1 geometric, rho={c['rho']}, {r.replicas}x{r.steps:.0e} steps"
    B, T = r.busy_fraction, r.throughput
    L, M = np.arange(N - 1), np.arange(1, N)  # servers sorted fastest first: l = j, m = j + 1
    rows = [
        _signed_row("1. the faster server is busy less often: P_l < P_m", params,
                    B[:, M] - B[:, L], P[M] - P[L], "P_m - P_l (fastest pair)"),
        _signed_row("2. yet it does more work: mu_l P_l > mu_m P_m", params,
                    T[:, L] - T[:, M], mus[L] * P[L] - mus[M] * P[M],
                    "mu_l P_l - mu_m P_m (throughputs, fastest pair)"),
    ]
    # 3. band: position of P_l inside ((mu_m/mu_l) P_m, P_m) must be in (0, 1)
    low = mus[M] / mus[L]
    pos_sim = (B[:, L] - low * B[:, M]) / (B[:, M] - low * B[:, M])
    pos_ex = (P[L] - low * P[M]) / (P[M] - low * P[M])
    est = replica_mean(pos_sim)
    lo, hi = est.interval()
    z = np.abs(est.mean - pos_ex) / est.stderr
    rows.append(ClaimRow(
        claim="3. (mu_m/mu_l) P_m < P_l < P_m", parameters=params,
        theory=f"position of P_l in the band = {pos_ex[0]:.4f} (fastest pair), in (0, 1) for all pairs",
        measured=f"{_fmt(est, 0)}; range over pairs {est.mean.min():.3f}..{est.mean.max():.3f}",
        passed=bool(np.all(lo > 0) and np.all(hi < 1) and np.all(z < 5)),
        criterion="every adjacent pair: 95% CI inside (0, 1) and |sim - exact| < 5 SE"))
    # identity: total throughput equals the arrival rate
    est = replica_mean(T.sum(axis=1))
    z = abs(float(est.mean) - lam) / float(est.stderr)
    rows.append(ClaimRow(
        claim="identity: sum_j mu_j P_j = lam", parameters=params, theory=f"{lam:.4f}",
        measured=_fmt(est), passed=bool(z < 5), criterion="|sim - lam| < 5 SE"))
    # identity behind claim 2, with the independently computed joint probability
    both = J.both_busy[L, M]
    rows.append(ClaimRow(
        claim="identity: mu_l P_l - mu_m P_m = (mu_l - mu_m) P(l and m busy)", parameters=params,
        theory=f"{(mus[0] - mus[1]) * both[0]:.4f} (fastest pair)",
        measured=f"exact lhs {mus[0] * P[0] - mus[1] * P[1]:.4f}; max |lhs - rhs| over pairs "
                 f"{np.max(np.abs(mus[L] * P[L] - mus[M] * P[M] - (mus[L] - mus[M]) * both)):.1e}",
        passed=bool(np.allclose(mus[L] * P[L] - mus[M] * P[M], (mus[L] - mus[M]) * both, atol=1e-12)),
        criterion="exact, to 1e-12"))
    # longest-idle-first has the same stationary law (Doroudi & Gopalakrishnan)
    est = result.claims_longest_idle.estimate("busy_fraction")
    z = np.abs(est.mean - P) / est.stderr
    rows.append(ClaimRow(
        claim="longest-idle routing gives the same P_j", parameters=params,
        theory="P = " + ", ".join(f"{p:.4f}" for p in P),
        measured="P = " + ", ".join(f"{p:.4f}" for p in est.mean) + f" (max z = {z.max():.2f})",
        passed=bool(np.all(z < 5)), criterion="every server |sim - exact| < 5 SE"))
    return rows
