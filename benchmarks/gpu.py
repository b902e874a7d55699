"""Replica-steps per second of the supermarket count chain on an accelerator, R up to 10^6.

Goal on one H200: >= 10^10 replica-steps/s. The engine is the same as on CPU (replicas are the
last axis, sharded over all of ``jax.devices()``); nothing here is GPU-specific except the sizes.

    python benchmarks/gpu.py            # R = 1e3 .. 1e6 on the default backend
    python benchmarks/gpu.py --memory   # also R = 1e5 x 1e7 steps: peak device memory stays flat
    python benchmarks/gpu.py --smoke    # tiny sizes on CPU, to check the script runs

Writes a JSON summary to stdout and, with ``--out DIR``, ``DIR/gpu_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N, D, LAM = 1000, 10, 0.95


def device_memory_peak() -> int | None:
    import jax

    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # CPU devices have no memory_stats
        return None
    return stats.get("peak_bytes_in_use")


def bench(R: int, steps: int, repeats: int = 3) -> dict:
    import qlib.supermarket as sm

    t0 = time.perf_counter()
    sm.simulate(N, D, LAM, steps=min(steps, 1000), replicas=R, seed=0)  # compile + warm
    compile_s = time.perf_counter() - t0
    rates = []
    for i in range(repeats):
        t0 = time.perf_counter()
        r = sm.simulate(N, D, LAM, steps=steps, replicas=R, seed=i + 1)
        rates.append(R * steps / (time.perf_counter() - t0))
    # a sanity check that the run did the model: E[u_1]/n = lam in equilibrium (loosely, from empty)
    return {"R": R, "steps": steps, "replica_steps_per_s": statistics.median(rates), "runs": rates,
            "first_call_s": compile_s, "levels": r.levels, "mean_u1_over_n": float(r.tail_fraction[:, 1].mean()),
            "peak_device_bytes": device_memory_peak()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CPU check)")
    ap.add_argument("--memory", action="store_true", help="also R = 1e5 x 1e7 steps")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    import qlib
    qlib.configure_xla()
    import jax

    devs = jax.devices()
    info = {"backend": jax.default_backend(), "devices": [str(d) for d in devs],
            "device_kind": devs[0].device_kind, "jax": jax.__version__}
    print(json.dumps(info), flush=True)
    if a.smoke:
        sizes = [(64, 2000), (1024, 500)]
    else:
        # about 1e10 replica-steps per timed call at the top; fewer steps for small R
        sizes = [(1_000, 200_000), (10_000, 100_000), (100_000, 20_000), (1_000_000, 10_000)]
    rows = []
    for R, steps in sizes:
        row = bench(R, steps, repeats=2 if a.smoke else 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    mem = []
    if a.memory:
        R = 1_000 if a.smoke else 100_000
        for steps in ((1_000, 10_000) if a.smoke else (10_000, 1_000_000, 10_000_000)):
            row = bench(R, steps, repeats=1)
            mem.append(row)
            print(json.dumps(row), flush=True)
    best = max(r["replica_steps_per_s"] for r in rows)
    summary = {**info, "rows": rows, "memory": mem, "best_replica_steps_per_s": best,
               "goal_1e10_met": best >= 1e10}
    print(json.dumps({"best_replica_steps_per_s": best, "goal_1e10_met": best >= 1e10}))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "gpu_bench.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
