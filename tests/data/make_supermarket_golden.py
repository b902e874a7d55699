"""Write tests/data/supermarket_golden.npz: outputs of the public API at fixed seeds.

The file holds the streams of issue 13 (two 64-bit words per step). Phase 1 of issue 12 used
the same script against commit 85b3b95 to show that the refactored kernel reproduced the old
streams bit for bit (83 arrays); the streams then changed on purpose (issue 13).

The cases cover every path of the chain kernel (R = 1, 3, 64; burn-in; batches; record_every;
level growth; sampling without replacement; n = 2^32 - 1; d = 1; per-replica starts; meeting
times ordered and unordered; coupled paths). tests/test_supermarket_golden.py reruns them and
compares bit for bit, so a refactor of the kernel cannot change a number unnoticed.

Run with the qlib to take as the reference first on the path:
``PYTHONPATH=<checkout> python tests/data/make_supermarket_golden.py [out.npz]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import qlib  # noqa: E402

qlib.configure_xla()  # before JAX: host devices, small loops
import qlib.supermarket as sm  # noqa: E402
from qlib.supermarket import coupling as C  # noqa: E402

FIELDS = ("tail_fraction", "max_length", "max_length_distribution", "counts", "batch_tail_fraction",
          "trajectory")

N32 = 2**32 - 1


def simulate_cases() -> dict:
    mid = np.array([[30, 20, 9, 3, 0], [30, 25, 10, 0, 0], [30, 5, 5, 5, 1]])
    return {
        "R1": ((1000, 10, 0.95), dict(steps=20_000, replicas=1, seed=3)),
        "R3_burn_batches_record": ((40, 3, 0.9), dict(steps=8_000, replicas=3, seed=5, burn_in=500, batches=4,
                                                      record_every=1000)),
        "R64": ((1000, 10, 0.95), dict(steps=3_000, replicas=64, seed=1)),
        "growth": ((10, 2, 0.95), dict(steps=30_000, replicas=4, seed=2, levels=2)),
        "no_replacement": ((40, 3, 0.9), dict(steps=6_000, replicas=3, seed=5, replacement=False, levels=8)),
        "no_replacement_growth": ((12, 4, 0.97), dict(steps=20_000, replicas=2, seed=9, replacement=False,
                                                      levels=2, batches=3)),
        "n_max": ((N32, 5, 0.9), dict(steps=20_000, replicas=2, seed=4, initial="fluid")),
        "n_max_no_replacement": ((N32, 3, 0.8), dict(steps=5_000, replicas=2, seed=4, initial="fluid",
                                                     replacement=False)),
        "d1_fluid": ((50, 1, 0.7), dict(steps=10_000, replicas=3, seed=3, initial="fluid", burn_in=100)),
        "per_replica_start": ((30, 2, 0.8), dict(steps=4_000, replicas=3, seed=8, initial={"counts": mid},
                                                 record_every=400, batches=2)),
        "huge_n": ((10**9, 100, 0.999), dict(steps=50_000, replicas=2, seed=1, initial="fluid")),
        "R5_record_every_1": ((25, 2, 0.9), dict(steps=300, replicas=5, seed=8, record_every=1, levels=12)),
    }


def meeting_cases() -> dict:
    return {
        "ordered": ((30, 3, 0.9), dict(replicas=16, seed=7, top_length=4, max_steps=3000, levels=14)),
        "ordered_growth": ((30, 3, 0.9), dict(replicas=4, seed=7, top_length=4, max_steps=3000, levels=5)),
        "ordered_no_replacement": ((2, 2, 0.6), dict(replicas=50, seed=3, top_length=3, max_steps=10**5,
                                                     replacement=False)),
        "unordered": ((40, 3, 0.9), dict(replicas=6, seed=2, top_length=3, max_steps=20_000, ordered=False,
                                         bottom="fluid", top=np.array([40, 30, 20, 10]))),
        "not_met": ((30, 3, 0.9), dict(replicas=4, seed=7, top_length=4, max_steps=10)),
    }


def paths_cases() -> dict:
    rows = np.array([[30, 22, 11, 4, 1], [30, 30, 3, 0, 0]])
    return {
        "three_starts": ((30, 3, 0.9), dict(starts=["empty", {"counts": rows}, sm.counts_all_at(30, 4)],
                                            steps=600, replicas=2, seed=7, record_every=10, levels=14)),
        "growth": ((10, 2, 0.95), dict(starts=["empty", sm.counts_all_at(10, 1)], steps=3000, replicas=3,
                                       seed=1, record_every=100, levels=2)),
        "no_replacement": ((6, 3, 0.8), dict(starts=["empty", sm.counts_all_at(6, 3)], steps=500, replicas=4,
                                             seed=2, record_every=5, replacement=False)),
    }


def generate() -> dict[str, np.ndarray]:
    out = {}
    for name, (p, kw) in simulate_cases().items():
        r = sm.simulate(*p, **kw)
        for f in FIELDS:
            v = getattr(r, f)
            if v is not None:
                out[f"simulate.{name}.{f}"] = np.asarray(v)
        out[f"simulate.{name}.levels"] = np.asarray(r.levels)
    for name, (p, kw) in meeting_cases().items():
        out[f"meeting.{name}"] = C.meeting_times(*p, **kw)
    for name, (p, kw) in paths_cases().items():
        kw = dict(kw)
        starts = kw.pop("starts")
        out[f"paths.{name}"] = C.coupled_paths(*p, starts, **kw).counts
    return out


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("supermarket_golden.npz")
    arrays = generate()
    np.savez_compressed(path, **arrays)
    print(f"wrote {len(arrays)} arrays to {path} ({path.stat().st_size} bytes)")
