"""The mixing study's run: meeting times by monotone coupling (cached), the lower-bound and good-set
runs, :func:`run` (every number of notebook 02 and its claim rows) and the sliders' :func:`explore`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qlib._rng import named_seed
from qlib.config import scale
from qlib.results import cache
from qlib.studies import ArrayResult, check_mode
from qlib.studies.mixing.parameters import PARAMETERS
from qlib.studies.wrong_models import point_of
from qlib.supermarket import (
    counts_all_at,
    coupled_paths,
    initial_counts,
    l1_distance,
    meeting_times,
    meeting_times_many,
    simulate_many,
)
from qlib.supermarket.point import PointTuple, as_point
from qlib.supermarket.refined import relaxation_time
from qlib.supermarket.regime import family_point, reference_time
from qlib.supermarket.theory import fluid_fixed_point, predicted_max_length, steps_per_time


def sample_seed(seed: int) -> int:
    """The seed of the stationary samples that a run with ``seed`` is compared with: its own
    named stream (:func:`qlib._rng.named_seed`), independent of the run's."""
    return named_seed("mixing", "stationary sample", int(seed))


def stationary_samples(points: Sequence[PointTuple], *, replicas: int, seeds: Sequence[int],
                       burn_taus: float = 20.0,
                       clock: Sequence[PointTuple] | None = None) -> list[np.ndarray]:
    """One state per replica, (replicas, L+1) counts, from each point's chain after ``burn_taus``
    relaxation times from the fluid point (docs/models.md#relaxation-time): samples of the
    stationary law, independent of the other runs (their own seeds). ``clock``: the points whose
    tau sets the burn-in (default: the points themselves; a wrong model runs on the right one's)."""
    clock = list(points) if clock is None else list(clock)
    burn = [int(burn_taus * relaxation_time(d, lam) * steps_per_time(n, lam)) for n, d, lam in clock]
    res = simulate_many(list(points), steps=1, burn_in=burn, replicas=replicas, seeds=list(seeds),
                        initial="fluid", progress=False)
    return [r.counts for r in res]


def good_start_times(points: Sequence[PointTuple], *, replicas: int, seeds: Sequence[int],
                     max_steps: Sequence[int],
                     burn_taus: float = 20.0, clock: Sequence[PointTuple] | None = None) -> list[np.ndarray]:
    """Meeting times (replicas,) of the chain from the fluid point (a good start) with a chain
    from a stationary sample, driven by the same draws; inf = not met within ``max_steps``.
    P(T > t) bounds the total-variation distance from the fluid start at step t."""
    y = stationary_samples(points, replicas=replicas, seeds=[sample_seed(s) for s in seeds],
                           burn_taus=burn_taus, clock=clock)
    x = [initial_counts(n, d, lam, "fluid") for n, d, lam in points]
    return meeting_times_many(list(points), replicas=replicas, top_length=0, max_steps=list(max_steps),
                              seeds=list(seeds), bottom=x, top=[{"counts": c} for c in y], ordered=False,
                              progress=False)


def top_start_times(points: Sequence[PointTuple], *, replicas: int, seeds: Sequence[int],
                    max_steps: Sequence[int]) -> list[np.ndarray]:
    """Meeting times (replicas,) of the chains from all-empty and from all queues at k+1 (a bad
    start with about n excess customers); their survival bounds d_TV from every start between."""
    tops = [int(predicted_max_length(d, lam)) + 1 if d > 1 else 3 for _, d, lam in points]
    return meeting_times_many(list(points), replicas=replicas, top_length=tops, max_steps=list(max_steps),
                              seeds=list(seeds), progress=False)


