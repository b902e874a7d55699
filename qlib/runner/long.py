"""The long tier (``make results-long``): the studies run with the long tier written, one
progress line per stored entry, and the ``python -m qlib results`` / ``results-long`` command line.

It runs the studies, so it lives in the runner, above them (it was ``qlib.results.long``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any

from qlib.config import child_environ, current, using
from qlib.results.checkpoints import verify
from qlib.results.freshness import stale_reasons
from qlib.results.pins import criteria_after, pin_problems
from qlib.results.store import TIERS, entries
from qlib.results.tier import primary_process, summary, writing
from qlib.runner.compute import run
from qlib.runner.registry import STUDIES


class _Progress:
    """One line per stored entry of a long job: entries, replica-steps done of the estimated
    total, the measured rate and the ETA of the whole job."""

    def __init__(self, estimate: float, out=print):
        self.estimate, self.out = estimate, out
        self.t0 = time.perf_counter()
        self.done = 0.0  # replica-steps computed in this process
        self.entries = 0

    def update(self, rec: Mapping) -> None:
        self.entries += 1
        self.done += float(rec.get("replica_steps", 0))
        wall = time.perf_counter() - self.t0
        rate = self.done / wall if wall > 0 else 0.0
        if self.estimate > 0 and rate > 0:
            left = max(0.0, self.estimate - self.done) / rate
            eta = (f"{self.done / self.estimate:4.0%} of ~{self.estimate:.3g} replica-steps, "
                   f"ETA {left / 60:.0f} min")
        else:
            eta = "no default-tier records to size the job: no ETA"
        self.out(
            f"[qlib] results-long: {self.entries} entries stored ({rec.get('key')}), "
            f"{self.done:.3g} replica-steps at {rate:.3g}/s, {wall / 60:.1f} min; {eta}",
            flush=True,
        )


def long_jobs(only: Sequence[str] | None = None) -> list[tuple[str, ModuleType]]:
    """(title, module) of the studies a long run runs (:data:`qlib.runner.STUDIES`), those whose
    title or module name contains one of ``only``."""
    jobs = [(t, m) for t, m in STUDIES.items() if not only or any(o in t or o in m.__name__ for o in only)]
    if not jobs:
        raise ValueError(
            f"--only {list(only or [])} matches no study; the studies are "
            f"{[m.__name__ for m in STUDIES.values()]}"
        )
    return jobs


def estimate_work(modules: Sequence[ModuleType], scale: float) -> float:
    """The replica-steps a long run of these studies will take: a study's own ``long_cost()`` where
    it has one (the points it lacks, sized a priori), else ``scale`` times what its default-tier
    entries recorded (the studies multiply every full-mode run length by the
    scale; the points added at large scales make it an underestimate, which the rate corrects)."""
    total = 0.0
    sized = []
    for m in modules:  # a study that sizes its own long points (e.g. families.long_cost)
        cost = getattr(m, "long_cost", None)
        if cost is not None:
            total += float(cost())
            sized.append(m)
    names = [m.__name__ for m in modules if m not in sized]
    if not names:
        return total
    default_total = 0.0
    for e in entries("default"):
        try:
            r = e.record()
        except (OSError, ValueError):
            continue
        if r.get("study") in names or r.get("study") is None:
            default_total += float(r.get("replica_steps", 0))
    return total + scale * default_total


def run_long(jobs: Sequence[tuple[str, Any]], *, scale: float, mode: str = "full", out=print,
             allow_dirty: bool = False) -> None:
    """Run each study (:func:`qlib.runner.run`) with the long tier written (entries stored one point
    at a time, atomically; a rerun skips every point the tiers already hold fresh), printing one
    progress line per stored entry. ``jobs``: (title, study module or callable). Refuses to start
    on uncommitted code unless ``allow_dirty`` (:func:`qlib.results.pins.start_run`)."""
    modules = [m for _, m in jobs if isinstance(m, ModuleType)]
    config = replace(current(), scale=repr(float(scale)))
    line = f"python -m qlib results-long --scale {scale:g}" + (f" ({mode} mode)" if mode != "full" else "")
    progress = _Progress(estimate_work(modules, scale), out=out)
    with using(config), writing("long", line, out=out, on_stored=progress.update, allow_dirty=allow_dirty):
        for title, job in jobs:
            out(f"[qlib] results-long: {title}", flush=True)
            # the study's name goes in each record it stores
            with using(replace(current(), study=job.__name__ if isinstance(job, ModuleType) else title)):
                if isinstance(job, ModuleType):
                    run(job, mode, progress=False)
                else:
                    job()


# --------------------------------------------------------------------------- command line


def _spawn_processes(argv: Sequence[str], processes: int) -> int:
    """Run ``python -m qlib.distributed ARGV`` in ``processes`` local processes (one job)."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for i in range(processes):
        # each process reads its place in the job from its environment (qlib.config.RunConfig)
        env = dict(child_environ(replace(current(), num_processes=str(processes), process_id=str(i))),
                   JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "qlib.distributed", *argv],
                env=env,
                stdout=None if i == 0 else subprocess.DEVNULL,
            )
        )
    codes = [p.wait() for p in procs]
    return max(codes)


def cli(a) -> int:
    """``python -m qlib results`` and ``python -m qlib results-long`` (see :mod:`qlib.__main__`)."""
    if a.cmd == "results":
        if a.verify:
            bad = unknown = later = 0
            for tier in TIERS:
                for e in entries(tier):
                    rec = e.record() if e.json.exists() else {}
                    # the pins: the criteria commit is an ancestor of the code commit (qlib.results.pins)
                    pinned, unknowns = pin_problems(rec)
                    problems = verify(e, recompute=True) + stale_reasons(rec) + pinned
                    bad += bool(problems)
                    unknown += bool(unknowns) and not problems
                    after = criteria_after(rec)
                    later += after is not None
                    notes = ([f"({', '.join(unknowns)})"] if unknowns else []) + (
                        [f"(its study's criteria changed after its code, at {after[:9]}: "
                         "criterion after data)"]
                        if after else [])
                    print(f"{tier}/{e.stem.name}: {'; '.join(problems) if problems else 'verified'}"
                          + "".join(" " + n for n in notes), flush=True)
            print(f"[qlib] results: {bad} entries fail verification; {unknown} verified with a pin unknown; "
                  f"{later} whose study's criteria file changed after their code commit")
            return 1 if bad else 0
        print(summary())
        return 0
    if a.processes < 1:
        raise ValueError(f"--processes must be an integer >= 1; got {a.processes}")
    if a.processes > 1 and not current().num_processes:
        argv = (
            ["results-long", "--scale", repr(a.scale or 1.0)]
            + (["--only", *a.only] if a.only else [])
            + (["--smoke"] if a.smoke else [])
            + (["--allow-dirty"] if a.allow_dirty else [])
        )
        return _spawn_processes(argv, a.processes)
    run_long(
        long_jobs(a.only),
        scale=a.scale or 1.0,
        mode="smoke" if a.smoke else "full",
        out=lambda *x, **k: print(*x, **k) if primary_process() else None,
        allow_dirty=a.allow_dirty,
    )
    return 0
