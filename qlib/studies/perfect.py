"""Study: exact stationary samples of the bounded supermarket model (notebook 04).

A method, not a claim of the papers (docs/models.md#bounded-model): coupling from the past
(:func:`qlib.supermarket.perfect_samples`) draws the stationary law of the supermarket model
whose queues hold at most L customers exactly, with no burn-in argument. This study shows

- **exactness**: at n = 2..6, the empirical law of many perfect samples against the exact
  stationary law of the bounded chain (:func:`qlib.supermarket.exact_stationary`), by a G-test
  whose threshold is fixed in :data:`PARAMETERS`; the forward-coupling meeting state (a biased
  sampler, :func:`qlib.supermarket.perfect.forward_meeting_states`) must fail the same test;
- **cost**: the coalescence time against n and lam, in steps, in units of n L (no coalescence
  can be faster) and of the relaxation time tau, beside the forward meeting time of the same
  two starts (the coupling certificate of ``estimate_equilibrium``'s burn-in) and the 20 tau
  burn-in, so one reads off when a perfect start is cheaper than a burn-in;
- **the law of the maximum** at notebook 01's boundary point, from iid exact samples (Wilson
  intervals), with the stationary mass at L and the loss probability: how far the bounded
  model at L = k + 3 is from the unbounded one.

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS`, then plain functions (issue 50):
:func:`parameters` (the mode's typed parameters), :func:`plan` (the runs, each a cache entry) and
:func:`assemble` (their arrays into a :class:`PerfectResult`), which :func:`qlib.runner.run`
carries out (``run(perfect, "full")``); :func:`claim_rows`, :func:`findings`; figures in
:mod:`qlib.plots.perfect`. It imports nothing from :mod:`qlib.results`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from qlib import _rng, stats
from qlib.claims import ClaimRow, ClaimSpec
from qlib.studies import ArrayResult, check_mode
from qlib.studies.plan import Run
from qlib.supermarket import (
    exact_equilibrium,
    exact_stationary,
    meeting_times,
    perfect_samples,
    relaxation_time,
)
from qlib.supermarket.equilibrium import BURN_IN_TAUS
from qlib.supermarket.perfect import capacity_for, forward_meeting_states, state_law
from qlib.supermarket.point import PointTuple
from qlib.supermarket.theory import all_sampled_at_least, predicted_max_length, steps_per_time

#: The thresholds of the rows, fixed before any run (both modes): ``p_pass`` the G-test's (exact
#: samples pass at p > p_pass, the biased sampler must give p < p_pass); ``loss_z`` the loss
#: probability within this many standard errors of the exact one.
CLAIM_THRESHOLDS: dict[str, float] = dict(p_pass=1e-3, loss_z=5.0)

#: Every parameter, per mode. ``exactness``: (n, d, lam, L, replacement) points and samples per
#: point; ``cost``: d, the (lam, n) grid, replicas; ``max_law``:
#: notebook 01's boundary point (1-lam) d^k = 1 and its samples; ``extra``: L = k + extra.
PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": {
        "exactness": dict(points=[(3, 2, 0.8, 4, True)], samples=3_000),
        "cost": dict(d=10, grid=[(0.9, 100), (0.9, 200), (0.99, 100)], replicas=4),
        "max_law": dict(point=(100, 10, 0.99), replicas=8),
        "extra": 3, "seed": 400, "claims": CLAIM_THRESHOLDS,
    },
    "full": {
        "exactness": dict(points=[(2, 3, 0.95, 5, True), (3, 2, 0.8, 4, True), (4, 2, 0.9, 3, False),
                                  (6, 3, 0.7, 2, True)], samples=20_000),
        "cost": dict(d=10, grid=[(0.9, 100), (0.9, 1_000), (0.9, 10_000), (0.99, 100), (0.99, 1_000)],
                     replicas=16),
        # notebook 01's boundary point: k = 2, (1-lam) d^k = 1
        "max_law": dict(point=(10_000, 10, 0.99), replicas=32),
        "extra": 3, "seed": 400, "claims": CLAIM_THRESHOLDS,
    },
}


@dataclass(frozen=True)
class Exactness(ArrayResult):
    """Per exactness point j (P,): ``n``, ``d``, ``lam``, ``capacity``, ``replacement``;
    ``samples``; G-test ``G``, ``dof``, ``p_value`` of the perfect samples and ``biased_G``,
    ``biased_p`` of the forward meeting states; ``loss`` (its 5-SE check uses ``loss_se``) and
    the exact ``loss_exact``; ``p_pass`` (scalar)."""

    n: np.ndarray
    d: np.ndarray
    lam: np.ndarray
    capacity: np.ndarray
    replacement: np.ndarray
    samples: np.ndarray
    G: np.ndarray
    dof: np.ndarray
    p_value: np.ndarray
    biased_G: np.ndarray
    biased_p: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray
    loss_exact: np.ndarray
    p_pass: np.ndarray


@dataclass(frozen=True)
class Cost(ArrayResult):
    """Per cost point j (P,): ``n``, ``d``, ``lam``, ``capacity``, ``tau`` (model time);
    ``coalescence`` (P, R) steps T per sample, ``steps_run`` (P, R) steps per chain per sample,
    ``forward`` (P, R) forward meeting times of the same two starts (unbounded chain, top at L);
    ``burn_in`` (P,) the 20 tau burn-in in steps; ``mass`` (P,) mean u_L/n and ``loss`` (P,)
    mean loss probability over the samples."""

    n: np.ndarray
    d: np.ndarray
    lam: np.ndarray
    capacity: np.ndarray
    tau: np.ndarray
    coalescence: np.ndarray
    steps_run: np.ndarray
    forward: np.ndarray
    burn_in: np.ndarray
    mass: np.ndarray
    loss: np.ndarray


@dataclass(frozen=True)
class MaxLaw(ArrayResult):
    """At one point: ``n``, ``d``, ``lam``, ``k``, ``capacity`` (scalars); ``counts`` (R, L+1) the
    perfect samples; ``max_law`` (L+1,) the fraction of samples whose longest queue is i, with
    Wilson ``max_low``/``max_high``; ``mass``, ``mass_se`` of u_L/n; ``loss``, ``loss_se``."""

    n: np.ndarray
    d: np.ndarray
    lam: np.ndarray
    k: np.ndarray
    capacity: np.ndarray
    counts: np.ndarray
    max_law: np.ndarray
    max_low: np.ndarray
    max_high: np.ndarray
    mass: np.ndarray
    mass_se: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray


@dataclass(frozen=True)
class PerfectResult:
    """Everything notebook 04 shows: ``exactness``, ``cost``, ``max_law``, and the ``mode``."""

    exactness: Exactness
    cost: Cost
    max_law: MaxLaw
    mode: str


def _seed(base: int, name: str, j: int) -> int:
    """One named, independent seed per (set of runs, point) (no hand-picked offsets)."""
    return int(_rng.replica_states_np(base, np.array([j]), stream=_STREAMS[name])[0] >> np.uint64(1))


_STREAMS = {"exactness": 1, "cost": 2, "max_law": 3}


def exactness(points, samples: int, p_pass: float, seed: int, *, progress: bool = False) -> Exactness:
    """The G-tests of perfect samples and of the biased sampler at small n (see the module)."""
    cols: dict[str, list] = {k: [] for k in ("n", "d", "lam", "capacity", "replacement", "samples", "G",
                                             "dof", "p_value", "biased_G", "biased_p", "loss", "loss_se",
                                             "loss_exact")}
    for j, (n, d, lam, L, repl) in enumerate(points):
        s = _seed(seed, "exactness", j)
        r = perfect_samples(n, d, lam, capacity=L, replicas=samples, seed=s, replacement=repl)
        C, pi = exact_stationary(n, d, lam, L, replacement=repl)
        g = stats.g_test(state_law(r.counts, C), pi)
        b = stats.g_test(state_law(forward_meeting_states(n, d, lam, capacity=L, replicas=samples, seed=s,
                                                          replacement=repl), C), pi)
        loss, loss_se = r.loss_probability
        for k, v in dict(n=n, d=d, lam=lam, capacity=L, replacement=repl, samples=samples, G=g.G, dof=g.dof,
                         p_value=g.p_value, biased_G=b.G, biased_p=b.p_value, loss=loss, loss_se=loss_se,
                         loss_exact=exact_equilibrium(n, d, lam, capacity=L,
                                                      replacement=repl).loss_probability
                         ).items():
            cols[k].append(v)
    return Exactness(**{k: np.asarray(v) for k, v in cols.items()}, p_pass=np.asarray(p_pass))


def _cost_point(n: int, d: int, lam: float, replicas: int, extra: int, seed: int) -> dict[str, np.ndarray]:
    L = capacity_for(d, lam, extra=extra)
    r = perfect_samples(n, d, lam, capacity=L, replicas=replicas, seed=seed)
    fwd = meeting_times(n, d, lam, replicas=replicas, seed=seed, top_length=L, max_steps=2**40,
                        progress=False)
    tau = relaxation_time(d, lam)
    return dict(n=n, d=d, lam=lam, capacity=L, tau=tau, coalescence=r.coalescence_steps,
                steps_run=r.steps_run,
                forward=fwd, burn_in=BURN_IN_TAUS * tau * steps_per_time(n, lam), mass=r.mass_at_capacity[0],
                loss=r.loss_probability[0], counts=r.counts)


@dataclass(frozen=True)
class Parameters:
    """The study's parameters in one mode, typed (:func:`parameters` builds them from
    :data:`PARAMETERS`).

    Args:
        mode: "full" or "smoke".
        seed: the base seed of every run.
        extra: the capacity is L = k + extra.
        exactness_points: (n, d, lam, L, with replacement) of the G-tests.
        samples: perfect samples per exactness point.
        p_pass: the G-test's threshold (``claims``).
        cost_d: d of the cost grid.
        cost_grid: its (lam, n) points.
        cost_replicas: samples per cost point.
        max_law_point: (n, d, lam) of the law of the maximum.
        max_law_replicas: its samples.
    """

    mode: str
    seed: int
    extra: int
    exactness_points: tuple[tuple[int, int, float, int, bool], ...]
    samples: int
    p_pass: float
    cost_d: int
    cost_grid: tuple[tuple[float, int], ...]
    cost_replicas: int
    max_law_point: PointTuple
    max_law_replicas: int

    @property
    def cost_points(self) -> list[PointTuple]:
        """The cost grid as (n, d, lam), in the grid's order."""
        return [(n, self.cost_d, lam) for lam, n in self.cost_grid]


