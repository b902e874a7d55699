"""Trajectory recording cost (issue 20, item 8): ``simulate(..., record_every=e)``.

Instance: n = 50, d = 2, lam = 0.9, 16 replicas, from empty; for each ``record_every`` the run
is timed after a compile call, and reported as recorded lane-values per second (replicas x
(levels + 1) x frames / seconds), microseconds per recorded frame, and the run's steps per
second. ``record_every=None`` is the same run without a trajectory.

Usage: ``python benchmarks/bench_trajectory.py [frames]`` (default 20000 frames per run).
"""

from __future__ import annotations

import sys
import time

import qlib

qlib.configure_xla()

import qlib.supermarket as sm  # noqa: E402

N, D, LAM, R = 50, 2, 0.9, 16


def one(every: int | None, frames: int) -> dict:
    steps = (every or 10) * frames
    kw = dict(steps=steps, replicas=R, seed=0, record_every=every)
    sm.simulate(N, D, LAM, **kw)  # compile
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        r = sm.simulate(N, D, LAM, **kw)
        best = min(best, time.perf_counter() - t0)
    out = {"record_every": every, "seconds": best, "steps_per_s": R * steps / best}
    if every:
        T = r.trajectory.shape[1]
        out.update(frames=T, values_per_s=r.trajectory.size / best, us_per_frame=1e6 * best / T)
    return out


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    print("| record_every | frames | recorded lane-values/s | µs per frame | replica-steps/s |")
    print("|---|---|---|---|---|")
    for every in (1, 10, 100, None):
        o = one(every, frames)
        if every:
            print(f"| {every} | {o['frames']} | {o['values_per_s']:.3g} | {o['us_per_frame']:.3g} | "
                  f"{o['steps_per_s']:.3g} |")
        else:
            print(f"| none | — | — | — | {o['steps_per_s']:.3g} |")


if __name__ == "__main__":
    main()
