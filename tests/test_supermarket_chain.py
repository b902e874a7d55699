"""The chain kernel (qlib.supermarket.chain): the fast block-drawn kernel against the plain step,
bit for bit; the level-cap rule; the public API against golden outputs.

The plain step (draw one word, sum the hits for the level, one-hot update) is the definition
of the chain. The fast kernel draws a block of steps at once and updates groups of lanes with
the prefix-mask form; any difference in a count, a random state, an overflow flag or a time
sum is a bug, so every comparison here is exact. The exact-oracle tests of
test_supermarket_simulation.py and test_supermarket_coupling.py check that this chain is the
supermarket model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from qlib import _rng
from qlib.supermarket import chain as K

DATA = Path(__file__).resolve().parent / "data"


def _plain_run(u0, rng0, params, steps, active, replacement):
    """``steps`` plain steps of the active lanes; returns (u, rng, overflow, sum_u, sum_busy)."""
    with jax.enable_x64(True):
        p = K.LaneParams(*(jnp.asarray(a) for a in params))
        act = jnp.asarray(active)

        @jax.jit
        def run(u, rng):
            def body(_, c):
                st, su, sb = c
                new, _ = K.step(st, p, replacement)
                # an inactive lane does not move (nor does its random state)
                new = K.ChainState(jnp.where(act, new.rng, st.rng), jnp.where(act[None, None], new.u, st.u),
                                   jnp.where(act, new.overflow, st.overflow))
                return new, su + new.u[0].astype(jnp.int64), sb + (new.u[0] > 0).astype(jnp.int64)

            st = K.ChainState(rng, u, jnp.zeros(rng.shape, bool))
            z = jnp.zeros(u.shape[1:], jnp.int64)
            return jax.lax.fori_loop(0, steps, body, (st, z, z))

        st, su, sb = run(jnp.asarray(u0), jnp.asarray(rng0))
        return tuple(np.asarray(a) for a in (st.u, st.rng, st.overflow, su, sb))


def _lanes(chains: int, replacement: bool):
    """Two parameter points x 8 lanes, non-trivial starting counts, one lane inactive."""
    points = [(50, 3, 0.9), (17, 2, 0.7)]
    params = K.lane_params(points, [8, 8])
    L = 6
    u0 = np.zeros((chains, L + 1, 16), np.uint32)
    u0[:, 0, :8], u0[:, 0, 8:] = 50, 17
    u0[0, 1:4, :5] = [[30, 20, 45, 10, 0], [10, 5, 30, 0, 0], [2, 5, 1, 0, 0]]
    u0[0, 1:3, 8:13] = [[17, 9, 3, 0, 12], [4, 1, 0, 0, 5]]
    if chains == 2:
        u0[1] = np.maximum(u0[0], u0[0, :1] * (np.arange(L + 1)[:, None] <= 2))  # an upper chain
    with jax.enable_x64(True):
        rng0 = np.asarray(_rng.replica_states(3, jnp.arange(16))).astype(np.uint64)
    active = np.ones(16, bool)
    active[7] = False
    return u0, rng0, params, active


@pytest.mark.parametrize("loop_bytes", [1024, 10**6])  # groups of 1-2 lanes, and all lanes at once
@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("chains", [1, 2])
def test_fast_kernel_equals_plain_step(chains, replacement, loop_bytes, monkeypatch):
    monkeypatch.setattr(K, "small_loop_bytes", lambda: loop_bytes)
    u0, rng0, params, active = _lanes(chains, replacement)
    steps = 3000  # > one block at these widths, and not a multiple of one
    drv = K.ChainDriver(u0, rng0, params, replacement=replacement, levels=6, progress=False, total=steps,
                        desc="test")
    out = drv.run(1234, observe="sums", active=drv.mask(active))
    out2 = drv.run(steps - 1234, observe="sums", active=drv.mask(active))
    u, rng, ovf, su, sb = _plain_run(u0, rng0, params, steps, active, replacement)
    assert not ovf.any() and drv.levels == 6  # no growth here: the cap was high enough
    np.testing.assert_array_equal(drv.counts(), u)
    np.testing.assert_array_equal(drv.rng(), rng)
    np.testing.assert_array_equal(drv.lanes_of(out["sum_u"] + out2["sum_u"]), su)
    np.testing.assert_array_equal(drv.lanes_of(out["sum_busy"] + out2["sum_busy"]), sb)
    assert np.all(np.diff(u.astype(np.int64), axis=1) <= 0)  # the state stayed a valid count vector
    assert rng[7] == rng0[7] and np.array_equal(u[..., 7], u0[..., 7])  # the inactive lane did not move
    g = K.group_width(drv.per_device, 6, chains, "sums", replacement)
    assert (g == drv.per_device) if loop_bytes > 10**5 else (g <= 2)


def test_draw_block_rows_are_successive_draws():
    with jax.enable_x64(True):
        p = K.LaneParams(*(jnp.asarray(a) for a in K.lane_params([(1000, 10, 0.95), (2**32 - 1, 2, 0.5)], [2, 1])))
        rng = _rng.replica_states(7, jnp.arange(3))
        for replacement in (True, False):
            block = K.draw_block(rng, p, 9, replacement)
            r = rng
            for k in range(9):
                r, ev = K.draw(r, p, replacement)
                for a, b in zip(ev, (x[k] if x is not None else None for x in block)):
                    if a is not None:
                        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            np.testing.assert_array_equal(np.asarray(r), np.asarray(_rng.advance(rng, 18)))  # two words a step


def test_level_cap_rule():
    assert [K.grown(L) for L in (2, 4, 8, 9, 20)] == [6, 8, 12, 13, 30]
    assert K.final_levels(5, 3) == 5 and K.final_levels(5, 5) == 5
    assert K.final_levels(5, 6) == 9 and K.final_levels(5, 10) == 13 and K.final_levels(2, 7) == 10


def test_overflow_grows_the_cap_and_reruns_the_chunk():
    # n = 10, lam = 0.95 from empty with a cap of 2: queues pass length 2 almost at once
    _, rng0, _, _ = _lanes(1, True)
    params = K.lane_params([(10, 2, 0.95)], [16])
    u0 = np.zeros((1, 2, 16), np.uint32)
    u0[0, 0] = 10
    small = K.ChainDriver(u0, rng0, params, replacement=True, levels=2, progress=False, total=1, desc="t")
    big = K.ChainDriver(u0, rng0, params, replacement=True, levels=30, progress=False, total=1, desc="t")
    a = small.run(5000, observe="sums")
    b = big.run(5000, observe="sums")
    assert small.levels > 2
    w = small.levels + 1
    np.testing.assert_array_equal(small.counts(), big.counts()[:, :w])
    np.testing.assert_array_equal(small.lanes_of(a["sum_u"]), big.lanes_of(b["sum_u"])[:w])
    assert np.all(big.counts()[:, w:] == 0)
    assert K.final_levels(2, int(small.peak().max())) == small.levels


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's small-loop path")
def test_sequential_loop_compiles_to_one_kernel():
    # The speed at few replicas rests on XLA:CPU compiling the per-group step loop into one
    # kernel; a jax upgrade that changes the cost model would show here first.
    u0, rng0, params, active = _lanes(1, True)
    drv = K.ChainDriver(u0, rng0, params, replacement=True, levels=6, progress=False, total=1, desc="t")
    G = drv.per_device
    g = K.group_width(G, 6, 1, "sums", True)
    fn = K._advance_fn(drv.devices, (2, 2), True, "sums", K.block_length(g, True), g, 0, False)
    with jax.enable_x64(True):
        obs = (jnp.zeros((7, drv.width), jnp.int64), jnp.zeros((7, drv.width), jnp.int32))
        hlo = fn.lower(drv.state, obs, drv.params, drv.active, jnp.int64(0), jnp.int64(100)).compile().as_text()
    assert "xla_cpu_small_call" in hlo


def test_public_api_matches_golden_outputs():
    """simulate, meeting_times and coupled_paths reproduce tests/data/supermarket_golden.npz bit
    for bit (83 arrays over R = 1, 3, 64, burn-in, batches, trajectories, level growth, no
    replacement, n = 2^32 - 1, d = 1, per-replica starts, ordered/unordered meetings, paths).

    A change of any number here is a change of the streams: regenerate the file on purpose
    (tests/data/make_supermarket_golden.py) and say so (benchmarks/README.md)."""
    sys.path.insert(0, str(DATA))
    try:
        import make_supermarket_golden as G
    finally:
        sys.path.remove(str(DATA))
    ref = np.load(DATA / "supermarket_golden.npz")
    new = G.generate()
    assert set(new) == set(ref.files)
    for k in ref.files:
        assert new[k].dtype == ref[k].dtype, k
        np.testing.assert_array_equal(new[k], ref[k], err_msg=k)
