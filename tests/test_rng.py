"""The counter-based SplitMix64 streams of qlib._rng: block draws, skips and the host copy of the
seeding are the same bits as one draw after another."""

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _rng


def test_block_words_skip_and_host_seeding_are_the_same_stream():
    with jax.enable_x64(True):
        for seed in (0, 1, 7, 2**63 - 1, 12345678901234):
            s = _rng.replica_states(seed, jnp.arange(300))
            np.testing.assert_array_equal(np.asarray(s), _rng.replica_states_np(seed, np.arange(300)))
        block = _rng.block_words(s, 5)  # (5, 300)
        st = s
        for k in range(5):
            st, w = _rng.next_u64(st)
            np.testing.assert_array_equal(np.asarray(block[k]), np.asarray(w))
        np.testing.assert_array_equal(np.asarray(_rng.advance(s, 5)), np.asarray(st))
        # distinct replicas, distinct seeds: distinct streams
        assert len(np.unique(np.asarray(s))) == 300
        one, two = _rng.replica_states_np(1, np.arange(4)), _rng.replica_states_np(2, np.arange(4))
        assert not np.array_equal(one, two)
