"""qlib._xla (issue 20, item 5): importing qlib sets no XLA flag; configure_xla() does, keeps
what XLA_FLAGS already says, and refuses (with a warning) once JAX has started."""

import os
import subprocess
import sys

from qlib import _xla


def _child(code: str, **env: str) -> str:
    e = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "QLIB_HOST_DEVICES")}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=e)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_import_sets_no_flags():
    assert _child("import os, qlib, qlib.supermarket; print(repr(os.environ.get('XLA_FLAGS')))") == "None"


def test_configure_xla_sets_both_flags_before_jax_starts():
    out = _child("import qlib, jax; print(qlib.configure_xla()); print(jax.device_count())",
                 QLIB_HOST_DEVICES="3")
    flags, devices = out.splitlines()
    assert "--xla_force_host_platform_device_count=3" in flags
    assert "xla_cpu_small_while_loop_byte_threshold=65536" in flags
    assert devices == "3"


def test_flags_keep_what_is_set():
    f = _xla.flags("--xla_force_host_platform_device_count=5 --xla_backend_extra_options=a=1")
    assert f.count("device_count") == 1 and "device_count=5" in f
    assert "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=65536,a=1" in f
    opt = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=7"
    assert _xla.flags(opt, host_devices=False, wide_vectors=False) == opt
    assert _xla.flags("--xla_cpu_prefer_vector_width=256", host_devices=False, small_loops=False,
                      wide_vectors=True) == "--xla_cpu_prefer_vector_width=256"


def test_wide_vectors_only_where_the_cpu_has_them():
    assert _xla.flags("", host_devices=False, small_loops=False, wide_vectors=True) == \
        "--xla_cpu_prefer_vector_width=512"
    assert _xla.flags("", host_devices=False, small_loops=False, wide_vectors=False) == ""
    default = _xla.flags("", host_devices=False, small_loops=False)
    assert ("prefer_vector_width=512" in default) == _xla.wide_vectors_supported()


# Both sampling rules, a near wrong model, the bounded model and the heterogeneous chain: the
# arrays and final random states, hashed. The vector width is a speed flag only: same bits.
_STREAMS = """
import hashlib, numpy as np, qlib, qlib.supermarket as sm, qlib.heterogeneous as het
qlib.configure_xla(small_loops=True, wide_vectors=False)
h = hashlib.sha256()
def add(*arrays):
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
for kw in (dict(), dict(replacement=False), dict(variant=("eta_greedy", 0.1)), dict(variant="tie_longer"),
           dict(capacity=3)):
    r = sm.simulate(200, 5, 0.9, steps=20_000, burn_in=1000, replicas=33, seed=4, progress=False, **kw)
    add(r.tail_fraction, r.counts, r.state, r.max_length_distribution)
r = sm.simulate(500, 3, 0.95, steps=300, replicas=1, seed=2, record_every=3, progress=False)
add(r.trajectory, r.state)
r = het.simulate(2.0, [1.0, 2.0, 0.5], steps=20_000, replicas=9, seed=3, progress=False)
add(*[v for v in vars(r).values() if isinstance(v, np.ndarray)])
print(h.hexdigest())
"""


def test_vector_width_changes_no_number():
    narrow = _child(_STREAMS, XLA_FLAGS="--xla_cpu_prefer_vector_width=256", QLIB_HOST_DEVICES="2")
    wide = _child(_STREAMS, XLA_FLAGS="--xla_cpu_prefer_vector_width=512", QLIB_HOST_DEVICES="2")
    assert narrow == wide


def test_too_late_warns_and_changes_nothing():
    code = ("import os, warnings, jax, qlib; jax.numpy.zeros(1).block_until_ready()\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always'); qlib.configure_xla()\n"
            "print(len(w), repr(os.environ.get('XLA_FLAGS')))")
    assert _child(code, QLIB_HOST_DEVICES="2") == "1 None"


def test_first_use_applies_the_flags_when_jax_has_not_started():
    # a script that never calls configure_xla(): the chain's driver applies the flags on first use
    run = "import os, jax, qlib.supermarket as sm; sm.simulate(20, 2, 0.5, steps=50, progress=False)\n"
    show = "print(repr(os.environ.get('XLA_FLAGS')), jax.device_count())"
    flags, devices = _child(run + show, QLIB_HOST_DEVICES="2").rsplit(" ", 1)
    assert "xla_cpu_small_while_loop_byte_threshold=65536" in flags and devices == "2"
    # not when JAX has already started (nothing changes, no warning), nor with QLIB_AUTO_XLA=0
    started = "import jax; jax.numpy.zeros(1).block_until_ready()\n"
    assert _child(started + run + show, QLIB_HOST_DEVICES="2") == "None 1"
    assert _child(run + show, QLIB_HOST_DEVICES="2", QLIB_AUTO_XLA="0") == "None 1"
