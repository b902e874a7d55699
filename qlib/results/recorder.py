"""The provenance of a stored result: which chains its computation simulated, and a checkpoint.

:func:`recording` listens (:mod:`qlib.simulations`) to the simulations run inside it, from above
the kernel: the simulators announce what they ran and know nothing of this record.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from qlib import _rng, simulations
from qlib.results.checkpoints import checkpoint_hashes, checkpoint_spec, hetero_state_hash
from qlib.results.store import state_hash
from qlib.simulations import Listener


class Recorder:
    """The simulations run inside :func:`recording`: one record per simulated chain (a point of
    a simulate / simulate_many call; a call that continues a recorded chain extends its record),
    with its start, steps, and the hash of each replica's final counts and random state."""

    def __init__(self, parent: Listener | None = None):
        self.parent = parent
        self.chains: list[dict] = []
        self._start0: list[tuple[np.ndarray, int]] = []  # replica 0's start counts and state, per chain
        self._open: dict[tuple, int] = {}  # (point, final hashes) -> chain: where a continuation resumes
        self.wall_s = self.cpu_s = 0.0

    def supermarket(self, plans: Sequence, results: Sequence, variant: Any, capacity: int | None) -> None:
        """Called by the simulation driver with each point's plan (point, steps, burn_in, seed,
        u0, rng0) and result (counts, state)."""
        var = [str(getattr(variant, "kind", "model")), float(getattr(variant, "value", 0.0))]
        for p, r in zip(plans, results):
            R = int(r.counts.shape[0])
            pt = p.point
            what = (pt.n, pt.d, json.dumps(pt.rate), bool(pt.replacement), tuple(var), capacity)
            start = tuple(state_hash(p.u0[i], p.rng0[i]) for i in range(R))
            final = [state_hash(r.counts[i], r.state[i]) for i in range(R)]
            j = self._open.pop((what, start), None)
            if j is None:
                seeded = bool(np.array_equal(np.asarray(p.rng0, np.uint64),
                                             _rng.replica_states_np(int(p.seed), np.arange(R))))
                self.chains.append({"n": int(pt.n), "d": int(pt.d), "rate": dict(pt.rate),
                                    "replacement": bool(pt.replacement), "variant": var, "capacity": capacity,
                                    "seed": int(p.seed), "seeded": seeded, "replicas": R, "calls": 0,
                                    "steps": 0, "burn_in": 0, "final": []})
                self._start0.append((np.asarray(p.u0[0], np.int64).copy(), int(p.rng0[0])))
                j = len(self.chains) - 1
            c = self.chains[j]
            c["calls"] += 1
            c["steps"] += int(p.steps)
            c["burn_in"] += int(p.burn_in)
            c["final"] = final
            self._open[(what, tuple(final))] = j
        if self.parent is not None:
            self.parent.supermarket(plans, results, variant, capacity)

    def heterogeneous(self, res: Any, start: Any, routing_exponent: float | None, seeded: bool) -> None:
        """Called by :func:`qlib.heterogeneous.simulate` with its result and start state."""
        R = int(res.busy_fraction.shape[0])
        what = ("heterogeneous", float(res.lam), tuple(float(x) for x in res.mus), res.policy,
                routing_exponent)
        first = tuple(hetero_state_hash(start, i) for i in range(R))
        final = [hetero_state_hash(res.state, i) for i in range(R)]
        j = self._open.pop((what, first), None)
        if j is None:
            self.chains.append({"model": "heterogeneous", "lam": float(res.lam),
                                "mus": [float(x) for x in res.mus],
                                "policy": res.policy, "routing_exponent": routing_exponent,
                                "seed": None if res.seed is None else int(res.seed), "seeded": bool(seeded),
                                "replicas": R, "calls": 0, "steps": 0, "burn_in": 0, "final": []})
            self._start0.append(({k: (None if v is None else np.asarray(v)[0].tolist())
                                  for k, v in start._asdict().items()}, 0))
            j = len(self.chains) - 1
        c = self.chains[j]
        c["calls"] += 1
        c["steps"] += int(res.steps)
        c["burn_in"] += int(res.burn_in)
        c["final"] = final
        self._open[(what, tuple(final))] = j
        if self.parent is not None:
            self.parent.heterogeneous(res, start, routing_exponent, seeded)

    def provenance(self, seeds: Sequence[Any]) -> list[dict]:
        """Per entry (one per seed, computed together): its chains (those started from its seed;
        chains whose seed is no entry's go to every entry that has none), the group's wall and
        CPU time, and a checkpoint of its first chain (recomputed now, to be recomputed later)."""
        mine = [[i for i, c in enumerate(self.chains) if c["seed"] == s] for s in seeds]
        orphans = [i for i, c in enumerate(self.chains) if c["seed"] not in set(seeds)]
        mine = [m or orphans for m in mine]
        specs, who = [], []
        for e, m in enumerate(mine):
            if m:
                c = self.chains[m[0]]
                u0, s0 = self._start0[m[0]]
                specs.append(checkpoint_spec(c | {"first_call_steps": c["steps"] + c["burn_in"]}, u0,
                                                     s0))
                who.append(e)
        hashes = dict(zip(who, checkpoint_hashes(specs))) if specs else {}
        out = []
        for e, m in enumerate(mine):
            out.append({"wall_s": self.wall_s, "cpu_s": self.cpu_s, "computed_together": len(seeds),
                        "simulations": [self.chains[i] for i in m],
                        "checkpoint": {"spec": specs[who.index(e)], "hash": hashes[e]} if e in hashes
                        else None})
        return out


@contextlib.contextmanager
def recording():
    """Record the simulations run inside (see :class:`Recorder`), and the wall and CPU time. A
    recording inside another also tells the outer one."""
    rec = Recorder(simulations.listener())
    t0, c0 = time.perf_counter(), time.process_time()
    with simulations.listening(rec):
        try:
            yield rec
        finally:
            rec.wall_s, rec.cpu_s = time.perf_counter() - t0, time.process_time() - c0