def parameters(mode: str = "full") -> Parameters:
    """The typed parameters of ``mode`` (ValueError for another mode)."""
    P = PARAMETERS[check_mode(mode)]
    ex, c, m = P["exactness"], P["cost"], P["max_law"]
    return Parameters(mode=mode, seed=P["seed"], extra=P["extra"],
                      exactness_points=tuple(tuple(p) for p in ex["points"]), samples=ex["samples"],
                      p_pass=P["claims"]["p_pass"], cost_d=c["d"],
                      cost_grid=tuple(tuple(g) for g in c["grid"]), cost_replicas=c["replicas"],
                      max_law_point=tuple(m["point"]), max_law_replicas=m["replicas"])


def plan(params: Parameters) -> list[Run]:
    """The runs of the study, each one cache entry: the exactness tests, each cost point, the law of
    the maximum (their names, parameters and seeds are the cache keys of the stored results)."""
    p = params
    ex = dict(points=list(p.exactness_points), samples=p.samples, p_pass=p.p_pass)
    runs = [Run("perfect-exactness", ex, p.seed,
                lambda: exactness(p.exactness_points, p.samples, p.p_pass, p.seed).arrays())]
    for j, (n, d, lam) in enumerate(p.cost_points):
        runs.append(_cost_run("perfect-cost", n, d, lam, p.cost_replicas, p.extra, _seed(p.seed, "cost", j)))
    n, d, lam = p.max_law_point
    runs.append(_cost_run("perfect-max-law", n, d, lam, p.max_law_replicas, p.extra,
                          _seed(p.seed, "max_law", 0)))
    return runs


