"""Lanes split over devices give the same numbers as one device, bit for bit.

The chain kernel splits the lane axis over all JAX devices (shard_map on a 1-D mesh, no
communication inside a chunk). On CPU, XLA_FLAGS=--xla_force_host_platform_device_count=K
makes K host devices; each count runs in a fresh subprocess, because the device count is fixed
when JAX starts, or in the test's own process when it has K devices (the ``run_on_devices``
fixture of conftest.py). Replica r's stream is seeded
from (seed, r), so its numbers must not depend on the number of replicas (odd counts are
padded to a multiple of the devices with inactive lanes), on the other points of a grid, nor
on the number of devices.
"""

from __future__ import annotations

import numpy as np

FIELDS = ("tail_fraction", "max_length", "max_length_distribution", "counts", "batch_tail_fraction", "state")

CHILD = """
import qlib.supermarket as sm
fields = %(fields)r
cases = {
    "R1": dict(replicas=1),
    "R3": dict(replicas=3),
    "R8": dict(replicas=8),
    "R3_burn_batches": dict(replicas=3, burn_in=500, batches=4),
    "R3_without_replacement": dict(replicas=3, replacement=False),
}
out = {}
for name, kw in cases.items():
    r = sm.simulate(40, 3, 0.9, steps=4000, seed=5, levels=8, **kw)
    out.update({f"{name}.{f}": getattr(r, f) for f in fields})
many = sm.simulate_many([(40, 3, 0.9), (25, 2, 0.8), (60, 5, 0.95)], steps=[4000, 1500, 2500], replicas=3,
                        seeds=[5, 6, 7], burn_in=[0, 300, 100], levels=8)
for j, r in enumerate(many):
    out.update({f"many{j}.{f}": getattr(r, f) for f in fields})
out["meet"] = sm.meeting_times(30, 3, 0.9, replicas=5, seed=7, top_length=4, max_steps=3000)
out["paths"] = sm.coupled_paths(30, 3, 0.9, ["empty", sm.counts_all_at(30, 4)], steps=300, replicas=3,
                                seed=7, record_every=10).counts
"""


def test_one_and_two_devices_give_the_same_bits(run_on_devices):
    one = run_on_devices(1, CHILD % {"fields": FIELDS})
    two = run_on_devices(2, CHILD % {"fields": FIELDS})
    assert one.keys() == two.keys() and len(one) == 8 * len(FIELDS) + 2
    for k in one:
        np.testing.assert_array_equal(one[k], two[k], err_msg=k)
    for a in (one, two):
        for f in FIELDS:
            r1, r3, r8 = a[f"R1.{f}"], a[f"R3.{f}"], a[f"R8.{f}"]
            # a replica does not depend on how many replicas run ...
            np.testing.assert_array_equal(r3, r8[:3], err_msg=f)
            np.testing.assert_array_equal(r1, r8[:1], err_msg=f)
            # ... nor on the other points of a grid (same seed, steps, burn-in as R3)
            np.testing.assert_array_equal(a[f"many0.{f}"], r3, err_msg=f)
        # and the replicas are really different streams
        assert not np.array_equal(a["R8.tail_fraction"][0], a["R8.tail_fraction"][1])
