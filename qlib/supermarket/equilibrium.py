"""Equilibrium estimates of the supermarket model with certified burn-in and honest error bars.

Model: the count chain u_i = #queues with length >= i of :func:`qlib.supermarket.simulate`
(docs/models.md#count-chain). :func:`estimate_equilibrium` estimates the stationary E[u_i]/n
and the stationary law of the longest queue, as a referee would want them measured
(docs/models.md#relaxation-time):

- **Burn-in certified, not guessed.** Every replica starts from empty. Either the monotone
  coupling certifies the burn-in (the chain from empty and the chain from the top state "all
  queues at k+2" have met in every replica, so the run no longer depends on where it started:
  docs/models.md#sandwich), or the burn-in is 20 relaxation times tau of the fluid ODE. The
  choice is recorded in the result.
- **Batch means, batches long enough to be independent.** After burn-in each replica runs in
  batches of ``batch_taus`` (default 20) tau; the batch means of all replicas are pooled, and
  a batch-length test (lag-1 autocorrelation of consecutive batch means) is reported.
- **Exact control variate.** E[u_1]/n = lam holds exactly in equilibrium for every n
  (docs/models.md#level-balance), so the measured u_1/n is used as a control variate for the
  other levels (regression coefficient estimated from the batch means); the variance factor
  it achieves is reported.
- **Sequential.** Batches are added until the 95% CI half-width of E[u_level]/n is at most
  ``rel_error`` times the estimate, or ``max_steps`` steps per replica are spent; each round
  continues the chains exactly (``simulate(..., initial=previous_result)``).

Limits, stated: tau is the relaxation time of the fluid ODE (the n -> oo chain). At small n the
chain can relax more slowly (JSQ(n) at n = 3 behaves like an M/M/3 queue), so batches of 20 tau
may then be too short; ``batch_lag1`` is the check. Student-t intervals need many visits: for a
level whose stationary mass is below ~1e-3 x (batches) the batch means are mostly 0 and the
interval can be too narrow; read such levels as "rarely visited", not as estimated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qlib import _progress
from qlib import _validate as V
from qlib.supermarket.batch_means import flow_summary, pad_levels, summarise
from qlib.supermarket.coupling import meeting_times
from qlib.supermarket.perfect import capacity_for, perfect_samples
from qlib.supermarket.point import Point, as_point
from qlib.supermarket.refined import relaxation_time
from qlib.supermarket.simulation import SupermarketResult, checked_capacity, simulate_many
from qlib.supermarket.theory import fluid_fixed_point, predicted_max_length, steps_per_time

BURN_IN_TAUS = 20.0
BATCH_TAUS = 20.0


@dataclass(frozen=True)
class EquilibriumEstimate:
    """Output of :func:`estimate_equilibrium`. Arrays run over levels i = 0..L.

    - ``tail_fraction[i]``: estimate of the stationary E[u_i]/n (fraction of queues with
      length >= i), with its 95% confidence interval ``ci_low[i]``, ``ci_high[i]``;
    - ``queue_length_distribution[i]``: estimate of the fraction of queues with length exactly i,
      with ``length_ci_low``, ``length_ci_high`` (from the batch means of u_i/n - u_{i+1}/n);
    - ``max_length_distribution[i]``: estimate of P(longest queue = i), with ``max_ci_low``,
      ``max_ci_high``;
    - ``level``: the level whose relative precision decided when to stop; ``converged``: the
      half-width there reached ``rel_error`` x estimate (``relative_halfwidth`` is what it reached);
    - ``relaxation_time``: tau (model time); ``relaxation_times``: tau covered per replica after
      burn-in; ``burn_in`` (steps per replica) and ``burn_in_method``;
    - ``steps`` measured per replica, in ``batches`` batches of ``batch_steps``; ``replicas``,
      ``seed``; ``batch_lag1``: lag-1 autocorrelation of the batch means at ``level`` (near 0
      when batches are independent); ``variance_factor``: Var with the control variate / Var
      without, at ``level`` (1 = no help).
    - ``capacity``: the bounded model's L (None: unbounded); ``start``: "empty" (burn-in) or
      "perfect" (each replica from its own exact sample; ``burn_in`` = 0);
    - with ``flows=True``: ``flow_fraction[i]``, the stationary E[g(u_i)] (g the model's, see
      :attr:`SupermarketResult.flow_fraction`), with ``flow_ci_low``, ``flow_ci_high``; and the
      level-flow residual ``flow_residual[j-1]`` = E[u_j/n] - lam E[g(u_{j-1})] for j = 1..L+1,
      estimated from the paired batch means (mean zero for JSQ(d): docs/models.md#level-flow),
      with its standard error ``flow_residual_se`` and degrees of freedom ``flow_dof``;
      None otherwise. ``variant``: the event map simulated ("model" or a near wrong model).
    """

    point: Point
    tail_fraction: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    queue_length_distribution: np.ndarray
    length_ci_low: np.ndarray
    length_ci_high: np.ndarray
    max_length_distribution: np.ndarray
    max_ci_low: np.ndarray
    max_ci_high: np.ndarray
    level: int
    rel_error: float
    relative_halfwidth: float
    converged: bool
    relaxation_time: float
    relaxation_times: float
    burn_in: int
    burn_in_method: str
    steps: int
    batch_steps: int
    batches: int
    replicas: int
    seed: int
    batch_lag1: float
    variance_factor: float
    flow_fraction: np.ndarray | None = None
    flow_ci_low: np.ndarray | None = None
    flow_ci_high: np.ndarray | None = None
    flow_residual: np.ndarray | None = None
    flow_residual_se: np.ndarray | None = None
    flow_dof: int | None = None
    variant: str = "model"
    capacity: int | None = None
    start: str = "empty"

    n = property(lambda self: self.point.n, doc="number of queues")
    d = property(lambda self: self.point.d, doc="choices per arrival")
    lam = property(lambda self: self.point.lam, doc="arrival rate per queue")
    one_minus_lam = property(lambda self: self.point.one_minus_lam, doc="1 - lam (as given, when given)")
    replacement = property(lambda self: self.point.replacement, doc="sampling with replacement")

    @property
    def levels(self) -> int:
        return self.tail_fraction.size - 1

    def flow_residual_in_se(self) -> np.ndarray:
        """flow_residual / flow_residual_se per level j = 1..L+1 (0 where both are 0: a level never
        reached, where the identity holds trivially)."""
        if self.flow_residual is None:
            raise ValueError("the level-flow sums were not kept: estimate with flows=True")
        r, se = self.flow_residual, self.flow_residual_se
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(se > 0, r / np.where(se > 0, se, 1.0), np.where(r == 0, 0.0, np.sign(r) * np.inf))

    def to_dataframe(self):
        """A tidy pandas DataFrame: one row per level i, with the point's parameters (n, d, lam,
        one_minus_lam, replacement), the estimates with their 95% CIs (``tail_fraction``,
        ``queue_length_fraction``, ``max_length_probability`` and their ``*_ci_low``/``*_ci_high``)
        and the run's summary (converged, relative_halfwidth at ``level``, batches, steps,
        relaxation_times, replicas, seed)."""
        import pandas as pd

        p = self.point
        return pd.DataFrame(
            {
                "n": p.n,
                "d": p.d,
                "lam": p.lam,
                "one_minus_lam": p.one_minus_lam,
                "replacement": p.replacement,
                "level": np.arange(self.levels + 1),
                "tail_fraction": self.tail_fraction,
                "tail_fraction_ci_low": self.ci_low,
                "tail_fraction_ci_high": self.ci_high,
                "queue_length_fraction": self.queue_length_distribution,
                "queue_length_fraction_ci_low": self.length_ci_low,
                "queue_length_fraction_ci_high": self.length_ci_high,
                "max_length_probability": pad_levels(self.max_length_distribution, self.levels + 1),
                "max_length_probability_ci_low": pad_levels(self.max_ci_low, self.levels + 1),
                "max_length_probability_ci_high": pad_levels(self.max_ci_high, self.levels + 1),
                "precision_level": self.level,
                "converged": self.converged,
                "relative_halfwidth": self.relative_halfwidth,
                "batches": self.batches,
                "steps": self.steps,
                "relaxation_times": self.relaxation_times,
                "replicas": self.replicas,
                "seed": self.seed,
            }
        )


def default_level(n: int | Point, d: int | None = None, lam: float | None = None) -> int:
    """k+1 if the fluid fixed point puts non-negligible mass there (n s_{k+1} >= 0.01 queues),
    else the deepest level with that much mass (k for d >= 2). ``n`` may be a Point."""
    p = as_point(n, d, lam)
    n, lam = p.n, p.lam
    theory = Point(None, p.d, **p.rate)  # the n -> oo fluid, whatever the sampling
    k = predicted_max_length(theory)
    if not math.isfinite(k):  # d = 1: geometric tail
        return max(1, int(math.floor(math.log(0.01 / n) / math.log(lam))))
    s = fluid_fixed_point(theory, levels=int(k) + 1)
    return int(k) + 1 if n * s[int(k) + 1] >= 0.01 else int(k)


def estimate_equilibrium(n: int | Point, d: int | None = None, lam: float | None = None, *,
                         rel_error: float = 0.1, level: int | None = None, max_steps: int | None = None,
                         seed: int = 0, replacement: bool | None = None, replicas: int = 8,
                         burn_in: str = "auto", burn_taus: float = BURN_IN_TAUS,
                         batch_taus: float = BATCH_TAUS, min_batches: int = 2, batches: int | None = None,
                         progress: bool | None = None, one_minus_lam: float | None = None,
                         flows: bool = False, variant=None, tau: float | None = None,
                         capacity: int | None = None, start: str = "empty") -> EquilibriumEstimate:
    """Estimate the stationary E[u_i]/n and the law of the longest queue of the supermarket model.

    Runs ``replicas`` chains from empty, burns them in, then adds batches of ``batch_taus``
    relaxation times until the 95% CI half-width of E[u_level]/n is <= ``rel_error`` x the
    estimate (with at least ``min_batches`` batches per replica) or ``max_steps`` are spent. The
    same ``seed`` gives the same numbers.

    Args:
        n: number of queues, or a :class:`~qlib.supermarket.point.Point` in place of
            (n, d, lam, replacement).
        d: choices per arrival.
        lam: arrival rate per queue (or ``one_minus_lam``).
        rel_error: the target relative CI half-width, in (0, 1).
        level: the level whose CI decides the stop (default: :func:`default_level`).
        max_steps: measured steps per replica at most (default: 200 batches).
        seed: seed of the random streams.
        replacement: sample with replacement (default True) or without.
        replicas: independent chains, >= 2.
        burn_in: "coupling" (certified by the monotone coupling), "tau" (``burn_taus``
            relaxation times) or "auto" (the coupling if it certifies a shorter burn-in).
        burn_taus: the burn-in (and the limit of a certified one) in relaxation times.
        batch_taus: steps per batch, in relaxation times.
        min_batches: batches per replica at least.
        batches: run exactly that many batches instead of stopping sequentially.
        progress: show a progress bar toward the precision target.
        one_minus_lam: 1 - lam in place of ``lam``.
        flows: also estimate the level-flow identity's residual at every level
            (``flow_residual``, ``flow_residual_se``).
        variant: a near wrong model (:mod:`qlib.supermarket.variants`) in place of JSQ(d), run
            with the model's tau and ``burn_taus`` of burn-in (the coupling certifies the model's
            burn-in only).
        tau: the relaxation time that sizes burn-in and batches (default: the point's own).
        capacity: L for the bounded model (docs/models.md#bounded-model): the coupling's top chain
            starts at L, which sandwiches every state, and no control variate is used.
        start: "empty", or "perfect": every replica starts from its own exact stationary sample
            (of the bounded model at ``capacity``, or at k + 3 for the unbounded model, exact up
            to the stationary mass there, which ``burn_in_method`` reports; coupling from the past,
            :func:`qlib.supermarket.perfect_samples`) and needs no burn-in.

    Returns:
        An :class:`EquilibriumEstimate`.

    Raises:
        ValueError: naming the parameter out of its range, before any compile; ``burn_in`` when
            "coupling" does not certify a burn-in within 50 x ``burn_taus``.
    """
    point = as_point(n, d, lam, one_minus_lam=one_minus_lam, replacement=replacement, simulation=True)
    return estimate_equilibrium_many([point], rel_error=rel_error, level=level,
                                     max_steps=max_steps, seeds=[seed], replacement=replacement,
                                     replicas=replicas, burn_in=burn_in, burn_taus=burn_taus,
                                     batch_taus=batch_taus, min_batches=min_batches, batches=batches,
                                     progress=progress, flows=flows, variant=variant, tau=tau,
                                     capacity=capacity, start=start)[0]


def estimate_equilibrium_many(points: Sequence[tuple[int, int, float] | Point], *, rel_error: float = 0.1,
                              level: int | Sequence[int] | None = None,
                              max_steps: int | Sequence[int] | None = None,
                              seeds: Sequence[int] | None = None, replacement: bool | None = None,
                              replicas: int = 8, burn_in: str = "auto", burn_taus: float = BURN_IN_TAUS,
                              batch_taus: float = BATCH_TAUS,
                              min_batches: int = 2, batches: int | None = None,
                              tau: float | Sequence[float] | None = None,
                              progress: bool | None = None, flows: bool = False,
                              variant=None, capacity: int | None = None,
                              start: str = "empty") -> list[EquilibriumEstimate]:
    """:func:`estimate_equilibrium` at several points at once, each round in one kernel.

    Each round runs every unconverged point as lanes of one kernel
    (:func:`qlib.supermarket.simulate_many`). Point p with seed ``seeds[p]`` (default p) gives
    exactly the numbers of the single-point call.

    Args:
        points: (n, d, lam) or :class:`~qlib.supermarket.point.Point`; they share one
            ``replacement`` (the points' own, or True).
        level, max_steps, tau: one value or one per point. ``tau``: the relaxation time(s) that
            size burn-in and batches (default: each point's own,
            :func:`qlib.supermarket.relaxation_time`); a deliberately wrong model is run with the
            right model's tau, so that it gets the same number of steps.
        seeds: one per point (default 0, 1, ..., P-1).
        batches: run exactly that many batches per replica instead of stopping sequentially.
        burn_taus: the burn-in (and the limit of a certified one) in tau.
        rel_error, replicas, burn_in, batch_taus, min_batches, progress, flows, variant, capacity, start:
            as in :func:`estimate_equilibrium` (one variant for all points).

    Returns:
        One :class:`EquilibriumEstimate` per point, in order.

    Raises:
        ValueError: naming the parameter out of its range, before any compile.
    """
    if replacement is None:
        replacement = next((p.replacement for p in points if isinstance(p, Point)), True)
    points_ = [as_point(p, replacement=replacement, simulation=True) if isinstance(p, Point)
               else as_point(*p, replacement=replacement, simulation=True) for p in points]
    replacement = points_[0].replacement if points_ else bool(replacement)
    P = len(points_)
    if P < 1:
        raise ValueError("points must hold at least one (n, d, lam); got none")
    rel_error = V.real("rel_error", rel_error, low=0.0, high=1.0)
    replicas = V.integer("replicas", replicas, low=2)
    min_batches = V.integer("min_batches", min_batches, low=1)
    batch_taus = V.real("batch_taus", batch_taus, low=0.0)
    burn_taus = V.real("burn_taus", burn_taus, low=0.0)
    V.choice("burn_in", burn_in, ("auto", "coupling", "tau"))
    if variant is not None and variant != "model":
        burn_in = "tau"  # the coupling's certificate is the model's, not the variant's
    seeds = list(range(P)) if seeds is None else [V.integer("seeds", s, low=0, high=2**63 - 1) for s in seeds]
    if len(seeds) != P:
        raise ValueError(f"seeds must hold one seed per point ({P}); got {len(seeds)}")
    levels = _levels(level, points_)
    plan = _Budget.of(points_, tau, batch_taus, batches, max_steps, min_batches, replicas)
    if progress is None:
        progress = sum(plan.cap) * replicas >= 5e10
    capacity = checked_capacity(capacity)
    if capacity is not None:  # no level above the capacity holds mass
        levels = [min(lv, capacity) for lv in levels]
    V.choice("start", start, ("empty", "perfect"))
    if start == "perfect" and variant is not None and variant != "model":
        raise ValueError(
            "start='perfect' draws the model's stationary law, not a variant's; use start='empty'"
        )
    burns = [_burn_in(points_[p], plan.per_tau[p], burn_in, burn_taus, start, capacity, replicas, seeds[p])
             for p in range(P)]
    runs = _Rounds(P)
    runs.run(points_, plan, burns, levels, seeds, replicas=replicas, rel_error=rel_error,
             replacement=replacement, progress=progress, flows=flows, variant=variant, capacity=capacity)
    return [runs.estimate(p, points_[p], plan, burns[p], levels[p], seeds[p], replicas=replicas,
                          rel_error=rel_error, flows=flows, capacity=capacity, start=start) for p in range(P)]


def _levels(level, points: list[Point]) -> list[int]:
    """The level whose CI decides each point's stop: ``level`` once or per point, or the default."""
    if level is None or isinstance(level, (int, np.integer)):
        return [default_level(p) if level is None else V.integer("level", level, low=1) for p in points]
    levels = [V.integer("level", x, low=1) for x in level]
    if len(levels) != len(points):
        raise ValueError(f"level must be an int or one per point ({len(points)}); got {len(levels)}")
    return levels


@dataclass
class _Budget:
    """Per point: the relaxation time ``tau``, steps per tau, steps per batch, the step cap; and
    the batches a point runs at least."""

    tau: list[float]
    per_tau: list[float]
    batch: list[int]
    cap: list[int]
    min_batches: int

    @classmethod
    def of(cls, points: list[Point], tau, batch_taus: float, batches, max_steps, min_batches: int,
           replicas: int) -> _Budget:
        P = len(points)
        if tau is None:
            tau = [relaxation_time(p.d, p.lam) for p in points]
        elif isinstance(tau, (int, float, np.integer, np.floating)):
            tau = [V.real("tau", tau, low=0.0)] * P
        else:
            tau = [V.real("tau", t, low=0.0) for t in tau]
            if len(tau) != P:
                raise ValueError(f"tau must be one value or one per point ({P}); got {len(tau)}")
        per_tau = [steps_per_time(p.n, p.lam) * t for p, t in zip(points, tau)]
        batch = [max(1, int(math.ceil(batch_taus * s))) for s in per_tau]
        if batches is not None:
            batches = V.integer("batches", batches, low=1)
            min_batches = batches
            cap = [batches * b for b in batch]
        elif max_steps is None:
            cap = [200 * b for b in batch]
        elif isinstance(max_steps, (int, np.integer)):
            cap = [V.integer("max_steps", max_steps, low=1)] * P
        else:
            cap = [V.integer("max_steps", m, low=1) for m in max_steps]
            if len(cap) != P:
                raise ValueError(f"max_steps must be an int or one per point ({P}); got {len(cap)}")
        for c in cap:
            V.work("max_steps", float(c) * replicas * P)
        return cls(tau, per_tau, batch, cap, min_batches)


def _burn_in(point: Point, per_tau: float, burn_in: str, burn_taus: float, start: str, capacity: int | None,
             replicas: int, seed: int) -> tuple[int, str, object]:
    """(burn-in steps, how they were found, the start) of one point: an exact stationary start,
    a burn-in certified by the monotone coupling, or ``burn_taus`` relaxation times."""
    b_tau = int(math.ceil(burn_taus * per_tau))
    k = predicted_max_length(point)
    if start == "perfect":
        ps, why = _perfect_start(point, capacity, replicas, seed, per_tau)
        return 0, why, {"counts": ps.counts}
    if burn_in != "tau" and (math.isfinite(k) or capacity is not None):
        # bounded: the top state (all at L) sandwiches every start, so the certificate is exact
        top_len = capacity if capacity is not None else int(k) + 2
        T = meeting_times(point, replicas=replicas, seed=seed, top_length=top_len,
                          max_steps=b_tau if burn_in == "auto" else 50 * b_tau,
                          progress=False, capacity=capacity)
        if np.all(np.isfinite(T)):
            b = int(T.max())
            return b, (f"coupling: all {replicas} replicas from empty met the chain from all queues "
                       + (f"at capacity L = {top_len}" if capacity is not None else f"at k+2 = {top_len}")
                       + f" by step {b} ({b / per_tau:.1f} tau)"), "empty"
        if burn_in == "coupling":
            raise ValueError(f"burn_in='coupling': the chains had not all met within 50 x {burn_taus:g} tau "
                             f"= {50 * b_tau} steps at (n, d, lam) = {(point.n, point.d, point.lam)}; "
                             "use burn_in='tau'")
    return (
        b_tau,
        (
            f"{burn_taus:g} tau = {b_tau} steps (the coupling did not certify a shorter one)"
            if burn_in == "auto" and math.isfinite(k)
            else f"{burn_taus:g} tau = {b_tau} steps"
        ),
        "empty",
    )


class _Rounds:
    """The batches of every point, round by round, continuing every chain exactly. A round runs m
    batches in one call; m grows with what the CI still needs, so a long estimate costs few calls."""

    def __init__(self, P: int):
        self.P = P
        self.results: list[SupermarketResult | None] = [None] * P
        self.tails: list[list[np.ndarray]] = [[] for _ in range(P)]  # per round: (replicas, m, L+1)
        self.flowb: list[list[np.ndarray]] = [[] for _ in range(P)]  # per round: (replicas, m, L+1) of g(u_i)
        self.maxes: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(P)]  # (steps, (replicas, L+1))
        self.nb = [0] * P
        self.est: list[tuple] = [None] * P  # type: ignore[list-item]

    def run(self, points: list[Point], plan: _Budget, burns: list[tuple], levels: list[int], seeds: list[int],
            *, replicas: int, rel_error: float, replacement: bool, progress: bool, flows: bool, variant,
            capacity: int | None) -> None:
        """Run rounds until every point's CI at its level meets ``rel_error`` or its cap is spent."""
        P = self.P
        want = [plan.min_batches] * P  # batches to run in the next round
        done = [False] * P
        # Progress toward the precision target, not through the step budget (which a sequential
        # estimate rarely spends): each point counts min(1, (rel_error / reached)^2), the share of
        # the batches it needs that it has run if the variance per batch stays as it is; 1 when done.
        bar = _progress.progress_bar(P, show=progress, desc="equilibrium", unit="point")
        shown, rounds = 0.0, 0
        try:
            while not all(done):
                todo = [p for p in range(P) if not done[p]]
                m_of = {p: max(1, min(want[p], plan.cap[p] // plan.batch[p] - self.nb[p])) for p in todo}
                # one call per round size (a call runs one batch count for all of its points)
                for m in sorted(set(m_of.values())):
                    self._call(
                        [p for p in todo if m_of[p] == m],
                        m,
                        points,
                        plan,
                        burns,
                        seeds,
                        replicas=replicas,
                        replacement=replacement,
                        flows=flows,
                        variant=variant,
                        capacity=capacity,
                    )
                for p in todo:
                    done[p], want[p] = self._judge(p, points[p], plan, levels[p], rel_error, capacity)
                rounds += 1
                reached = [self.est[p][1][levels[p]] / self.est[p][0][levels[p]]
                           if self.est[p][0][levels[p]] > 0 else math.inf for p in range(P)]
                share = sum(1.0 if done[p] else min(1.0, (rel_error / reached[p]) ** 2) for p in range(P))
                bar.update(share - shown)
                shown = share
                open_ = [reached[p] for p in range(P) if not done[p]]
                bar.set_postfix(round=rounds, target=f"{rel_error:.3g}",
                                worst=f"{max(open_):.3g}" if open_ else "done")
        finally:
            bar.close()

    def _call(self, grp: list[int], m: int, points, plan: _Budget, burns, seeds, *, replicas, replacement,
              flows, variant, capacity) -> None:
        """m more batches of the points ``grp``, in one kernel call."""
        res = self.results
        out = simulate_many(
            [points[p] for p in grp],
            steps=[m * plan.batch[p] for p in grp],
            replicas=replicas,
            seeds=[seeds[p] for p in grp],
            batches=m,
            burn_in=[burns[p][0] if res[p] is None else 0 for p in grp],
            initial=[res[p] if res[p] is not None else burns[p][2] for p in grp],
            replacement=replacement,
            progress=False,
            flows=flows,
            variant=variant,
            capacity=capacity,
        )
        for p, r in zip(grp, out):
            res[p] = r
            self.tails[p].append(r.batch_tail_fraction)
            if flows:
                self.flowb[p].append(r.batch_flow_fraction)
            self.maxes[p].append((r.steps, r.max_length_distribution))
            self.nb[p] += m

    def _judge(self, p: int, point: Point, plan: _Budget, level: int, rel_error: float,
               capacity: int | None) -> tuple[bool, int]:
        """(whether point p is done, the batches its next round runs), from its estimate so far."""
        nb = self.nb[p]
        # E[u_1] = lam n is exact for every routing rule, but not when arrivals are lost
        self.est[p] = summarise(self.tails[p], self.maxes[p], point.lam if capacity is None else None, level)
        mean, half = self.est[p][0][level], self.est[p][1][level]
        if (nb >= plan.min_batches and mean > 0 and half <= rel_error * mean) or nb >= plan.cap[
            p
        ] // plan.batch[p]:
            return True, 0
        # batches still needed if the variance per batch stays what it is (at least double)
        need = nb * (half / (rel_error * mean)) ** 2 if mean > 0 else 2 * nb
        return False, int(min(max(nb, math.ceil(1.1 * need) - nb), 4 * nb))

    def estimate(self, p: int, point: Point, plan: _Budget, burn: tuple, level: int, seed: int, *,
                 replicas: int, rel_error: float, flows: bool, capacity: int | None, start: str
                 ) -> EquilibriumEstimate:
        """Point p's :class:`EquilibriumEstimate` from its batches."""
        mean, half, factor, mmean, mhalf, lag1, pmean, phalf = self.est[p]
        nb, batch = self.nb[p], plan.batch[p]
        lv = min(level, mean.size - 1)
        rel = float(half[lv] / mean[lv]) if mean[lv] > 0 else float("inf")
        fl = flow_summary(self.tails[p], self.flowb[p], point.lam) if flows else {}
        vname = self.results[p].variant if self.results[p] is not None else "model"
        return EquilibriumEstimate(
            point=point,
            tail_fraction=mean,
            ci_low=mean - half,
            ci_high=mean + half,
            queue_length_distribution=pmean,
            length_ci_low=pmean - phalf,
            length_ci_high=pmean + phalf,
            max_length_distribution=mmean,
            max_ci_low=np.clip(mmean - mhalf, 0, 1),
            max_ci_high=np.clip(mmean + mhalf, 0, 1),
            level=level,
            rel_error=rel_error,
            relative_halfwidth=rel,
            converged=bool(rel <= rel_error),
            relaxation_time=plan.tau[p],
            relaxation_times=nb * batch / plan.per_tau[p],
            burn_in=burn[0],
            burn_in_method=burn[1],
            steps=nb * batch,
            batch_steps=batch,
            batches=nb,
            replicas=replicas,
            seed=seed,
            batch_lag1=lag1,
            variance_factor=float(factor[lv]),
            variant=vname,
            capacity=capacity,
            start=start,
            **fl,
        )


def _perfect_start(point: Point, capacity: int | None, replicas: int, seed: int, steps_per_tau: float):
    """Each replica's own exact sample of the bounded model at time 0 (its words of times <= 0;
    the estimate then runs on its words of times >= 1, independent of them), and what it says."""
    L = capacity if capacity is not None else capacity_for(point)
    ps = perfect_samples(point, capacity=L, replicas=replicas, seed=seed)
    mass, se = ps.mass_at_capacity
    why = (
        f"perfect: every replica starts from its own exact stationary sample of the bounded model at L = {L} "
        f"(coupling from the past, mean coalescence {ps.coalescence_steps.mean():.3g} steps = "
        f"{ps.coalescence_steps.mean() / steps_per_tau:.1f} tau); no burn-in"
    )
    if capacity is None:
        why += (f"; for the unbounded chain the start is exact up to the stationary mass at L, "
                f"E[u_L]/n = {mass:.2g} ± {se:.1g}, loss probability {ps.loss_probability[0]:.2g}")
    return ps, why


__all__ = ["EquilibriumEstimate", "estimate_equilibrium", "estimate_equilibrium_many", "default_level"]