def uncoupled_times(points: Sequence[PointTuple], *, replicas: int, seeds: Sequence[int],
                    max_steps: Sequence[int],
                    frames: int = 2000, burn_taus: float = 20.0, clock: Sequence[PointTuple] | None = None
                    ) -> list[np.ndarray]:
    """The good-start protocol with the coupling removed: the chain from the fluid point and the
    chain from a stationary sample use independent random numbers (other seeds). "Met" = the
    first recorded frame (every max_steps/frames steps) at which all counts agree; inf if none."""
    y = stationary_samples(points, replicas=replicas, seeds=[sample_seed(s) for s in seeds],
                           burn_taus=burn_taus, clock=clock)
    every = [max(1, m // frames) for m in max_steps]
    a = simulate_many(list(points), steps=[e * frames for e in every], replicas=replicas, seeds=list(seeds),
                      initial="fluid", record_every=every[0],
                      progress=False) if len(set(every)) == 1 else None
    out = []
    for j, (pt, e) in enumerate(zip(points, every)):
        ra = a[j] if a is not None else simulate_many([pt], steps=e * frames, replicas=replicas,
                                                      seeds=[seeds[j]], initial="fluid", record_every=e,
                                                      progress=False)[0]
        rb = simulate_many([pt], steps=e * frames, replicas=replicas,
                           seeds=[named_seed("mixing", "uncoupled chain", seeds[j])],
                           initial=[{"counts": y[j]}], record_every=e, progress=False)[0]
        L = max(ra.trajectory.shape[2], rb.trajectory.shape[2])
        pad = lambda t, L=L: np.pad(t, ((0, 0), (0, 0), (0, L - t.shape[2])))  # noqa: E731
        eq = np.all(pad(ra.trajectory) == pad(rb.trajectory), axis=2)  # (replicas, frames)
        out.append(np.where(eq.any(axis=1), (np.argmax(eq, axis=1) + 1) * e, np.inf).astype(float))
    return out


def event_crossing(n: int, d: int, lam: float, *, replicas: int, seed: int, horizon_taus: float, frames: int,
                   threshold: float = 0.25, start: str = "displaced", burn_taus: float = 20.0,
                   samples: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """A lower bound on the mixing time from a good start, by one event.

    Draw ``replicas`` stationary samples (``stationary_samples``); let N = sum_i u_i be the number
    of customers (the slow mode) and A = {N > the samples' median}. ``start="displaced"``: every
    chain starts at the sample whose N is the upper 2.5% point (a state the stationary chain visits
    often, so a good one) and runs on its own stream; ``start="stationary"``: each chain starts at
    its own sample (started at the answer). d_TV(law at t, pi) >= |P_t(A) - pi(A)|, so the first
    recorded t with P_t(A) - pi(A) <= ``threshold`` + 2 SE is (up to noise, conservatively early) a
    lower bound on the time to reach d_TV <= threshold. Returns ``times`` (frames,) steps, ``p``
    (frames,) the estimate of P_t(A), ``pi_A`` (0-d), ``crossing`` (0-d) steps (0 if already at the
    first frame, inf if never within ``horizon_taus`` tau). ``samples``: the stationary samples,
    if already drawn (``stationary_samples`` with seed ``sample_seed(seed)``: both starts use the same)."""
    tau_steps = relaxation_time(d, lam) * steps_per_time(n, lam)
    every = max(1, int(horizon_taus * tau_steps / frames))
    y = stationary_samples([(n, d, lam)], replicas=replicas, seeds=[sample_seed(seed)],
                           burn_taus=burn_taus)[0] \
        if samples is None else samples
    N = y[:, 1:].sum(axis=1)
    med = float(np.median(N))
    pi_A = float(np.mean(N > med))
    if start == "displaced":
        x = y[int(np.argsort(N)[int(0.975 * (N.size - 1))])]
        init: Any = {"counts": np.broadcast_to(x, y.shape).copy()}
    else:
        init = {"counts": y}
    r = simulate_many([(n, d, lam)], steps=every * frames, replicas=replicas, seeds=[seed], initial=[init],
                      record_every=every, progress=False)[0]
    p = (r.trajectory[:, :, 1:].sum(axis=2) > med).mean(axis=0)  # (frames,)
    se = np.sqrt(np.maximum(p * (1 - p), 1.0 / replicas) / replicas)
    below = np.nonzero(p - pi_A <= threshold + 2 * se)[0]
    times = np.arange(1, frames + 1) * every
    crossing = 0.0 if below.size and below[0] == 0 else (float(times[below[0]]) if below.size else np.inf)
    return {"times": times, "p": p, "pi_A": np.asarray(pi_A), "crossing": np.asarray(crossing)}


def good_set_exits(points: Sequence[PointTuple], *, eps: float, horizon_taus: float, replicas: int,
                   seeds: Sequence[int], frames: int = 500,
                   reference_d: int | None = None) -> list[np.ndarray]:
    """First exit time (steps; inf if none within ``horizon_taus`` tau) from the good set
    N^eps = {max_i |u_i/n - s*_i| <= eps} of chains started at the fluid point, recorded every
    horizon/frames steps; s* is the fluid fixed point of d = ``reference_d`` (default: the
    point's own d), so a wrong model is judged against the right model's good set."""
    every = []
    for n, d, lam in points:
        dd = d if reference_d is None else reference_d
        every.append(max(1, int(horizon_taus * relaxation_time(dd, lam) * steps_per_time(n, lam) / frames)))
    out = []
    for (n, d, lam), e, s in zip(points, every, seeds):
        r = simulate_many([(n, d, lam)], steps=e * frames, replicas=replicas, seeds=[s],
                          initial="fluid" if reference_d is None else
                          [initial_counts(n, reference_d, lam, "fluid")], record_every=e, progress=False)[0]
        L = r.trajectory.shape[2] - 1
        fp = fluid_fixed_point(d if reference_d is None else reference_d, lam, L)
        dist = np.abs(r.trajectory / n - fp[None, None]).max(axis=2)  # (replicas, frames)
        out_ = dist > eps
        out.append(np.where(out_.any(axis=1), (np.argmax(out_, axis=1) + 1) * e, np.inf).astype(float))
    return out




@dataclass(frozen=True)
class MeetingTimes(ArrayResult):
    """Meeting times at points j: ``n``, ``d``, ``lam``, ``k`` (P,); ``T`` (P, replicas) in steps
    (inf = not met within ``cap`` (P,) steps)."""

    n: np.ndarray
    d: np.ndarray
    lam: np.ndarray
    k: np.ndarray
    T: np.ndarray
    cap: np.ndarray


@dataclass(frozen=True)
class LowerBound(ArrayResult):
    """Lower-bound runs (:func:`event_crossing`) at points j: ``n``, ``d``, ``lam`` (P,);
    ``times``, ``p_good`` (from the displaced good start) and ``p_stationary`` (from stationary
    samples) (P, frames) estimates of P_t(A); ``pi_A`` (P,); ``crossing_good`` and
    ``crossing_stationary`` (P,) steps."""

    n: np.ndarray
    d: np.ndarray
    lam: np.ndarray
    times: np.ndarray
    p_good: np.ndarray
    p_stationary: np.ndarray
    pi_A: np.ndarray
    crossing_good: np.ndarray
    crossing_stationary: np.ndarray


@dataclass(frozen=True)
class MixingResult:
    """Everything notebook 02 and its claim rows show, for one ``mode``. Meeting-time sets:
    ``good``/``top`` (the family, good and bad starts), ``good_jsq2``/``top_jsq2``/``uncoupled``
    (their counterfactuals), ``d_sweep``/``d_fixed`` (fixed 1-lam, d varied / held at its first
    value), ``tail``/``tail_uncoupled`` (many replicas at one point); ``lower`` the TV runs;
    ``exits``/``exits_jsq2`` (good-set exit times, as MeetingTimes with T the exit time)."""

    mode: str
    parameters: dict
    good: MeetingTimes
    top: MeetingTimes
    good_jsq2: MeetingTimes
    top_jsq2: MeetingTimes
    uncoupled: MeetingTimes
    d_sweep: MeetingTimes
    d_fixed: MeetingTimes
    tail: MeetingTimes
    tail_uncoupled: MeetingTimes
    lower: LowerBound
    exits: MeetingTimes
    exits_jsq2: MeetingTimes
    #: rows 10, 13, 15 on the gamma > 0 family ``PARAMETERS[mode]["family_pos"]``
    good_pos: MeetingTimes
    good_pos_jsq2: MeetingTimes
    lower_pos: LowerBound
    exits_pos: MeetingTimes
    exits_pos_jsq2: MeetingTimes
    #: near wrong model name -> the good-start meeting times at the three smallest n
    good_near: dict = field(default_factory=dict)
    good_pos_near: dict = field(default_factory=dict)


def _pack(points: Sequence[PointTuple], T: list[np.ndarray], cap: Sequence[float]) -> dict[str, np.ndarray]:
    return {"n": np.array([p[0] for p in points]), "d": np.array([p[1] for p in points]),
            "lam": np.array([p[2] for p in points]),
            "k": np.array([predicted_max_length(d, lam) if d > 1 else 0 for _, d, lam in points],
                          dtype=float),
            "T": np.stack(T), "cap": np.asarray(cap, dtype=float)}


# --------------------------------------------------------------------------- the study

def _times(ctx: dict, name: str, points, cap, fn, sd, reps: int | None = None, clock=None,
           **kw) -> MeetingTimes:
    """Cached meeting times (one cache entry per point) of ``fn`` at ``points`` with caps ``cap`` and
    seeds ``sd``; ``clock`` the points whose relaxation times size the runs (default: their own)."""
    reps = ctx["R"] if reps is None else reps

    def compute(idx):
        extra = {} if clock is None else {"clock": [clock[i] for i in idx]}
        T = fn([points[i] for i in idx], replicas=reps, seeds=[sd[i] for i in idx],
               max_steps=[int(cap[i]) for i in idx], **kw, **extra)
        return [{**_pack([points[i]], [T[j]], [cap[i]]), "T": T[j]} for j, i in enumerate(idx)]
    cl = clock if clock is not None else points
    # runs that draw stationary samples record that their streams are named (not offsets)
    named = {"seeds": "named"} if fn in (good_start_times, uncoupled_times) else {}
    got = cache.cached_points(name, [{**dict(point=list(p), cap=int(c), reps=reps, burn_taus=ctx["burn_taus"],
                                             clock=list(q)), **kw, **named}
                                     for p, c, q in zip(points, cap, cl)], sd, compute, group=len(points))
    return MeetingTimes.from_arrays({k: (np.stack([g[k] for g in got]) if k == "T"
                                         else np.concatenate([np.atleast_1d(g[k]) for g in got]))
                                     for k in got[0]})


def _near(ctx: dict, tag: str, points, cap) -> dict[str, MeetingTimes]:
    """The good-start meeting times of each near wrong model of PARAMETERS[mode]["near"], on the
    model's clock."""
    P = ctx["P"]
    return {wm: _times(ctx, f"02_{tag}_near_{wm.replace('*', 'x')}", [point_of(wm, p) for p in points], cap,
                       good_start_times, [named_seed(P["stream"], tag, "near", wm, p[0]) for p in points],
                       reps=P["counterfactual_replicas"], clock=points, burn_taus=ctx["burn_taus"])
            for wm in P["near"]}


def _family_sets(ctx: dict) -> dict:
    """Good and bad starts along the family, their far wrong models (JSQ(2), uncoupled chains) and the
    near ones at the three smallest n."""
    P, k_scale, burn_taus = ctx["P"], ctx["k_scale"], ctx["burn_taus"]
    fam = P["family"]
    fns = list(fam["ns"]) + (list(fam["scaled_ns"]) if ctx["mode"] == "full" and scale() >= fam["scaled_from"]
                             else [])
    pts = [family_point(n, fam["alpha"], fam["beta"]) for n in fns]
    seeds = [named_seed(P["stream"], "family", n) for n, _, _ in pts]
    # generous first caps: 40 x the upper bound's scale; every set below records its cap
    cap0 = [int(40 * reference_time(*p) * k_scale) for p in pts]
    good = _times(ctx, "02_good", pts, cap0, good_start_times, seeds, burn_taus=burn_taus)
    top = _times(ctx, "02_top", pts, cap0, top_start_times, seeds)
    # counterfactual caps: cap x the largest JSQ(d) time at the point (inf if never met there)
    cf_cap = [max(1, int(ctx["capf"] * np.nanmax(np.where(np.isfinite(np.concatenate([g, t])),
                                                          np.concatenate([g, t]), np.nan))))
              for g, t in zip(good.T, top.T)]
    # JSQ(2) (power of two), not JSQ(1): with one choice near lam = 1 the queues are ~1/(1-lam)
    # long, so the count chain would carry thousands of levels
    # wrong models run to their cap (they do not meet), so they are run at the three smallest n
    # and with fewer replicas: the criterion fails at the first point that does not meet
    m3 = min(3, len(pts))
    cpts, ccap, cseeds = pts[:m3], cf_cap[:m3], seeds[:m3]
    jsq2 = [point_of("jsq2", p) for p in cpts]
    Rc = P["counterfactual_replicas"]
    return dict(good=good, top=top,
                good_jsq2=_times(ctx, "02_good_jsq2", jsq2, ccap, good_start_times, cseeds, reps=Rc,
                                 clock=cpts, burn_taus=burn_taus),
                top_jsq2=_times(ctx, "02_top_jsq2", jsq2, ccap, top_start_times, cseeds, reps=Rc),
                uncoupled=_times(ctx, "02_uncoupled", cpts, ccap, uncoupled_times, cseeds, reps=Rc,
                                 clock=cpts, burn_taus=burn_taus),
                good_near=_near(ctx, "good", cpts, ccap))


def _d_sets(ctx: dict) -> dict:
    """The d sweep at fixed 1 - lam, and its control with d held at its first value."""
    P, k_scale, burn_taus = ctx["P"], ctx["k_scale"], ctx["burn_taus"]
    ds = P["d_sweep"]
    lam_d = 1.0 - ds["one_minus_lam"]
    dpts = [(ds["n"], d, lam_d) for d in ds["ds"]]
    dseeds = [named_seed(P["stream"], "d_sweep", d) for _, d, _ in dpts]
    dcap = [int(40 * reference_time(*p) * k_scale) for p in dpts]
    d_sweep = _times(ctx, "02_d_sweep", dpts, dcap, good_start_times, dseeds, reps=ds["replicas"],
                     burn_taus=burn_taus)
    fixed = [(ds["n"], ds["ds"][0], lam_d)] * len(dpts)  # a model that ignores d: d held at its first value
    d_fixed = _times(ctx, "02_d_fixed", fixed, dcap, good_start_times,
                     [named_seed(P["stream"], "d_fixed", d) for _, d, _ in dpts], reps=ds["replicas"],
                     clock=dpts, burn_taus=burn_taus)
    return dict(d_sweep=d_sweep, d_fixed=d_fixed)


def _tail_sets(ctx: dict) -> dict:
    """Many replicas at one point (the survival of T_meet), and uncoupled chains there."""
    P, k_scale = ctx["P"], ctx["k_scale"]
    tp, fam = P["tail"], P["family"]
    tpt = [family_point(tp["n"], fam["alpha"], fam["beta"])]
    tcap = [int(40 * reference_time(*tpt[0]) * k_scale)]
    tseed = named_seed(P["stream"], "tail")
    tail = _times(ctx, "02_tail", tpt, tcap, top_start_times, [tseed], reps=tp["replicas"])
    tcf = [max(1, int(ctx["capf"] * np.max(tail.T[np.isfinite(tail.T)], initial=1)))]
    tail_uncoupled = _times(ctx, "02_tail_uncoupled", tpt, tcf, uncoupled_times, [tseed],
                            reps=P["counterfactual_replicas"], clock=tpt, burn_taus=ctx["burn_taus"])
    return dict(tail=tail, tail_uncoupled=tail_uncoupled)


def _lower_set(ctx: dict, name: str, lpts, tag: str) -> LowerBound:
    """The lower-bound runs at ``lpts``: from the displaced good start and from stationary samples,
    judged against the same stationary samples."""
    P, burn_taus = ctx["P"], ctx["burn_taus"]
    lo = P["lower"]
    lseeds = [named_seed(P["stream"], tag, n) for n, _, _ in lpts]

    def lower_compute(idx):
        out = []
        for i in idx:
            n, d, lam = lpts[i]
            kw = dict(replicas=lo["replicas"], seed=lseeds[i], horizon_taus=lo["horizon_taus"],
                      frames=lo["frames"], threshold=lo["threshold"], burn_taus=burn_taus)
            # both starts judge against the same stationary samples: draw them once
            y = stationary_samples([(n, d, lam)], replicas=kw["replicas"], seeds=[sample_seed(kw["seed"])],
                                   burn_taus=burn_taus)[0]
            g = event_crossing(n, d, lam, start="displaced", samples=y, **kw)
            s_ = event_crossing(n, d, lam, start="stationary", samples=y, **kw)
            out.append({"n": np.array([n]), "d": np.array([d]), "lam": np.array([lam]),
                        "times": g["times"][None],
                        "p_good": g["p"][None], "p_stationary": s_["p"][None], "pi_A": np.array([g["pi_A"]]),
                        "crossing_good": np.array([g["crossing"]]),
                        "crossing_stationary": np.array([s_["crossing"]])})
        return out

    got = cache.cached_points(name,
                              [dict(lo, point=list(p), burn_taus=burn_taus, seeds="named") for p in lpts],
                              lseeds, lower_compute, group=len(lpts))
    return LowerBound.from_arrays({k: np.concatenate([g[k] for g in got]) for k in got[0]})


def _exit_sets(ctx: dict, name: str, gpts, tag: str) -> tuple[MeetingTimes, MeetingTimes]:
    """First exits from the good set at ``gpts``, and JSQ(2)'s judged against JSQ(d)'s good set."""
    P, k_scale = ctx["P"], ctx["k_scale"]
    gs = P["good_set"]

    def exit_fn(points, replicas, seeds, max_steps, reference=False):
        kw = dict(eps=gs["eps"], horizon_taus=gs["horizon_taus"] * k_scale, replicas=replicas, seeds=seeds)
        if reference:  # JSQ(2) judged against JSQ(d)'s good set, with JSQ(d)'s clock
            return [good_set_exits([point_of("jsq2", (n, d, lam))], reference_d=d, **dict(kw, seeds=[s]))[0]
                    for (n, d, lam), s in zip(points, seeds)]
        return good_set_exits(points, **kw)

    gseeds = [named_seed(P["stream"], tag, n) for n, _, _ in gpts]
    gcap = [int(gs["horizon_taus"] * k_scale * relaxation_time(d, lam) * steps_per_time(n, lam))
            for n, d, lam in gpts]
    ex = _times(ctx, name, gpts, gcap, exit_fn, gseeds, reps=gs["replicas"])
    exj = _times(ctx, name + "_jsq2", gpts, gcap, lambda *a, **k: exit_fn(*a, reference=True, **k), gseeds,
                 reps=P["counterfactual_replicas"])
    return ex, exj


def _positive_family_sets(ctx: dict) -> dict:
    """Rows 10, 13 and 15 again on a family with gamma > 0."""
    P, k_scale, burn_taus = ctx["P"], ctx["k_scale"], ctx["burn_taus"]
    fp = P["family_pos"]
    ppts = [family_point(n, fp["alpha"], fp["beta"]) for n in fp["ns"]]
    pseeds = [named_seed(P["stream"], "family_pos", n) for n in fp["ns"]]
    pcap = [int(40 * reference_time(*p) * k_scale) for p in ppts]
    good_pos = _times(ctx, "02_good_pos", ppts, pcap, good_start_times, pseeds, burn_taus=burn_taus)
    pcf = [max(1, int(ctx["capf"] * np.nanmax(np.where(np.isfinite(g), g, np.nan)))) if np.any(np.isfinite(g))
           else c
           for g, c in zip(good_pos.T, pcap)]
    pm3 = min(3, len(ppts))
    good_pos_jsq2 = _times(ctx, "02_good_pos_jsq2", [point_of("jsq2", p) for p in ppts[:pm3]], pcf[:pm3],
                           good_start_times, pseeds[:pm3], reps=P["counterfactual_replicas"],
                           clock=ppts[:pm3], burn_taus=burn_taus)
    exits_pos, exits_pos_jsq2 = _exit_sets(ctx, "02_exits_pos", [family_point(n, fp["alpha"], fp["beta"])
                                                                for n in fp["good_set_ns"]], "good_set_pos")
    return dict(good_pos=good_pos, good_pos_jsq2=good_pos_jsq2,
                good_pos_near=_near(ctx, "good_pos", ppts[:pm3], pcf[:pm3]),
                lower_pos=_lower_set(ctx, "02_lower_pos", [family_point(n, fp["alpha"], fp["beta"])
                                                           for n in fp["lower_ns"]], "lower_pos"),
                exits_pos=exits_pos, exits_pos_jsq2=exits_pos_jsq2)


def run(mode: str = "full", *, progress: bool = True) -> MixingResult:
    """Compute every measurement of the study.

    Args:
        mode: "full" or "smoke"; full-mode caps and horizons scale with :func:`qlib.config.scale`.
        progress: accepted for the studies' common signature (the runs here show none).

    Returns:
        A :class:`MixingResult`.
    """
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    k_scale = scale() if mode == "full" else 1.0
    ctx = dict(P=P, mode=mode, k_scale=k_scale, burn_taus=P["burn_taus"], capf=P["cap"] * k_scale,
               R=P["family"]["replicas"])
    sets = {**_family_sets(ctx), **_d_sets(ctx), **_tail_sets(ctx)}
    fam = P["family"]
    lower = _lower_set(ctx, "02_lower",
                       [family_point(n, fam["alpha"], fam["beta"]) for n in P["lower"]["ns"]], "lower")
    exits, exits_jsq2 = _exit_sets(ctx, "02_exits", [family_point(n, fam["alpha"], fam["beta"])
                                                     for n in P["good_set"]["ns"]], "good_set")
    return MixingResult(mode=mode, parameters=P, lower=lower, exits=exits, exits_jsq2=exits_jsq2,
                        **sets, **_positive_family_sets(ctx))


# --------------------------------------------------------------------------- the sliders

@dataclass(frozen=True)
class Exploration:
    """Slider data for one (n, d, lam): meeting times ``T`` (replicas,), ``times`` (F+1,) and the
    mean L1 distance per queue ``l1`` (F+1,) of the bottom/top pair."""

    n: int
    d: int
    lam: float
    k: int
    T: np.ndarray
    times: np.ndarray
    l1: np.ndarray


def explore(n: int, d: int, lam: float, *, replicas: int = 16, seed: int = 0, frames: int = 100,
            levels: int | None = None) -> Exploration:
    """Slider callback data: meeting times (bottom all empty, top all at k+1) and the mean L1
    distance between the pair over time, for one (n, d, lam). Cost ~ replicas * T_meet steps."""
    n, d, lam = as_point(n, d, lam).as_tuple()
    if d < 2:
        raise ValueError(f"d must be an integer >= 2 here (k is finite only then); got {d}")
    k = int(predicted_max_length(d, lam))
    top = {"counts": counts_all_at(n, k + 1)}
    T = meeting_times(n, d, lam, replicas=replicas, seed=seed, top_length=k + 1,
                      max_steps=int(1e4 * n * max(1.0, math.log(n))), progress=False, levels=levels)
    horizon = int(np.max(T[np.isfinite(T)], initial=1000))
    every = max(1, -(-horizon // frames))
    p = coupled_paths(n, d, lam, ["empty", top], steps=every * frames, replicas=replicas, seed=seed,
                      record_every=every, levels=levels)
    return Exploration(n=n, d=d, lam=lam, k=k, T=T, times=p.times,
                       l1=l1_distance(p.counts[1], p.counts[0]).mean(axis=0) / n)
