"""Study: the mixing time of the supermarket model, by monotone coupling (notebook 02).

Claims (Brightwell & Luczak, arXiv:1201.5523, as summarised; docs/models.md#mixing-time): from a
good initial state the mixing time is O(k d^(k-1) n log n) jump-chain steps and at least
Omega(n (lam d)^(k-1)); past it the total-variation distance decays exponentially; the bound
holds up to constants from bad starts too; the process stays in the good set for a long time.
One unit of model time is (1 + lam) n steps.

How each is measured (docs/models.md#monotone-coupling):

- **upper bounds** through the coupling inequality d_TV(t) <= P(T_meet > t): from a good start,
  the meeting time of the chain from the fluid point with a chain from a stationary sample
  (an unordered coupling, meeting detected by equality); from a bad start, the meeting time of
  the chains from all-empty and from all queues at k+1 (ordered: it bounds d_TV from every
  start between them);
- **in the paper's regime, separating d^(k-1) from 1/(1-lam)**: along the paper's family
  lam = 1 - n^(-alpha), d = floor(n^beta) (alpha = 0.75, beta = 0.5: k = 2, 1/(1-lam) = n^0.75
  while k d^(k-1) = 2 n^0.5), and at fixed 1 - lam with d varied within one k-window;
- **the lower bound** from a good start: the first time the law of u_k(t) over replicas is
  within 1/4 of its stationary law in (binned) total variation, a lower bound on the mixing time
  from that start, against n (lam d)^(k-1);
- **exponential decay**: the survival P(T_meet > t) beyond its median against the
  submultiplicative bound P(T > s + t) <= P(T > s) P(T > t);
- **staying near equilibrium**: the first exit time from the good set
  N^eps = {max_i |u_i/n - s*_i| <= eps} from the fluid point, as n grows.

Every claim row carries the same criterion on wrong models: JSQ(2) in place of JSQ(d),
uncoupled chains (independent randomness), d held fixed, a start drawn from the stationary law.

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS`, :func:`run`,
:func:`claim_rows`; figures in :mod:`qlib.plots.mixing`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from qlib import _validate as V
from qlib import cache, stats
from qlib.claims import ClaimRow, Counterfactual
from qlib.config import scale
from qlib.studies import ArrayResult, check_mode
from qlib.supermarket import (counts_all_at, initial_counts, l1_distance, meeting_times,
                              meeting_times_many, simulate_many)
from qlib.supermarket.refined import relaxation_time
from qlib.supermarket.theory import (check_parameters, fluid_fixed_point, predicted_max_length,
                                     steps_per_time)

Point = tuple[int, int, float]

#: Every parameter of the study, per mode. Run lengths are in relaxation times tau (model
#: time) or in multiples of the measured meeting times; full mode scales by --scale.
PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": {
        "family": dict(alpha=0.75, beta=0.5, ns=[100, 300, 1000], replicas=8),
        "d_sweep": dict(n=1000, one_minus_lam=1e-3, ds=[100, 141, 200], replicas=8),
        "lower": dict(ns=[100, 300], replicas=64, horizon_taus=10.0, frames=40, threshold=0.25),
        "tail": dict(n=300, replicas=64),
        "good_set": dict(ns=[100, 300, 1000], eps=0.2, horizon_taus=20.0, replicas=8),
        "burn_taus": 20.0, "cap": 2.0, "counterfactual_replicas": 4, "seed": 2024,
    },
    "full": {
        "family": dict(alpha=0.75, beta=0.5, ns=[100, 300, 1000, 3000, 10_000], replicas=16),
        "d_sweep": dict(n=3000, one_minus_lam=1e-3, ds=[100, 141, 200, 283], replicas=16),
        "lower": dict(ns=[300, 1000, 3000], replicas=128, horizon_taus=10.0, frames=100, threshold=0.25),
        "tail": dict(n=1000, replicas=256),
        "good_set": dict(ns=[100, 300, 1000, 3000], eps=0.2, horizon_taus=50.0, replicas=32),
        "burn_taus": 20.0, "cap": 2.0, "counterfactual_replicas": 4, "seed": 2024,
    },
}


def family_point(n: int, alpha: float, beta: float) -> Point:
    """The paper's family: lam = 1 - n^(-alpha), d = floor(n^beta) (k = ceil(alpha/beta) for large n)."""
    n = V.integer("n", n, low=2)
    return n, max(2, int(math.floor(n**beta + 1e-9))), 1.0 - n ** (-alpha)


