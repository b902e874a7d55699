"""qlib against the natural peer (benchmarks/natural_supermarket.py) at R = 1, 64, 1024.

Same work (n = 1000, d = 10, lam = 0.95, from empty, time sums of u_i and 1[u_i > 0] every step),
same process, rounds alternated, medians of the per-round ratios (qlib rate / natural rate).
numba runs on 1 thread at R = 1 and with prange over 2 threads at R = 64 and 1024, as issue 21
sets the targets. Usage: ``python benchmarks/bench_natural.py [--quick]`` -> a markdown table and
benchmarks/results_natural.json. The agreement check (|z| of the tail fractions) runs first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import qlib  # noqa: E402

qlib.configure_xla() if hasattr(qlib, "configure_xla") else None
import qlib.supermarket as sm  # noqa: E402
from natural_supermarket import check_agreement, levels_for, natural_chain  # noqa: E402

N, D, LAM = 1000, 10, 0.95
TARGETS = {1: 0.5, 64: 1.0, 1024: 1.0}  # issue 21


def _time(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    z = check_agreement(steps=200_000 if a.quick else 2_000_000, burn=100_000 if a.quick else 500_000)
    L = levels_for(D, LAM)
    rows = []
    for R in (1, 64, 1024):
        steps = max(2_000, (2_000_000 if a.quick else 20_000_000) // R)
        threads = 1 if R == 1 else 2
        q = lambda: sm.simulate(N, D, LAM, steps=steps, replicas=R, seed=1)  # noqa: E731
        nat = lambda: natural_chain(N, D, LAM, steps=steps, replicas=R, seed=1, levels=L, threads=threads)  # noqa: E731
        q(), nat()  # compile both
        ratios, tq, tn = [], [], []
        for _ in range(3 if a.quick else 5):
            x, y = _time(q), _time(nat)
            tq.append(x)
            tn.append(y)
            ratios.append(y / x)
        work = R * steps
        rows.append(dict(R=R, steps=steps, numba_threads=threads, qlib_rate=work / statistics.median(tq),
                         natural_rate=work / statistics.median(tn), ratio=statistics.median(ratios),
                         ratios=ratios, target=TARGETS[R]))
    (HERE / ("results_natural_quick.json" if a.quick else "results_natural.json")).write_text(
        json.dumps(dict(agreement_max_abs_z=z, rows=rows), indent=1) + "\n")
    print(f"agreement with qlib: max |z| = {z:.2f} over levels 1..k+1")
    print("| R | numba threads | qlib (replica-steps/s) | natural loop | qlib / natural (median of rounds) | target |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['R']} | {r['numba_threads']} | {r['qlib_rate']:.3g} | {r['natural_rate']:.3g} | "
              f"{r['ratio']:.2f}× | ≥ {r['target']}× |")


if __name__ == "__main__":
    main()
