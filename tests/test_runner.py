"""qlib.runner: a study's plan carried out through the cache, from above."""

from __future__ import annotations

import numpy as np

from qlib import results, runner
from qlib.studies.plan import Run
from qlib.supermarket import simulate


def _plan(calls):
    def measure(seed):
        def go():
            calls.append(seed)
            r = simulate(40, 2, 0.8, steps=500, replicas=2, seed=seed)
            return {"tail": np.asarray(r.tail_fraction)}
        return go

    return [Run("runner-demo", {"j": j}, 10 + j, measure(10 + j)) for j in range(2)]


def test_a_plan_is_measured_once_then_read(tiers):
    calls = []
    first = runner.execute(_plan(calls))
    assert calls == [10, 11]
    again = runner.execute(_plan(calls))
    assert calls == [10, 11]  # read from the local cache, nothing measured
    assert all(np.array_equal(a["tail"], b["tail"]) for a, b in zip(first, again))


def test_a_plan_run_while_a_tier_is_written_stores_its_record(tiers):
    calls = []
    with results.writing("default", "a test", out=lambda *a, **k: None):
        runner.execute(_plan(calls))
    stored = results.entries("default")
    assert calls == [10, 11] and len(stored) == 2
    rec = stored[0].record()
    assert rec["study"] == __name__ and rec["command"] == "a test"
    assert rec["simulations"]  # the recorder heard the chains the runner measured
    assert all(results.status(e) == "fresh" for e in stored)
