"""The maximum-length study's run: equilibrium estimates (cached), the theory the sliders show, and
:func:`run`, which computes every number of notebook 01 and its claim rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qlib import _validate as V
from qlib import results
from qlib._rng import named_seed
from qlib.config import scale
from qlib.results import cache
from qlib.studies import ArrayResult, check_mode, long_point, long_points_read
from qlib.studies.max_length.parameters import (
    PARAMETERS,
    PointTuple,
    family_sizes,
    sweep_points,
)
from qlib.studies.wrong_models import WRONG_MODELS, point_of
from qlib.supermarket import simulate
from qlib.supermarket.equilibrium import EquilibriumEstimate, estimate_equilibrium_many
from qlib.supermarket.point import as_point
from qlib.supermarket.refined import refined_mean_field, relaxation_time
from qlib.supermarket.regime import exact_lengths, family_point, fluid_max_length
from qlib.supermarket.theory import (
    asymptotic_profile,
    boundary_distance,
    fluid_fixed_point,
    fluid_trajectory,
    predicted_max_length,
    steps_per_time,
)
from qlib.supermarket.variants import name_of

#: the command that computes the long-tier points (the finite-n n = 1e4 and 1e5)
LONG_COMMAND = "make results-long ONLY=max_length"

# --------------------------------------------------------------------------- typed results

@dataclass(frozen=True)
class Estimates(ArrayResult):
    """Equilibrium estimates at points j (from :func:`estimate_equilibrium_many`): ``n``, ``d``,
    ``lam``, ``k`` (P,); over levels i = 0..L: ``tail``/``tail_low``/``tail_high`` (P, L+1) E[u_i]/n
    and its 95% CI, ``p``/``p_low``/``p_high`` the fraction of queues at length exactly i (CI from
    the tail's), ``max_dist``/``max_low``/``max_high`` P(longest queue = i); ``taus`` (P,) relaxation
    times measured per replica after a burn-in of ``burn_taus`` (P,) tau; ``replicas`` (P,);
    ``relative_halfwidth`` (P,) at the stopping level; ``converged`` (P,) bool."""

    n: np.ndarray
    d: np.ndarray
    lam: np.ndarray
    k: np.ndarray
    tail: np.ndarray
    tail_low: np.ndarray
    tail_high: np.ndarray
    p: np.ndarray
    p_low: np.ndarray
    p_high: np.ndarray
    max_dist: np.ndarray
    max_low: np.ndarray
    max_high: np.ndarray
    taus: np.ndarray
    burn_taus: np.ndarray
    replicas: np.ndarray
    relative_halfwidth: np.ndarray
    converged: np.ndarray

    def at(self, j: int) -> dict[str, Any]:
        """Point j's fields as a dict."""
        return {f: getattr(self, f)[j] for f in self.__dataclass_fields__}


def _entry(e: EquilibriumEstimate, levels: int) -> dict[str, np.ndarray]:
    def fit(a):
        out = np.zeros(levels + 1)
        m = min(a.size, levels + 1)
        out[:m] = a[:m]
        return out

    t, lo, hi = fit(e.tail_fraction), fit(e.ci_low), fit(e.ci_high)
    k = predicted_max_length(e.d, e.lam)
    return {"n": np.array(e.n), "d": np.array(e.d), "lam": np.array(e.lam),
            "k": np.array(k if math.isfinite(k) else -1), "tail": t, "tail_low": lo, "tail_high": hi,
            "p": fit(e.queue_length_distribution), "p_low": fit(e.length_ci_low),
            "p_high": fit(e.length_ci_high), "max_dist": fit(e.max_length_distribution),
            "max_low": fit(e.max_ci_low), "max_high": fit(e.max_ci_high),
            "taus": np.array(e.relaxation_times),
            "burn_taus": np.array(e.burn_in / (e.relaxation_time * steps_per_time(e.n, e.lam))),
            "replicas": np.array(e.replicas), "relative_halfwidth": np.array(e.relative_halfwidth),
            "converged": np.array(e.converged)}


LEVELS = 8  # every estimate is reported over lengths 0..8 (the longest queues here are <= 6)


def _level_groups(points: Sequence[PointTuple]) -> list[list[int]]:
    """Indices of ``points`` grouped by the levels their queues need (about k + 3; for d = 1, the
    length where lam^i falls below 1/n), in powers of two."""
    def need(n, d, lam):
        k = predicted_max_length(d, lam)
        L = k + 3 if math.isfinite(k) else math.log(1.0 / n) / math.log(lam)
        return int(math.ceil(math.log2(max(L, 2))))

    keys = [need(*p) for p in points]
    return [[i for i, key in enumerate(keys) if key == g] for g in sorted(set(keys))]


def estimates(name: str, points: Sequence[PointTuple], *, replicas: int, seeds: Sequence[int],
              batches: int | None = 1, rel_error: float = 0.5, min_batches: int = 2,
              max_batches: int | None = None, level: int | None = None,
              burn_taus: float = 20.0, batch_taus: float = 20.0, taus_of: Sequence[PointTuple] | None = None,
              replacement: bool = True, variant: Any = None, progress: bool = False) -> Estimates:
    """Cached equilibrium estimates (one cache entry per point, so an interrupted sweep resumes):
    ``batches`` batches of ``batch_taus`` tau after ``burn_taus`` tau from empty, or (batches=None)
    sequentially until the CI at ``level`` is within ``rel_error`` (at least ``min_batches``, at
    most ``max_batches``).
    ``taus_of``: the points whose relaxation times size the runs (a wrong model runs as many
    steps as the right one; default: each point's own). ``replacement``: the sampling rule (False:
    without replacement, the "other sampling rule" wrong model). ``variant``: a kernel variant of
    :mod:`qlib.supermarket.variants` (a near wrong model; None: the model)."""
    points = [as_point(*p).as_tuple() for p in points]
    clock = list(points) if taus_of is None else [tuple(q) for q in taus_of]
    tau = [relaxation_time(d, lam) for _, d, lam in clock]
    params = [dict(point=list(p), replicas=replicas, batches=batches, rel_error=rel_error,
                   max_batches=max_batches, level=level, burn_taus=burn_taus, batch_taus=batch_taus, tau=t)
              for p, t in zip(points, tau)]
    # (min_batches = 2, the default, is left out: the keys cached before stay valid)
    if batches is None and min_batches != 2:
        params = [{**q, "min_batches": min_batches} for q in params]
    if not replacement:
        params = [{**q, "replacement": False} for q in params]
    if variant is not None:
        params = [{**q, "variant": name_of(variant)} for q in params]

    def compute(idx):
        # Lanes of one kernel share its level count, so points that need many levels (small d near
        # lam = 1: long queues) run in kernels of their own instead of slowing the others down.
        out: dict[int, dict] = {}
        for group in _level_groups([points[i] for i in idx]):
            sub = [idx[g] for g in group]
            pts = [points[i] for i in sub]
            max_steps = None
            if batches is None and max_batches is not None:  # max_batches batches at every point
                max_steps = [int(max_batches * batch_taus * tau[i] * steps_per_time(n, lam))
                             for i, (n, d, lam) in zip(sub, pts)]
            est = estimate_equilibrium_many(pts, rel_error=rel_error, level=level,
                                            seeds=[seeds[i] for i in sub],
                                            replicas=replicas, burn_in="tau", burn_taus=burn_taus,
                                            batch_taus=batch_taus, batches=batches,
                                            min_batches=min_batches, replacement=replacement,
                                            max_steps=max_steps, tau=[tau[i] for i in sub], variant=variant,
                                            progress=progress)
            out.update({i: _entry(e, LEVELS) for i, e in zip(sub, est)})
        return [out[i] for i in idx]

    got = cache.cached_points(name, params, list(seeds), compute, group=len(points))
    return Estimates.from_arrays({f: np.stack([g[f] for g in got]) for f in got[0]})


# --------------------------------------------------------------------------- theory helpers

@dataclass(frozen=True)
class ProfileView:
    """What the sliders show for (1-lam, d, n), with no simulation. Arrays over ``levels`` (L+1,):
    the fraction of queues with length exactly i, ``fluid`` (fixed point), ``refined`` (with the
    1/n and 1/n^2 terms at this n) and ``asymptotic`` (Brightwell-Luczak formulas; NaN beyond k+1)."""

    lam: float
    d: int
    n: int
    k: int
    boundary_distance: float
    fluid_max: int
    tau: float
    levels: np.ndarray
    fluid: np.ndarray
    refined: np.ndarray
    asymptotic: np.ndarray


def profile_view(one_minus_lam: float, d: int, n: int) -> ProfileView:
    """The slider panel's theory for (1-lam, d, n): pure and fast (no simulation)."""
    eps = V.real("one_minus_lam", one_minus_lam, low=0.0, high=1.0)
    d = V.integer("d", d, low=2)
    n = V.integer("n", n, low=1)
    lam = 1.0 - eps
    k = int(predicted_max_length(d, lam))
    r = refined_mean_field(d, lam, order=2)
    L = max(k + 2, int(np.nonzero(r.fixed_point > 1e-12)[0][-1]) + 2)
    L = min(L, r.levels)
    fluid = exact_lengths(r.fixed_point)[: L + 1]
    refined = r.queue_length_distribution(n)[: L + 1]
    asym = np.full(L + 1, np.nan)
    a = asymptotic_profile(d, lam)
    m = min(a.size, L + 1)
    asym[:m] = a[:m]
    return ProfileView(lam=lam, d=d, n=n, k=k, boundary_distance=boundary_distance(d, lam),
                       fluid_max=fluid_max_length(n, d, lam), tau=r.relaxation_time,
                       levels=np.arange(L + 1), fluid=fluid, refined=refined, asymptotic=asym)


@dataclass(frozen=True)
class InteractiveRun:
    """The notebook button's run: fraction of queues at each length ``p``/``p_se`` and
    ``max_dist`` (L+1,) over ``replicas``, model ``time`` and the ``taus`` it covers after a
    burn-in of ``burn_taus``."""

    p: np.ndarray
    p_se: np.ndarray
    max_dist: np.ndarray
    replicas: int
    time: float
    taus: float
    burn_taus: float


def interactive_run(one_minus_lam: float, d: int, n: int, *, max_steps: float = 2e6, replicas: int = 4,
                    seed: int = 0, progress: bool = True) -> InteractiveRun:
    """The notebook button: from empty, 20 tau of burn-in then 20 tau measured, but at most
    ``max_steps`` steps per replica in all (split 1:1), so a slider click takes seconds; the
    result says how many tau it covered."""
    view = profile_view(one_minus_lam, d, n)
    max_steps = V.real("max_steps", max_steps, low=2.0)
    per_tau = view.tau * steps_per_time(n, view.lam)
    half = int(min(20 * per_tau, max_steps / 2))
    res = simulate(n, d, view.lam, steps=max(1, half), burn_in=half, replicas=replicas, seed=seed,
                   progress=progress)
    L1 = view.levels.size
    p = np.zeros((res.replicas, L1))
    q = res.queue_length_distribution[:, :L1]
    p[:, : q.shape[1]] = q
    md = np.zeros((res.replicas, L1))
    md[:, : min(L1, res.levels + 1)] = res.max_length_distribution[:, :L1]
    se = p.std(axis=0, ddof=1) / np.sqrt(res.replicas) if res.replicas > 1 else np.full(L1, np.nan)
    return InteractiveRun(p=p.mean(axis=0), p_se=se, max_dist=md.mean(axis=0), replicas=res.replicas,
                          time=res.time, taus=half / per_tau, burn_taus=half / per_tau)


@dataclass(frozen=True)
class FromEmptyRun(ArrayResult):
    """The approach to equilibrium from empty: ``t`` (T,) model time; ``sim`` (T, L+1) replica mean
    of u_i/n; ``fluid`` (T, L+1) the fluid ODE from empty; ``fixed_point`` (L+1,); ``tau`` (0-d)."""

    t: np.ndarray
    sim: np.ndarray
    fluid: np.ndarray
    fixed_point: np.ndarray
    tau: np.ndarray


def from_empty_run(n: int, d: int, lam: float, *, taus: float, points: int = 150, replicas: int = 4,
                   seed: int = 0, progress: bool = False) -> FromEmptyRun:
    """u_i/n over ``taus`` relaxation times from empty, with the fluid ODE from empty. Cached."""
    n, d, lam = as_point(n, d, lam).as_tuple()
    tau = relaxation_time(d, lam)
    params = dict(n=n, d=d, lam=lam, taus=taus, points=points, replicas=replicas)

    def compute():
        per_unit = steps_per_time(n, lam)
        every = max(1, int(round(taus * tau * per_unit / points)))
        res = simulate(n, d, lam, steps=every * points, replicas=replicas, seed=seed, initial="empty",
                       record_every=every, progress=progress)
        traj = res.trajectory.astype(float) / n
        t = np.arange(1, points + 1) * every / per_unit
        L = traj.shape[2] - 1
        s0 = np.zeros(L + 1)
        s0[0] = 1.0
        return {"t": t, "sim": traj.mean(axis=0), "fluid": fluid_trajectory(d, lam, t, s0),
                "fixed_point": fluid_fixed_point(d, lam, L), "tau": np.asarray(tau)}

    return FromEmptyRun.from_arrays(cache.cached("01_from_empty", params, seed, compute))


# --------------------------------------------------------------------------- the study

@dataclass(frozen=True)
class MaxLengthResult:
    """Everything notebook 01 and its claim rows show, for one ``mode``. ``Estimates`` per set:
    ``max`` and its counterfactuals ``max_wrong`` (JSQ(d') for each d' of
    ``PARAMETERS[mode]["max"]["wrong_d"]``, in that order); ``profile`` and ``profile_low_d``,
    ``profile_high_d`` (d x 0.75, x 1.25); ``sweep`` and ``sweep_high_d``, ``sweep_jsq2``;
    ``boundary``;
    ``finite_n`` and ``finite_n_short`` (the old protocol: a short run from the fluid point);
    ``family``; and the ``from_empty`` run; ``max_near``, ``profile_near``, ``sweep_near`` the
    near wrong models at the max, profile and sweep points. ``refined`` (N, 3) the refined mean field at the
    finite-n points: fluid, order 1, order 2 at level ``finite_n`` level."""

    mode: str
    parameters: dict
    max: Estimates
    max_wrong: Estimates
    profile: Estimates
    profile_low_d: Estimates
    profile_high_d: Estimates
    sweep: Estimates
    sweep_high_d: Estimates
    sweep_jsq2: Estimates
    boundary: Estimates
    finite_n: Estimates
    finite_n_short: dict
    family: Estimates
    from_empty: FromEmptyRun
    refined: np.ndarray
    #: near wrong model name -> Estimates at the ``max`` points, the ``profile`` point and the
    #: ``sweep`` points (PARAMETERS[mode]["near"]; qlib.studies.wrong_models)
    max_near: dict = field(default_factory=dict)
    profile_near: dict = field(default_factory=dict)
    sweep_near: dict = field(default_factory=dict)
    #: the finite-n design's long-tier n that results/long lacks or holds stale: (n, why)
    finite_n_missing: tuple = ()
    #: where the finite-n long-tier entries read came from ("" when none were read)
    finite_n_provenance: str = ""
    #: set name -> its estimates on the fresh stream (issue 47), for the sets results/long holds whole
    fresh: dict = field(default_factory=dict)
    #: the fresh points results/long lacks: (set, j, why)
    fresh_missing: tuple = ()


def _with_d(points: Sequence[PointTuple], d_of) -> list[PointTuple]:
    return [(n, max(1, int(d_of(d))), lam) for n, d, lam in points]


def short_fluid_run(n: int, d: int, lam: float, *, taus: float, replicas: int, seed: int, level: int) -> dict:
    """The protocol the referee rejected: start at the fluid fixed point, 1 tau of burn-in,
    ``taus`` tau measured. Returns ``tail`` (replicas,) E[u_level]/n per replica, ``taus`` and ``n``."""
    per_tau = relaxation_time(d, lam) * steps_per_time(n, lam)
    r = simulate(n, d, lam, steps=int(taus * per_tau), burn_in=int(per_tau), replicas=replicas, seed=seed,
                 initial="fluid", progress=False)
    t = r.tail_fraction[:, level] if r.levels >= level else np.zeros(replicas)
    return {"tail": t, "taus": np.asarray(taus), "n": np.asarray(n)}


def _plan(P: dict, mode: str) -> dict[str, tuple]:
    """set name -> (points, clock points, replicas, batches per scale unit) of the fixed-length
    estimates; counterfactuals run on the model's clock."""
    R_cf = P["counterfactual_replicas"]
    mx, pr, sw, bd, fm = P["max"], P["profile"], P["sweep"], P["boundary"], P["family"]
    spts = sweep_points(mode)
    fam = [family_point(n, fm["alpha"], fm["beta"]) for n in family_sizes(mode)]
    mb = mx.get("batches", 1)
    return {
        "max": (mx["points"], mx["points"], mx["replicas"], mb),
        # the profile point is one of the maximum points: its run is reused (same seed, same numbers)
        **({} if tuple(pr["point"]) in [tuple(p) for p in mx["points"]]
           else {"profile": ([pr["point"]], [pr["point"]], pr["replicas"], 1)}),
        "sweep": (spts, spts, sw["replicas"], 1),
        "boundary": ([(bd["n"], bd["d"], 1.0 - e) for e in bd["one_minus_lam"]], None, bd["replicas"], 1),
        "family": (fam, fam, fm["replicas"], 1),
        "max_wrong": ([(n, wd, lam) for (n, _, lam), ws in zip(mx["points"], mx["wrong_d"]) for wd in ws],
                      [p for p, ws in zip(mx["points"], mx["wrong_d"]) for _ in ws], R_cf, mb),
        "profile_low_d": (_with_d([pr["point"]], WRONG_MODELS["d*0.75"].d_of), [pr["point"]], R_cf, 1),
        "profile_high_d": (_with_d([pr["point"]], WRONG_MODELS["d*1.25"].d_of), [pr["point"]], R_cf, 1),
        "sweep_high_d": (_with_d(spts, WRONG_MODELS["d*1.25"].d_of), spts, R_cf, 1),
        "sweep_jsq2": (_with_d(spts, WRONG_MODELS["jsq2"].d_of), spts, R_cf, 1),
    }


def _fixed_sets(P: dict, mode: str, nb: int, base: dict) -> dict[str, Estimates]:
    """The fixed-length estimates: lanes of one kernel per (replicas, batches); each set draws from
    its own named stream (named_seed(stream, set, j))."""
    plan = _plan(P, mode)
    sets: dict[str, Estimates] = {}
    for reps, mult in sorted({(v[2], v[3]) for v in plan.values()}):
        names = [k for k, v in plan.items() if (v[2], v[3]) == (reps, mult)]
        pts, clocks, seeds, owner = [], [], [], []
        for name in names:
            p, c, _, _ = plan[name]
            pts += list(p)
            clocks += list(c if c is not None else p)
            seeds += [named_seed(P["stream"], name, j) for j in range(len(p))]
            owner += [name] * len(p)
        tag = f"01_r{reps}" + ("" if mult == 1 else f"_b{mult}")
        e = estimates(tag, pts, replicas=reps, seeds=seeds, batches=nb * mult, taus_of=clocks, **base)
        for name in names:
            idx = np.array([i for i, o in enumerate(owner) if o == name])
            sets[name] = Estimates.from_arrays({f: getattr(e, f)[idx] for f in e.__dataclass_fields__})
    mx, pr = P["max"], P["profile"]
    if "profile" not in sets:
        j = [tuple(p) for p in mx["points"]].index(tuple(pr["point"]))
        sets["profile"] = Estimates.from_arrays({f: getattr(sets["max"], f)[[j]]
                                                 for f in sets["max"].__dataclass_fields__})
    return sets


def _finite_n_points(P: dict, ns: Sequence[int], k_scale: float, base: dict) -> Estimates:
    """The sequential finite-n estimates at ``ns`` (cached per point)."""
    fn = P["finite_n"]
    return estimates("01_finite_n", [(n, fn["d"], fn["lam"]) for n in ns], replicas=fn["replicas"],
                     seeds=[named_seed(P["stream"], "finite_n", n) for n in ns],
                     batches=None, rel_error=fn["rel_error"], min_batches=fn["min_batches"],
                     max_batches=int(fn["max_batches"] * k_scale), level=fn["level"],
                     **{**base, "batch_taus": fn["batch_taus"]})


def _finite_n_sets(P: dict, mode: str, k_scale: float, base: dict) -> tuple[Estimates, dict, tuple, list]:
    """The sequential finite-n estimates (the default tier's n together, then each long-tier n: read
    from results/long outside ``make results-long``) and the old protocol's short run at the largest
    n of the default run (the comparison is made there): (estimates, short run, missing long n as
    (n, why), records of the long entries read)."""
    fn, stream = P["finite_n"], P["stream"]

    def est(ns):
        return _finite_n_points(P, ns, k_scale, base)

    parts, missing, records = [est(fn["ns"])], [], []
    for n in fn["long_ns"]:
        got, read, why = long_point(long_points_read(mode), lambda n=n: est([n]), LONG_COMMAND)
        if got is None:
            missing.append((n, why))
            continue
        parts.append(got)
        records += read
    finite = Estimates.concat(parts)
    spt = (fn["ns"][-1], fn["d"], fn["lam"])
    s_seed, s_taus = named_seed(stream, "finite_n_short"), P["short_taus"]
    short = cache.cached("01_finite_n_short", dict(point=list(spt), taus=s_taus, replicas=fn["replicas"]),
                         s_seed, lambda: short_fluid_run(*spt, taus=s_taus, replicas=fn["replicas"],
                                                         seed=s_seed, level=fn["level"]))
    return finite, short, tuple(missing), records


def _fresh_one(P: dict, mode: str, name: str, j: int, base: dict) -> Estimates:
    """Point j of set ``name`` on the fresh stream (issue 47): the set's replicas and run lengths."""
    p, clocks, reps, mult = _plan(P, mode)[name]
    clock = (clocks if clocks is not None else p)[j]
    return estimates(f"01_fresh_{name}", [p[j]], replicas=reps,
                     seeds=[named_seed(P["fresh"]["stream"], name, j)], batches=mult, taus_of=[clock], **base)


def _fresh_sets(P: dict, mode: str, base: dict) -> tuple[dict, tuple]:
    """The sets of ``PARAMETERS[mode]["fresh"]`` on their fresh stream, each point one long-tier entry
    (read from results/long outside ``make results-long``): ({set: Estimates} for the sets stored whole,
    the points lacking as (set, j, why))."""
    out, missing = {}, []
    for name in P["fresh"]["sets"]:
        got = []
        for j in range(len(_plan(P, mode)[name][0])):
            e, _, why = long_point(long_points_read(mode),
                                   lambda j=j, name=name: _fresh_one(P, mode, name, j, base), LONG_COMMAND)
            if e is None:
                missing.append((name, j, why))
            else:
                got.append(e)
        if got and len(got) == len(_plan(P, mode)[name][0]):
            out[name] = Estimates.concat(got)
    return out, tuple(missing)


def fresh_cost(mode: str = "full") -> dict[str, float]:
    """Replica-steps of each fresh set (issue 47), stored or not: replicas x (burn-in + batches x batch)
    relaxation times (of the clock point) x steps per relaxation time."""
    P = PARAMETERS[check_mode(mode)]
    out = {}
    for name in P["fresh"]["sets"]:
        p, clocks, reps, mult = _plan(P, mode)[name]
        total = 0.0
        for (n, _, _), (_, dc, lc) in zip(p, clocks if clocks is not None else p):
            total += (relaxation_time(dc, lc) * (1.0 + lc) * n * reps
                      * (P["burn_taus"] + mult * P["batch_taus"]))
        out[name] = total
    return out


def long_cost(mode: str = "full") -> float:
    """The replica-steps of the finite-n long-tier points results/long does not hold yet, a priori:
    replicas x (burn-in + the sequential rule's minimum batches) x steps per relaxation time (at
    n = 1e5 the rule stops near that minimum: ~1000 tau pooled); what the long run's ETA is sized by."""
    P = PARAMETERS[check_mode(mode)]
    fn = P["finite_n"]
    total = 0.0
    for n in fn["long_ns"]:
        try:
            with cache.stored_only("long"):
                _finite_n_points(P, [n], 1.0, dict(burn_taus=P["burn_taus"], progress=False))
        except cache.NotStored:
            per_tau = relaxation_time(fn["d"], fn["lam"]) * (1.0 + fn["lam"]) * n
            total += per_tau * fn["replicas"] * (P["burn_taus"] + fn["min_batches"] * fn["batch_taus"])
    base = dict(burn_taus=P["burn_taus"], batch_taus=P["batch_taus"], progress=False)
    for name in P["fresh"]["sets"]:  # issue 47's fresh points results/long lacks
        p, clocks, reps, mult = _plan(P, mode)[name]
        for j, (n, _, _) in enumerate(p):
            try:
                with cache.stored_only("long"):
                    _fresh_one(P, mode, name, j, base)
            except cache.NotStored:
                _, dc, lc = (clocks if clocks is not None else p)[j]
                total += (relaxation_time(dc, lc) * (1.0 + lc) * n * reps
                          * (P["burn_taus"] + mult * P["batch_taus"]))
    return total


def _near_sets(P: dict, mode: str, nb: int, progress: bool) -> dict[str, dict[str, Estimates]]:
    """The near wrong models at the max, profile and sweep points (PARAMETERS[mode]["near"]: which
    of the rows' wrong models this mode runs), each on its row's own criterion."""
    W, stream = P["near"], P["stream"]

    def near(tag: str, points: Sequence[PointTuple]) -> dict[str, Estimates]:
        # each near model its own kernel run (a variant or the other sampling rule is one per call)
        out = {}
        for wm in W[tag]:
            m = WRONG_MODELS[wm]
            out[wm] = estimates(f"01_near_{tag}_{wm.replace('*', 'x').replace('=', '')}",
                                [point_of(wm, p) for p in points], replicas=W["replicas"],
                                seeds=[named_seed(stream, "near", tag, wm, j) for j in range(len(points))],
                                batches=nb * W["batches"], taus_of=points, replacement=not m.flip,
                                variant=m.variant, burn_taus=W["burn_taus"], batch_taus=W["batch_taus"],
                                progress=progress)
        return out

    return dict(max_near=near("max", P["max"]["points"]),
                profile_near=near("profile", [P["profile"]["point"]]),
                sweep_near=near("sweep", sweep_points(mode)))


def run(mode: str = "full", *, progress: bool = True) -> MaxLengthResult:
    """Compute every estimate of the study.

    The fixed-length estimates run as lanes of two kernels (one per replica count: the model's and
    the counterfactuals'), the sequential finite-n estimates as a third: few compiles.

    Args:
        mode: "full" or "smoke"; full-mode run lengths (batches, and the finite-n batch budget) are
            multiplied by :func:`qlib.config.scale`.
        progress: show progress bars.

    Returns:
        A :class:`MaxLengthResult`.
    """
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    # --scale S runs S batches of 10 tau where 1 runs one; the long run reads the default tier as stored
    k_scale = scale() if long_points_read(mode) else 1.0
    nb = max(1, int(round(k_scale)))
    base = dict(burn_taus=P["burn_taus"], batch_taus=P["batch_taus"], progress=progress)
    sets = _fixed_sets(P, mode, nb, base)
    finite, short, finite_missing, records = _finite_n_sets(P, mode, k_scale, base)
    fe = P["from_empty"]
    empty = from_empty_run(fe["n"], fe["d"], fe["lam"], taus=fe["taus"], points=fe["points"],
                           replicas=fe["replicas"], seed=named_seed(P["stream"], "from_empty"))
    near_sets = _near_sets(P, mode, nb, progress)
    fresh, fresh_missing = _fresh_sets(P, mode, base)
    fn, ns = P["finite_n"], [int(x) for x in finite.n]
    r1, r2 = refined_mean_field(fn["d"], fn["lam"]), refined_mean_field(fn["d"], fn["lam"], order=2)
    refined = np.array([[r1.fixed_point[fn["level"]], r1.tail_fraction(n)[fn["level"]],
                         r2.tail_fraction(n)[fn["level"]]]
                        for n in ns])
    return MaxLengthResult(mode=mode, parameters=P, finite_n=finite, finite_n_short=short, from_empty=empty,
                           refined=refined, finite_n_missing=finite_missing,
                           finite_n_provenance=results.provenance_text(records, LONG_COMMAND),
                           fresh=fresh, fresh_missing=fresh_missing, **sets, **near_sets)