def reference_time(n: int, d: int, lam: float) -> float:
    """The upper bound's scale k d^(k-1) n ln n (jump-chain steps)."""
    k = int(predicted_max_length(d, lam))
    return k * float(d) ** (k - 1) * n * math.log(n)


def lower_time(n: int, d: int, lam: float) -> float:
    """The lower bound's scale n (lam d)^(k-1) (jump-chain steps)."""
    k = int(predicted_max_length(d, lam))
    return n * (lam * d) ** (k - 1)


# --------------------------------------------------------------------------- measurements

def stationary_samples(points: Sequence[Point], *, replicas: int, seeds: Sequence[int],
                       burn_taus: float = 20.0, clock: Sequence[Point] | None = None) -> list[np.ndarray]:
    """One state per replica, (replicas, L+1) counts, from each point's chain after ``burn_taus``
    relaxation times from the fluid point (docs/models.md#relaxation-time): samples of the
    stationary law, independent of the other runs (their own seeds). ``clock``: the points whose
    tau sets the burn-in (default: the points themselves; a wrong model runs on the right one's)."""
    clock = list(points) if clock is None else list(clock)
    burn = [int(burn_taus * relaxation_time(d, lam) * steps_per_time(n, lam)) for n, d, lam in clock]
    res = simulate_many(list(points), steps=1, burn_in=burn, replicas=replicas, seeds=list(seeds),
                        initial="fluid", progress=False)
    return [r.counts for r in res]


def good_start_times(points: Sequence[Point], *, replicas: int, seeds: Sequence[int], max_steps: Sequence[int],
                     burn_taus: float = 20.0, clock: Sequence[Point] | None = None) -> list[np.ndarray]:
    """Meeting times (replicas,) of the chain from the fluid point (a good start) with a chain
    from a stationary sample, driven by the same draws; inf = not met within ``max_steps``.
    P(T > t) bounds the total-variation distance from the fluid start at step t."""
    y = stationary_samples(points, replicas=replicas, seeds=[s + 10**6 for s in seeds], burn_taus=burn_taus,
                           clock=clock)
    x = [initial_counts(n, d, lam, "fluid") for n, d, lam in points]
    return meeting_times_many(list(points), replicas=replicas, top_length=0, max_steps=list(max_steps),
                              seeds=list(seeds), bottom=x, top=[{"counts": c} for c in y], ordered=False,
                              progress=False)


def top_start_times(points: Sequence[Point], *, replicas: int, seeds: Sequence[int],
                    max_steps: Sequence[int]) -> list[np.ndarray]:
    """Meeting times (replicas,) of the chains from all-empty and from all queues at k+1 (a bad
    start with about n excess customers); their survival bounds d_TV from every start between."""
    tops = [int(predicted_max_length(d, lam)) + 1 if d > 1 else 3 for _, d, lam in points]
    return meeting_times_many(list(points), replicas=replicas, top_length=tops, max_steps=list(max_steps),
                              seeds=list(seeds), progress=False)


