"""Claims-table rows for Cabral's "who works the most?": simulation (± 95% CI) against exact theory.

Each row states its criterion: the simulated quantity has the claimed sign with its 95% CI
excluding zero, and it agrees with the exact product-form value within 5 standard errors.
"""

from __future__ import annotations

import numpy as np

from qlib.claims import ClaimRow
from qlib.heterogeneous.exact import busy_probabilities, joint_probabilities
from qlib.heterogeneous.explore import geometric_rates
from qlib.heterogeneous.simulate import SimulationResult, simulate
from qlib.stats import replica_mean

N, SPREAD, RHO = 5, 10.0, 0.7


def run_sim(quick: bool = False, policy: str = "random", seed: int = 2024) -> SimulationResult:
    mus = geometric_rates(N, SPREAD)
    lam = RHO * mus.sum()
    ev = 50_000 if quick else 1_000_000
    return simulate(lam, mus, steps=ev, replicas=32, seed=seed, burn_in=ev // 20, policy=policy)


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
        passed=ok, criterion="every adjacent pair: 95% CI > 0 and |sim - exact| < 5 SE",
        extra={"exact": exact.tolist(), "mean": est.mean.tolist(), "stderr": est.stderr.tolist()})


def claim_rows(quick: bool = False) -> list[ClaimRow]:
    """The three claims, the identity sum_j mu_j P_j = lam, and longest-idle = random."""
    r = run_sim(quick)
    mus, lam = r.mus, r.lam
    P = busy_probabilities(lam, mus)
    J = joint_probabilities(lam, mus)
    params = f"n={N}, mu={SPREAD:g}..1 geometric, rho={RHO}, {r.replicas}x{r.steps:.0e} steps"
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
    r2 = run_sim(quick, policy="longest_idle", seed=2025)
    est = r2.estimate("busy_fraction")
    z = np.abs(est.mean - P) / est.stderr
    rows.append(ClaimRow(
        claim="longest-idle routing gives the same P_j", parameters=params,
        theory="P = " + ", ".join(f"{p:.4f}" for p in P),
        measured="P = " + ", ".join(f"{p:.4f}" for p in est.mean) + f" (max z = {z.max():.2f})",
        passed=bool(np.all(z < 5)), criterion="every server |sim - exact| < 5 SE"))
    return rows
