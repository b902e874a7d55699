"""Verifying a stored entry: its bytes against its record, and its checkpoint (replica 0 of its
first chain, at most :data:`~qlib.results.store.CHECKPOINT_STEPS` steps) recomputed and hashed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qlib import _rng, simulations
from qlib.heterogeneous.simulate import ChainState, fresh_state, simulate
from qlib.results.environment import environment_reasons
from qlib.results.store import (
    CHECKPOINT_STEPS,
    Entry,
    array_hash,
    entry_key,
    record_text,
    self_hash,
    state_hash,
)
from qlib.supermarket.chain import EventMap
from qlib.supermarket.point import Point
from qlib.supermarket.simulation import SupermarketResult, simulate_many

# --------------------------------------------------------------------------- verify


def verify(e: Entry, *, recompute: bool = False) -> list[str]:
    """What is wrong with a stored entry (empty list: nothing). Its record must be the canonical
    text of itself (so any edited byte of the .json fails), its key must be that of its name,
    parameters and seed, and every array of the .npz must have the hash its record lists.
    ``recompute``: also recompute the checkpoint (replica 0, a few seconds) and compare."""
    try:
        text = e.json.read_text()
        rec = json.loads(text)
    except (OSError, ValueError) as err:
        return [f"record unreadable ({type(err).__name__}: {err})"]
    problems = []
    if text != record_text(rec):
        problems.append("record is not in its canonical form (edited by hand?)")
    if rec.get("record_sha256") != self_hash(rec):
        problems.append("record does not match its own hash (edited?)")
    if rec.get("key") != e.stem.name or entry_key(
        rec.get("name"), rec.get("params"), rec.get("seed")
    ) != rec.get("key"):
        problems.append("its key does not match its name, parameters and seed")
    try:
        if hashlib.sha256(e.npz.read_bytes()).hexdigest()[:16] != rec.get("npz_sha256"):
            problems.append("the .npz file's bytes differ from its recorded hash")
        with np.load(e.npz, allow_pickle=False) as f:
            have = {k: array_hash(f[k]) for k in f.files}
    except Exception as err:  # noqa: BLE001 (zlib.error, BadZipFile, ...: any of them means "not intact")
        return problems + [f"arrays unreadable ({type(err).__name__}: {err})"]
    want = {k: v["sha256"] for k, v in rec.get("arrays", {}).items()}
    if have != want:
        bad = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
        problems.append(f"arrays {bad} differ from their recorded hashes")
    if recompute and rec.get("checkpoint"):
        cp = rec["checkpoint"]
        got = checkpoint_hashes([cp["spec"]])[0]
        if got != cp["hash"]:
            # the same code gives other bits in another environment: say which, else it is the code
            env = environment_reasons(rec.get("lock"))
            why = ("different environment: " + "; ".join(env)) if env else \
                "stale code: the kernel or streams changed"
            problems.append(f"checkpoint recomputed to hash {got}, recorded {cp['hash']} ({why})")
    return problems


# --------------------------------------------------------------------------- checkpoints


def hetero_state_hash(state: Any, r: int) -> str:
    """Hash of replica r of a heterogeneous :class:`~qlib.heterogeneous.simulate.ChainState`."""
    h = hashlib.sha256()
    for k, v in state._asdict().items():
        if v is not None:
            h.update(k.encode())
            h.update(
                np.ascontiguousarray(np.asarray(v)[r]).astype(np.asarray(v).dtype.newbyteorder("<")).tobytes()
            )
    return h.hexdigest()[:16]


def checkpoint_spec(chain: Mapping, start_counts: Any, start_state: int) -> dict:
    """The spec of replica 0 of a recorded chain, up to at most :data:`CHECKPOINT_STEPS` steps."""
    if chain.get("model") == "heterogeneous":
        spec = {k: chain[k] for k in ("model", "lam", "mus", "policy", "routing_exponent", "seed", "seeded")}
        return spec | {
            "replica": 0,
            "steps": int(min(CHECKPOINT_STEPS, chain["first_call_steps"])),
            "start": {k: v for k, v in start_counts.items() if v is not None}
            | {"rng": str(int(start_counts["rng"]))},
        }
    spec = {k: chain[k] for k in ("n", "d", "rate", "replacement", "variant", "capacity", "seed", "seeded")}
    spec["replica"] = 0
    spec["steps"] = int(min(CHECKPOINT_STEPS, chain["first_call_steps"]))
    spec["counts"] = [int(x) for x in np.trim_zeros(np.asarray(start_counts, np.int64), "b")] or [
        int(chain["n"])
    ]
    spec["state"] = str(int(start_state))
    return spec


def checkpoint_hashes(specs: Sequence[Mapping]) -> list[str]:
    """Recompute each spec (replica 0 from its start for ``steps`` steps) and hash its counts and
    random state; specs of one sampling rule, variant and capacity run as lanes of one kernel."""
    out: list[str | None] = [None] * len(specs)
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(specs):
        if s.get("model") == "heterogeneous":
            out[i] = hetero_checkpoint(s)
            continue
        groups.setdefault((bool(s["replacement"]), tuple(s["variant"]), s["capacity"]), []).append(i)
    for (repl, var, cap), idx in groups.items():
        pts, inits, seeds = [], [], []
        for i in idx:
            s = specs[i]
            pt = Point.simulation(s["n"], s["d"], replacement=repl, **s["rate"])
            u = np.asarray(s["counts"], np.int64)
            u = np.concatenate([u, [0]]) if u.size < 2 else u
            state = np.array([int(s["state"])], np.uint64)
            seed = int(s["seed"])
            if s["seeded"]:
                if not np.array_equal(_rng.replica_states_np(seed, np.arange(1)), state):
                    raise ValueError(
                        f"checkpoint spec: state {s['state']} is not replica 0's state of seed {seed}"
                    )
                init: Any = {"counts": u}
            else:  # a continued chain: its start is the state it was continued from
                L1 = u.size
                z = np.zeros((1, L1))
                init = SupermarketResult(
                    point=pt,
                    steps=1,
                    burn_in=0,
                    seed=seed,
                    tail_fraction=z,
                    max_length=np.zeros(1, np.int64),
                    max_length_distribution=z,
                    counts=u[None],
                    batch_tail_fraction=z[:, None],
                    state=state,
                    capacity=cap,
                )
            pts.append(pt)
            inits.append(init)
            seeds.append(seed)
        variant = None if var[0] == "model" else EventMap(var[0], float(var[1]))
        with simulations.listening(None):  # a check, not part of what a record records
            res = simulate_many(
                pts,
                steps=[int(specs[i]["steps"]) for i in idx],
                replicas=1,
                seeds=seeds,
                initial=inits,
                replacement=repl,
                variant=variant,
                capacity=cap,
                progress=False,
            )
        for i, r in zip(idx, res):
            out[i] = state_hash(r.counts[0], r.state[0])
    return out  # type: ignore[return-value]


def hetero_checkpoint(s: Mapping) -> str:
    st = s["start"]
    start = ChainState(
        rng=np.array([int(st["rng"])], np.uint64),
        busy=np.array([st["busy"]], bool),
        queue=np.array([st["queue"]], np.int64),
        idle_order=None if st.get("idle_order") is None else np.array([st["idle_order"]], np.int64),
    )
    kw = dict(
        steps=int(s["steps"]), policy=s["policy"], routing_exponent=s["routing_exponent"], progress=False
    )
    with simulations.listening(None):  # a check, not part of what a record records
        if s["seeded"]:  # from its seed: the start must be replica 0's fresh state of that seed
            if hetero_state_hash(start, 0) != hetero_state_hash(
                fresh_state(int(s["seed"]), 1, len(s["mus"]), s["policy"]), 0
            ):
                raise ValueError(f"checkpoint spec: its start is not replica 0's start of seed {s['seed']}")
            r = simulate(s["lam"], s["mus"], seed=int(s["seed"]), replicas=1, **kw)
        else:
            r = simulate(s["lam"], s["mus"], initial=start, **kw)
    return hetero_state_hash(r.state, 0)
