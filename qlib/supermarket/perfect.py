"""Exact stationary samples of the bounded supermarket model, by coupling from the past.

Model (docs/models.md#bounded-model): the supermarket model of :func:`qlib.supermarket.simulate`
(n queues, Exp(1) service, arrivals at rate lam n, each joining a shortest of d sampled queues)
in which every queue holds at most L = ``capacity`` customers: an arrival whose chosen queue is
full is lost. Its count chain u_0..u_L is finite, and the same-words coupling of
docs/models.md#monotone-coupling is monotone on it, with a bottom state (all queues empty) and a
top state (all queues at L). An arrival at a full queue touches level L and is dropped by the
one kernel (:mod:`qlib.supermarket.chain`) exactly as it would be without a cap; with
``capacity`` the driver keeps the cap instead of growing it.

Coupling from the past (Propp & Wilson 1996). For T = T_0, 2 T_0, 4 T_0, ... run the bottom and
the top chain from time -T to time 0, both fed the random words of the absolute times
-T + 1, ..., 0; once they agree at time 0, every start agrees with them (monotonicity), and the
common state is an exact draw from the stationary law of the bounded chain. The words of a time
never change with T: they are counter-based (:mod:`qlib._rng`), the words of step t of replica r
being mix64(s_r + (2t - 1) GOLDEN) and mix64(s_r + 2t GOLDEN) for t <= 0, with s_r the replica's
state of :func:`qlib.supermarket.simulate` for the same seed. So the chain at -T starts from the
random state s_r - 2T GOLDEN; a replica's sample depends on nothing but (seed, r): not on how
many replicas run, in what batches, or on how many devices. Its sample at time 0 and the words
of times t >= 1 (those of ``simulate``) are independent, so a forward run from the sample with
the replica's own stream is a stationary path (:func:`stationary_start`).

Cost. Between two ordered coupled chains the gap D = sum_i (top_i - bottom_i) drops by at most
one per step (a departure real in the top only, or an arrival lost in the top only), and it
starts at n L: no T below n L can coalesce, so T_0 = n L (at least 16), and a
budget ``max_steps`` below it is refused before anything compiles. Doubling spends at most
about four times the coalescence time, in two chains.

What is exact and what is not. The samples are exact for the bounded model with capacity L.
For the unbounded model they are samples of a different chain; the two stationary laws differ
by at most (about) the stationary mass at L, which the result reports
(:attr:`PerfectSamples.mass_at_capacity`) with the loss probability per arrival
(:attr:`PerfectSamples.loss_probability` = E[g(u_L)], g(u) = (u/n)^d or C(u, d)/C(n, d)).
Dominated coupling from the past for the unbounded chain (Kendall; Graham, arXiv:2407.03756) is
not implemented here: docs/models.md#bounded-model says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from qlib import _rng
from qlib import _validate as V
from qlib.supermarket import chain as K
from qlib.supermarket.point import Point
from qlib.supermarket.simulation import MAX_CAPACITY
from qlib.supermarket.theory import all_sampled_at_least, predicted_max_length

__all__ = [
    "PerfectSamples",
    "perfect_samples",
    "capacity_for",
    "coalescence_lower_bound",
    "forward_meeting_states",
    "state_law",
]

#: Default budget: replica-steps (both chains) per sample beyond which a round is refused.
DEFAULT_MAX_STEPS = 2**40


@dataclass(frozen=True)
class PerfectSamples:
    """Exact stationary draws of the bounded supermarket model, from :func:`perfect_samples`.

    ``point`` the validated parameter point (n, d, lam, 1 - lam, replacement; ``n``, ``d``,
    ``lam``, ``replacement`` are read from it), ``capacity`` L, ``seed``;

    - ``counts[r, i]`` (R, L+1) int64: u_i of replica r's sample, i = 0..L (u_0 = n);
    - ``coalescence_steps[r]`` (R,): the T from which replica r's bottom and top chains met by
      time 0 (the first of T_0, 2 T_0, ... that did);
    - ``start_states[r]`` (R,) uint64: s_r; step t <= 0 of replica r used the words
      mix64(s_r + (2t - 1) GOLDEN) and mix64(s_r + 2t GOLDEN) (see :meth:`words`);
    - ``steps_run[r]`` (R,): chain steps spent on replica r (each of the two chains), i.e. the
      sum of the T of its rounds.
    """

    point: Point
    capacity: int
    seed: int
    counts: np.ndarray
    coalescence_steps: np.ndarray
    start_states: np.ndarray
    steps_run: np.ndarray

    n = property(lambda self: self.point.n, doc="number of queues")
    d = property(lambda self: self.point.d, doc="choices per arrival")
    lam = property(lambda self: self.point.lam, doc="arrival rate per queue")
    replacement = property(lambda self: self.point.replacement, doc="sampling with replacement")

    @property
    def replicas(self) -> int:
        return self.counts.shape[0]

    @property
    def tail_fraction(self) -> np.ndarray:
        """u_i/n of each sample, (R, L+1)."""
        return self.counts / self.n

    @property
    def max_length(self) -> np.ndarray:
        """The longest queue of each sample, (R,)."""
        return np.sum(self.counts[:, 1:] > 0, axis=1)

    @property
    def mass_at_capacity(self) -> tuple[float, float]:
        """(mean, standard error) of u_L/n over the samples: the stationary fraction of full queues."""
        x = self.counts[:, -1] / self.n
        return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan

    @property
    def loss_probability(self) -> tuple[float, float]:
        """(mean, standard error) of g(u_L/n): the stationary probability that an arrival is lost
        (all d sampled queues full); the loss rate is lam n times it."""
        g = all_sampled_at_least(self.counts[:, -1] / self.n, self.d, replacement=self.replacement,
                                 n=self.n)
        g = np.asarray(g, dtype=float)
        return float(g.mean()), float(g.std(ddof=1) / math.sqrt(g.size)) if g.size > 1 else math.nan

    def words(self, replica: int, times: Any) -> np.ndarray:
        """The two 64-bit words of replica ``replica`` at the steps ``times`` (integers <= 0):
        shape (len(times), 2). Row j is what step times[j] of its chains consumed."""
        t = np.asarray(times, dtype=np.int64)
        if np.any(t > 0):
            raise ValueError("times must be <= 0 (coupling from the past uses the past only)")
        s = np.uint64(self.start_states[replica])
        with np.errstate(over="ignore"):
            tt = t.astype(np.uint64)  # two's complement: s + (2t - 1) G is taken mod 2^64
            w1 = _rng.mix64_np(s + (np.uint64(2) * tt - np.uint64(1)) * np.uint64(_rng.GOLDEN))
            w2 = _rng.mix64_np(s + np.uint64(2) * tt * np.uint64(_rng.GOLDEN))
        return np.stack([w1, w2], axis=-1)


def coalescence_lower_bound(n: int, capacity: int) -> int:
    """n L: no coalescence from fewer steps (the gap between top and bottom, n L customers at the
    start, drops by at most one per step)."""
    return int(n) * int(capacity)


def capacity_for(d: int, lam: float | None = None, *, one_minus_lam: float | None = None, extra: int = 3
                 ) -> int:
    """k + ``extra``: the capacity at which the notebooks compare the bounded model with the unbounded one.

    Args:
        d: choices per arrival, >= 2 (k is finite only then).
        lam: arrival rate per queue (or ``one_minus_lam``).
        one_minus_lam: 1 - lam in place of ``lam``.
        extra: levels above k, >= 0.

    Returns:
        The capacity.

    Raises:
        ValueError: naming ``d`` at d = 1, or the parameter out of its range.
    """
    k = predicted_max_length(d, lam, one_minus_lam=one_minus_lam)
    if not math.isfinite(k):
        raise ValueError("d must be >= 2 for capacity_for (at d = 1 the maximum does not concentrate); "
                         "pass capacity explicitly")
    return int(k) + int(V.integer("extra", extra, low=0, high=MAX_CAPACITY))


def _check(n, d, lam, one_minus_lam, replacement, capacity, replicas, seed, max_steps):
    pt = n if isinstance(n, Point) else Point.simulation(n, d, lam, one_minus_lam=one_minus_lam,
                                                         replacement=replacement)
    pt = pt.simulable()
    n = pt.n
    capacity = V.integer("capacity", capacity, low=1, high=MAX_CAPACITY)  # the simulation's range
    replicas = V.integer("replicas", replicas, low=1, high=2**31 - 1)
    seed = V.integer("seed", seed, low=0, high=2**63 - 1)
    max_steps = (
        DEFAULT_MAX_STEPS if max_steps is None else V.integer("max_steps", max_steps, low=1, high=2**62)
    )
    low = coalescence_lower_bound(n, capacity)
    if max_steps < low:
        raise ValueError(f"max_steps = {max_steps} cannot be met: the top state (all {n} queues at capacity "
                         f"{capacity}) needs at least n L = {low} steps to meet the bottom state (the gap "
                         f"drops by at most one customer per step); raise max_steps to >= {low} or lower "
                         "capacity")
    V.memory("replicas", float(replicas) * (capacity + 1) * 4 * 2 * 3,
             f"{replicas} replicas x {capacity + 1} levels x 2 chains (uint32, with copies)")
    V.work("replicas", 2.0 * replicas * 4 * low)  # the least the first rounds can cost
    return pt, capacity, replicas, seed, max_steps


def perfect_samples(n: int | Point, d: int | None = None, lam: float | None = None, *, capacity: int,
                    replicas: int, seed: int = 0, replacement: bool = True, max_steps: int | None = None,
                    one_minus_lam: float | None = None) -> PerfectSamples:
    """``replicas`` exact stationary samples of the supermarket model with queues of capacity L.

    Propp-Wilson coupling from the past with T doubling from T_0 = max(n L, 16) (see the module
    docstring): the bottom (all empty) and top (all at L) count chains are run from time -T to 0
    on the words of those times until they agree at 0. ``n``, ``d``, ``lam`` (or
    ``one_minus_lam``), ``replacement`` as in :func:`qlib.supermarket.simulate` (or a
    :class:`~qlib.supermarket.point.Point` as ``n``); ``capacity`` in
    [1, 10^4]; ``max_steps`` bounds T per replica (default 2^40): below n L it is refused before
    anything compiles, and if a replica has not coalesced from the largest T within it, a
    ValueError names ``max_steps`` with how many had. ``seed`` selects the streams exactly as in
    ``simulate``: replica r's sample depends only on (seed, r).

    Args:
        n, d, lam, one_minus_lam, replacement: the point, as in :func:`qlib.supermarket.simulate`.
        capacity: L, in [1, 10^4].
        replicas: independent samples.
        seed: seed of the streams.
        max_steps: bound on T per replica (default 2^40), at least n L.

    Returns:
        A :class:`PerfectSamples`.

    Raises:
        ValueError: naming the parameter out of its range before anything compiles, or
            ``max_steps`` (with how many replicas had coalesced) when a replica has not.
    """
    pt, L, R, seed, max_steps = _check(
        n, d, lam, one_minus_lam, replacement, capacity, replicas, seed, max_steps
    )
    n, replacement = pt.n, pt.replacement
    params = K.lane_params([pt], [R])  # the event threshold of simulate at this point
    s0 = _rng.replica_states_np(seed, np.arange(R))
    counts = np.zeros((R, L + 1), np.int64)
    coalesced_at = np.full(R, -1, np.int64)
    spent = np.zeros(R, np.int64)
    T = min(max(16, coalescence_lower_bound(n, L)), max_steps)
    todo = np.arange(R)
    width = 1 << (R - 1).bit_length()
    while todo.size:
        # the lanes still to do first, then idle copies of the first up to a power of two >= R:
        # every round has the same shapes (one compile), and the kernel skips the idle groups
        m = todo.size
        lanes = np.r_[todo, np.full(width - m, todo[0])]
        u0 = np.zeros((2, L + 1, lanes.size), np.uint32)
        u0[:, 0] = n
        u0[1, 1:] = n
        with np.errstate(over="ignore"):  # s_r - 2T GOLDEN, mod 2^64
            rng0 = s0[lanes] - np.uint64(2 * T % 2**64) * np.uint64(_rng.GOLDEN)
        sub = K.LaneParams(*(a[lanes] for a in params))
        drv = K.ChainDriver(u0, rng0, sub, replacement=replacement, levels=L, progress=False, total=T,
                            desc="coupling from the past", capacity=True)
        try:
            drv.run(T, observe="seen", active=drv.mask(np.arange(lanes.size) < m))
            c = drv.counts()[:, :, :m]
        finally:
            drv.close()
        spent[todo] += T
        met = np.all(c[0] == c[1], axis=0)
        done = todo[met]
        counts[done] = c[0][:, met].T
        coalesced_at[done] = T
        todo = todo[~met]
        if todo.size and T >= max_steps:
            raise ValueError(f"max_steps = {max_steps}: {R - todo.size} of {R} replicas coalesced from T <= "
                             f"{max_steps} steps; the other {todo.size} need more; raise max_steps")
        T = min(2 * T, max_steps)
    return PerfectSamples(point=pt, capacity=L, seed=seed, counts=counts, coalescence_steps=coalesced_at,
                          start_states=s0, steps_run=spent)


def forward_meeting_states(n: int, d: int, lam: float, *, capacity: int, replicas: int, seed: int = 0,
                           replacement: bool = True) -> np.ndarray:
    """A deliberately BIASED sampler, kept as the wrong model the exactness tests must reject.

    Bottom and top start at time 0 and run forward on the replica's words of times 1, 2, ...;
    the state at which they first meet is returned, (R, L+1). The meeting time depends on the
    path, so this state is not stationary (it sits low: the chains meet when the top has drained).
    Runs the plain step (:func:`qlib.supermarket.chain.step`) until every replica has met: for
    small runs only.
    """
    pt, L, R, seed, _ = _check(n, d, lam, None, replacement, capacity, replicas, seed, None)
    n, replacement = pt.n, pt.replacement
    import jax
    import jax.numpy as jnp

    u0 = np.zeros((2, L + 1, R), np.uint32)
    u0[:, 0] = n
    u0[1, 1:] = n
    with jax.enable_x64(True):
        p = K.LaneParams(*(jnp.asarray(a) for a in K.lane_params([pt], [R])))

        def body(c):
            st, out, todo = c
            st, _ = K.step(st, p, replacement)  # the plain step: one kernel, no host round trip
            met = todo & jnp.all(st.u[0] == st.u[1], axis=0)
            return st, jnp.where(met[:, None], st.u[0].T.astype(jnp.int64), out), todo & ~met

        st0 = K.ChainState(jnp.asarray(_rng.replica_states_np(seed, np.arange(R))), jnp.asarray(u0),
                           jnp.zeros(R, jnp.int64))
        run = jax.jit(lambda c: jax.lax.while_loop(lambda c: jnp.any(c[2]), body, c))
        _, out, _ = run((st0, jnp.zeros((R, L + 1), jnp.int64), jnp.ones(R, bool)))
        return np.asarray(out)


def state_law(counts: Any, states: np.ndarray) -> np.ndarray:
    """Cell counts of sample count vectors (R, L+1) over the rows of ``states`` (S, L+1), e.g.
    the states of :func:`qlib.supermarket.exact_stationary`; ValueError if a sample is not one."""
    index = {tuple(int(v) for v in s): i for i, s in enumerate(np.asarray(states))}
    try:
        cells = [index[tuple(int(v) for v in c)] for c in np.asarray(counts)]
    except KeyError as e:
        raise ValueError(f"a sample {e.args[0]} is not among the given states") from None
    return np.bincount(np.asarray(cells, dtype=np.int64), minlength=len(index))
