"""Fuzz test of the public API of qlib.supermarket and qlib.heterogeneous (issue 13, item 7).

Every case draws valid inputs (tiny runs: a few queues, servers, replicas and steps, with the
extremes of the validated ranges mixed in) and then, in about half of the cases, replaces one
or two arguments by a value a careless or demanding user might pass: a wrong type, a bool, a
string, NaN, inf, a negative, zero, a huge number, a wrong shape, lam >= 1, lam >= sum(mu),
one_minus_lam together with lam, ... The call must then either

- raise ``ValueError`` whose message names one of the function's parameters, or
- return a result that satisfies the model's invariants: counts 0 <= u_i <= n with u_0 = n,
  non-increasing in i; tail fractions in [0, 1], non-increasing; laws that sum to 1; busy
  probabilities in [0, 1]; meeting times >= 0 or inf; finite numbers.

Untouched (valid) inputs must succeed. No other exception may escape: TypeError, IndexError,
OverflowError, ZeroDivisionError, MemoryError or a JAX error is a bug. The examples are
derandomized (the same cases every run, no example database), capped so that the file runs
in about a minute on two cores: JIT compiles are the cost, so runs reuse a few shapes
(replica counts 1..3, level caps in steps of 8).
"""

from __future__ import annotations

import inspect
import math
import re
from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qlib.heterogeneous as H
import qlib.supermarket as S
from qlib import stats
from qlib.supermarket.equilibrium import estimate_equilibrium


