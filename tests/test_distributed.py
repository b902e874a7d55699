"""Two processes joined by jax.distributed give the numbers of one process, bit for bit.

Two children are started on this machine, each with one CPU device
(``--xla_force_host_platform_device_count=1``), joined through a coordinator on 127.0.0.1 at a
free port (:func:`qlib.distributed.initialize`; CPU collectives through gloo). Both run the
same program: the supermarket ``simulate`` at several replica counts (odd ones padded over the
two processes' devices), with burn-in, batches and level growth (a start of 2 levels that the
queues pass), ``simulate_many`` on a grid, ``meeting_times_many``, ``coupled_paths`` and the
heterogeneous ``simulate`` (both kernels). Each saves what it gathered; both files must equal,
array by array and bit by bit, what one plain process computes.

The test can fail: in a third job process 1 uses another seed (an environment variable read by
the child script only, not by qlib); that job runs to the end, and the numbers both of its
processes gathered must differ from one process's.
The three jobs (one process, two, two perturbed) run at once, under one deadline; when a child
fails or hangs (a process that diverged waits in a collective forever), every child still
running is killed and the test fails with their output. No child outlives the test.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from child_process import child_env

DEADLINE_S = 240  # for all three jobs together (about 30 s on a busy 2-core machine)

CHILD = r'''
import os, sys
import numpy as np
if os.environ.get("QLIB_TEST_PROCESSES"):  # the distributed children
    import qlib.distributed
    qlib.distributed.initialize(f"127.0.0.1:{os.environ['QLIB_TEST_PORT']}", timeout=60)
import jax
import qlib.supermarket as sm
from qlib import heterogeneous as het

P = jax.process_count()
assert P == int(os.environ.get("QLIB_TEST_PROCESSES", 1)), P
assert jax.device_count() == P and jax.local_device_count() == 1, jax.devices()
seed = 5 + int(os.environ.get("QLIB_TEST_SEED_OFFSET", 0))  # the test's perturbation check

FIELDS = ("tail_fraction", "max_length", "max_length_distribution", "counts", "batch_tail_fraction", "state")
out = {}
for name, kw in {"R3_burn_batches": dict(replicas=3, burn_in=500, batches=4), "R4": dict(replicas=4),
                 "R5_grow_without_replacement": dict(replicas=5, levels=2, replacement=False)}.items():
    r = sm.simulate(40, 3, 0.9, steps=3000, seed=seed, **kw)
    out.update({f"{name}.{f}": getattr(r, f) for f in FIELDS})
    if os.environ.get("QLIB_TEST_QUICK"):  # the perturbation check needs only the first run
        np.savez(sys.argv[1], **out)
        sys.exit(0)
# level growth: 2 levels to start, queues longer than that
assert out["R5_grow_without_replacement.max_length"].max() > 2
many = sm.simulate_many([(40, 3, 0.9), (25, 2, 0.8), (60, 5, 0.95)], steps=[3000, 1500, 2500], replicas=3,
                        seeds=[seed, seed + 1, seed + 2], burn_in=[0, 300, 100], batches=2, record_every=500,
                        levels=2)
for j, r in enumerate(many):
    out.update({f"many{j}.{f}": getattr(r, f) for f in FIELDS + ("trajectory",)})
assert max(int(r.max_length.max()) for r in many) > 2  # the grid's level cap grew too
for j, T in enumerate(sm.meeting_times_many([(30, 3, 0.9), (20, 2, 0.7)], replicas=3, seeds=[seed, seed + 1],
                                            top_length=[4, 3], max_steps=3000)):
    out[f"meet{j}"] = T
out["paths"] = sm.coupled_paths(30, 3, 0.9, ["empty", sm.counts_all_at(30, 4)], steps=300, replicas=3,
                                seed=seed, record_every=10).counts
mus = np.array([3.0, 2.0, 1.0, 0.5])
for kernel, policy in (("bits", "random"), ("array", "longest_idle")):
    h = het.simulate(4.0, mus, steps=2000, replicas=3, seed=seed, burn_in=100, policy=policy, kernel=kernel,
                     chunk=700)
    for f in ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals"):
        out[f"het_{kernel}.{f}"] = getattr(h, f)
    out[f"het_{kernel}.rng"] = h.state.rng
    out[f"het_{kernel}.busy"] = h.state.busy
np.savez(sys.argv[1], **{k: np.asarray(v) for k, v in out.items() if v is not None})
'''


# what jax.distributed.initialize would otherwise pick up from the environment
_JOB_ENV = ("SLURM_", "OMPI_", "PMI_", "JAX_COORDINATOR", "JAX_LOCAL_DEVICE_IDS", "QLIB_NUM_PROCESSES",
            "QLIB_PROCESS_ID")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Job:
    """``processes`` children of CHILD (joined by jax.distributed when more than one)."""

    def __init__(self, tmp: Path, name: str, processes: int, env_of: dict[int, dict[str, str]] | None = None,
                 argv: list[str] | None = None):
        script = tmp / "child.py"
        if argv is None and not script.exists():
            script.write_text(textwrap.dedent(CHILD))
        self.name, self.paths, self.procs, self.logs = name, [], [], []
        port = _free_port()
        for i in range(processes):
            env = child_env(1)  # one CPU device per process
            for k in [k for k in env if k.startswith(_JOB_ENV)]:
                del env[k]  # a test run inside a batch job must not join that job
            if processes > 1:
                env.update(QLIB_TEST_PROCESSES=str(processes), QLIB_TEST_PORT=str(port),
                           QLIB_NUM_PROCESSES=str(processes), QLIB_PROCESS_ID=str(i))
            env.update((env_of or {}).get(i, {}))
            self.paths.append(tmp / f"{name}_{i}.npz")
            self.logs.append(open(tmp / f"{name}_{i}.log", "w+"))
            cmd = [sys.executable] + (argv or [str(script), str(self.paths[-1])])
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=self.logs[-1], stderr=subprocess.STDOUT))

    def failed(self) -> bool:
        return any(p.poll() not in (None, 0) for p in self.procs)

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait(timeout=30)

    def results(self) -> tuple[list[dict[str, np.ndarray] | None], str]:
        """Each process's saved arrays (None if it failed) and their output."""
        out, text = [], []
        for i, (p, log, path) in enumerate(zip(self.procs, self.logs, self.paths)):
            log.seek(0)
            text.append(f"--- {self.name}, process {i}: exit {p.returncode}\n" + log.read()[-3000:])
            log.close()
            if p.returncode == 0:
                with np.load(path) as z:
                    out.append({k: z[k] for k in z.files})
            else:
                out.append(None)
        return out, "\n".join(text)


