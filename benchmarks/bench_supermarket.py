"""Replica-steps per second of qlib.supermarket.simulate vs a numba loop and a plain Python loop.

Instance (issue 2): n = 1000, d = 10, lam = 0.95, from all-empty, simulate's default number of
levels. All three simulators run the same count chain with the same per-replica SplitMix64
streams and the same bookkeeping every step (time sums of u_i and of 1[u_i > 0]); the suite
checks that numba and plain Python reproduce qlib's arrays bit for bit before timing them.

Timings are medians over interleaved repeats (the machine is shared, so wall time is noisy;
ratios come from the same run, and the load average is recorded before and after). Measured:
qlib vs numba at R = 1 (numba on 1 thread), 64 and 1024 (numba prange over 2 threads);
many points in one kernel (simulate_many, 32 points x 32 replicas) against one point x 1024
replicas and against a loop of 32 simulate calls; compile time; throughput against the
number of replicas, n (the count chain's step does not depend on n) and d; and peak memory for
many replicas over growing numbers of steps (it must not grow with steps).

Run: ``python benchmarks/bench_supermarket.py [--quick]`` or through ``benchmarks/run.py``.
Wall times are never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import qlib  # noqa: E402

qlib.configure_xla()  # before JAX runs: one host device per core, small loops

import numpy as np  # noqa: E402

N, D, LAM = 1000, 10, 0.95


def default_levels(n: int = N, d: int = D, lam: float = LAM) -> int:
    """The number of levels simulate() picks for this instance from all-empty."""
    from qlib.supermarket.simulation import default_levels as levels
    from qlib.supermarket.simulation import initial_counts

    return levels(d, lam, initial_counts(n, d, lam, "empty"))


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages (the machine is shared)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return [float("nan")] * 3


# --------------------------------------------------------------------------- single timings

def time_qlib(R: int, steps: int, *, n: int = N, d: int = D, lam: float = LAM, levels: int | None = None,
              seed: int = 1) -> float:
    """Seconds for one steady-state (already compiled) simulate() call."""
    import qlib.supermarket as sm

    t0 = time.perf_counter()
    r = sm.simulate(n, d, lam, steps=steps, replicas=R, seed=seed, levels=levels)
    dt = time.perf_counter() - t0
    time_qlib.last_levels = r.levels  # the cap after the run (it grows if a queue needs it)
    return dt


def compile_qlib(R: int, *, n: int = N, d: int = D, lam: float = LAM, levels: int | None = None) -> float:
    """Seconds to trace and compile the chunk kernel for R replicas (first call minus a rerun)."""
    import jax

    import qlib.supermarket as sm

    jax.clear_caches()
    t0 = time.perf_counter()
    sm.simulate(n, d, lam, steps=10, replicas=R, seed=0, levels=levels)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    sm.simulate(n, d, lam, steps=10, replicas=R, seed=0, levels=levels)
    return first - (time.perf_counter() - t0)


def time_numba(R: int, steps: int, *, n: int = N, d: int = D, lam: float = LAM, levels: int,
               threads: int = 2) -> float:
    from numba_supermarket import numba_chain

    t0 = time.perf_counter()
    numba_chain(n, d, lam, steps=steps, replicas=R, seed=1, levels=levels, threads=threads)
    return time.perf_counter() - t0


def time_python(R: int, steps: int, *, levels: int) -> float:
    from numba_supermarket import python_chain

    t0 = time.perf_counter()
    python_chain(N, D, LAM, steps=steps, replicas=R, seed=1, levels=levels)
    return time.perf_counter() - t0


def check_identical(levels: int) -> dict:
    """numba and plain Python reproduce qlib's arrays exactly (same streams, same rules), at
    R = 1, 3 and 64 (the three code paths of the kernel: one lane, small groups, wide groups)."""
    from numba_supermarket import numba_chain, python_chain

    import qlib.supermarket as sm

    out = {"numba": True, "python": True}
    for R, steps in ((1, 20000), (3, 5000), (64, 2000)):
        r = sm.simulate(N, D, LAM, steps=steps, replicas=R, seed=7, levels=levels)
        a = numba_chain(N, D, LAM, steps=steps, replicas=R, seed=7, levels=r.levels, threads=2)
        same = lambda x, r=r: bool(  # noqa: E731
            np.array_equal(x["tail_fraction"], r.tail_fraction)
            and np.array_equal(x["counts"], r.counts)
            and np.array_equal(x["max_length_distribution"], r.max_length_distribution))
        out["numba"] &= same(a)
        if R == 3:
            out["python"] &= same(python_chain(N, D, LAM, steps=steps, replicas=R, seed=7, levels=r.levels))
    return out


def _median_rate(fn, work: float, repeats: int) -> tuple[float, list[float]]:
    rates = [work / fn() for _ in range(repeats)]
    return statistics.median(rates), rates


# --------------------------------------------------------------------------- the suite

def peer_table(quick: bool) -> list[dict]:
    """qlib vs numba (2 threads) vs plain Python at R in {1, 64, 1024}, interleaved repeats."""
    import numba

    L = default_levels()
    rows = []
    budget = 6e6 if quick else 4e7  # replica-steps per timed call
    repeats = 5 if quick else 7
    for R in (1, 64, 1024):
        steps = int(budget // R) if R > 1 else int(budget // 2)
        threads = 1 if R == 1 else 2  # issue 12: numba on one thread for one chain, prange over 2 else
        compile_s = compile_qlib(R, levels=L)
        time_qlib(R, 1000, levels=L)  # warm (also the numba JIT below)
        time_numba(min(R, 2), 10, levels=L, threads=threads)
        q, n_, ratios = [], [], []
        for _ in range(repeats):  # interleaved, so both see the same machine load
            tq = time_qlib(R, steps, levels=L)
            tn = time_numba(R, steps, levels=L, threads=threads)
            q.append(R * steps / tq)
            n_.append(R * steps / tn)
            ratios.append(tn / tq)
        py_steps = max(2, int((2e4 if quick else 1e5) // R))
        py = R * py_steps / time_python(R, py_steps, levels=L)
        qm, nm = statistics.median(q), statistics.median(n_)
        rows.append({"model": "supermarket", "R": R, "levels": L, "steps": steps,
                     "qlib": qm, "numba": nm, "python": py,
                     "vs_numba": statistics.median(ratios), "vs_python": qm / py,
                     "qlib_runs": q, "numba_runs": n_, "ratio_runs": ratios, "compile_s": compile_s,
                     "numba_threads": min(threads, numba.config.NUMBA_NUM_THREADS)})
    return rows


MANY_POINTS, MANY_REPLICAS = 32, 32


def many_points(quick: bool) -> dict:
    """simulate_many over 32 points x 32 replicas vs one point x 1024 replicas vs a loop of 32
    simulate calls: the same number of replica-steps, interleaved repeats, medians.

    The points are n = 1000, d = 10 and 32 arrival rates in [0.90, 0.96] (k = 2 at every one,
    so every point tracks as many levels as the 1 x 1024 instance, lam = 0.95)."""
    import qlib.supermarket as sm

    lams = np.linspace(0.90, 0.96, MANY_POINTS)
    points = [(N, D, float(x)) for x in lams]
    R = MANY_REPLICAS
    steps = 5000 if quick else 40000
    repeats = 3 if quick else 5
    work = MANY_POINTS * R * steps

    def one_wide():
        sm.simulate(N, D, LAM, steps=steps, replicas=MANY_POINTS * R, seed=1)

    def many():
        sm.simulate_many(points, steps=steps, replicas=R)

    def loop():
        for j, p in enumerate(points):
            sm.simulate(*p, steps=steps, replicas=R, seed=j)

    # the grid is a loop of single calls, only faster: check it on two points first
    a = sm.simulate_many(points[:2], steps=500, replicas=R)
    identical = all(np.array_equal(x.tail_fraction,
                                   sm.simulate(*p, steps=500, replicas=R, seed=j).tail_fraction)
                    for j, (x, p) in enumerate(zip(a, points[:2])))
    for f in (one_wide, many, loop):
        f()  # compile
    t: dict[str, list[float]] = {"one_wide": [], "many": [], "loop": []}
    for _ in range(repeats):
        for name, f in (("one_wide", one_wide), ("many", many), ("loop", loop)):
            t0 = time.perf_counter()
            f()
            t[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in t.items()}
    return {"points": MANY_POINTS, "replicas": R, "steps": steps, "identical": identical,
            "rate_one_wide": work / med["one_wide"], "rate_many": work / med["many"],
            "rate_loop": work / med["loop"],
            "many_vs_one_wide": statistics.median([b / a for a, b in zip(t["many"], t["one_wide"])]),
            "many_vs_loop": statistics.median([b / a for a, b in zip(t["many"], t["loop"])]),
            "seconds": t}


def sweep(param: str, values, quick: bool, R: int = 1024) -> list[dict]:
    """Throughput of qlib (and numba) against one parameter, others at the instance."""
    import math

    out = []
    budget = 2e6 if quick else 1e7
    for v in values:
        kw = {"n": N, "d": D, "lam": LAM}
        if param == "R":
            R = v
        else:
            kw[param] = v
        # a fixed, generous cap for n and d (small n or d grow long queues): no level growth,
        # hence no recompiles, inside a timed call
        L = 16 if param in ("n", "d") else default_levels(**kw)
        steps = max(200, int(budget // R))
        time_qlib(R, 200, levels=L, **kw)  # compile this shape
        rates = sorted(R * steps / time_qlib(R, steps, levels=L, **kw) for _ in range(3))
        row = {"param": param, "value": v, "R": R, "levels": L, "levels_end": time_qlib.last_levels,
               "qlib": rates[1]}
        if param in ("R", "d"):
            time_numba(min(R, 2), 10, levels=L, **kw)
            row["numba"] = statistics.median(R * steps / time_numba(R, steps, levels=L, **kw)
                                             for _ in range(3))
        if param == "n":
            row["log10_n"] = math.log10(v)
        out.append(row)
    return out


_MEM_CHILD = r"""
import json, resource, sys, time, tracemalloc
sys.path.insert(0, {root!r})
import qlib, qlib.supermarket as sm
R, steps = {R}, {steps}
sm.simulate(1000, 10, 0.95, steps=10, replicas=R, seed=0)  # compile, and JAX's own buffers
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
r = sm.simulate(1000, 10, 0.95, steps=steps, replicas=R, seed=0)
dt = time.perf_counter() - t0
_, peak_py = tracemalloc.get_traced_memory()
peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result_bytes = r.tail_fraction.nbytes + r.counts.nbytes + r.batch_tail_fraction.nbytes
print(json.dumps(dict(R=R, steps=steps, seconds=dt, peak_rss_mb=peak_rss / 1024,
                      rss_after_compile_mb=base / 1024, python_peak_mb=peak_py / 2**20,
                      result_mb=result_bytes / 2**20)))