def _cost_run(name: str, n: int, d: int, lam: float, replicas: int, extra: int, seed: int) -> Run:
    return Run(name, dict(n=n, d=d, lam=lam, replicas=replicas, extra=extra), seed,
               lambda: _cost_point(n, d, lam, replicas, extra, seed))


def assemble(arrays: list[dict[str, np.ndarray]], params: Parameters) -> PerfectResult:
    """The result from the arrays of :func:`plan`'s runs, in its order."""
    e, *pts, mp = arrays
    cost = Cost(**{f: np.stack([np.asarray(p[f]) for p in pts]) for f in Cost.__dataclass_fields__})
    _, d, lam = params.max_law_point
    return PerfectResult(exactness=Exactness.from_arrays(e), cost=cost, max_law=_max_law(mp, d, lam),
                         mode=params.mode)


def _max_law(p: dict[str, np.ndarray], d: int, lam: float) -> MaxLaw:
    counts = np.asarray(p["counts"])
    R, L1 = counts.shape
    mx = np.sum(counts[:, 1:] > 0, axis=1)
    hits = np.bincount(mx, minlength=L1)[:L1]
    lo, hi = stats.wilson_interval(hits, R)
    n = int(p["n"])
    u_L = counts[:, -1] / n
    g = np.asarray(all_sampled_at_least(u_L, d, replacement=True, n=n), dtype=float)
    se = lambda x: float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan  # noqa: E731
    return MaxLaw(n=np.asarray(n), d=np.asarray(d), lam=np.asarray(lam),
                  k=np.asarray(predicted_max_length(d, lam)),
                  capacity=np.asarray(L1 - 1), counts=counts, max_law=hits / R, max_low=lo, max_high=hi,
                  mass=np.asarray(u_L.mean()), mass_se=np.asarray(se(u_L)), loss=np.asarray(g.mean()),
                  loss_se=np.asarray(se(g)))


