"""The cost of exact stationary samples (coupling from the past) against n and lam.

For each point: the bounded model at capacity L = k + 3, ``replicas`` perfect samples; reported
are the coalescence time T (the first of T_0 = n L, 2 T_0, ... from which bottom and top met by
time 0), the chain steps spent per sample (sum of the rounds' T, each for two chains), both in
units of n L (the least any coalescence can take) and of the relaxation time tau of the fluid
ODE, the forward meeting time of the same two starts (the burn-in certificate
``estimate_equilibrium`` uses, for the unbounded chain), wall time per sample, and the stationary
mass at L and loss probability (what the cap changes). Steps are machine-independent; seconds
are of this machine, measured in this run.

Usage: ``python benchmarks/perfect.py [--quick]`` -> benchmarks/results_perfect.json and a
markdown table on stdout (pasted into benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import qlib  # noqa: E402,F401
from qlib.supermarket import meeting_times, perfect_samples, relaxation_time  # noqa: E402
from qlib.supermarket.perfect import capacity_for, coalescence_lower_bound  # noqa: E402
from qlib.supermarket.theory import steps_per_time  # noqa: E402

POINTS = [  # (n, d, lam)
    (100, 10, 0.9), (1_000, 10, 0.9), (10_000, 10, 0.9),
    (1_000, 10, 0.99), (10_000, 10, 0.99), (1_000, 10, 0.999),
    (1_000, 2, 0.9), (1_000, 30, 0.999),
]
QUICK = POINTS[:2] + [(1_000, 10, 0.99)]


def measure(n: int, d: int, lam: float, replicas: int, seed: int = 0) -> dict:
    L = capacity_for(d, lam)
    tau = relaxation_time(d, lam)
    t0 = time.perf_counter()
    r = perfect_samples(n, d, lam, capacity=L, replicas=replicas, seed=seed)
    wall = time.perf_counter() - t0
    fwd = meeting_times(n, d, lam, replicas=replicas, seed=seed, top_length=L, max_steps=2**40,
                        progress=False)
    spt = steps_per_time(n, lam)
    mass, mass_se = r.mass_at_capacity
    loss, loss_se = r.loss_probability
    return dict(n=n, d=d, lam=lam, capacity=L, replicas=replicas, tau=tau, nL=coalescence_lower_bound(n, L),
                coalescence_mean=float(r.coalescence_steps.mean()),
                steps_per_sample=float(r.steps_run.mean()),
                forward_meeting_mean=float(np.mean(fwd)), seconds_per_sample=wall / replicas,
                coalescence_taus=float(r.coalescence_steps.mean() / spt / tau),
                mass_at_capacity=mass, mass_at_capacity_se=mass_se, loss_probability=loss,
                loss_probability_se=loss_se)


def table(rows: list[dict]) -> str:
    out = ["| n | d | λ | L = k+3 | τ | coalescence T (mean) | T / nL | T / ((1+λ)n τ) | steps per sample "
           "(each of 2 chains) | forward meeting (mean) | s per sample | E[u_L]/n | P(arrival lost) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['d']} | {r['lam']} | {r['capacity']} | {r['tau']:.3g} | "
                   f"{r['coalescence_mean']:.3g} | {r['coalescence_mean'] / r['nL']:.2f} | "
                   f"{r['coalescence_taus']:.2f} | {r['steps_per_sample']:.3g} | "
                   f"{r['forward_meeting_mean']:.3g} | {r['seconds_per_sample']:.2g} | "
                   f"{r['mass_at_capacity']:.1e} ± {r['mass_at_capacity_se']:.0e} | "
                   f"{r['loss_probability']:.1e} ± {r['loss_probability_se']:.0e} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--replicas", type=int, default=64)
    a = ap.parse_args()
    rows = [measure(*p, replicas=a.replicas) for p in (QUICK if a.quick else POINTS)]
    (HERE / ("results_perfect_quick.json" if a.quick else "results_perfect.json")).write_text(
        json.dumps(rows, indent=1) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