def fuzz(examples: int):
    """Deterministic hypothesis settings: fixed examples, no deadline, no database."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


# --------------------------------------------------------------------------- inputs

class _Odd:
    """An object of no numeric or sequence type."""

    def __repr__(self) -> str:
        return "<odd object>"


#: Values no parameter of the API should need: wrong types, special floats, huge and tiny
#: numbers, wrong shapes. Every huge number is large enough to be rejected (not merely slow)
#: wherever it is not a valid small value, so no case can start a long run.
GARBAGE = [
    None, True, False, np.bool_(True), "1", "", "fluid", b"x", math.nan, math.inf, -math.inf,
    -1, 0, -0.0, 0.5, 1.5, -2.5, 1.0, 2**63, 2**64, 2**70, -(2**70), 1e300, -1e300, 1e-300,
    10**400, 1j, [1, 2], [], [[1]], [[1], [2, 3]], (1,), {"a": 1}, np.array(2), np.array([1.0, math.nan]),
    np.array([[1, 2]]), np.float64(math.nan), np.int8(-1), np.uint64(2**64 - 1), np.float32(0.5),
    Fraction(1, 3), _Odd(),
]
garbage = st.sampled_from(GARBAGE)


def _names_parameter(fn, message: str) -> bool:
    for p in inspect.signature(fn).parameters:
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(p)}(?![A-Za-z0-9_])", message):
            return True
    return False


def call(fn, kw: dict, *, valid: bool):
    """fn(**kw): its result, or None after a ValueError that names one of fn's parameters.

    ``valid``: the inputs are valid, so any exception is a failure. Any exception other than
    ValueError always propagates (and fails the test)."""
    try:
        return fn(**kw)
    except ValueError as e:
        assert not valid, f"{fn.__name__}({kw!r}) rejected valid input: {e}"
        assert _names_parameter(fn, str(e)), f"{fn.__name__}({kw!r}): the ValueError names no parameter: {e}"
        return None


def spoil(data, kw: dict, *, extra: dict | None = None) -> tuple[dict, bool]:
    """About half the time, replace one or two arguments by garbage (or by ``extra[name]``'s
    values, invalid for that parameter). Returns (kwargs, still valid)."""
    if not data.draw(st.booleans(), label="spoil"):
        return kw, True
    kw = dict(kw)
    for name in data.draw(st.lists(st.sampled_from(sorted(kw)), min_size=1, max_size=2, unique=True),
                          label="spoiled"):
        bad = garbage
        if extra and name in extra:
            bad = st.one_of(st.sampled_from(extra[name]), garbage)
        kw[name] = data.draw(bad, label=name)
    return kw, False


def lam_kw(data, *, extremes: bool = True) -> dict:
    """The arrival rate as lam or as one_minus_lam (the other None), within the resolvable range."""
    if data.draw(st.booleans(), label="as one_minus_lam"):
        eps = data.draw(st.sampled_from([0.5, 0.2, 0.05]) | (st.sampled_from([2.0**-43, 1e-12, 1e-7])
                                                              if extremes else st.nothing()), label="1-lam")
        return dict(lam=None, one_minus_lam=eps)
    lam = data.draw(st.floats(0.05, 0.95) | (st.sampled_from([2.0**-43, 1 - 2.0**-43, 1e-6])
                                            if extremes else st.nothing()), label="lam")
    return dict(lam=lam, one_minus_lam=None)


#: Invalid arrival rates (and lam given with one_minus_lam, which spoil() draws for either).
BAD_LAM = dict(lam=[1.0, 1.0 - 1e-17, 1.5, -0.1, 0.0, 1e-20, 1 - 1e-15],
               one_minus_lam=[0.3, 1.0, 0.0, -1e-9, 1e-20, 2.0])


# --------------------------------------------------------------------------- invariants

def assert_counts(u, n: int) -> None:
    """u (..., L+1): integer counts, u_0 = n, 0 <= u_i <= n, non-increasing in i."""
    u = np.asarray(u)
    assert u.dtype.kind in "iu", u.dtype
    assert u.shape[-1] >= 1
    assert np.all(u[..., 0] == n)
    assert np.all((u >= 0) & (u <= n))
    assert np.all(np.diff(u.astype(np.int64), axis=-1) <= 0)


def assert_tails(t) -> None:
    """t (..., L+1): finite fractions in [0, 1], t_0 = 1, non-increasing in i."""
    t = np.asarray(t, dtype=float)
    assert np.all(np.isfinite(t))
    assert np.all((t >= 0) & (t <= 1))
    assert np.allclose(t[..., 0], 1.0, rtol=0, atol=1e-12)
    assert np.all(np.diff(t, axis=-1) <= 1e-12)


def assert_law(p, axis: int = -1, atol: float = 1e-9) -> None:
    """A probability law along ``axis``: finite, in [0, 1], sums to 1."""
    p = np.asarray(p, dtype=float)
    assert np.all(np.isfinite(p)) and np.all(p >= -1e-15) and np.all(p <= 1 + 1e-12)
    assert np.allclose(p.sum(axis=axis), 1.0, rtol=0, atol=atol)


def assert_supermarket_result(r: S.SupermarketResult) -> None:
    R, L = r.replicas, r.levels
    n = r.n
    assert_counts(r.counts, n)
    assert r.counts.shape == (R, L + 1) and r.tail_fraction.shape == (R, L + 1)
    assert_tails(r.tail_fraction)
    assert_law(r.max_length_distribution)
    assert r.max_length.shape == (R,) and np.all((r.max_length >= 0) & (r.max_length <= L))
    # the longest queue seen is where the law of the maximum ends, and at least the final one
    last = np.array([np.max(np.nonzero(p > 0)[0]) for p in r.max_length_distribution])
    assert np.array_equal(last, r.max_length)
    final = (r.counts > 0).sum(axis=1) - 1
    assert np.all(final <= r.max_length)
    # E[u_1]/n <= P(some queue busy): a queue is busy only when the maximum is >= 1
    assert np.all(r.tail_fraction[:, 1] <= 1 - r.max_length_distribution[:, 0] + 1e-12)
    B = r.batch_tail_fraction
    assert B.shape[0] == R and B.shape[2] == L + 1
    assert_tails(B)
    lengths = np.diff([(r.steps * b) // B.shape[1] for b in range(B.shape[1] + 1)])
    assert np.allclose(
        (B * lengths[None, :, None]).sum(axis=1) / r.steps, r.tail_fraction, rtol=0, atol=1e-12
    )
    assert r.state.shape == (R,) and r.state.dtype == np.uint64
    assert 0 < r.one_minus_lam < 1 and 0 < r.lam < 1
    # every step moves at most one customer
    if r.trajectory is not None:
        tr = r.trajectory
        assert tr.shape == (R, r.steps // r.record_every, L + 1)
        assert_counts(tr, n)
        customers = tr[..., 1:].sum(axis=-1)
        assert np.all(np.abs(np.diff(customers, axis=1)) <= r.record_every)
        assert np.array_equal(tr[:, -1], r.counts) if r.steps % r.record_every == 0 else True


# --------------------------------------------------------------------------- every garbage value

def test_garbage_scalars():
    """Each GARBAGE value in turn for each scalar of a few cheap functions (the drawn cases
    reach only some of them): a ValueError naming a parameter, or a valid result."""
    cases = [(S.fluid_fixed_point, dict(d=2, lam=0.5, levels=3, replacement=True, n=None)),
             (S.fluid_fixed_point, dict(d=2, lam=None, one_minus_lam=0.5, levels=3, replacement=False, n=4)),
             (S.predicted_max_length, dict(d=2, lam=0.5)),
             (S.tv_noise_floor, dict(pmf=[0.5, 0.5], size=10, reference_size=10)),
             (S.counts_all_at, dict(n=3, length=2)),
             (H.busy_probabilities, dict(lam=1.0, mus=[1.0, 2.0]))]
    for fn, kw in cases:
        for name in kw:
            for g in GARBAGE:
                r = call(fn, {**kw, name: g}, valid=False)
                if r is not None:  # (predicted_max_length is inf for d = 1)
                    assert not np.any(np.isnan(np.asarray(r, dtype=float)))


# --------------------------------------------------------------------------- supermarket: runs

def _n_d(data, *, small: bool = False) -> tuple[int, int, bool]:
    n = data.draw(
        st.integers(1, 6) if small else st.integers(1, 6) | st.sampled_from([10**9, 3 * 10**9, 2**32 - 1]),
        label="n",
    )
    replacement = data.draw(st.booleans(), label="replacement")
    d = data.draw(
        st.integers(1, 4) if small else st.integers(1, 4) | st.sampled_from([45, 10**9, 10**18, 2**63 - 1]),
        label="d",
    )
    if not replacement:
        d = min(d, n)
    return n, d, replacement


def _start(data, n: int, d: int, lk: dict):
    kind = data.draw(st.sampled_from(["empty", "fluid", "counts", "lengths"]), label="start")
    eps = lk["one_minus_lam"] if lk["lam"] is None else 1 - lk["lam"]
    if kind == "fluid" and d == 1 and eps < 0.05:  # geometric, ~log(2n)/(1-lam) levels: too many
        return "empty"
    if kind == "counts":
        return {"counts": S.counts_all_at(n, data.draw(st.integers(0, 3), label="top"))}
    if kind == "lengths":
        if n > 6:
            return "empty"
        return {"lengths": data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n), label="lengths")}
    return kind


def _levels_for(n, d, lam_args, starts, replacement) -> int:
    """A level cap in steps of 8 that fits the starts (so that shapes, and compiles, repeat)."""
    width = max(S.initial_counts(n, d, lam_args["lam"], s, replacement,
                                 one_minus_lam=lam_args["one_minus_lam"]).shape[-1] for s in starts)
    return 8 * ((width + 8) // 8)


@fuzz(40)
@given(st.data())
def test_simulate(data):
    n, d, replacement = _n_d(data)
    lk = lam_kw(data)
    start = _start(data, n, d, lk)
    steps = data.draw(st.integers(1, 48), label="steps")
    kw = dict(n=n, d=d, **lk, steps=steps, replicas=data.draw(st.integers(1, 3), label="replicas"),
              seed=data.draw(st.integers(0, 2**63 - 1), label="seed"),
              burn_in=data.draw(st.integers(0, 16), label="burn_in"), initial=start, replacement=replacement,
              batches=data.draw(st.integers(1, min(steps, 3)), label="batches"),
              record_every=data.draw(st.none() | st.integers(1, steps), label="record_every"),
              levels=_levels_for(n, d, lk, [start], replacement), progress=False)
    kw, valid = spoil(data, kw, extra=BAD_LAM)
    r = call(S.simulate, kw, valid=valid)
    if r is None:
        return
    assert_supermarket_result(r)
    if valid and data.draw(st.booleans(), label="continue"):  # a continued run keeps the invariants
        r2 = call(S.simulate, dict(n=n, d=d, **lk, steps=steps, replicas=r.replicas, initial=r,
                                   replacement=replacement, progress=False), valid=True)
        assert_supermarket_result(r2)


@fuzz(12)
@given(st.data())
def test_simulate_many(data):
    P = data.draw(st.integers(1, 3), label="points")
    eps = data.draw(st.booleans(), label="one_minus_lam")
    pts, oml = [], []
    for _ in range(P):
        n, d, _ = _n_d(data, small=True)
        if eps:
            pts.append((n, d))
            oml.append(data.draw(st.sampled_from([0.5, 0.1, 1e-9]), label="1-lam"))
        else:
            pts.append((n, d, data.draw(st.floats(0.05, 0.95), label="lam")))
    kw = dict(
        points=pts,
        steps=data.draw(
            st.integers(4, 32) | st.lists(st.integers(4, 32), min_size=P, max_size=P), label="steps"
        ),
        replicas=data.draw(st.integers(1, 2), label="replicas"),
        seeds=None,
        burn_in=0,
        initial="empty",
        replacement=True,
        batches=data.draw(st.integers(1, 2), label="batches"),
        record_every=None,
        levels=16,
        one_minus_lam=oml if eps else None,
        progress=False,
    )
    kw, valid = spoil(
        data,
        kw,
        extra=dict(
            points=[
                [(3, 2, 1.0)],
                [(0, 2, 0.5)],
                [(3, 0, 0.5)],
                [(3, 2)],
                [3, 2, 0.5],
                "abc",
                [],
                [(3, 2, 0.5, 1)],
            ]
        ),
    )
    out = call(S.simulate_many, kw, valid=valid)
    if out is None:
        return
    assert isinstance(out, list) and len(out) == len(kw["points"])
    for r in out:
        assert_supermarket_result(r)


@fuzz(24)
@given(st.data())
def test_meeting_times(data):
    n, d, replacement = _n_d(data)
    top_length = data.draw(st.integers(0, 4), label="top_length")
    max_steps = data.draw(st.integers(1, 400), label="max_steps")
    kw = dict(
        n=n,
        d=d,
        **lam_kw(data),
        replicas=data.draw(st.integers(1, 3), label="replicas"),
        seed=data.draw(st.integers(0, 2**63 - 1), label="seed"),
        top_length=top_length,
        max_steps=max_steps,
        replacement=replacement,
        bottom="empty",
        top=None,
        ordered=data.draw(st.booleans(), label="ordered"),
        levels=8,
        progress=False,
    )
    kw, valid = spoil(data, kw, extra=BAD_LAM)
    T = call(S.meeting_times, kw, valid=valid)
    if T is None:
        return
    T = np.asarray(T)
    assert T.dtype.kind == "f" and T.ndim == 1
    met = np.isfinite(T)
    assert np.all(T[~met] == np.inf) and np.all(T[met] >= 0) and np.all(T[met] == np.floor(T[met]))
    if valid:
        assert T.shape == (kw["replicas"],) and np.all(T[met] <= max_steps)
        if top_length == 0:  # the top start is the bottom one
            assert np.all(T == 0)


@fuzz(10)
@given(st.data())
def test_meeting_times_many(data):
    P = data.draw(st.integers(1, 3), label="points")
    pts = [(*_n_d(data, small=True)[:2], data.draw(st.floats(0.05, 0.95), label="lam")) for _ in range(P)]
    kw = dict(points=pts, replicas=data.draw(st.integers(1, 2), label="replicas"),
              top_length=data.draw(st.integers(0, 3) | st.lists(st.integers(0, 3), min_size=P, max_size=P),
                                   label="top_length"),
              max_steps=data.draw(st.integers(1, 300), label="max_steps"), seeds=None, one_minus_lam=None,
              replacement=True, bottom="empty", top=None, ordered=True, levels=8, progress=False)
    kw, valid = spoil(data, kw, extra=dict(points=[[(3, 2, 1.0)], [(3, 2)], "abc", []]))
    out = call(S.meeting_times_many, kw, valid=valid)
    if out is None:
        return
    assert len(out) == len(kw["points"])
    for T in out:
        met = np.isfinite(T)
        assert np.all(T[~met] == np.inf) and np.all(T[met] >= 0)


@fuzz(16)
@given(st.data())
def test_coupled_paths(data):
    n, d, replacement = _n_d(data, small=True)
    lk = lam_kw(data, extremes=False)
    starts = ["empty"] + data.draw(
        st.lists(st.sampled_from(["fluid", "top"]), min_size=1, max_size=2), label="starts"
    )
    starts = [{"counts": S.counts_all_at(n, 3)} if s == "top" else s for s in starts]
    record_every = data.draw(st.integers(1, 4), label="record_every")
    kw = dict(
        n=n,
        d=d,
        **lk,
        starts=starts,
        steps=record_every * data.draw(st.integers(1, 8), label="frames"),
        replicas=data.draw(st.integers(1, 2), label="replicas"),
        seed=data.draw(st.integers(0, 99), label="seed"),
        record_every=record_every,
        replacement=replacement,
        levels=_levels_for(n, d, lk, starts, replacement),
        progress=False,
    )
    kw, valid = spoil(data, kw, extra=BAD_LAM)
    p = call(S.coupled_paths, kw, valid=valid)
    if p is None:
        return
    C, R, F, L1 = p.counts.shape
    assert p.times.shape == (F,) and p.times[0] == 0 and np.all(np.diff(p.times) > 0)
    assert_counts(p.counts, p.n)
    assert np.all(np.isfinite(p.model_time))
    if valid:
        # the chain from "empty" is below every other coupled chain at every frame (monotone
        # coupling), and its excess customers never increase
        lo = p.counts[0]
        for c in range(1, C):
            assert np.all(lo <= p.counts[c])
            D = S.l1_distance(p.counts[c], lo)
            assert np.all(np.diff(D, axis=-1) <= 0)


# --------------------------------------------------------------------------- supermarket: states

@fuzz(40)
@given(st.data())
def test_initial_counts(data):
    n, d, replacement = _n_d(data)
    start = data.draw(
        st.sampled_from(["empty", "fluid"])
        | st.builds(lambda k: {"counts": S.counts_all_at(n, k)}, st.integers(0, 3)),
        label="initial",
    )
    kw, valid = spoil(
        data, dict(n=n, d=d, **lam_kw(data), initial=start, replacement=replacement), extra=BAD_LAM
    )
    u = call(S.initial_counts, kw, valid=valid)
    if u is not None:
        assert_counts(u, int(u[..., 0].max()))
        if valid:
            assert np.all(u[..., 0] == n)


@fuzz(40)
@given(st.data())
def test_counts(data):
    lengths = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=8), label="lengths")
    kw, valid = spoil(data, dict(lengths=lengths))
    u = call(S.counts_from_lengths, kw, valid=valid)
    if u is not None:
        assert_counts(u, u[0])
        if valid:
            assert u[0] == len(lengths) and u[1:].sum() == sum(lengths)
    kw, valid = spoil(data, dict(n=data.draw(st.integers(1, 2**32 - 1), label="n"),
                                 length=data.draw(st.integers(0, 5), label="length")))
    u = call(S.counts_all_at, kw, valid=valid)
    if u is not None:
        assert_counts(u, u[0])
        assert np.all(u == u[0])


# --------------------------------------------------------------------------- supermarket: theory

@fuzz(120)
@given(st.data())
def test_theory(data):
    d = data.draw(st.integers(1, 5) | st.sampled_from([10**4, 10**9, 2**63 - 1]), label="d")
    lk = lam_kw(data)
    replacement = data.draw(st.booleans(), label="replacement")
    n = data.draw(st.none() | st.integers(1, 10) | st.sampled_from([10**9, 10**12]), label="n")
    if not replacement:
        n = max(n or d, d)
    levels = data.draw(st.integers(0, 12), label="levels")
    kw, valid = spoil(data, dict(d=d, **lk, levels=levels, replacement=replacement, n=n), extra=BAD_LAM)
    s = call(S.fluid_fixed_point, kw, valid=valid)
    if s is not None:
        assert s.ndim == 1 and s[0] == 1.0
        assert_tails(s)
        if valid and replacement and lk["lam"] is not None and d <= 5:
            i = np.arange(levels + 1)
            expo = i if d == 1 else (float(d) ** i - 1) / (d - 1)
            assert np.allclose(s, lk["lam"] ** expo, rtol=1e-9, atol=1e-300)
        if valid and s.size >= 2:  # the fixed point is a zero of the drift (truncated: last level)
            drift = call(S.fluid_drift, dict(s=s[1:], d=d, **lk, replacement=replacement, n=n), valid=True)
            assert np.all(np.isfinite(drift)) and np.all(np.abs(drift[:-1]) <= 1e-9)

    kw, valid = spoil(
        data,
        dict(
            s=data.draw(st.lists(st.floats(-0.5, 1.5), min_size=1, max_size=4), label="s"),
            d=d,
            **lk,
            replacement=replacement,
            n=n,
        ),
        extra=BAD_LAM,
    )
    drift = call(S.fluid_drift, kw, valid=valid)
    if drift is not None:
        assert drift.shape == np.asarray(kw["s"]).shape and np.all(np.isfinite(drift))

    x = data.draw(st.lists(st.floats(0, 1), min_size=1, max_size=4), label="s")
    kw, valid = spoil(data, dict(s=x, d=d, replacement=replacement, n=n))
    g = call(S.all_sampled_at_least, kw, valid=valid)
    if g is not None:
        g = np.asarray(g)
        assert np.all(np.isfinite(g)) and np.all((g >= 0) & (g <= 1))
        if valid:
            order = np.argsort(x, kind="stable")
            assert np.all(np.diff(g[order]) >= -1e-12)  # g is non-decreasing in s

    kw, valid = spoil(data, dict(d=d, **lk), extra=BAD_LAM)
    k = call(S.predicted_max_length, kw, valid=valid)
    if k is not None:
        assert k == math.inf if kw["d"] == 1 else (isinstance(k, int) and k >= 0)
    kw, valid = spoil(data, dict(d=max(d, 2), **lk), extra=BAD_LAM)
    b = call(S.boundary_distance, kw, valid=valid)
    if b is not None:
        assert 0.0 <= b <= 0.5
    kw, valid = spoil(data, dict(d=max(d, 2), **lk, levels=None), extra=BAD_LAM)
    p = call(S.asymptotic_profile, kw, valid=valid)
    if p is not None:
        assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))


@fuzz(40)
@given(st.data())
def test_fluid_trajectory(data):
    d = data.draw(st.integers(1, 4) | st.just(10**5), label="d")
    lk = lam_kw(data, extremes=False)
    replacement = data.draw(st.booleans(), label="replacement")
    n = None if replacement else max(d, data.draw(st.integers(1, 10**6), label="n"))
    L = data.draw(st.integers(1, 4), label="L")
    start = np.sort(np.array(data.draw(st.lists(st.floats(0, 1), min_size=L, max_size=L), label="s")))[::-1]
    times = np.cumsum(data.draw(st.lists(st.floats(0, 5), min_size=1, max_size=3), label="dt"))
    kw, valid = spoil(data, dict(d=d, **lk, times=times, initial=np.concatenate([[1.0], start]),
                                 replacement=replacement, n=n, rtol=1e-6, atol=1e-9), extra=BAD_LAM)
    traj = call(S.fluid_trajectory, kw, valid=valid)
    if traj is not None:
        assert np.all(np.isfinite(traj)) and np.all(traj[:, 0] == 1.0)
        assert np.all(traj >= -1e-4) and np.all(traj <= 1 + 1e-4)  # to the solver's tolerance


@fuzz(8)
@given(st.data())
def test_refined_mean_field(data):
    d = data.draw(st.integers(1, 3), label="d")
    lam = data.draw(st.floats(0.2, 0.8), label="lam")
    kw = dict(d=d, lam=lam, levels=data.draw(st.sampled_from([6, 10]), label="levels"),
              replacement=data.draw(st.booleans(), label="replacement"), order=1)
    kw, valid = spoil(data, kw, extra=dict(lam=BAD_LAM["lam"], levels=[0, 10**6]))
    rmf = call(S.refined_mean_field, kw, valid=valid)
    if rmf is None:
        return
    assert_tails(rmf.fixed_point)
    assert np.all(np.isfinite(rmf.correction)) and np.all(np.isfinite(rmf.covariance))
    assert np.allclose(rmf.covariance, rmf.covariance.T, atol=1e-12) and np.all(
        np.diag(rmf.covariance) >= -1e-12
    )
    assert math.isfinite(rmf.relaxation_time) and rmf.relaxation_time > 0
    for n in (1, 10, 10**6):
        assert np.all(np.isfinite(rmf.tail_fraction(n)))


@fuzz(16)
@given(st.data())
def test_exact_equilibrium(data):
    n = data.draw(st.integers(1, 3), label="n")
    replacement = data.draw(st.booleans(), label="replacement")
    d = data.draw(st.integers(1, 3 if replacement else n), label="d")
    lam = data.draw(st.floats(0.1, 0.8), label="lam")
    levels = data.draw(st.integers(0, 4), label="levels")
    kw = dict(n=n, d=d, lam=lam, levels=levels, replacement=replacement,
              tol=data.draw(st.sampled_from([1e-8, 1e-6]), label="tol"))
    # lam = 1 - 1e-15 is valid but needs boxes up to max_states (20 million states, ~10 GB):
    # it is drawn only below, with a small max_states
    kw, valid = spoil(data, kw, extra=dict(lam=[x for x in BAD_LAM["lam"] if x != 1 - 1e-15],
                                           tol=[0.0, -1.0, 1e-20, 0.5]))
    if data.draw(st.booleans(), label="near 1"):  # the box bound is checked before a box is built
        e = call(S.exact_equilibrium, dict(n=n, d=d, lam=1 - 1e-15, replacement=replacement, max_states=2000),
                 valid=False)
        assert e is None
    t = call(S.exact_tail_fraction, kw, valid=valid)
    if t is None:
        return
    assert_tails(t)
    if valid:
        assert t.shape == (levels + 1,)
        if levels >= 1:  # E[u_1]/n = lam in equilibrium, for every n
            assert abs(t[1] - lam) <= 1e-5
        if n == 1:  # M/M/1: P(length >= i) = lam^i
            assert np.allclose(t, lam ** np.arange(levels + 1), rtol=0, atol=1e-5)
        eq = call(
            S.exact_equilibrium, dict(n=n, d=d, lam=lam, replacement=replacement, tol=kw["tol"]), valid=True
        )
        assert_tails(eq.tail_fraction)
        assert_law(eq.max_length_distribution, atol=1e-5)
        assert_law(eq.queue_length_distribution, atol=1e-5)


# --------------------------------------------------------------------------- supermarket: estimators

@fuzz(30)
@given(st.data())
def test_estimators(data):
    a = S.counts_all_at(4, data.draw(st.integers(0, 3), label="a"))
    b = S.counts_from_lengths(data.draw(st.lists(st.integers(0, 3), min_size=4, max_size=4), label="b"))
    kw, valid = spoil(data, dict(counts_a=a, counts_b=b))
    D = call(S.l1_distance, kw, valid=valid)
    if D is not None:
        assert np.all(np.asarray(D) >= 0)
        if valid:  # at least the difference in customers
            assert D >= abs(a[1:].sum() - b[1:].sum())
    x = np.array(data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=6), label="samples"))
    ref = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=6), label="reference")
    kw, valid = spoil(data, dict(samples=x, reference=ref, reference_is_pmf=False,
                                 bins=data.draw(st.none() | st.integers(1, 3), label="bins")))
    tv = call(S.tv_distance, kw, valid=valid)
    if tv is not None:
        tv = np.asarray(tv)
        assert np.all(np.isfinite(tv)) and np.all((tv >= 0) & (tv <= 1 + 1e-12))
    pmf = np.array(data.draw(st.lists(st.floats(0, 1), min_size=1, max_size=4), label="pmf"))
    kw, valid = spoil(
        data, dict(pmf=pmf, size=data.draw(st.integers(1, 100), label="size"), reference_size=None)
    )
    f = call(S.tv_noise_floor, kw, valid=valid)
    if f is not None:
        assert math.isfinite(f) and f >= 0


@fuzz(10)
@given(st.data())
def test_exact_coupling_and_direct(data):
    n = data.draw(st.integers(1, 3), label="n")
    lam = data.draw(st.floats(0.1, 0.8), label="lam")
    kw = dict(
        n=n,
        d=2,
        lam=lam,
        bottom=[n],
        top=S.counts_all_at(n, data.draw(st.integers(0, 3), label="top")),
        steps=data.draw(st.integers(0, 20), label="steps"),
        level=1,
        cap=5,
        replacement=True,
    )
    kw, valid = spoil(data, kw, extra=dict(lam=BAD_LAM["lam"]))
    ex = call(S.exact_coupling, kw, valid=valid)
    if ex is not None:
        s = ex.survival
        assert (
            np.all(np.isfinite(s))
            and np.all((s >= -1e-12) & (s <= 1 + 1e-12))
            and np.all(np.diff(s) <= 1e-12)
        )
        assert_law(ex.bottom_law, atol=1e-9)
        assert_law(ex.top_law, atol=1e-9)
        assert math.isfinite(ex.mean) and ex.mean >= 0
    kw = dict(n=n, d=2, lam=lam, steps=data.draw(st.integers(1, 200), label="steps"), seed=0, burn_in=0,
              replacement=True, levels=4)
    kw, valid = spoil(data, kw, extra=dict(lam=BAD_LAM["lam"]))
    t = call(S.direct_simulation, kw, valid=valid)
    if t is not None:
        assert_tails(t)


# --------------------------------------------------------------------------- heterogeneous

def _rates(data, *, max_n: int = 5) -> tuple[float, list[float]]:
    mus = data.draw(st.lists(st.floats(0.1, 10) | st.sampled_from([1.0, 2.0]), min_size=1, max_size=max_n),
                    label="mus")
    rho = data.draw(st.floats(0.01, 0.99) | st.sampled_from([1e-9, 1 - 1e-9]), label="rho")
    return rho * math.fsum(mus), mus


def _bad_rates(mus) -> dict:
    total = math.fsum(mus) if all(isinstance(m, float) for m in mus) else 1.0
    return dict(
        lam=[total, 2 * total, -1.0, 0.0, math.nan],
        mus=[
            [1.0, -1.0],
            [0.0],
            [True, True],
            ["1", "2"],
            [[1.0]],
            [1.0, math.inf],
            [],
            [1.0, math.nan],
            np.array([1, 2], dtype=object),
            [1e-300, 1e300],
        ],
    )


@fuzz(30)
@given(st.data())
def test_heterogeneous_simulate(data):
    lam, mus = _rates(data, max_n=4)
    kw = dict(
        lam=lam,
        mus=mus,
        steps=data.draw(st.integers(1, 200), label="steps"),
        replicas=data.draw(st.integers(1, 3), label="replicas"),
        seed=data.draw(st.integers(0, 2**64 - 1), label="seed"),
        burn_in=data.draw(st.integers(0, 20), label="b"),
        policy=data.draw(st.sampled_from(H.POLICIES), label="policy"),
        initial=None,
        chunk=None,
        progress=False,
        kernel=data.draw(st.sampled_from(["auto", "array"]), label="kernel"),
    )
    kw, valid = spoil(data, kw, extra=_bad_rates(mus))
    r = call(H.simulate, kw, valid=valid)
    if r is None:
        return
    R, n = r.busy_fraction.shape
    assert n == r.mus.size
    assert np.all(np.isfinite(r.busy_fraction)) and np.all((r.busy_fraction >= 0) & (r.busy_fraction <= 1))
    assert np.all(np.isfinite(r.throughput)) and np.all(r.throughput >= 0)
    assert np.all(np.isfinite(r.mean_queue)) and np.all(r.mean_queue >= 0)
    assert np.all((r.arrivals >= 0) & (r.arrivals <= r.steps))
    w = r.wait_fraction
    assert np.all(np.isnan(w) == (r.arrivals == 0))  # undefined exactly when no one arrived
    assert np.all((w[r.arrivals > 0] >= 0) & (w[r.arrivals > 0] <= 1))
    assert np.all(np.isfinite(r.time)) and np.all(r.time > 0)
    # counts behind the averages are whole numbers of steps and completions
    assert np.allclose(r.busy_fraction * r.steps, np.rint(r.busy_fraction * r.steps), atol=1e-6)
    assert np.all(r.throughput * r.time[:, None] <= r.steps + 1e-6)
    st_ = r.state
    assert st_.busy.shape == (R, n) and np.all(st_.queue >= 0)
    assert np.all(st_.busy.all(axis=1) | (st_.queue == 0))


@fuzz(80)
@given(st.data())
def test_heterogeneous_exact(data):
    lam, mus = _rates(data, max_n=6)
    bad = _bad_rates(mus)
    kw, valid = spoil(data, dict(lam=lam, mus=mus), extra=bad)
    P = call(H.busy_probabilities, kw, valid=valid)
    if P is None:
        return
    P = np.asarray(P)
    assert P.ndim == 1 and np.all(np.isfinite(P)) and np.all((P >= 0) & (P <= 1))
    lam_, m = H.check_rates(kw["lam"], kw["mus"])
    Q = H.idle_probabilities(**kw)
    assert np.allclose(P + Q, 1.0, rtol=0, atol=1e-12)
    assert math.isclose(H.effective_rates(**kw).sum(), lam_, rel_tol=1e-9)
    assert_law(H.busy_count_distribution(**kw), atol=1e-12)
    w = H.wait_probability(**kw)
    assert 0 <= w <= 1
    q = H.mean_queue_length(**kw)
    assert math.isfinite(q) and q >= 0
    assert H.mean_number_in_system(**kw) >= P.sum() * (1 - 1e-12)
    pm = call(
        H.pair_margins,
        dict(**kw, pairs=data.draw(st.sampled_from(["adjacent", "all"]) | garbage, label="pairs")),
        valid=False,
    )
    if pm is not None:  # Cabral's claims hold: every margin of a pair with mu_l > mu_m is >= 0
        for a in (pm.busy_margin, pm.effective_rate_margin, pm.band_margin):
            assert np.all(np.isfinite(a)) and np.all(a >= 0)
    J = H.joint_probabilities(**kw)
    for a in (J.both_busy, J.busy_idle, J.both_idle):
        assert np.all(np.isfinite(a)) and np.all((a >= -1e-15) & (a <= 1 + 1e-12))
    assert math.isfinite(H.queue_gap(**kw)) and H.queue_gap(**kw) > 0
    steps = call(H.step_probabilities, kw, valid=False)  # ValueError where a share is unresolvable
    if steps is not None:
        assert sum(steps) == 1 and all(f >= 0 for f in steps)
    if m.size <= 4:
        sets, probs = H.stationary_distribution(**kw)
        assert_law(probs, atol=1e-9)
        assert np.allclose(H.marginals_from_sets(sets, probs), P, rtol=0, atol=1e-9)
        policy = data.draw(st.sampled_from(["random", "fastest", "slowest"]) | garbage, label="policy")
        g = call(H.generator_solve, dict(**kw, queue_cap=None, policy=policy), valid=False)
        if g is not None:
            sets, ps, qd = g
            assert_law(ps, atol=1e-8)
            assert np.all(qd >= -1e-15) and qd.sum() <= 1 + 1e-9
            if policy == "random":
                assert np.allclose(H.marginals_from_sets(sets, ps), P, rtol=0, atol=1e-8)
        for f in (H.fastest_busy_probabilities, H.slowest_busy_probabilities):
            p = f(**kw)
            assert np.all(np.isfinite(p)) and np.all((p >= -1e-12) & (p <= 1 + 1e-12))


@fuzz(10)
@given(st.data())
def test_heterogeneous_relaxation_time(data):
    mus = data.draw(st.lists(st.floats(0.5, 4), min_size=1, max_size=3), label="mus")
    lam = data.draw(st.floats(0.1, 0.9), label="rho") * math.fsum(mus)
    kw = dict(lam=lam, mus=mus, policy=data.draw(st.sampled_from(H.POLICIES), label="policy"))
    kw, valid = spoil(data, kw, extra=_bad_rates(mus))
    tau = call(H.relaxation_time, kw, valid=valid)
    if tau is not None:
        assert math.isfinite(tau) and tau > 0
        # the queue alone relaxes no faster: 1/queue_gap is a lower bound
        assert tau >= (1 - 1e-9) / H.queue_gap(kw["lam"], kw["mus"])


# --------------------------------------------------------------------------- estimate_equilibrium

@fuzz(6)
@given(st.data())
def test_estimate_equilibrium(data):
    n, d = data.draw(st.integers(2, 3), label="n"), data.draw(st.integers(1, 2), label="d")
    lam = data.draw(st.floats(0.2, 0.7), label="lam")
    kw = dict(n=n, d=d, lam=lam, rel_error=0.5, max_steps=4000, seed=0, replicas=2, burn_in="tau",
              batch_taus=1.0, min_batches=2, progress=False)
    kw, valid = spoil(data, kw, extra=dict(lam=BAD_LAM["lam"]))
    e = call(estimate_equilibrium, kw, valid=valid)
    if e is not None:
        assert_tails(e.tail_fraction)
        assert np.all(np.isfinite(e.ci_low)) and np.all(np.isfinite(e.ci_high))
        assert np.all(e.ci_low <= e.tail_fraction + 1e-12) and np.all(e.tail_fraction <= e.ci_high + 1e-12)
        assert_law(e.max_length_distribution, atol=1e-9)


# --------------------------------------------------------------------------- long runs (rare, small)

@fuzz(4)
@given(n=st.integers(1, 4), d=st.integers(1, 3), lam=st.floats(0.2, 0.7), replacement=st.booleans())
def test_long_run_level_one_balance(n, d, lam, replacement):
    """E[u_1]/n = lam in equilibrium for every n, d (docs/models.md, level balance): the time
    average over 16 replicas, after a burn-in of many relaxation times, is within 5 standard
    errors of lam (plus the burn-in bias, below 1e-3 here)."""
    d = d if replacement else min(d, n)
    r = S.simulate(n, d, lam, steps=40_000, burn_in=10_000, replicas=16, seed=7, initial="fluid",
                   replacement=replacement, levels=24, progress=False)
    assert_supermarket_result(r)
    est = stats.replica_mean(r.tail_fraction[:, 1])
    assert abs(est.mean - lam) <= 5 * est.stderr + 1e-3, (est.mean, est.stderr, lam)


@fuzz(3)
@given(mus=st.lists(st.floats(0.5, 4), min_size=2, max_size=3), rho=st.floats(0.2, 0.8))
def test_long_run_busy_probabilities(mus, rho):
    """Busy fractions of 16 long heterogeneous runs agree with the exact P_j to 5 standard errors."""
    lam = rho * math.fsum(mus)
    r = H.simulate(lam, mus, steps=40_000, burn_in=4_000, replicas=16, seed=3, progress=False)
    est = r.estimate("busy_fraction")
    P = H.busy_probabilities(lam, mus)
    assert np.all(np.abs(est.mean - P) <= 5 * est.stderr + 1e-3), (est.mean, est.stderr, P)