# --------------------------------------------------------------------------- rows and prose

def _coalescence_taus(c: Cost) -> np.ndarray:
    """Mean coalescence time per cost point, in relaxation times ((1 + lam) n tau steps)."""
    return c.coalescence.mean(axis=1) / (c.tau * (1 + c.lam) * c.n)


def _exactness_rows(result: PerfectResult, spec: ClaimSpec) -> list[ClaimRow]:
    """One exactness row per small-n point (kind "identity": a check of the sampler against the
    exact law, with the biased sampler's verdict beside it)."""
    e, rows = result.exactness, []
    P = PARAMETERS[result.mode]
    t = spec.values(P)
    p_pass = t["p_pass"]
    for j in range(e.n.size):
        ok = e.p_value[j] > p_pass and e.biased_p[j] < p_pass and \
            abs(e.loss[j] - e.loss_exact[j]) <= t["loss_z"] * e.loss_se[j] + 1e-12
        rows.append(ClaimRow(
            claim=spec.claim,
            parameters=f"n={int(e.n[j])}, d={int(e.d[j])}, λ={float(e.lam[j]):g}, L={int(e.capacity[j])}, "
                       f"{'with' if e.replacement[j] else 'without'} replacement, "
                       f"{int(e.samples[j])} samples",
            theory="exact law (sparse solve on lengths ≤ L)",
            measured=f"G = {e.G[j]:.1f} on {int(e.dof[j])} df, p = {e.p_value[j]:.3f}; loss {e.loss[j]:.4f} "
                     f"± {e.loss_se[j]:.4f} (exact {e.loss_exact[j]:.4f}); forward meeting state: "
                     f"G = {e.biased_G[j]:.0f}, p = {e.biased_p[j]:.1e}",
            passed=bool(ok), kind="identity", threshold=spec.threshold_text(P),
            criterion=spec.criterion_text(P), reference=spec.reference))
    return rows