"""


def memory(quick: bool) -> list[dict]:
    """Peak memory of many replicas over growing numbers of steps, each in a fresh process.

    The full demo asks for R = 1e5 replicas x 1e7 steps; that is 1e12 replica-steps (hours on
    2 cores, minutes on a GPU: benchmarks/gpu.py --memory). Here the steps grow tenfold at a
    time and the peak must stay flat: the state is (levels+1) x R integers, whatever the steps.
    """
    R = 10_000 if quick else 100_000
    steps_list = (100, 10_000) if quick else (100, 1_000, 10_000)
    rows = []
    for steps in steps_list:
        code = _MEM_CHILD.format(root=str(ROOT), R=R, steps=steps)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return rows


def run(quick: bool = False) -> dict:
    """Everything, as plain dicts: peer table, sweeps over R, n, d, memory, environment."""
    import jax

    L = default_levels()
    t0 = time.perf_counter()
    res = {"instance": {"n": N, "d": D, "lam": LAM, "levels": L}, "load_start": load(),
           "devices": len(jax.devices()), "xla_flags": os.environ.get("XLA_FLAGS", ""),
           "identical": check_identical(L), "peers": peer_table(quick)}
    res["many"] = many_points(quick)
    res["load_after_ratios"] = load()
    res["sweep_R"] = sweep("R", (1, 16, 256, 1024, 8192) if quick else
                           (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536), quick)
    # from n = 100: at n = 10 (lam = 0.95) queues reach length 20+, so the cap grows past 16
    # levels and the step costs more -- because of the levels, not of n.
    res["sweep_n"] = sweep("n", (10**2, 10**3, 10**5, 10**7, 10**9), quick)
    res["sweep_d"] = sweep("d", (2, 10, 100, 10**4) if quick else (2, 3, 5, 10, 30, 100, 1000, 10**4), quick)
    res["memory"] = memory(quick)
    res["seconds"] = time.perf_counter() - t0
    res["load_end"] = load()
    return res


def table(res: dict) -> str:
    lines = [f"{'R':>6} {'qlib M/s':>9} {'numba M/s':>10} {'thr':>4} {'python M/s':>11} {'x numba':>8} "
             f"{'x python':>9} {'compile s':>10}"]
    for r in res["peers"]:
        lines.append(f"{r['R']:6d} {r['qlib'] / 1e6:9.2f} {r['numba'] / 1e6:10.2f} {r['numba_threads']:4d} "
                     f"{r['python'] / 1e6:11.3f} {r['vs_numba']:8.2f} {r['vs_python']:9.0f} "
                     f"{r['compile_s']:10.2f}")
    if "many" in res:
        m = res["many"]
        lines.append(f"many points ({m['points']} x {m['replicas']}, {m['steps']} steps): simulate_many "
                     f"{m['rate_many'] / 1e6:.2f} M/s, 1 x {m['points'] * m['replicas']} "
                     f"{m['rate_one_wide'] / 1e6:.2f} M/s, loop of {m['points']} calls "
                     f"{m['rate_loop'] / 1e6:.2f} M/s; many / one point x 1024 = "
                     f"{m['many_vs_one_wide']:.2f}, many / loop = {m['many_vs_loop']:.2f} (bit-identical: "
                     f"{m['identical']})")
    if "load_start" in res:
        lines.append(f"load average: start {res['load_start']}, after the ratios "
                     f"{res.get('load_after_ratios')}, end {res.get('load_end')}")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--peers-only", action="store_true",
                    help="only the qlib/numba/python table and many points")
    a = ap.parse_args()
    if a.peers_only:
        res = {"load_start": load(), "peers": peer_table(a.quick), "many": many_points(a.quick),
               "load_end": load()}
    else:
        res = run(a.quick)
        print(json.dumps({k: v for k, v in res.items() if k not in ("peers",)}, indent=1, default=float))
    print(table(res))
