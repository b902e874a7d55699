"""Stored results with provenance: ``results/default/`` (what ``make figures`` computes) and
``results/long/`` (``make results-long``), beside the code.

An entry is one sweep-cache entry (:mod:`qlib.cache`): ``NAME-KEY.npz`` (the arrays the figures
and claim rows are computed from) and ``NAME-KEY.json`` (its record). KEY hashes the name, the
parameters and the seed only, so an entry computed by other code is still found, and then
reported stale instead of silently missed. The record says where the arrays came from: the
command, commit, versions (qlib, the random streams, JAX, NumPy), parameters, seed, replicas,
steps, wall and CPU time, the machine, the hash of every array, and per simulated chain
(:func:`qlib.supermarket.simulate` reports to :func:`qlib.cache.recording`) its start, steps and a
hash of each replica's final counts and random state; plus a checkpoint: the spec of replica 0
of the first chain and the hash of its state after at most :data:`CHECKPOINT_STEPS` steps, which
:func:`verify` recomputes in seconds.

- :func:`status` (entry) -> "fresh" | "stale" | "missing"; :func:`stale_row_text` is the text a
  claim row shows for a long entry that is not fresh.
- :func:`verify` checks an entry's bytes against its record (any edited byte fails) and, with
  ``recompute=True``, recomputes its checkpoint.
- :func:`compare` is what ``make figures`` does with each recomputed entry: bit for bit on the
  exact arrays (integers, the hashes of counts and random states), to :data:`FLOAT_RTOL` on floats.

The files are written deterministically (sorted keys, zip members without timestamps) and only
when their content changes, so ``git diff results/`` shows exactly what a code change changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import sys
import time
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qlib.config import ROOT

TIERS = ("default", "long")
#: Relative tolerance (to the largest magnitude of the array) of a recomputed float array.
FLOAT_RTOL = 1e-12
#: Steps of replica 0 recomputed by a checkpoint (a second or two, compile included).
CHECKPOINT_STEPS = 2**16
RESULTS_DIR_ENV = "QLIB_RESULTS_DIR"  # the results folder ("off": none is read or written)
WRITE_ENV = "QLIB_RESULTS_WRITE"  # the tier a run writes: "default" (make figures) or "long"
RUN_ENV = "QLIB_RESULTS_RUN"  # the id of that run: an entry computed in it is not computed again
LOG_ENV = "QLIB_RESULTS_LOG"  # JSON lines: one comparison per written entry
COMMAND_ENV = "QLIB_RESULTS_COMMAND"  # the command that recomputes the tier, for the record
LONG_COMMAND = "make results-long"


class ResultsWarning(UserWarning):
    """A stored result does not match the code or its record, and is not used."""


# --------------------------------------------------------------------------- where


def root() -> Path | None:
    """The results folder: ``$QLIB_RESULTS_DIR`` or ``results/`` at the repository root (None if "off")."""
    raw = os.environ.get(RESULTS_DIR_ENV, "").strip()
    if raw.lower() in {"off", "none", "0"}:
        return None
    return Path(raw) if raw else ROOT / "results"


def tier_dir(tier: str) -> Path | None:
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}; got {tier!r}")
    r = root()
    return None if r is None else r / tier


def write_tier() -> str | None:
    """The tier this process writes (set by ``figures`` / ``results-long``), or None."""
    t = os.environ.get(WRITE_ENV, "").strip()
    if t and t not in TIERS:
        raise ValueError(f"{WRITE_ENV} must be one of {TIERS}; got {t!r}")
    return t or None


def run_id() -> str | None:
    return os.environ.get(RUN_ENV) or None


def entry_key(name: str, params: Mapping, seed: Any) -> str:
    """NAME-HASH of (name, params, seed): the same for any code version (the record holds those)."""
    blob = json.dumps({"name": name, "params": _jsonable(params), "seed": _jsonable(seed)}, sort_keys=True)
    return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class Entry:
    """A stored entry: its tier and its stem (``stem.npz``, ``stem.json``)."""

    tier: str
    stem: Path

    @property
    def npz(self) -> Path:
        return self.stem.parent / (self.stem.name + ".npz")

    @property
    def json(self) -> Path:
        return self.stem.parent / (self.stem.name + ".json")

    def record(self) -> dict:
        return json.loads(self.json.read_text())


def entry(tier: str, name: str, params: Mapping, seed: Any) -> Entry | None:
    d = tier_dir(tier)
    return None if d is None else Entry(tier, d / entry_key(name, params, seed))


def entries(tier: str) -> list[Entry]:
    """Every stored entry of a tier (sorted by file name)."""
    d = tier_dir(tier)
    if d is None or not d.is_dir():
        return []
    return [Entry(tier, p.parent / p.name[:-5]) for p in sorted(d.glob("*.json"))]


# --------------------------------------------------------------------------- hashing, files


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, sort_keys=True, default=str))


def array_hash(a: np.ndarray) -> str:
    """sha256 of an array's dtype, shape and bytes (16 hex digits)."""
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()[:16]


