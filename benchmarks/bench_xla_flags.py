"""What ``qlib.configure_xla()`` buys: chain throughput with and without each of its XLA flags.

Each configuration runs in a fresh process (XLA reads its flags once, when JAX starts):
no flags; one host device per core only; the small-while-loop threshold only; 512-bit vectors
only (on a CPU with AVX-512); all of them (what ``configure_xla()`` sets). Instance: n = 1000,
d = 10, lam = 0.95 from empty, R = 1 and 64 replicas; replica-steps per second, median of 3 timed
calls after a compile call.

Usage: ``python benchmarks/bench_xla_flags.py`` (about a minute); prints a markdown table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import qlib, qlib.supermarket as sm
R, steps = int(sys.argv[1]), int(sys.argv[2])
sm.simulate(1000, 10, 0.95, steps=steps, replicas=R, seed=0)  # compile
ts = []
for _ in range(3):
    t0 = time.perf_counter()
    sm.simulate(1000, 10, 0.95, steps=steps, replicas=R, seed=0)
    ts.append(time.perf_counter() - t0)
ts.sort()
import jax
print(json.dumps({"rate": R * steps / ts[1], "devices": jax.device_count()}))
"""


def flags(devices: bool, small_loops: bool, wide: bool) -> str:
    from qlib import _xla

    return _xla.flags("", host_devices=devices, small_loops=small_loops, wide_vectors=wide)


def measure(R: int, steps: int, xla_flags: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "QLIB_HOST_DEVICES")}
    # QLIB_AUTO_XLA=0: exactly these flags (else qlib's first use would add the missing ones)
    env.update(XLA_FLAGS=xla_flags, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT), QLIB_AUTO_XLA="0")
    out = subprocess.run([sys.executable, "-c", CHILD, str(R), str(steps)], env=env, capture_output=True,
                         text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from qlib import _xla

    wide = _xla.wide_vectors_supported()
    configs = [("none", False, False, False), ("host devices only", True, False, False),
               ("small loops only", False, True, False)]
    if wide:
        configs.append(("512-bit vectors only", False, False, True))
    configs.append(("all (configure_xla)", True, True, wide))
    rows = []
    for name, dev, small, vec in configs:
        f = flags(dev, small, vec)
        r1 = measure(1, 2_000_000, f)
        r64 = measure(64, 200_000, f)
        rows.append((name, f or "(none)", r1, r64))
    print(f"load average at the end: {os.getloadavg()}")
    print("| XLA flags | XLA_FLAGS | R = 1 (M replica-steps/s) | R = 64 (M replica-steps/s) | devices |")
    print("|---|---|---|---|---|")
    for name, f, r1, r64 in rows:
        print(f"| {name} | `{f}` | {r1['rate'] / 1e6:.1f} | {r64['rate'] / 1e6:.1f} | {r64['devices']} |")


if __name__ == "__main__":
    main()