def uncoupled_times(points: Sequence[Point], *, replicas: int, seeds: Sequence[int], max_steps: Sequence[int],
                    frames: int = 2000, burn_taus: float = 20.0, clock: Sequence[Point] | None = None
                    ) -> list[np.ndarray]:
    """The good-start protocol with the coupling removed: the chain from the fluid point and the
    chain from a stationary sample use independent random numbers (other seeds). "Met" = the
    first recorded frame (every max_steps/frames steps) at which all counts agree; inf if none."""
    y = stationary_samples(points, replicas=replicas, seeds=[s + 10**6 for s in seeds], burn_taus=burn_taus,
                           clock=clock)
    every = [max(1, m // frames) for m in max_steps]
    a = simulate_many(list(points), steps=[e * frames for e in every], replicas=replicas, seeds=list(seeds),
                      initial="fluid", record_every=every[0], progress=False) if len(set(every)) == 1 else None
    out = []
    for j, (pt, e) in enumerate(zip(points, every)):
        ra = a[j] if a is not None else simulate_many([pt], steps=e * frames, replicas=replicas, seeds=[seeds[j]],
                                                      initial="fluid", record_every=e, progress=False)[0]
        rb = simulate_many([pt], steps=e * frames, replicas=replicas, seeds=[seeds[j] + 2 * 10**6],
                           initial=[{"counts": y[j]}], record_every=e, progress=False)[0]
        L = max(ra.trajectory.shape[2], rb.trajectory.shape[2])
        pad = lambda t: np.pad(t, ((0, 0), (0, 0), (0, L - t.shape[2])))  # noqa: E731
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
    if already drawn (``stationary_samples`` with seed ``seed + 10**6``: both starts use the same)."""
    tau_steps = relaxation_time(d, lam) * steps_per_time(n, lam)
    every = max(1, int(horizon_taus * tau_steps / frames))
    y = stationary_samples([(n, d, lam)], replicas=replicas, seeds=[seed + 10**6], burn_taus=burn_taus)[0] \
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


def good_set_exits(points: Sequence[Point], *, eps: float, horizon_taus: float, replicas: int,
                   seeds: Sequence[int], frames: int = 500, reference_d: int | None = None) -> list[np.ndarray]:
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


# --------------------------------------------------------------------------- typed results

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


def _pack(points: Sequence[Point], T: list[np.ndarray], cap: Sequence[float]) -> dict[str, np.ndarray]:
    return {"n": np.array([p[0] for p in points]), "d": np.array([p[1] for p in points]),
            "lam": np.array([p[2] for p in points]),
            "k": np.array([predicted_max_length(d, lam) if d > 1 else 0 for _, d, lam in points], dtype=float),
            "T": np.stack(T), "cap": np.asarray(cap, dtype=float)}


# --------------------------------------------------------------------------- the study

def run(mode: str = "full", *, progress: bool = True) -> MixingResult:
    """Compute every measurement of the study for ``mode`` ("full" or "smoke")."""
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    k_scale = scale() if mode == "full" else 1.0
    seed, burn_taus, capf = P["seed"], P["burn_taus"], P["cap"] * k_scale
    fam = P["family"]
    pts = [family_point(n, fam["alpha"], fam["beta"]) for n in fam["ns"]]
    R = fam["replicas"]
    seeds = [seed + j for j in range(len(pts))]
    # generous first caps: 40 x the upper bound's scale; every set below records its cap
    cap0 = [int(40 * reference_time(*p) * k_scale) for p in pts]

    def times(name, points, cap, fn, sd, reps=R, clock=None, **kw):
        def compute(idx):
            extra = {} if clock is None else {"clock": [clock[i] for i in idx]}
            T = fn([points[i] for i in idx], replicas=reps, seeds=[sd[i] for i in idx],
                   max_steps=[int(cap[i]) for i in idx], **kw, **extra)
            return [{**_pack([points[i]], [T[j]], [cap[i]]), "T": T[j]} for j, i in enumerate(idx)]
        cl = clock if clock is not None else points
        got = cache.cached_points(name, [{**dict(point=list(p), cap=int(c), reps=reps, burn_taus=burn_taus,
                                                 clock=list(q)), **kw}
                                         for p, c, q in zip(points, cap, cl)], sd, compute, group=len(points))
        return MeetingTimes.from_arrays({k: (np.stack([g[k] for g in got]) if k == "T"
                                             else np.concatenate([np.atleast_1d(g[k]) for g in got]))
                                         for k in got[0]})

    good = times("02_good", pts, cap0, good_start_times, seeds, burn_taus=burn_taus)
    top = times("02_top", pts, cap0, top_start_times, seeds)
    # counterfactual caps: cap x the largest JSQ(d) time at the point (inf if never met there)
    cf_cap = [max(1, int(capf * np.nanmax(np.where(np.isfinite(np.concatenate([g, t])), np.concatenate([g, t]), np.nan))))
              for g, t in zip(good.T, top.T)]
    # JSQ(2) (power of two), not JSQ(1): with one choice near lam = 1 the queues are ~1/(1-lam)
    # long, so the count chain would carry thousands of levels
    # wrong models run to their cap (they do not meet), so they are run at the three smallest n
    # and with fewer replicas: the criterion fails at the first point that does not meet
    m3 = min(3, len(pts))
    cpts, ccap, cseeds = pts[:m3], cf_cap[:m3], seeds[:m3]
    jsq2 = [(n, 2, lam) for n, _, lam in cpts]
    Rc = P["counterfactual_replicas"]
    good_jsq2 = times("02_good_jsq2", jsq2, ccap, good_start_times, cseeds, reps=Rc, clock=cpts, burn_taus=burn_taus)
    top_jsq2 = times("02_top_jsq2", jsq2, ccap, top_start_times, cseeds, reps=Rc)
    uncoupled = times("02_uncoupled", cpts, ccap, uncoupled_times, cseeds, reps=Rc, clock=cpts, burn_taus=burn_taus)

    ds = P["d_sweep"]
    lam_d = 1.0 - ds["one_minus_lam"]
    dpts = [(ds["n"], d, lam_d) for d in ds["ds"]]
    dseeds = [seed + 100 + j for j in range(len(dpts))]
    dcap = [int(40 * reference_time(*p) * k_scale) for p in dpts]
    d_sweep = times("02_d_sweep", dpts, dcap, good_start_times, dseeds, reps=ds["replicas"], burn_taus=burn_taus)
    fixed = [(ds["n"], ds["ds"][0], lam_d)] * len(dpts)  # a model that ignores d: d held at its first value
    d_fixed = times("02_d_fixed", fixed, dcap, good_start_times, [s + 50 for s in dseeds], reps=ds["replicas"],
                    clock=dpts, burn_taus=burn_taus)

    tp = P["tail"]
    tpt = [family_point(tp["n"], fam["alpha"], fam["beta"])]
    tcap = [int(40 * reference_time(*tpt[0]) * k_scale)]
    tail = times("02_tail", tpt, tcap, top_start_times, [seed + 200], reps=tp["replicas"])
    tcf = [max(1, int(capf * np.max(tail.T[np.isfinite(tail.T)], initial=1)))]
    tail_uncoupled = times("02_tail_uncoupled", tpt, tcf, uncoupled_times, [seed + 200],
                           reps=P["counterfactual_replicas"], clock=tpt, burn_taus=burn_taus)

    lo = P["lower"]
    lpts = [family_point(n, fam["alpha"], fam["beta"]) for n in lo["ns"]]

    def lower_compute(idx):
        out = []
        for i in idx:
            n, d, lam = lpts[i]
            kw = dict(replicas=lo["replicas"], seed=seed + 300 + i, horizon_taus=lo["horizon_taus"],
                      frames=lo["frames"], threshold=lo["threshold"], burn_taus=burn_taus)
            # both starts judge against the same stationary samples: draw them once
            y = stationary_samples([(n, d, lam)], replicas=kw["replicas"], seeds=[kw["seed"] + 10**6],
                                   burn_taus=burn_taus)[0]
            g = event_crossing(n, d, lam, start="displaced", samples=y, **kw)
            s = event_crossing(n, d, lam, start="stationary", samples=y, **kw)
            out.append({"n": np.array([n]), "d": np.array([d]), "lam": np.array([lam]), "times": g["times"][None],
                        "p_good": g["p"][None], "p_stationary": s["p"][None], "pi_A": np.array([g["pi_A"]]),
                        "crossing_good": np.array([g["crossing"]]), "crossing_stationary": np.array([s["crossing"]])})
        return out

    got = cache.cached_points("02_lower", [dict(lo, point=list(p), burn_taus=burn_taus) for p in lpts],
                              [seed + 300 + i for i in range(len(lpts))], lower_compute, group=len(lpts))
    lower = LowerBound.from_arrays({k: np.concatenate([g[k] for g in got]) for k in got[0]})

    gs = P["good_set"]
    gpts = [family_point(n, fam["alpha"], fam["beta"]) for n in gs["ns"]]
    gseeds = [seed + 400 + j for j in range(len(gpts))]

    def exit_fn(points, replicas, seeds, max_steps, reference=False):
        kw = dict(eps=gs["eps"], horizon_taus=gs["horizon_taus"] * k_scale, replicas=replicas, seeds=seeds)
        if reference:  # JSQ(2) judged against JSQ(d)'s good set, with JSQ(d)'s clock
            return [good_set_exits([(n, 2, lam)], reference_d=d, **dict(kw, seeds=[s]))[0]
                    for (n, d, lam), s in zip(points, seeds)]
        return good_set_exits(points, **kw)

    gcap = [int(gs["horizon_taus"] * k_scale * relaxation_time(d, lam) * steps_per_time(n, lam)) for n, d, lam in gpts]
    exits = times("02_exits", gpts, gcap, exit_fn, gseeds, reps=gs["replicas"])
    exits_jsq2 = times("02_exits_jsq2", gpts, gcap, lambda *a, **k: exit_fn(*a, reference=True, **k), gseeds,
                       reps=P["counterfactual_replicas"])
    return MixingResult(mode=mode, parameters=P, good=good, top=top, good_jsq2=good_jsq2, top_jsq2=top_jsq2,
                        uncoupled=uncoupled, d_sweep=d_sweep, d_fixed=d_fixed, tail=tail,
                        tail_uncoupled=tail_uncoupled, lower=lower, exits=exits, exits_jsq2=exits_jsq2)


# --------------------------------------------------------------------------- claim rows

REF = "Brightwell & Luczak arXiv:1201.5523 (as summarised; docs/models.md#mixing-time)"
GROWTH = 0.1  # "bounded": the exponent of T / (k d^(k-1) n ln n) in n is at most 0.1 (upper 95% CI end)


def _met(T: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(T)))


def _ratio_exponent(m: MeetingTimes) -> tuple[stats.PowerFit | None, str]:
    """Exponent of mean T / (k d^(k-1) n ln n) in n, with a bootstrap CI (None if some replica never met)."""
    ref = np.array([reference_time(int(n), int(d), float(lam)) for n, d, lam in zip(m.n, m.d, m.lam)])
    if not _met(m.T):
        unmet = int(np.sum(~np.isfinite(m.T)))
        return None, f"{unmet} of {m.T.size} replica-runs never met within {m.cap.min():.2g}..{m.cap.max():.2g} steps"
    fit = stats.fit_power_law(m.n.astype(float), m.T / ref[:, None])
    ratio = m.T.mean(axis=1) / ref
    return fit, f"T/(k d^(k-1) n ln n) = {', '.join(f'{r:.2f}' for r in ratio)}; exponent in n {fit}"


def _bounded_verdict(m: MeetingTimes) -> tuple[bool, str, float | None]:
    fit, text = _ratio_exponent(m)
    if fit is None:
        return False, text, None
    return bool(fit.ci[1] <= GROWTH), text, fit.exponent


def claim_rows(result: MixingResult) -> list[ClaimRow]:
    """Upper bounds from good and bad starts along the paper's family, the d^(k-1) scaling at fixed
    1 - lam, the lower bound from good starts, exponential decay past the mixing time, and the
    time to leave the good set; each with the same criterion on wrong models."""
    P = result.parameters
    fam = P["family"]
    fam_par = (f"lam = 1 - n^-{fam['alpha']}, d = floor(n^{fam['beta']}) (k = 2; (1-lam) d = n^-0.25, "
               f"(1-lam) d^2 = n^0.25), n = {', '.join(str(int(x)) for x in result.good.n)}; {fam['replicas']} replicas")
    rows: list[ClaimRow] = []
    taus_good = float(P["burn_taus"])  # the stationary samples have that many tau of burn-in (stationary_samples)

    ok, text, b = _bounded_verdict(result.good)
    small = ", ".join(str(int(x)) for x in result.good_jsq2.n)
    cf = [Counterfactual(f"JSQ(2) in place of JSQ(d), same protocol at n = {small}, capped at {P['cap']:g}x the "
                         "JSQ(d) time", *_cf(result.good_jsq2)),
          Counterfactual(f"uncoupled chains (independent random numbers), same protocol at n = {small}",
                         *_cf(result.uncoupled))]
    rows.append(ClaimRow(
        claim="from a good start the mixing time is O(k d^(k-1) n log n): T_meet/(k d^(k-1) n ln n) stays bounded",
        parameters=fam_par, theory="bounded ratio: it does not grow with n", measured=text, passed=ok,
        criterion=f"upper end of the 95% bootstrap CI of the exponent of the ratio in n <= {GROWTH}; T_meet = "
                  "meeting time of the chain from the fluid point with one from a stationary sample (d_TV <= P(T > t))",
        taus=taus_good, start="fluid point vs a stationary sample (20 τ burn-in)", reference=REF,
        counterfactuals=tuple(cf)))

    ok, text, b = _bounded_verdict(result.top)
    drain = [(1 + lam) * n / (1 - lam) / reference_time(int(n), int(d), float(lam))
             for n, d, lam in zip(result.top.n, result.top.d, result.top.lam)]
    rows.append(ClaimRow(
        claim="even from a bad start (all queues at k+1) the bound holds up to a constant over this range of n",
        parameters=fam_par,
        theory="bounded ratio; the drain term (1+lam) n/(1-lam) is " + ", ".join(f"{x:.2f}" for x in drain)
               + " x k d^(k-1) n ln n here (it grows like n^0.25/ln n: asymptotically the drain dominates)",
        measured=text, passed=ok,
        criterion=f"upper end of the 95% bootstrap CI of the exponent of T_meet/(k d^(k-1) n ln n) in n <= {GROWTH}; "
                  "T_meet = meeting time of the chains from all-empty and all-at-(k+1)",
        taus=None, start="all empty and all queues at k+1", reference=REF + "; docs/models.md#bad-starts",
        counterfactuals=(Counterfactual(f"JSQ(2) in place of JSQ(d) at n = {small}, capped at {P['cap']:g}x the "
                                        "JSQ(d) time", *_cf(result.top_jsq2)),)))

    ds = result.d_sweep
    dsp = P["d_sweep"]
    okd, textd, bd = _d_exponent(ds)
    okf, textf, bf = _d_exponent(result.d_fixed, d_axis=ds.d)
    kk = int(ds.k[0])
    rows.append(ClaimRow(
        claim=f"the mixing time scales with d^(k-1), not with 1/(1-lam): at fixed 1-lam it grows with d (k = {kk})",
        parameters=f"n = {int(ds.n[0])}, 1-lam = {dsp['one_minus_lam']:g} fixed, d = "
                   f"{', '.join(str(int(x)) for x in ds.d)} ((1-lam) d = "
                   + ", ".join(f"{dsp['one_minus_lam'] * x:.2g}" for x in ds.d) + f"); {dsp['replicas']} replicas",
        theory=f"exponent of T_meet in d: above 0 (it would be 0 if the time were set by 1/(1-lam), fixed here) and "
               f"at most k-1 = {kk - 1} (the upper bound), up to 0.3", measured=textd, passed=okd,
        criterion="95% bootstrap CI of the exponent of T_meet (good start) in d inside (0, k - 1 + 0.3]",
        taus=20.0, start="fluid point vs a stationary sample (20 τ burn-in)", reference=REF,
        counterfactuals=(Counterfactual(f"d held at {int(ds.d[0])} whatever d is asked for (d-independent dynamics)",
                                        textf, okf, bf),)))

    lo = result.lower
    lp = P["lower"]
    ratio_g = lo.crossing_good / np.array([lower_time(int(n), int(d), float(lam)) for n, d, lam in zip(lo.n, lo.d, lo.lam)])
    ratio_s = lo.crossing_stationary / np.array([lower_time(int(n), int(d), float(lam))
                                                  for n, d, lam in zip(lo.n, lo.d, lo.lam)])
    okl = bool(np.all(np.isfinite(ratio_g)) and ratio_g.min() >= 0.2)
    okls = bool(np.all(np.isfinite(ratio_s)) and ratio_s.min() >= 0.2)
    rows.append(ClaimRow(
        claim="lower bound from a good start: the mixing time is at least a constant times n (lam d)^(k-1)",
        parameters=f"the family at n = {', '.join(str(int(x)) for x in lo.n)}; {lp['replicas']} replicas from a good "
                   "state whose number of customers N is at the stationary 97.5% point; A = {N > stationary median}",
        theory="t(P_t(A) - pi(A) <= 1/4) / (n (lam d)^(k-1)) >= 0.2 at every n (d_TV >= |P_t(A) - pi(A)|)",
        measured="ratio " + ", ".join(f"{x:.2f}" for x in ratio_g),
        passed=okl, criterion="the first time P_t(A) - pi(A) <= 1/4 + 2 SE (conservatively early), over "
                              "n (lam d)^(k-1), is >= 0.2 at every n: a lower bound on the time to d_TV <= 1/4 from "
                              "that good start",
        taus=float(lp["horizon_taus"]), start="a stationary-typical state displaced to N's 97.5% point",
        reference=REF, counterfactuals=(Counterfactual(
            "each chain started from a stationary sample (a run started at the answer)",
            "ratio " + ", ".join(f"{x:.2f}" for x in ratio_s), okls),)))

    tl = result.tail
    okt, textt = _tail_verdict(tl.T[0])
    oktu, texttu = _tail_verdict(result.tail_uncoupled.T[0])
    rows.append(ClaimRow(
        claim="past the mixing time the distance to equilibrium decays exponentially: P(T_meet > t) does",
        parameters=f"the family at n = {int(tl.n[0])} (d = {int(tl.d[0])}); {tl.T.shape[1]} replicas, bottom/top coupling",
        theory="P(T > 2m) <= P(T > m)^2 and P(T > 3m) <= P(T > m)^3 (submultiplicative) at the median m; "
               "log P(T > t) linear beyond m",
        measured=textt, passed=okt,
        criterion="empirical P(T > 2m) and P(T > 3m) within their 95% bounds of 1/4 and 1/8, and every replica met",
        taus=None, start="all empty and all queues at k+1", reference=REF,
        counterfactuals=(Counterfactual("uncoupled chains (independent random numbers)", texttu, oktu),)))

    ex, exj = result.exits, result.exits_jsq2
    oke, texte = _exit_verdict(ex, ex)
    okej, textej = _exit_verdict(exj, ex)
    gs = P["good_set"]
    rows.append(ClaimRow(
        claim="the chain stays in the good set for a long time, and longer as n grows",
        parameters=f"the family at n = {', '.join(str(int(x)) for x in ex.n)}; N^eps with eps = {gs['eps']} "
                   f"(sup distance of u/n to the fluid fixed point); {gs['replicas']} replicas, "
                   f"{gs['horizon_taus']:g} τ",
        theory="first exit time grows with n (exponentially, at fixed eps)", measured=texte, passed=oke,
        criterion="the median first exit time in relaxation times (censored at the horizon) rises with n at every "
                  "step",
        taus=float(gs["horizon_taus"]), start="the fluid point", reference=REF + "; docs/models.md#good-set",
        counterfactuals=(Counterfactual("JSQ(2) in place of JSQ(d), judged against JSQ(d)'s good set", textej, okej),)))
    return rows


def _cf(m: MeetingTimes) -> tuple[str, bool, float | None]:
    ok, text, b = _bounded_verdict(m)
    return text, ok, b


def _d_exponent(m: MeetingTimes, d_axis: np.ndarray | None = None) -> tuple[bool, str, float | None]:
    d = (m.d if d_axis is None else d_axis).astype(float)
    if not _met(m.T):
        return False, f"{int(np.sum(~np.isfinite(m.T)))} replica-runs never met", None
    fit = stats.fit_power_law(d, m.T)
    k = int(predicted_max_length(int(m.d[-1]) if d_axis is None else int(d_axis[-1]), float(m.lam[0])))
    ok = bool(fit.ci[0] > 0 and fit.ci[1] <= k - 1 + 0.3)
    return ok, f"exponent of T_meet in d: {fit}", fit.exponent


def _tail_verdict(T: np.ndarray) -> tuple[bool, str]:
    if not _met(T):
        return False, f"{int(np.sum(~np.isfinite(T)))} of {T.size} never met (no decay to measure)"
    m = float(np.median(T))
    N = T.size
    out = []
    ok = True
    for j, bound in ((2, 0.25), (3, 0.125)):
        p = float(np.mean(T > j * m))
        slack = 1.96 * math.sqrt(bound * (1 - bound) / N)
        ok &= p <= bound + slack
        out.append(f"P(T > {j}m) = {p:.3f} (bound {bound} + {slack:.3f})")
    return ok, f"median m = {m:.3g} steps; " + "; ".join(out)


def _exit_verdict(m: MeetingTimes, clock: MeetingTimes) -> tuple[bool, str]:
    """Median first exit time in relaxation times of ``clock``'s points: it must rise at every
    step of n (a median that never happens within the horizon counts as the largest)."""
    tau = np.array([relaxation_time(int(d), float(lam)) * steps_per_time(int(n), float(lam))
                    for n, d, lam in zip(clock.n, clock.d, clock.lam)])
    med = np.array([np.median(t) for t in m.T]) / tau  # inf when more than half never left
    big = np.where(np.isinf(med), np.finfo(float).max, med)
    ok = bool(np.all(np.diff(big) > 0))
    parts = [f"n={int(n)}: median {'never' if np.isinf(x) else f'{x:.3g} τ'} ({100 * np.mean(np.isinf(t)):.0f}% "
             f"never leave)" for n, x, t in zip(m.n, med, m.T)]
    return ok, "; ".join(parts)



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
    from qlib.supermarket import coupled_paths

    n, d, lam, _ = check_parameters(n, d, lam)
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