def _run_jobs(tmp: Path, specs: dict[str, tuple], deadline_s: float = DEADLINE_S,
              kill_on_failure: bool = True) -> dict[str, tuple[list, str]]:
    """Run the jobs ``name: (processes, env per process id[, argv])`` at once, under the
    deadline; a job with a failed child is killed at once (its other processes would wait for
    it forever)."""
    jobs: list[_Job] = []
    try:
        for name, spec in specs.items():
            jobs.append(_Job(tmp, name, *spec))
        deadline = time.monotonic() + deadline_s
        while any(j.running() for j in jobs) and time.monotonic() < deadline:
            for j in jobs:
                if kill_on_failure and j.failed():
                    j.kill()
            time.sleep(0.1)
    finally:
        for j in jobs:
            j.kill()  # out of time (or an error here): nothing is left running
    return {j.name: j.results() for j in jobs}


def _differences(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[str]:
    """Keys of ``b`` whose arrays are not bit-identical to ``a``'s (b may hold a subset)."""
    missing = sorted(set(b) - set(a))
    if missing:
        return [f"unknown arrays {missing}"]
    return [k for k in b if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
            or not np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[list, str]]:
    tmp = tmp_path_factory.mktemp("distributed")
    return _run_jobs(tmp, {"one": (1, {}), "two": (2, {}),
                           # process 1 of this job computes other numbers (the child's seed + 1)
                           "perturbed": (2, {i: {"QLIB_TEST_QUICK": "1"} for i in (0, 1)}
                                         | {1: {"QLIB_TEST_QUICK": "1", "QLIB_TEST_SEED_OFFSET": "1"}})})


def test_two_processes_give_the_numbers_of_one(runs):
    (one,), log1 = runs["one"]
    assert one is not None, log1
    both, log2 = runs["two"]
    assert all(r is not None for r in both), log2
    assert len(one) > 50
    for i, r in enumerate(both):
        assert r.keys() == one.keys(), f"process {i}: {sorted(r.keys() ^ one.keys())}"
        diff = _differences(one, r)
        assert not diff, f"process {i} of 2 differs from one process in {diff}"
    # the comparison is not trivial: replicas are different streams, and pairs do meet
    assert not np.array_equal(one["R4.tail_fraction"][0], one["R4.tail_fraction"][1])
    assert np.isfinite(one["meet0"]).any() and np.isfinite(one["meet1"]).any()


def test_a_process_computing_other_numbers_is_caught(runs):
    """Process 1 draws from seed + 1 for its own replicas: the gathered numbers mix the two
    seeds, so in both processes they must differ from one process's."""
    (one,), log1 = runs["one"]
    assert one is not None, log1
    both, log2 = runs["perturbed"]
    assert all(r is not None for r in both), "the perturbed job failed instead of running:\n" + log2
    assert all(_differences(one, r) for r in both), "a perturbed process went unnoticed:\n" + log2


def test_the_command_line_joins_the_job(tmp_path: Path):
    """``python -m qlib.distributed ARGS`` joins through QLIB_NUM_PROCESSES / QLIB_PROCESS_ID /
    JAX_COORDINATOR_ADDRESS, then runs ``python -m qlib ARGS`` in every process (here a bad
    --scale: exit status 2 with the CLI's one-line message, in both processes)."""
    port = _free_port()
    env_of = {i: {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}"} for i in (0, 1)}
    job = _run_jobs(tmp_path, {"cli": (2, env_of, ["-m", "qlib.distributed", "reproduce", "--scale", "0"])},
                    deadline_s=120, kill_on_failure=False)
    procs, log = job["cli"]
    for i in (0, 1):
        assert f"cli, process {i}: exit 2" in log and "--scale must be a finite number > 0" in log, log


def test_bad_process_parameters_raise_before_jax(monkeypatch):
    import qlib.distributed as qd

    with pytest.raises(ValueError, match="process_id must be an integer in \\[0, 1\\]"):
        qd.initialize("127.0.0.1:1", num_processes=2, process_id=2)
    with pytest.raises(ValueError, match="num_processes"):
        qd.initialize("127.0.0.1:1", num_processes=0, process_id=0)
    monkeypatch.setenv(qd.NUM_PROCESSES_ENV, "two")
    with pytest.raises(ValueError, match="QLIB_NUM_PROCESSES must be an integer"):
        qd.initialize("127.0.0.1:1")
