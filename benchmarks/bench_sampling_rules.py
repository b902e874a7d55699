"""Sampling without replacement against sampling with replacement, in one process (issue 20).

``python benchmarks/bench_sampling_rules.py`` runs ``simulate`` at a few points under both
sampling rules, interleaved, and prints M lane-steps/s and the ratio (without / with). The
without-replacement step compares log U with log g(u_i) = log C(u_i, d)/C(n, d); the kernel
carries log g per level and recomputes it only at the level a step changes (before, every level
was evaluated each step: two lgammas and a log per level, scalar C-library calls on XLA:CPU).
"""

from __future__ import annotations

import statistics
import sys
import time

import qlib

qlib.configure_xla()

import qlib.supermarket as sm  # noqa: E402

POINTS = [(4, 2, 0.9, 32, 200_000), (1000, 10, 0.95, 1, 1_000_000), (1000, 10, 0.95, 64, 100_000),
          (10_000, 100, 0.99, 8, 400_000)]


def rate(n: int, d: int, lam: float, replicas: int, steps: int, replacement: bool, seed: int) -> float:
    t = time.perf_counter()
    sm.simulate(n, d, lam, steps=steps, replicas=replicas, seed=seed, replacement=replacement, levels=12,
                progress=False)
    return replicas * steps / (time.perf_counter() - t) / 1e6


def main(repeats: int = 3) -> None:
    print("| n | d | λ | R | with replacement (M lane-steps/s) | without (M lane-steps/s) | without / with |")
    print("|---|---|---|---|---|---|---|")
    for n, d, lam, R, steps in POINTS:
        for rep in (True, False):  # compile both first
            rate(n, d, lam, R, steps // 10, rep, 0)
        runs = {True: [], False: []}
        for i in range(repeats):
            for rep in (True, False):
                runs[rep].append(rate(n, d, lam, R, steps, rep, i + 1))
        w, wo = statistics.median(runs[True]), statistics.median(runs[False])
        print(f"| {n} | {d} | {lam} | {R} | {w:.2f} | {wo:.2f} | {wo / w:.2f} |", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
