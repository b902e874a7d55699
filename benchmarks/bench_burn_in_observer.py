"""The burn-in's two kernels, in one process (issue 20): the "seen" observer against "sums".

``python benchmarks/bench_burn_in_observer.py`` advances the same count chains with both
observers, interleaved, and prints M lane-steps/s and the ratio of times (sums / seen). A burn-in
needs only the levels reached ("seen"); the measured steps need the time sums ("sums"). The
simulation runs a burn-in stretch of at least ``simulation.BURN_IN_KERNEL_WORK`` lane-steps with
the "seen" kernel and a shorter one with the measuring kernel (its sums dropped): the second
compile (~0.5 s) is worth it only where the few per cent it saves add up to more.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import qlib

qlib.configure_xla()

from qlib.supermarket import chain as K  # noqa: E402

POINTS = [(20, 3, 0.8, 1, True, 2_000_000), (1000, 10, 0.95, 8, True, 1_000_000),
          (1000, 10, 0.95, 8, False, 500_000), (300, 20, 0.998, 4, True, 2_000_000),
          (100, 5, 0.9, 64, True, 300_000), (50, 2, 0.9, 256, True, 100_000),
          (10_000, 100, 0.999, 2, True, 2_000_000)]


def main(repeats: int = 4) -> None:
    print("| n | d | λ | R | sampling | seen (M lane-steps/s) | sums (M lane-steps/s) | time sums / seen |")
    print("|---|---|---|---|---|---|---|---|")
    for n, d, lam, R, repl, steps in POINTS:
        u0 = np.zeros((1, 13, R), np.uint32)
        u0[0, 0] = n
        drv = K.ChainDriver(u0, np.arange(R, dtype=np.uint64) * 7 + 1, K.lane_params([(n, d, lam)], [R]),
                            replacement=repl, levels=12, progress=False, total=1, desc="bench")
        best = {}
        for obs in ["seen", "sums"] * (repeats + 1):  # the first pair compiles
            t = time.perf_counter()
            drv.run(steps, observe=obs)
            best[obs] = min(best.get(obs, np.inf), time.perf_counter() - t)
        rate = {k: R * steps / v / 1e6 for k, v in best.items()}
        print(f"| {n} | {d} | {lam} | {R} | {'with' if repl else 'without'} | {rate['seen']:.1f} | "
              f"{rate['sums']:.1f} | {best['sums'] / best['seen']:.3f} |", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