def state_hash(counts: np.ndarray, state: Any) -> str:
    """Hash of one replica's counts (trailing empty levels dropped) and random state."""
    u = np.trim_zeros(np.asarray(counts, np.int64).ravel(), "b")
    h = hashlib.sha256(u.astype("<i8").tobytes())
    h.update(np.asarray(state, np.uint64).astype("<u8").tobytes())
    return h.hexdigest()[:16]


def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An .npz (np.load reads it) with fixed member timestamps: the same arrays, the same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for k in sorted(arrays):
            a = np.asarray(arrays[k])
            if a.dtype == object:
                raise ValueError(f"array {k!r} has dtype object; a stored result holds plain arrays")
            b = io.BytesIO()
            np.lib.format.write_array(b, a, allow_pickle=False)
            info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, b.getvalue())
    return buf.getvalue()


def _record_text(record: Mapping) -> str:
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def _atomic_bytes(path: Path, data: bytes) -> None:
    from qlib.cache import _atomic_write

    def write(f):
        f.write(data)
        os.fchmod(f.fileno(), 0o644)  # a file of the repository, not a private temporary

    _atomic_write(path, write, binary=True)


# --------------------------------------------------------------------------- the record


def machine() -> dict:
    """Platform, CPU model, cores and JAX's devices of this machine."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out = {"platform": platform.platform(), "cpu": cpu, "cores": os.cpu_count()}
    try:
        import jax

        devs = jax.devices()
        out["devices"] = f"{len(devs)} x {devs[0].device_kind}"
    except Exception:  # noqa: BLE001 (no device information: still a record)
        pass
    return out


def versions() -> dict:
    from qlib.cache import versions as v

    return v() | {"python": platform.python_version()}


def command() -> str:
    return os.environ.get(COMMAND_ENV) or " ".join(
        ["python"] + [os.path.basename(sys.argv[0])] + sys.argv[1:]
    )


def make_record(
    tier: str, name: str, params: Mapping, seed: Any, arrays: Mapping[str, np.ndarray], provenance: Mapping
) -> dict:
    """The record of an entry. ``provenance`` (from :func:`qlib.cache.recording`): wall_s, cpu_s,
    computed_together, simulations (chains), checkpoint."""
    from qlib.cache import git_commit

    sims = list(provenance.get("simulations", []))
    rec = {
        "name": name,
        "params": _jsonable(params),
        "seed": _jsonable(seed),
        "key": entry_key(name, params, seed),
        "tier": tier,
        "command": command(),
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": versions(),
        "machine": machine(),
        "wall_s": round(float(provenance.get("wall_s", 0.0)), 3),
        "cpu_s": round(float(provenance.get("cpu_s", 0.0)), 3),
        "computed_together": int(provenance.get("computed_together", 1)),
        "study": os.environ.get(STUDY_ENV) or provenance.get("study"),
        "replicas": max((c["replicas"] for c in sims), default=0),
        "steps": int(sum(c["steps"] + c["burn_in"] for c in sims)),
        "replica_steps": int(sum((c["steps"] + c["burn_in"]) * c["replicas"] for c in sims)),
        "simulations": sims,
        "checkpoint": provenance.get("checkpoint"),
        "arrays": {
            k: {
                "dtype": np.asarray(v).dtype.str,
                "shape": list(np.shape(v)),
                "sha256": array_hash(np.asarray(v)),
            }
            for k, v in sorted(arrays.items())
        },
        "npz_sha256": hashlib.sha256(_npz_bytes(arrays)).hexdigest()[:16],
    }
    rec = _jsonable(rec)
    return rec | {"record_sha256": _self_hash(rec)}


def _self_hash(rec: Mapping) -> str:
    """sha256 of the record's canonical text without this field: an edited record fails it."""
    body = {k: v for k, v in rec.items() if k != "record_sha256"}
    return hashlib.sha256(_record_text(body).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- read


def read(e: Entry) -> tuple[dict[str, np.ndarray], dict] | None:
    """(arrays, record) of a stored entry, or None when it does not exist. Raises ValueError
    when its files are unreadable or disagree with its record (:func:`verify` says how)."""
    if not (e.npz.exists() and e.json.exists()):
        return None
    problems = verify(e)
    if problems:
        raise ValueError("; ".join(problems))
    with np.load(e.npz) as f:
        arrays = {k: f[k] for k in f.files}
    return arrays, e.record()


def stale_reasons(record: Mapping) -> list[str]:
    """Why a record does not match the running code (empty: it matches). The code version and
    the random streams must match; JAX and NumPy versions are recorded, not required (the
    stored exact arrays do not depend on them: ``make figures`` checks that they reproduce)."""
    from qlib.cache import versions as v

    now, then = v(), record.get("versions", {})
    out = [
        f"{k} {then.get(k)!r} != {now[k]!r} now"
        for k in ("qlib", "streams")
        if str(then.get(k)) != str(now[k])
    ]
    return out


def status(e: Entry | None, *, recompute: bool = False) -> str:
    """ "fresh" (stored, intact and matching the code), "stale" (stored, but from other code or
    edited) or "missing". ``recompute``: also recompute the checkpoint (seconds)."""
    if e is None or not (e.json.exists() and e.npz.exists()):
        return "missing"
    if verify(e, recompute=recompute):
        return "stale"
    return "stale" if stale_reasons(e.record()) else "fresh"


def stale_row_text(tier: str = "long") -> str:
    """What a claim row shows for a stored result that is not fresh."""
    return f"stale: rerun `{LONG_COMMAND if tier == 'long' else 'make figures'}`"


def row_status(name: str, params: Mapping, seed: Any, tier: str = "long") -> tuple[str, str]:
    """(status, text for the claim row): "fresh" with the entry's provenance, else the stale or
    missing text. For the studies' rows of long points."""
    e = entry(tier, name, params, seed)
    s = status(e)
    if s == "fresh":
        r = e.record()
        return (
            s,
            f"{tier} result {r['date'][:10]}, commit {r['commit'][:9]}, "
            f"{r['replica_steps']:.3g} replica-steps",
        )
    return s, stale_row_text(tier) if s == "stale" else f"missing: run `{LONG_COMMAND}`"


def lookup(
    name: str, params: Mapping, seed: Any, tiers: Sequence[str] = TIERS
) -> dict[str, np.ndarray] | None:
    """The arrays of a fresh stored entry in the first of ``tiers`` that holds one; None when
    none does. A stored entry that is not fresh is reported (:class:`ResultsWarning`) and not used."""
    for tier in tiers:
        e = entry(tier, name, params, seed)
        if e is None or not e.json.exists():
            continue
        try:
            got = read(e)
            if got is None:
                continue
            arrays, rec = got
            if {k: rec.get(k) for k in ("name", "params", "seed")} != _jsonable(
                {"name": name, "params": params, "seed": seed}
            ):
                raise ValueError("its record's name, parameters or seed differ")
            why = stale_reasons(rec)
            if why:
                raise ValueError("computed by other code: " + ", ".join(why))
            return arrays
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as err:
            what = "recomputing" if tier == "default" else stale_row_text(tier)
            warnings.warn(
                f"stored result {tier}/{e.stem.name} is stale ({err}); {what}", ResultsWarning, stacklevel=3
            )
    return None


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
    if text != _record_text(rec):
        problems.append("record is not in its canonical form (edited by hand?)")
    if rec.get("record_sha256") != _self_hash(rec):
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
            problems.append(
                f"checkpoint recomputed to hash {got}, recorded {cp['hash']} (the kernel or streams changed)"
            )
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
    from qlib import _rng
    from qlib.supermarket.chain import EventMap
    from qlib.supermarket.point import Point
    from qlib.supermarket.simulation import SupermarketResult, simulate_many

    out: list[str | None] = [None] * len(specs)
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(specs):
        if s.get("model") == "heterogeneous":
            out[i] = _hetero_checkpoint(s)
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
        from qlib import cache

        with cache.not_recording():
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


def _hetero_checkpoint(s: Mapping) -> str:
    from qlib import cache
    from qlib.heterogeneous.simulate import ChainState, _fresh_state, simulate

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
    with cache.not_recording():
        if s["seeded"]:  # from its seed: the start must be replica 0's fresh state of that seed
            if hetero_state_hash(start, 0) != hetero_state_hash(
                _fresh_state(int(s["seed"]), 1, len(s["mus"]), s["policy"]), 0
            ):
                raise ValueError(f"checkpoint spec: its start is not replica 0's start of seed {s['seed']}")
            r = simulate(s["lam"], s["mus"], seed=int(s["seed"]), replicas=1, **kw)
        else:
            r = simulate(s["lam"], s["mus"], initial=start, **kw)
    return hetero_state_hash(r.state, 0)


# --------------------------------------------------------------------------- write and compare


def compare(
    new: Mapping[str, np.ndarray],
    new_rec: Mapping,
    old: Mapping[str, np.ndarray],
    old_rec: Mapping,
    rtol: float = FLOAT_RTOL,
) -> tuple[str, list[str]]:
    """("bit" | "tol" | "mismatch", what differs): integer, boolean and string arrays, the hashes
    of every chain's final counts and random states and the checkpoint must agree bit for bit;
    float arrays to ``rtol`` times the array's largest magnitude (NaNs in the same places)."""
    diffs, inexact = [], []
    if sorted(new) != sorted(old):
        diffs.append(f"arrays {sorted(set(new) ^ set(old))} present in one only")
    for k in sorted(set(new) & set(old)):
        a, b = np.asarray(new[k]), np.asarray(old[k])
        if a.shape != b.shape or a.dtype != b.dtype:
            diffs.append(f"{k}: shape/dtype {a.shape} {a.dtype} != stored {b.shape} {b.dtype}")
        elif array_hash(a) == array_hash(b):
            continue
        elif a.dtype.kind in "fc":
            nan_a, nan_b = np.isnan(a), np.isnan(b)
            scale = float(np.nanmax(np.abs(b))) if b.size and not nan_b.all() else 0.0
            err = np.where(nan_a | nan_b, 0.0, np.abs(a - b))
            worst = float(err.max()) if err.size else 0.0
            if np.array_equal(nan_a, nan_b) and worst <= rtol * scale:
                inexact.append(k)
            else:
                diffs.append(f"{k}: max |new - stored| = {worst:.3g} (tolerance {rtol:g} x {scale:.3g})")
        else:
            diffs.append(f"{k}: {int(np.sum(a != b))} of {a.size} exact values differ")
    fin = lambda r: [(c.get("seed"), c.get("final")) for c in r.get("simulations", [])]  # noqa: E731
    if fin(new_rec) != fin(old_rec):
        diffs.append("final counts / random states of the simulated chains differ")
    cp = lambda r: (r.get("checkpoint") or {}).get("hash")  # noqa: E731
    if cp(new_rec) != cp(old_rec):
        diffs.append(f"checkpoint hash {cp(new_rec)} != stored {cp(old_rec)}")
    if diffs:
        return "mismatch", diffs
    return ("tol", [f"{k} within {rtol:g}" for k in inexact]) if inexact else ("bit", [])


def commit(
    tier: str, name: str, params: Mapping, seed: Any, arrays: Mapping[str, np.ndarray], provenance: Mapping
) -> str:
    """Store a newly computed entry in ``tier``, comparing it with the stored one first: an
    entry that reproduces is left as it is (its record keeps the original provenance); a new or
    changed one is written (atomically: the .npz, then the .json). The outcome ("new", "bit",
    "tol" or "mismatch") is appended to ``$QLIB_RESULTS_LOG`` and returned."""
    e = entry(tier, name, params, seed)
    if e is None:
        return "off"
    # A multi-process job: every process computed the same entry and writes it (atomically), so
    # each finds it at its next lookup whatever the others' timing; one process logs it.
    e.stem.parent.mkdir(parents=True, exist_ok=True)
    rec = make_record(tier, name, params, seed, arrays, provenance)
    outcome, details, stale = "new", [], []
    if e.json.exists() or e.npz.exists():
        try:
            old = read(e)
            outcome, details = compare(arrays, rec, *old) if old else ("new", [])
            stale = stale_reasons(old[1]) if old else []
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
            outcome, details = "mismatch", [f"the stored entry is unreadable or edited ({err})"]
        if stale:
            details = details + ["stored by other code (" + ", ".join(stale) + "): record rewritten"]
    if outcome in ("new", "mismatch") or stale:
        _atomic_bytes(e.npz, _npz_bytes(arrays))
        _atomic_bytes(e.json, _record_text(rec).encode())
    if not _primary():
        return outcome
    if _PROGRESS is not None and outcome in ("new", "mismatch"):
        _PROGRESS.update(rec)
    log = os.environ.get(LOG_ENV)
    if log:
        line = json.dumps(
            {
                "tier": tier,
                "entry": e.stem.name,
                "outcome": outcome,
                "details": details,
                "wall_s": rec["wall_s"],
                "replica_steps": rec["replica_steps"],
            }
        )
        with open(log, "a") as f:
            f.write(line + "\n")
    return outcome


def _primary() -> bool:
    import jax

    return jax.process_index() == 0


def read_log(path: str | os.PathLike) -> list[dict]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def report(log: Sequence[Mapping]) -> tuple[str, bool]:
    """(text, all reproduced) of a ``make figures`` run's comparisons: "reproduced N of N", every
    mismatch by name, and the entries that had nothing stored to compare with."""
    last: dict[str, Mapping] = {}
    for rec in log:  # the last comparison of each entry (a point may be asked for twice)
        last[f"{rec['tier']}/{rec['entry']}"] = rec
    cmp = {k: r for k, r in last.items() if r["outcome"] != "new"}
    ok = [k for k, r in cmp.items() if r["outcome"] in ("bit", "tol")]
    bit = sum(r["outcome"] == "bit" for r in cmp.values())
    new = sorted(k for k, r in last.items() if r["outcome"] == "new")
    lines = [
        f"[qlib] results: reproduced {len(ok)} of {len(cmp)} stored entries ({bit} bit for bit, "
        f"{len(ok) - bit} within a relative {FLOAT_RTOL:g} on derived floats)"
    ]
    for k, r in sorted(cmp.items()):
        if r["outcome"] == "mismatch":
            lines.append(f"[qlib]   MISMATCH {k}: " + "; ".join(r["details"]))
    if new:
        lines.append(f"[qlib] results: {len(new)} new entries written (nothing stored to compare with)")
    return "\n".join(lines), len(ok) == len(cmp)


def prune(tier: str, keep: set[str]) -> list[str]:
    """Remove the entries of ``tier`` whose stem is not in ``keep`` (after a full ``make figures``:
    the entries no study asks for any more). Returns their names."""
    gone = []
    for e in entries(tier):
        if e.stem.name not in keep:
            for p in (e.npz, e.json):
                try:
                    p.unlink()
                except OSError:
                    pass
            gone.append(e.stem.name)
    return gone


def note(prefixes: Sequence[str] | None = None, tier: str = "default") -> str:
    """One line for a notebook's top: where its numbers come from (the stored entries whose name
    starts with one of ``prefixes``): how many, when, at which commit, their replica-steps and
    wall time as recorded, and the command that recomputes them."""
    recs = []
    for e in entries(tier):
        if prefixes is None or any(e.stem.name.startswith(p) for p in prefixes):
            try:
                recs.append(e.record())
            except (OSError, ValueError):
                continue
    cmd = "make figures" if tier == "default" else LONG_COMMAND
    if not recs:
        return f"No stored results in results/{tier}/: computing them (`{cmd}` stores them)."
    dates = sorted(r["date"][:10] for r in recs)
    commits = sorted({r["commit"][:9] for r in recs})
    wall = sum(r["wall_s"] / max(1, r.get("computed_together", 1)) for r in recs)
    steps = sum(r["replica_steps"] for r in recs)
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return (
        f"Drawn from results/{tier}/ ({len(recs)} entries, computed {when} at commit {', '.join(commits)}: "
        f"{steps:.3g} replica-steps, {wall / 60:.1f} min of wall time on "
        f"{recs[0]['machine'].get('cpu', '?')}); "
        f"`{cmd}` recomputes them and checks that they reproduce."
    )


def summary(tiers: Sequence[str] = TIERS) -> str:
    """One line per stored entry: tier, name, status, replica-steps, wall time, date, machine.
    The costs are the records', never typed."""
    lines = [
        f"{'tier':<8} {'entry':<48} {'status':<7} {'replica-steps':>13} {'wall s':>8} {'cpu s':>8}"
        "  date        cpu"
    ]
    tot: dict[str, float] = {}
    for tier in tiers:
        for e in entries(tier):
            try:
                r = e.record()
            except (OSError, ValueError):
                lines.append(f"{tier:<8} {e.stem.name:<48} unreadable")
                continue
            share = r["wall_s"] / max(1, r.get("computed_together", 1))
            tot[tier] = tot.get(tier, 0.0) + share
            lines.append(
                f"{tier:<8} {e.stem.name:<48} {status(e):<7} {r['replica_steps']:>13.3g} {r['wall_s']:>8.1f} "
                f"{r['cpu_s']:>8.1f}  {r['date'][:10]}  {r['machine'].get('cpu', '')} "
                f"({r['machine'].get('cores')} cores)"
            )
    for tier, s in tot.items():
        lines.append(
            f"{tier}: {s / 60:.1f} min of wall time (entries computed together share their batch's time)"
        )
    return "\n".join(lines)


__all__ = [
    "TIERS",
    "FLOAT_RTOL",
    "CHECKPOINT_STEPS",
    "Entry",
    "ResultsWarning",
    "entry",
    "entries",
    "entry_key",
    "read",
    "lookup",
    "note",
    "status",
    "stale_row_text",
    "row_status",
    "verify",
    "compare",
    "commit",
    "report",
    "prune",
    "summary",
    "checkpoint_hashes",
    "state_hash",
    "array_hash",
    "make_record",
    "machine",
]


# --------------------------------------------------------------------------- runs that write a tier


@contextlib.contextmanager
def writing(tier: str, command_line: str, *, prune_after: bool = False, out=print):
    """Make this process (and the notebook kernels it starts, through the environment) write
    ``tier``: every entry computed is compared with the stored one and written (see
    :func:`commit`). On exit, print the comparison (:func:`report`: "reproduced N of N" and
    every mismatch by name); with ``prune_after`` (a complete ``make figures``), remove the
    entries of the tier that this run did not produce. Yields the log path."""
    if root() is None:
        yield None
        return
    import tempfile
    import uuid

    fd, log = tempfile.mkstemp(prefix="qlib-results-", suffix=".jsonl")
    os.close(fd)
    env = {WRITE_ENV: tier, RUN_ENV: uuid.uuid4().hex, LOG_ENV: log, COMMAND_ENV: command_line}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    completed = False
    try:
        yield log
        completed = True
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        entries_log = read_log(log)
        text, _ = report(entries_log)
        out(text)
        if completed and prune_after and entries_log:
            gone = prune(tier, {r["entry"] for r in entries_log if r["tier"] == tier})
            if gone:
                out(
                    f"[qlib] results: removed {len(gone)} entries of results/{tier} that no study asks for: "
                    + ", ".join(gone)
                )
        try:
            os.unlink(log)
        except OSError:
            pass


STUDY_ENV = "QLIB_RESULTS_STUDY"  # the study a results-long job is running (for its record)


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


_PROGRESS: _Progress | None = None


def long_jobs(only: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(title, module) of the studies a long run runs (:data:`qlib.claims.STUDIES`), those whose
    title or module contains one of ``only``."""
    from qlib.claims import STUDIES

    jobs = [(t, m) for t, m in STUDIES.items() if not only or any(o in t or o in m for o in only)]
    if not jobs:
        raise ValueError(
            f"--only {list(only or [])} matches no study; the studies are {list(STUDIES.values())}"
        )
    return jobs


def estimate_work(modules: Sequence[str], scale: float) -> float:
    """The replica-steps a long run of these studies will take, estimated as ``scale`` times what
    their default-tier entries recorded (the studies multiply every full-mode run length by the
    scale; the points added at large scales make it an underestimate, which the rate corrects)."""
    total = 0.0
    for e in entries("default"):
        try:
            r = e.record()
        except (OSError, ValueError):
            continue
        if r.get("study") in modules or r.get("study") is None:
            total += float(r.get("replica_steps", 0))
    return scale * total


def run_long(jobs: Sequence[tuple[str, Any]], *, scale: float, mode: str = "full", out=print) -> None:
    """Run each study's ``run(mode)`` with the long tier written (entries stored one point at a
    time, atomically; a rerun skips every point the tiers already hold fresh), printing one
    progress line per stored entry. ``jobs``: (title, module name or callable)."""
    import importlib

    from qlib.config import SCALE_ENV

    global _PROGRESS
    modules = [m for _, m in jobs if isinstance(m, str)]
    os.environ[SCALE_ENV] = repr(float(scale))
    line = f"python -m qlib results-long --scale {scale:g}" + (f" ({mode} mode)" if mode != "full" else "")
    _PROGRESS = _Progress(estimate_work(modules, scale), out=out)
    try:
        with writing("long", line, out=out):
            for title, job in jobs:
                out(f"[qlib] results-long: {title}", flush=True)
                os.environ[STUDY_ENV] = job if isinstance(job, str) else title
                fn = importlib.import_module(job).run if isinstance(job, str) else job
                if isinstance(job, str):
                    fn(mode, progress=False)
                else:
                    fn()
    finally:
        os.environ.pop(STUDY_ENV, None)
        _PROGRESS = None


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
        env = dict(
            os.environ,
            JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
            QLIB_NUM_PROCESSES=str(processes),
            QLIB_PROCESS_ID=str(i),
        )
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
            bad = 0
            for tier in TIERS:
                for e in entries(tier):
                    problems = verify(e, recompute=True) + stale_reasons(
                        e.record() if e.json.exists() else {}
                    )
                    bad += bool(problems)
                    print(
                        f"{tier}/{e.stem.name}: {'; '.join(problems) if problems else 'verified'}", flush=True
                    )
            print(f"[qlib] results: {bad} entries fail verification")
            return 1 if bad else 0
        print(summary())
        return 0
    if a.processes < 1:
        raise ValueError(f"--processes must be an integer >= 1; got {a.processes}")
    if a.processes > 1 and not os.environ.get("QLIB_NUM_PROCESSES"):
        argv = (
            ["results-long", "--scale", repr(a.scale or 10.0)]
            + (["--only", *a.only] if a.only else [])
            + (["--smoke"] if a.smoke else [])
        )
        return _spawn_processes(argv, a.processes)
    run_long(
        long_jobs(a.only),
        scale=a.scale or 10.0,
        mode="smoke" if a.smoke else "full",
        out=lambda *x, **k: print(*x, **k) if _primary() else None,
    )
    return 0
