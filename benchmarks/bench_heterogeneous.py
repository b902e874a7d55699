"""Events per second of qlib.heterogeneous.simulate vs a numba loop, Ciw and SimPy, in one run.

Same model in every row: n = 10 servers, rates geometric from 10 down to 1, load rho = 0.9, an
arrival that finds idle servers joins one uniformly at random (SimPy: the longest-idle one,
which has the same stationary law), else one FIFO queue. "Events" are real events (arrivals +
service completions) in every row. The JAX and numba simulators run the uniformised chain, where
about 5% of steps are fictitious at this load; their rates count only the real events of the
run itself. Ciw and SimPy each simulate 10^5 events per repeat (Ciw: until 5·10^4 customers have
completed service, plus their arrivals).

Robust ratios: every simulator is measured ``repeats`` times in interleaved rounds (so load from
other jobs hits all rows alike), each row reports its median rate, and the ratios are ratios of
medians, all in one process. Compile time is excluded (a warm-up run with the same shapes).

``run_many_servers`` measures the same way at n = 50 servers (rates geometric 10..1, rho = 0.9)
with R = 32 and R = 1024 replicas: the bits kernel (64-bit busy masks, the default), the
general (servers, replicas) array kernel, and the numba loop.

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
sys.path.insert(0, str(Path(__file__).resolve().parent))

N, SPREAD, RHO = 10, 10.0, 0.9
MANY_N = 50
PEER_EVENTS = 100_000  # events per Ciw / SimPy repeat


def instance(n: int = N):
    mus = np.geomspace(SPREAD, 1.0, n)
    return RHO * mus.sum(), mus


def jax_runner(replicas: int, steps: int, policy: str = "random", n: int = N, kernel: str = "auto"):
    """A zero-argument callable timing one JAX run; returns (real events, seconds)."""
    import jax

    from qlib.heterogeneous import simulate
    lam, mus = instance(n)
    simulate(lam, mus, steps=64, replicas=replicas, policy=policy, chunk=steps, kernel=kernel)  # compile

    def once():
        t0 = time.perf_counter()
        r = simulate(lam, mus, steps=steps, replicas=replicas, policy=policy, chunk=steps, kernel=kernel)
        dt = time.perf_counter() - t0
        return float(r.arrivals.sum() + np.rint(r.throughput * r.time[:, None]).sum()), dt

    what = "" if kernel == "auto" else f", {kernel} kernel"
    name = f"qlib JAX ({policy}{what}, {replicas} replicas, {jax.device_count()} devices)"
    return name, steps * replicas, once


def numba_runner(replicas: int, steps: int, threads: int = 2, n: int = N):
    import numba
    from numba_heterogeneous import simulate_reference
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    lam, mus = instance(n)
    simulate_reference(lam, mus, steps=64, replicas=2)  # compile

    def once():
        t0 = time.perf_counter()
        r = simulate_reference(lam, mus, steps=steps, replicas=replicas)
        dt = time.perf_counter() - t0
        return float(r["arrivals"].sum() + r["done"].sum()), dt

    return (f"numba prange loop ({numba.get_num_threads()} threads, {replicas} replicas)", steps * replicas,
            once)


def ciw_runner(events: int = PEER_EVENTS):
    import ciw

    lam, mus = instance()

    class PerServer(ciw.dists.Distribution):
        """Service time drawn at the rate of the server the customer was attached to."""

        def sample(self, t=None, ind=None):
            return random.expovariate(mus[ind.server.id_number - 1])

    seeds = iter(range(10**6))

    def once():
        net = ciw.create_network(
            arrival_distributions=[ciw.dists.Exponential(lam)],
            service_distributions=[PerServer()],
            number_of_servers=[N],
            server_priority_functions=[lambda srv, ind: random.random()],  # uniform among idle
        )
        s = next(seeds)
        ciw.seed(s)
        random.seed(s)
        sim = ciw.Simulation(net)
        t0 = time.perf_counter()
        sim.simulate_until_max_customers(events // 2, method="Complete")
        dt = time.perf_counter() - t0
        done = sim.nodes[-1].number_of_completed_individuals
        arrived = sim.nodes[0].number_of_individuals
        return float(arrived + done), dt

    return f"Ciw {ciw.__version__} (server_priority_function)", events, once


def simpy_runner(events: int = PEER_EVENTS):
    """SimPy: idle servers wait on one FIFO Store, so the longest-idle one takes the next
    customer (same stationary law as random choice)."""
    import simpy

    lam, mus = instance()
    seeds = iter(range(10**6))

    def once():
        rng = random.Random(next(seeds))
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
        env.run(until=events / (2 * lam))  # about `events` arrivals + completions
        dt = time.perf_counter() - t0
        return float(count[0]), dt

    return "SimPy 4 (longest idle)", events, once


def run(quick: bool = False) -> list[dict]:
    """Measure every simulator in interleaved rounds; rows carry median rates and ratios of
    medians relative to the numba row and the Ciw row."""
    replicas = 4096
    steps = 2_000 if quick else 16_000
    repeats = 3 if quick else 5
    runners = [jax_runner(replicas, steps), jax_runner(replicas, steps, "longest_idle"),
               numba_runner(replicas, steps), ciw_runner(), simpy_runner()]
    rows = _measure(runners, repeats)
    numba_rate = rows[2]["events_per_s"]
    ciw_rate = rows[3]["events_per_s"]
    for r in rows:
        r["vs_numba"] = r["events_per_s"] / numba_rate
        r["vs_ciw"] = r["events_per_s"] / ciw_rate
        r["instance"] = f"n={N}, rates {SPREAD:g}..1 geometric, rho={RHO}"
        r["cpus"] = os.cpu_count()
    return rows


def _measure(runners, repeats: int) -> list[dict]:
    """Interleaved rounds over the runners; one row per runner with its median rate."""
    samples = [[] for _ in runners]
    for _ in range(repeats):
        for (_, _, once), s in zip(runners, samples):
            s.append(once())
    rows = []
    for (name, steps_run, _), s in zip(runners, samples):
        rates = np.array([ev / dt for ev, dt in s])
        i = int(np.argsort(rates)[len(rates) // 2])  # the median repeat (odd count)
        rows.append({"name": name, "steps": steps_run, "events": s[i][0], "seconds": s[i][1],
                     "events_per_s": float(rates[i]), "rate_min": float(rates.min()),
                     "rate_max": float(rates.max()), "repeats": len(rates),
                     "replica_steps_per_s": steps_run / s[i][1]})
    return rows


def run_many_servers(quick: bool = False) -> list[dict]:
    """n = 50 servers, R = 32 and 1024: qlib's bits and array kernels against numba, interleaved.
    ``vs_numba`` is relative to the numba row with the same R."""
    rows = []
    for replicas, steps in ((32, 20_000 if quick else 200_000), (1024, 1_000 if quick else 10_000)):
        runners = [jax_runner(replicas, steps, n=MANY_N),
                   jax_runner(replicas, steps, n=MANY_N, kernel="array"),
                   numba_runner(replicas, steps, n=MANY_N)]
        part = _measure(runners, 3 if quick else 5)
        for r in part:
            r["vs_numba"] = r["events_per_s"] / part[-1]["events_per_s"]
            r["vs_ciw"] = float("nan")
            r["instance"] = f"n={MANY_N}, rates {SPREAD:g}..1 geometric, rho={RHO}"
            r["cpus"] = os.cpu_count()
        rows += part
    return rows


def table(rows: list[dict]) -> str:
    out = [f"{'simulator':52} {'events':>9} {'seconds':>8} {'events/s (median; min-max)':>30} "
           f"{'x numba':>8} {'x Ciw':>7}"]
    for r in rows:
        spread = f"{r['events_per_s']:.3g} ({r['rate_min']:.3g}-{r['rate_max']:.3g})"
        out.append(f"{r['name']:52} {r['events']:9.3g} {r['seconds']:8.3f} {spread:>30} "
                   f"{r['vs_numba']:8.2f} {r['vs_ciw']:7.0f}")
    return "\n".join(out)


if __name__ == "__main__":
    import qlib
    qlib.configure_xla()  # one host device per core, before JAX starts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    quick = ap.parse_args().quick
    rows = run(quick=quick)
    print(rows[0]["instance"], f"; {rows[0]['repeats']} interleaved repeats, medians")
    print(table(rows))
    many = run_many_servers(quick=quick)
    print("\n" + many[0]["instance"], f"; {many[0]['repeats']} interleaved repeats, medians")
    print(table(many))
