"""Replica-steps per second of qlib's supermarket count chain on an accelerator, R = 1024 .. 65536.

One script for a lent GPU (issue 29, item 5): n = 1000, d = 10, lam = 0.95 from empty, the way a
user calls it (``qlib.configure_xla()`` first, ``simulate`` with its time sums). Per R: a first
call (compile), a calibration call, then ``--repeats`` timed calls of about ``--seconds`` each;
the median rate is reported. The engine is the same as on CPU (replicas are the last axis,
sharded over all of ``jax.devices()``); nothing here is GPU-specific except the sizes.

    python benchmarks/gpu.py --out $OUT          # on the GPU machine: prints rows, writes $OUT/gpu_bench.json
    python benchmarks/gpu.py --dry-run           # tiny sizes on whatever backend (CPU): checks the script
    python benchmarks/gpu.py --memory --out DIR  # also R = 1e5 x 1e7 steps: peak device memory stays flat

Without ``--dry-run`` it refuses to run on a CPU backend (exit 2), so no CPU number is ever
reported as a GPU number. The JSON carries the device, versions, the commit (when git is there)
and a hash of the kernel source, so a number can be traced to the kernel it measured.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N, D, LAM = 1000, 10, 0.95
SIZES = (1024, 4096, 16384, 65536)
DRY_SIZES = (64, 256)


def device_memory_peak() -> int | None:
    import jax

    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # CPU devices have no memory_stats
        return None
    return stats.get("peak_bytes_in_use")


def provenance() -> dict:
    import jax
    import numpy

    import qlib

    kernel = hashlib.sha256()
    for name in ("chain.py", "events.py", "loop.py", "observers.py"):  # the kernel's modules
        kernel.update((ROOT / "qlib" / "supermarket" / name).read_bytes())
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                       check=False)
    devs = jax.devices()
    return {"backend": jax.default_backend(), "devices": [str(d) for d in devs],
            "device_kind": devs[0].device_kind, "device_count": len(devs), "jax": jax.__version__,
            "numpy": numpy.__version__,
            "qlib": qlib.__version__, "python": platform.python_version(), "host": platform.node(),
            "commit": r.stdout.strip() or None,
            "kernel_sha256": kernel.hexdigest(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def bench(R: int, seconds: float, repeats: int, min_steps: int) -> dict:
    """Median replica-steps/s of ``simulate`` at R replicas, calls of about ``seconds`` each."""
    import qlib.supermarket as sm

    def call(steps, seed):
        t0 = time.perf_counter()
        r = sm.simulate(N, D, LAM, steps=steps, replicas=R, seed=seed)
        return time.perf_counter() - t0, r

    first_s, _ = call(min_steps, 0)  # compile + warm
    t, _ = call(min_steps, 0)  # calibration
    steps = max(min_steps, int(seconds * R * min_steps / max(t, 1e-9) / R))
    call(steps, 0)  # the shapes of the timed calls, once untimed
    rates = []
    for i in range(repeats):
        t, r = call(steps, i + 1)
        rates.append(R * steps / t)
    # the run did the model: E[u_1]/n -> lam (from empty, so only roughly; a wrong chain is far off)
    return {"R": R, "steps": steps, "replica_steps_per_s": statistics.median(rates), "runs": rates,
            "first_call_s": first_s, "levels": r.levels,
            "mean_u1_over_n": float(r.tail_fraction[:, 1].mean()),
            "peak_device_bytes": device_memory_peak()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", "--smoke", dest="dry_run", action="store_true",
                    help="tiny sizes on any backend (CPU check of the script)")
    ap.add_argument("--memory", action="store_true", help="also R = 1e5 x 1e7 steps (peak device memory)")
    ap.add_argument("--seconds", type=float, default=2.0, help="target seconds per timed call (default 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None,
                    help="a directory (writes gpu_bench.json there) or a .json path; default: "
                         "benchmarks/results_gpu.json, none for --dry-run")
    a = ap.parse_args(argv)

    import qlib
    qlib.configure_xla()
    import jax

    info = provenance()
    print(json.dumps(info), flush=True)
    if jax.default_backend() == "cpu" and not a.dry_run:
        print("no accelerator: JAX's backend is cpu. Use --dry-run to check the script on CPU "
              "(its numbers are not GPU numbers).", file=sys.stderr)
        return 2
    sizes, seconds, repeats, min_steps = SIZES, a.seconds, a.repeats, 1000
    if a.dry_run:
        sizes, seconds, repeats, min_steps = DRY_SIZES, 0.05, 2, 200
    t_all = time.perf_counter()
    rows = []
    for R in sizes:
        row = bench(R, seconds, repeats, min_steps)
        rows.append(row)
        print(json.dumps(row), flush=True)
    mem = []
    if a.memory:
        import qlib.supermarket as sm

        R = 256 if a.dry_run else 100_000
        for steps in ((1_000, 10_000) if a.dry_run else (10_000, 1_000_000, 10_000_000)):
            t0 = time.perf_counter()
            sm.simulate(N, D, LAM, steps=steps, replicas=R, seed=0)
            row = {"R": R, "steps": steps, "seconds": time.perf_counter() - t0,
                   "peak_device_bytes": device_memory_peak()}
            mem.append(row)
            print(json.dumps(row), flush=True)
    best = max(r["replica_steps_per_s"] for r in rows)
    summary = {**info, "dry_run": a.dry_run, "instance": {"n": N, "d": D, "lam": LAM}, "rows": rows,
               "memory": mem, "best_replica_steps_per_s": best, "total_s": time.perf_counter() - t_all}
    print(json.dumps({"best_replica_steps_per_s": best, "dry_run": a.dry_run,
                      "table": {r["R"]: f"{r['replica_steps_per_s']:.3e}" for r in rows}}), flush=True)
    out = a.out if a.out is not None else (None if a.dry_run else ROOT / "benchmarks" / "results_gpu.json")
    if out is not None:
        if out.suffix != ".json":
            out.mkdir(parents=True, exist_ok=True)
            out = out / "gpu_bench.json"
        out.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