def _cost_rows(result: PerfectResult, spec: ClaimSpec) -> list[ClaimRow]:
    """The coalescence time of coupling from the past: a sanity check (>= n L holds by construction for
    every chain: the gap drains by at most one customer per step; issue 41), its cost reported beside."""
    c = result.cost
    per_tau = _coalescence_taus(c)
    return [ClaimRow(
        claim=spec.claim,
        parameters=f"d={int(c.d[0])}, L = k+3, (λ, n) = " + ", ".join(
            f"({float(l):g}, {int(n)})" for l, n in zip(c.lam, c.n)),
        theory="≥ n L steps (the gap drains by at most one customer per step)",
        measured=", ".join(f"{x:.1f} τ" for x in per_tau) + "; T/(nL) = " + ", ".join(
            f"{x:.0f}" for x in c.coalescence.mean(axis=1) / (c.n * c.capacity)),
        passed=bool(np.all(c.coalescence >= c.n[:, None] * c.capacity[:, None])), kind="check",
        criterion=spec.criterion_text(PARAMETERS[result.mode]), reference=spec.reference)]


#: The study's claims as data: thresholds (paths under PARAMETERS[mode]["claims"]), the criterion
#: and threshold text rendered from them, the wrong sampler each row runs, the rows.
CLAIMS: dict[str, ClaimSpec] = {
    "exactness": ClaimSpec(
        "exactness", "perfect samples follow the exact stationary law of the bounded chain",
        "G-test of the samples' empirical law against the exact law; the biased sampler must fail the same "
        "test; the loss probability within {loss_z:g} SE of the exact one",
        thresholds=(("p_pass",), ("loss_z",)), threshold="p > {p_pass:g} (biased sampler p < {p_pass:g})",
        controls=("forward_meeting_state",), rows=_exactness_rows, reference="docs/models.md#bounded-model"),
    "cost": ClaimSpec(
        "cost", "coalescence time of coupling from the past, in relaxation times",
        "every coalescence time ≥ n L (true by construction: a sanity check, not counted as evidence)",
        rows=_cost_rows,
        reference="docs/models.md#bounded-model"),
}


