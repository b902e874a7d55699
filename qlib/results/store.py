"""Where stored entries live, how their files are hashed and written, and their record.

The constants of :mod:`qlib.results` and the names of the environment variables that carry its
part of the run's configuration (:class:`qlib.config.RunConfig` reads them), the :class:`Entry` of a tier,
deterministic .npz bytes and atomic writes, and :func:`make_record` (the provenance of an entry).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

import qlib
from qlib.config import ROOT, RunConfig, current
from qlib.results.environment import lock_hash
from qlib.results.pins import record_fields
from qlib.supermarket import chain

TIERS = ("default", "long")
#: Relative tolerance (to the largest magnitude of the array) of a recomputed float array.
FLOAT_RTOL = 1e-12
#: Steps of replica 0 recomputed by a checkpoint (a second or two, compile included).
CHECKPOINT_STEPS = 2**16
RESULTS_DIR_ENV = RunConfig.ENV["results_dir"]  # the results folder ("off": none is read or written)
WRITE_ENV = RunConfig.ENV["write_tier"]  # the tier a run writes: "default" (make figures) or "long"
RUN_ENV = RunConfig.ENV["run_id"]  # the id of that run: an entry computed in it is not computed again
LOG_ENV = RunConfig.ENV["log"]  # JSON lines: one comparison per written entry
COMMAND_ENV = RunConfig.ENV["command"]  # the command that recomputes the tier, for the record
LONG_COMMAND = "make results-long"
STUDY_ENV = RunConfig.ENV["study"]  # the study a results-long job is running (for its record)


class ResultsWarning(UserWarning):
    """A stored result does not match the code or its record, and is not used."""


# --------------------------------------------------------------------------- where


def root() -> Path | None:
    """The results folder: ``$QLIB_RESULTS_DIR`` or ``results/`` at the repository root (None if "off")."""
    raw = current().results_dir
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
    t = current().write_tier
    if t and t not in TIERS:
        raise ValueError(f"{WRITE_ENV} must be one of {TIERS}; got {t!r}")
    return t or None


def run_id() -> str | None:
    return current().run_id


def entry_key(name: str, params: Mapping, seed: Any) -> str:
    """NAME-HASH of (name, params, seed): the same for any code version (the record holds those)."""
    blob = json.dumps({"name": name, "params": jsonable(params), "seed": jsonable(seed)}, sort_keys=True)
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


def jsonable(x: Any) -> Any:
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


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
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


def record_text(record: Mapping) -> str:
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def atomic_write(path: Path, write: Callable[[Any], None], binary: bool) -> None:
    """Write ``path`` through a temporary file in its folder renamed over it (``os.replace`` is
    atomic): a reader sees the old file or the whole new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_bytes(path: Path, data: bytes) -> None:
    def write(f):
        f.write(data)
        os.fchmod(f.fileno(), 0o644)  # a file of the repository, not a private temporary

    atomic_write(path, write, binary=True)


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
        devs = jax.devices()
        out["devices"] = f"{len(devs)} x {devs[0].device_kind}"
    except Exception:  # noqa: BLE001 (no device information: still a record)
        pass
    return out


def code_versions() -> dict[str, str]:
    """What a cached number depends on besides its parameters: the code (qlib's version and the
    version of the random streams), jax and numpy (a sweep-cache key hashes them)."""
    return {"qlib": qlib.__version__, "streams": str(chain.STREAM_VERSION), "jax": jax.__version__,
            "numpy": np.__version__}


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict:
    """:func:`code_versions` and Python's: what a stored record names."""
    return code_versions() | {"python": platform.python_version()}


def command() -> str:
    return current().command or " ".join(
        ["python"] + [os.path.basename(sys.argv[0])] + sys.argv[1:]
    )


def make_record(
    tier: str, name: str, params: Mapping, seed: Any, arrays: Mapping[str, np.ndarray], provenance: Mapping
) -> dict:
    """The record of an entry. ``provenance`` (from :func:`qlib.results.cache.recording`): wall_s, cpu_s,
    computed_together, simulations (chains), checkpoint. ``commit`` and ``code_commit`` are the
    commit the run started from; ``code_diff``, ``criteria_file``, ``criteria_commit``: see
    :mod:`qlib.results.pins`."""
    sims = list(provenance.get("simulations", []))
    study = current().study or provenance.get("study")
    # the code as it was when the run started, not HEAD now (qlib.results.pins)
    pins = record_fields(study)
    rec = {
        "name": name,
        "params": jsonable(params),
        "seed": jsonable(seed),
        "key": entry_key(name, params, seed),
        "tier": tier,
        "command": command(),
        "commit": pins["code_commit"],
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": versions(),
        "lock": lock_hash(),
        "machine": machine(),
        "wall_s": round(float(provenance.get("wall_s", 0.0)), 3),
        "cpu_s": round(float(provenance.get("cpu_s", 0.0)), 3),
        "computed_together": int(provenance.get("computed_together", 1)),
        "study": study,
        **pins,
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
        "npz_sha256": hashlib.sha256(npz_bytes(arrays)).hexdigest()[:16],
    }
    rec = jsonable(rec)
    return rec | {"record_sha256": self_hash(rec)}


def self_hash(rec: Mapping) -> str:
    """sha256 of the record's canonical text without this field: an edited record fails it."""
    body = {k: v for k, v in rec.items() if k != "record_sha256"}
    return hashlib.sha256(record_text(body).encode()).hexdigest()[:16]
