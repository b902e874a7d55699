"""Events per second of qlib.heterogeneous.simulate vs a numba loop, Ciw and SimPy, in one run.

Instance: n = 10 servers, rates geometric from 10 down to 1, load rho = 0.9, random idle choice.
"Events" are real events (arrivals + service completions). The JAX and numba simulators run the
uniformised chain, where about 5% of steps are fictitious at this load; their rates are
converted to real events with the counts from the run itself, so every row counts the same thing.

Run: ``python benchmarks/bench_heterogeneous.py [--quick]``. Wall times are never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

N, SPREAD, RHO = 10, 10.0, 0.9


def instance():
    mus = np.geomspace(SPREAD, 1.0, N)
    return RHO * mus.sum(), mus


def bench_jax(replicas: int, steps: int, policy: str = "random") -> dict:
    from qlib.heterogeneous import simulate
    lam, mus = instance()
    simulate(lam, mus, events=64, replicas=replicas, policy=policy, chunk=steps)  # compile
    t0 = time.perf_counter()
    r = simulate(lam, mus, events=steps, replicas=replicas, policy=policy, chunk=steps)
    dt = time.perf_counter() - t0
    real = float(r.arrivals.sum() + (r.throughput * r.time[:, None]).sum())
    return {"name": f"qlib JAX ({policy}, {replicas} replicas)", "steps": steps * replicas,
            "events": real, "seconds": dt, "events_per_s": real / dt}


def bench_numba(replicas: int, steps: int, threads: int = 2) -> dict:
    import numba
    from qlib.heterogeneous.reference import simulate_reference
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    lam, mus = instance()
    simulate_reference(lam, mus, events=64, replicas=2)  # compile
    t0 = time.perf_counter()
    r = simulate_reference(lam, mus, events=steps, replicas=replicas)
    dt = time.perf_counter() - t0
    real = float(r["arrivals"].sum() + r["done"].sum())
    return {"name": f"numba prange loop ({numba.get_num_threads()} threads)", "steps": steps * replicas,
            "events": real, "seconds": dt, "events_per_s": real / dt}


def bench_ciw(events: int) -> dict:
    import ciw

    lam, mus = instance()

    class PerServer(ciw.dists.Distribution):
        """Service time drawn at the rate of the server the customer was attached to."""

        def sample(self, t=None, ind=None):
            return random.expovariate(mus[ind.server.id_number - 1])

    horizon = events / (2 * lam)  # about `events` arrivals + departures
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(lam)],
        service_distributions=[PerServer()],
        number_of_servers=[N],
        server_priority_functions=[lambda srv, ind: random.random()],  # uniform among idle
    )
    ciw.seed(0)
    random.seed(0)
    sim = ciw.Simulation(net)
    t0 = time.perf_counter()
    sim.simulate_until_max_time(horizon)
    dt = time.perf_counter() - t0
    recs = sim.get_all_records()
    done = sum(1 for r in recs if r.record_type == "service")
    arrived = len(recs) + len(sim.nodes[1].all_individuals)
    real = float(arrived + done)
    return {"name": "Ciw 3.2.7 (server_priority_function)", "steps": real, "events": real,
            "seconds": dt, "events_per_s": real / dt}


def bench_simpy(events: int) -> dict:
    """SimPy: idle servers wait on one FIFO Store, so the longest-idle one takes the next
    customer (same stationary law as random choice)."""
    import simpy

    lam, mus = instance()
    rng = random.Random(0)
    env = simpy.Environment()
    queue = simpy.Store(env)
    count = [0]

    def source():
        while True:
            yield env.timeout(rng.expovariate(lam))
            count[0] += 1
            yield queue.put(env.now)

    def server(mu):
        while True:
            yield queue.get()
            yield env.timeout(rng.expovariate(mu))
            count[0] += 1

    env.process(source())
    for m in mus:
        env.process(server(m))
    t0 = time.perf_counter()
    env.run(until=events / (2 * lam))
    dt = time.perf_counter() - t0
    return {"name": "SimPy 4 (longest idle)", "steps": count[0], "events": float(count[0]),
            "seconds": dt, "events_per_s": count[0] / dt}


def run(quick: bool = False) -> list[dict]:
    """Measure every simulator once; ratios are relative to the numba row and the Ciw row."""
    replicas = 4096
    steps = 2_000 if quick else 16_000
    rows = [bench_jax(replicas, steps), bench_jax(replicas, steps, "longest_idle"),
            bench_numba(replicas, steps)]
    rows += [bench_ciw(10_000 if quick else 100_000), bench_simpy(10_000 if quick else 100_000)]
    numba_rate = rows[2]["events_per_s"]
    ciw_rate = rows[3]["events_per_s"]
    for r in rows:
        r["vs_numba"] = r["events_per_s"] / numba_rate
        r["vs_ciw"] = r["events_per_s"] / ciw_rate
        r["instance"] = f"n={N}, rates {SPREAD:g}..1 geometric, rho={RHO}"
        r["cpus"] = os.cpu_count()
    return rows


def table(rows: list[dict]) -> str:
    out = [f"{'simulator':42} {'events':>12} {'seconds':>8} {'events/s':>12} {'x numba':>8} {'x Ciw':>9}"]
    for r in rows:
        out.append(f"{r['name']:42} {r['events']:12.3g} {r['seconds']:8.3f} {r['events_per_s']:12.4g} "
                   f"{r['vs_numba']:8.2f} {r['vs_ciw']:9.0f}")
    return "\n".join(out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    rows = run(quick=ap.parse_args().quick)
    print(rows[0]["instance"])
    print(table(rows))
