"""Replicas sharded over devices give the same numbers as one device, bit for bit.

The engine shards the replica axis over all JAX devices (a NamedSharding on a 1-D mesh). On CPU,
XLA_FLAGS=--xla_force_host_platform_device_count=K makes K host devices; each configuration
runs in a fresh subprocess, because the device count is fixed when JAX starts. Replica r's
stream is seeded from (seed, r), so its numbers must not depend on the number of replicas
(odd counts are padded to a multiple of the devices), nor on the number of devices.

Also here: the fused, software-pipelined step of ``_run_chunk`` against the plain composition
of ``_draw``, ``_level`` and ``_apply`` (the functions other code uses for coupled chains).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("tail_fraction", "max_length", "max_length_distribution", "counts", "batch_tail_fraction")

CHILD = r"""
import json, sys
import numpy as np
import jax
import qlib.supermarket as sm
out = {"devices": jax.device_count(), "runs": {}}
cases = {
    "R1": dict(replicas=1),
    "R3": dict(replicas=3),
    "R8": dict(replicas=8),
    "R3_burn_batches": dict(replicas=3, burn_in=500, batches=4),
    "R3_without_replacement": dict(replicas=3, replacement=False),
}
for name, kw in cases.items():
    r = sm.simulate(40, 3, 0.9, steps=4000, seed=5, levels=8, **kw)
    out["runs"][name] = {f: np.asarray(getattr(r, f)).tolist() for f in %(fields)r}
np.savez(sys.argv[1], **{f"{k}.{f}": np.asarray(v) for k, run in out["runs"].items() for f, v in run.items()})
print(json.dumps({"devices": out["devices"]}))
"""


def _run_child(devices: int, tmp_path: Path) -> tuple[int, dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("QLIB_HOST_DEVICES", "XLA_FLAGS")}
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    path = tmp_path / f"dev{devices}.npz"
    p = subprocess.run([sys.executable, "-c", CHILD % {"fields": FIELDS}, str(path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    info = json.loads(p.stdout.strip().splitlines()[-1])
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    return info["devices"], arrays


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sharding")
    return {k: _run_child(k, tmp) for k in (1, 2)}


def test_two_host_devices_are_really_two(runs):
    assert runs[1][0] == 1
    assert runs[2][0] == 2


def test_sharded_results_are_bit_identical_to_one_device(runs):
    one, two = runs[1][1], runs[2][1]
    assert one.keys() == two.keys() and len(one) == 5 * len(FIELDS)
    for k in one:
        np.testing.assert_array_equal(one[k], two[k], err_msg=k)


@pytest.mark.parametrize("devices", [1, 2])
def test_replica_result_does_not_depend_on_replica_count(runs, devices):
    a = runs[devices][1]
    for f in FIELDS:
        r1, r3, r8 = a[f"R1.{f}"], a[f"R3.{f}"], a[f"R8.{f}"]
        np.testing.assert_array_equal(r3, r8[:3], err_msg=f)
        np.testing.assert_array_equal(r1, r8[:1], err_msg=f)
    # and the replicas are really different streams
    assert not np.array_equal(a["R8.tail_fraction"][0], a["R8.tail_fraction"][1])


def test_fused_step_equals_draw_level_apply():
    """_run_chunk's pipelined uint32 step == the plain loop over _draw/_level/_apply (int64)."""
    import jax
    import jax.numpy as jnp

    from qlib import _rng
    from qlib.supermarket import engine

    n, d, lam, L, R, steps = 50, 3, 0.9, 6, 5, 3000
    with jax.enable_x64(True):
        c = engine._consts(n, d, lam)
        u0 = np.zeros((L + 1, R), np.int64)
        u0[0] = n
        u0[1:4] = [[30, 20, 45, 10, 0], [10, 5, 30, 0, 0], [2, 5, 1, 0, 0]]  # non-increasing columns
        carry = {"rng": _rng.replica_states(3, jnp.arange(R)), "u": jnp.asarray(u0),
                 "overflow": jnp.zeros(R, bool)}
        out = engine._run_chunk(carry, jnp.int64(steps), c, replacement=True, accumulate=True)

        rng, u = carry["rng"], jnp.asarray(u0)
        sum_u = np.zeros_like(u0)
        sum_busy = np.zeros_like(u0)
        overflow = np.zeros(R, bool)

        @jax.jit
        def step(rng, u):
            rng, arrival, lo = engine._draw(rng, c)
            level = engine._level(u, arrival, lo, c, True)
            return rng, engine._apply(u, arrival, level), arrival & (level == L)

        for _ in range(steps):
            rng, u, top = step(rng, u)
            overflow |= np.asarray(top)
            un = np.asarray(u)
            sum_u += un
            sum_busy += un > 0
        np.testing.assert_array_equal(np.asarray(out["u"]), np.asarray(u))
        assert out["u"].dtype == jnp.int64
        np.testing.assert_array_equal(np.asarray(out["rng"]), np.asarray(rng))
        np.testing.assert_array_equal(np.asarray(out["sum_u"]), sum_u)
        np.testing.assert_array_equal(np.asarray(out["sum_busy"]), sum_busy)
        np.testing.assert_array_equal(np.asarray(out["overflow"]), overflow)
        assert np.all(np.diff(np.asarray(u), axis=0) <= 0)  # the state stayed a valid count vector
