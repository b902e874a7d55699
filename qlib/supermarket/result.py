"""The result of a supermarket simulation: :class:`SupermarketResult`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qlib import stats
from qlib.supermarket.point import Point

__all__ = ["SupermarketResult"]


@dataclass(frozen=True)
class SupermarketResult:
    """Output of :func:`simulate`. Arrays have one row per replica (R = ``replicas``, L = ``levels``).

    - ``tail_fraction[r, i]`` (R, L+1): time average of u_i/n (fraction of queues with
      length >= i) over the ``steps`` steps after burn-in.
    - ``max_length[r]`` (R,): the largest queue length present at any step after burn-in.
    - ``max_length_distribution[r, i]`` (R, L+1): fraction of those steps at which the maximum was i.
    - ``counts[r, i]`` (R, L+1): the final u_i.
    - ``state[r]`` (R,) uint64: the final random state of replica r (pass the result as
      ``initial`` to continue the same chains).
    - ``batch_tail_fraction[r, b, i]`` (R, batches, L+1): ``tail_fraction`` over each of
      ``batches`` equal batches.
    - ``trajectory[r, t, i]`` (R, steps // record_every, L+1): u_i after every
      ``record_every`` steps (only if asked for).
    - ``flow_fraction[r, i]`` (R, L+1), with ``flows=True`` only: time average of g(u_i), the
      probability that all d sampled queues have length >= i under the *model's* d and sampling
      rule ((u_i/n)^d, or C(u_i, d)/C(n, d) without replacement), over the same steps as
      ``tail_fraction``; lam ``flow_fraction[:, j-1]`` is the rate per queue at which arrivals
      enter level j, so in equilibrium E[u_j/n] = lam E[g(u_{j-1})] (docs/models.md#level-flow).
      Exact time sums of g rounded to 2^-40 per step (chain.FLOW_BITS), so bit-identical however
      the run is batched or sharded. ``batch_flow_fraction`` (R, batches, L+1) per batch.
    - ``capacity``, ``lost_arrivals`` (R,): the bounded model (each queue holds at most
      ``capacity`` customers, docs/models.md#bounded-model) and the arrivals it lost at a full
      queue in the measured steps (None without a capacity); ``loss_probability`` their share.
    - ``variant``: the event map simulated, "model" or a near wrong model of
      :mod:`qlib.supermarket.variants` (its name, e.g. "eta_greedy(0.01)").
    """

    point: Point  # the parameters simulated (1 - lam as given, when given as one_minus_lam)
    steps: int
    burn_in: int
    seed: int
    tail_fraction: np.ndarray
    max_length: np.ndarray
    max_length_distribution: np.ndarray
    counts: np.ndarray
    batch_tail_fraction: np.ndarray
    state: np.ndarray
    trajectory: np.ndarray | None = None
    record_every: int | None = None
    flow_fraction: np.ndarray | None = None
    batch_flow_fraction: np.ndarray | None = None
    variant: str = "model"
    capacity: int | None = None
    lost_arrivals: np.ndarray | None = None

    n = property(lambda self: self.point.n, doc="number of queues")
    d = property(lambda self: self.point.d, doc="choices per arrival")
    lam = property(lambda self: self.point.lam, doc="arrival rate per queue")
    one_minus_lam = property(lambda self: self.point.one_minus_lam, doc="1 - lam (as given, when given)")
    replacement = property(lambda self: self.point.replacement, doc="sampling with replacement")

    @property
    def replicas(self) -> int:
        return self.tail_fraction.shape[0]

    @property
    def levels(self) -> int:
        return self.tail_fraction.shape[1] - 1

    @property
    def queue_length_distribution(self) -> np.ndarray:
        """Time-average fraction of queues with length exactly i, (R, L+1): s_i - s_{i+1}."""
        t = self.tail_fraction
        return t - np.concatenate([t[:, 1:], np.zeros((t.shape[0], 1))], axis=1)

    @property
    def time(self) -> float:
        """Model time covered by the measured steps: steps / ((1 + lam) n)."""
        return self.steps / ((1.0 + self.lam) * self.n)

    def to_dataframe(self):
        """A tidy pandas DataFrame: one row per (replica, level i), with the point's parameters
        (n, d, lam, one_minus_lam, replacement), seed, steps and burn_in, then
        ``tail_fraction`` (time-average u_i/n), ``queue_length_fraction`` (length exactly i),
        ``max_length_probability`` (P(max = i)) and the final ``counts`` u_i."""
        import pandas as pd

        R, L1 = self.tail_fraction.shape
        p = self.point
        return pd.DataFrame({
            "n": p.n, "d": p.d, "lam": p.lam, "one_minus_lam": p.one_minus_lam, "replacement": p.replacement,
            "seed": self.seed, "steps": self.steps, "burn_in": self.burn_in,
            "replica": np.repeat(np.arange(R), L1), "level": np.tile(np.arange(L1), R),
            "tail_fraction": self.tail_fraction.ravel(),
            "queue_length_fraction": self.queue_length_distribution.ravel(),
            "max_length_probability": self.max_length_distribution.ravel(),
            "counts": self.counts.ravel(),
        })

    def tail_fraction_estimate(self):
        """Mean and standard error of ``tail_fraction``: over replicas if there are several,
        else by batch means of the single run (needs ``batches >= 2``)."""
        if self.replicas >= 2:
            return stats.replica_mean(self.tail_fraction)
        if self.batch_tail_fraction.shape[1] >= 2:
            return stats.replica_mean(self.batch_tail_fraction[0])
        raise ValueError("an error bar needs replicas >= 2 or batches >= 2")

    @property
    def loss_probability(self) -> np.ndarray | None:
        """Bounded model: lost arrivals / expected arrivals (lam n per unit time) in the measured
        steps, per replica (R,), an estimate of P(an arrival is lost); None without a capacity."""
        if self.lost_arrivals is None:
            return None
        return self.lost_arrivals / (self.lam * self.n * self.time)

    def level_flow_residual(self):
        """The paired residual of the level-flow identity, Z_j = u_j/n - lam g(u_{j-1}) time-averaged,
        for j = 1..L+1 (index j - 1), as an :class:`qlib.stats.Estimate` over replicas (or batch
        means of one replica). Mean zero in equilibrium for JSQ(d) with the model's sampling rule
        (docs/models.md#level-flow); needs ``flows=True``."""
        if self.flow_fraction is None:
            raise ValueError("the level-flow sums were not kept: simulate with flows=True")
        z = lambda t, f: np.concatenate([t[..., 1:], np.zeros(t.shape[:-1] + (1,))], axis=-1) - self.lam * f  # noqa: E731
        if self.replicas >= 2:
            return stats.replica_mean(z(self.tail_fraction, self.flow_fraction))
        if self.batch_flow_fraction.shape[1] >= 2:
            return stats.replica_mean(z(self.batch_tail_fraction[0], self.batch_flow_fraction[0]))
        raise ValueError("an error bar needs replicas >= 2 or batches >= 2")
