"""The event map's AVX2 forms (issue 48) give the bits of its plain forms, word for word.

On a CPU without AVX-512 the event map is traced with frexp from the bits, float -> int64 by
adding 2^52, and the departure rank's n masked to 32 bits (qlib.supermarket.events.avx2_forms);
elsewhere as before. Both are run here on the same words, including the edges of every branch
(U near 0, near 1, exactly 1 after rounding; z at -ln 2 and -2^-26; x clipped at n - 1), and
must agree exactly, so the streams do not depend on the CPU's instruction set.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from qlib import _xla
from qlib.supermarket import events as E

TWO64 = 2**64


def _words(count: int = 200_000) -> np.ndarray:
    rng = np.random.default_rng(48)
    w = rng.integers(0, TWO64, size=count, dtype=np.uint64, endpoint=False)
    edges = [0, 1, 2, 3, 2**11 - 1, 2**11, 2**53, 2**63 - 1, 2**63, 2**63 + 1, E._NEAR_ONE - 1, E._NEAR_ONE,
             TWO64 - 2**11 - 1, TWO64 - 2**11, TWO64 - 2, TWO64 - 1]
    small = [2**k + j for k in range(64) for j in (-1, 0, 1) if 0 <= 2**k + j < TWO64]
    return np.concatenate([w, np.array(edges + small, dtype=np.uint64)])


def _run(forms: bool, w, n, d):
    with jax.enable_x64(True):
        old = E.avx2_forms
        E.avx2_forms = lambda: forms
        try:
            f = jax.jit(lambda w, n, d: (E.uniform_log(w), E.join_threshold(E.uniform_log(w), n, d),
                                         E.departure_rank(w, n)))
            return [np.asarray(a) for a in f(jnp.asarray(w), jnp.asarray(n), jnp.asarray(d))]
        finally:
            E.avx2_forms = old


@pytest.mark.parametrize("n, d", [(1, 1.0), (2, 1.0), (1000, 10.0), (30_000, 61.0), (200_000, 428.0),
                                  (2**32 - 1, 2.0), (5, 1e6)])
def test_avx2_forms_give_the_same_bits(n, d):
    w = _words()
    nn = np.full(w.shape, n, np.uint64)
    dd = np.full(w.shape, d, np.float64)
    plain, avx2 = _run(False, w, nn, dd), _run(True, w, nn, dd)
    for a, b in zip(plain, avx2):
        assert a.dtype == b.dtype
        assert np.array_equal(a.view(np.uint64) if a.dtype == np.float64 else a,
                              b.view(np.uint64) if b.dtype == np.float64 else b)


def test_frexp_from_bits_is_frexp():
    with jax.enable_x64(True):
        u = (jnp.asarray(_words()).astype(jnp.float64) + 0.5) * 2.0**-64
        m0, e0 = jnp.frexp(u)
        m1, e1 = E._frexp_positive(u)
        assert np.array_equal(np.asarray(m0), np.asarray(m1))
        assert np.array_equal(np.asarray(e0).astype(np.float64), np.asarray(e1))
        x = jnp.asarray(np.array([0.0, -0.0, 1.0, 2.0**32 - 1, 2.0**52 - 1, 12345.0]))
        assert np.array_equal(np.asarray(E._small_int(x)), np.asarray(x.astype(jnp.int64)))


def test_an_isa_cap_below_avx512_turns_off_wide_vectors(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX2")
    assert _xla.isa_capped() and not _xla.wide_vectors_supported()
    assert "prefer_vector_width" not in _xla.flags(host_devices=False, small_loops=False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX512_CORE")
    assert not _xla.isa_capped()
    monkeypatch.setenv("XLA_FLAGS", "")
    assert not _xla.isa_capped()