def claim_rows(result: PerfectResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order: exactness per small-n point (identities),
    then the cost of coalescence (a sanity check)."""
    return [r for spec in CLAIMS.values() for r in spec.rows(result, spec)]


def cost_table(result: PerfectResult) -> str:
    """Markdown: per cost point, steps per replica of a perfect start (both chains) against the
    coupling certificate (two chains to their meeting; estimate_equilibrium waits for the
    slowest replica) and the 20 tau burn-in (one chain), and which is cheaper."""
    c = result.cost
    out = ["| λ | n | L | τ | perfect start (2 chains) | coupling certificate (2 chains, slowest replica) "
           "| 20 τ burn-in | cheapest |", "|---|---|---|---|---|---|---|---|"]
    for j in range(c.n.size):
        perfect = 2 * float(c.steps_run[j].mean())
        cert = 2 * float(np.max(c.forward[j]))
        burn = float(c.burn_in[j])
        best = min((perfect, "perfect start"), (cert, "coupling certificate"), (burn, "20 τ burn-in"))[1]
        out.append(f"| {float(c.lam[j]):g} | {int(c.n[j])} | {int(c.capacity[j])} | {float(c.tau[j]):.3g} | "
                   f"{perfect:.3g} | {cert:.3g} | {burn:.3g} | {best} |")
    return "\n".join(out)


#: the columns of :func:`summary`
SUMMARY_COLUMNS = ("lam", "n", "capacity", "tau", "coalescence_taus", "perfect_steps", "certificate_steps",
                   "burn_in_steps", "cheapest")


def summary(result: PerfectResult):
    """The cost table of notebook 04 as numbers, one row per cost point.

    Args:
        result: a :class:`PerfectResult`.

    Returns:
        A pandas DataFrame with :data:`SUMMARY_COLUMNS`: the mean coalescence time in relaxation
        times, the steps per replica of a perfect start (both chains), of the coupling certificate
        (two chains to their meeting, the slowest replica) and of the 20 tau burn-in, and the cheapest.
    """
    import pandas as pd

    c = result.cost
    per_tau = _coalescence_taus(c)
    out = []
    for j in range(c.n.size):
        steps = {"perfect start": 2 * float(c.steps_run[j].mean()),
                 "coupling certificate": 2 * float(np.max(c.forward[j])), "20 τ burn-in": float(c.burn_in[j])}
        out.append(dict(lam=float(c.lam[j]), n=int(c.n[j]), capacity=int(c.capacity[j]), tau=float(c.tau[j]),
                        coalescence_taus=float(per_tau[j]), perfect_steps=steps["perfect start"],
                        certificate_steps=steps["coupling certificate"], burn_in_steps=steps["20 τ burn-in"],
                        cheapest=min((v, k) for k, v in steps.items())[1]))
    return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))


def findings(result: PerfectResult) -> str:
    """The notebook's findings as Markdown, every number computed from ``result``."""
    e, c, m = result.exactness, result.cost, result.max_law
    per_tau = _coalescence_taus(c)
    ratio = c.coalescence.mean(axis=1) / np.maximum(c.forward.mean(axis=1), 1)
    k = int(m.k)
    lines = [
        f"- **Exact.** At {e.n.size} small-n points the G-test against the exact law gives p = "
        + ", ".join(f"{p:.2f}" for p in e.p_value) + f" (threshold {float(e.p_pass):g}); the forward meeting "
        "state, a sampler that looks similar, gives p = " + ", ".join(f"{p:.0e}" for p in e.biased_p) + ".",
        f"- **Cost.** Coalescence from the past takes {per_tau.min():.1f}–{per_tau.max():.1f} relaxation "
        f"times τ (T/(nL) = {np.min(c.coalescence.mean(1) / (c.n * c.capacity)):.0f}–"
        f"{np.max(c.coalescence.mean(1) / (c.n * c.capacity)):.0f}), {ratio.min():.2f}–{ratio.max():.2f} "
        "times the forward meeting time of the same two starts; with T doubling a sample costs "
        f"{np.min(c.steps_run.mean(1) / c.coalescence.mean(1)):.1f}–"
        f"{np.max(c.steps_run.mean(1) / c.coalescence.mean(1)):.1f} T steps in each of two chains.",
        f"- **The maximum at n = {int(m.n)}, d = {int(m.d)}, λ = {float(m.lam):g}** (k = {k}), from "
        f"{m.counts.shape[0]} exact samples: P(max = {k}) = {m.max_law[k]:.2f} (95% {m.max_low[k]:.2f}–"
        f"{m.max_high[k]:.2f}), P(max = {k + 1}) = {m.max_law[k + 1]:.2f} ({m.max_low[k + 1]:.2f}–"
        f"{m.max_high[k + 1]:.2f}). At the capacity L = {int(m.capacity)} the stationary mass is "
        f"{float(m.mass):.1e} ± {float(m.mass_se):.0e} and the loss probability {float(m.loss):.1e}: "
        + ("no sample had a queue at L, so the bounded and the unbounded model cannot be told apart at this "
           "precision." if float(m.mass) == 0
           else "the cap is felt; read the samples as the bounded model's."),
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class Exploration:
    """One slider setting of notebook 04: the ``samples`` (R, L+1) at (n, d, lam, capacity), the
    law of their maximum ``max_law`` with Wilson ``max_low``/``max_high``, and ``coalescence`` (R,)."""

    n: int
    d: int
    lam: float
    capacity: int
    samples: np.ndarray
    max_law: np.ndarray
    max_low: np.ndarray
    max_high: np.ndarray
    coalescence: np.ndarray


def explore(n: int, d: int, lam: float, capacity: int, *, replicas: int = 32, seed: int = 0) -> Exploration:
    """Perfect samples at one slider setting (the notebook's widget callback calls this)."""
    r = perfect_samples(n, d, lam, capacity=capacity, replicas=replicas, seed=seed)
    hits = np.bincount(r.max_length, minlength=capacity + 1)[: capacity + 1]
    lo, hi = stats.wilson_interval(hits, r.replicas)
    return Exploration(n=r.n, d=r.d, lam=r.lam, capacity=r.capacity, samples=r.counts,
                       max_law=hits / r.replicas, max_low=lo, max_high=hi, coalescence=r.coalescence_steps)
