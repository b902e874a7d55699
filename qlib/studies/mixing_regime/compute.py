"""The in-regime mixing study's runs: per point, certified stationary samples, the good-start
meeting time and the autocorrelation times of N and u_k in equilibrium (one cache entry each), the
same at d held fixed, and JSQ(2) on the same protocol; :func:`run` gathers them."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qlib import results
from qlib._rng import named_seed
from qlib.results import cache
from qlib.stats import integrated_autocorrelation_time
from qlib.studies import check_mode
from qlib.studies.mixing_regime.parameters import PARAMETERS, PointTuple, relaxation_scale
from qlib.studies.wrong_models import point_of
from qlib.supermarket import initial_counts, meeting_times_many, simulate_many
from qlib.supermarket.linear_noise import linear_noise
from qlib.supermarket.mixing_law import predicted_meeting_time
from qlib.supermarket.regime import family_point, hypotheses, reference_time
from qlib.supermarket.theory import predicted_max_length

#: the command that computes the full mode (the long tier)
LONG_COMMAND = "make results-long ONLY=regime"
#: the arrays of one point (every one is (1,) or (1, replicas))
FIELDS = ("n", "d", "lam", "T_bt", "burn", "certified", "T", "iact_N", "iact_uk", "iact_steps", "samples_N")


def certified_samples(
    pt: PointTuple,
    *,
    replicas: int,
    seed: int,
    cap: int,
    burn_factor: float,
    record: tuple[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """Stationary samples at ``pt`` whose start is certified by coupling.

    The chains from all-empty and from all queues at k + 1 are run until they meet (monotone
    coupling: every chain started between them has then coalesced with both); the samples are the
    chain from the fluid point (between them) after ``burn_factor`` times the largest of those
    meeting times, so d_TV(sample, pi) <= P(T_bt > burn) + pi(some queue > k + 1). ``record``:
    (steps, frames) of a stationary run after the burn-in, recorded for the autocorrelation times.

    Returns:
        ``T_bt`` (replicas,) bottom/top meeting times (inf: not met within ``cap``), ``burn`` steps,
        ``certified`` (every pair met), ``counts`` (replicas, L+1) the samples, and with ``record``
        ``N`` and ``uk`` (replicas, frames): the number of customers and the queues at k or more.
    """
    n, d, lam = pt
    k = int(predicted_max_length(d, lam))
    T_bt = meeting_times_many(
        [pt], replicas=replicas, top_length=k + 1, max_steps=[cap], seeds=[seed], progress=False
    )[0]
    certified = bool(np.all(np.isfinite(T_bt)))
    burn = int(math.ceil(burn_factor * (np.max(T_bt) if certified else cap)))
    steps, frames = record if record is not None else (1, 1)
    every = max(1, steps // frames)
    r = simulate_many(
        [pt],
        steps=every * frames,
        burn_in=[burn],
        replicas=replicas,
        seeds=[named_seed("mixing_regime", "samples", seed)],
        initial="fluid",
        record_every=every if record is not None else None,
        progress=False,
    )[0]
    out = {
        "T_bt": T_bt,
        "burn": np.asarray(burn),
        "certified": np.asarray(certified),
        "counts": r.counts,
        "every": np.asarray(every),
    }
    if record is not None:
        tr = r.trajectory.astype(float)
        out["N"] = tr[:, :, 1:].sum(axis=2)
        out["uk"] = tr[:, :, k] if tr.shape[2] > k else np.zeros(tr.shape[:2])
    return out


def spaced_samples(
    pt: PointTuple,
    *,
    samples: int,
    spacing: int,
    seed: int,
    cap: int,
    cert_replicas: int,
    burn_factor: float,
) -> dict[str, np.ndarray]:
    """``samples`` stationary samples of one chain at ``pt``, ``spacing`` steps apart, whose start is
    certified by coupling (issue 42: one certified chain in place of a burn-in per replica).

    ``cert_replicas`` pairs from all-empty and from all queues at k + 1 are run until they meet; the
    chain from the fluid point is then burned in for ``burn_factor`` times the largest of those
    meeting times (as :func:`certified_samples`) and recorded every ``spacing`` steps. The spacing
    is set from the predicted tau_int(N) so that successive samples are nearly independent; the
    lag-one correlation of N across the samples (``lag1_N``) shows it.

    Returns:
        ``T_bt`` (cert_replicas,), ``burn``, ``certified``, ``counts`` (samples, L+1) the samples,
        ``samples_N`` (samples,) their numbers of customers, ``lag1_N`` and ``spacing``.
    """
    n, d, lam = pt
    k = int(predicted_max_length(d, lam))
    T_bt = meeting_times_many(
        [pt], replicas=cert_replicas, top_length=k + 1, max_steps=[cap], seeds=[seed], progress=False
    )[0]
    certified = bool(np.all(np.isfinite(T_bt)))
    burn = int(math.ceil(burn_factor * (np.max(T_bt) if certified else cap)))
    r = simulate_many(
        [pt],
        steps=spacing * samples,
        burn_in=[burn],
        replicas=1,
        seeds=[named_seed("mixing_regime", "spaced", seed)],
        initial="fluid",
        record_every=spacing,
        progress=False,
    )[0]
    counts = np.asarray(r.trajectory[0])
    N = counts[:, 1:].sum(axis=1).astype(float)
    x = N - N.mean()
    lag1 = float(np.dot(x[1:], x[:-1]) / np.dot(x, x)) if samples > 2 and np.dot(x, x) > 0 else float("nan")
    return {
        "T_bt": T_bt,
        "burn": np.asarray(burn),
        "certified": np.asarray(certified),
        "counts": counts,
        "samples_N": N,
        "lag1_N": np.asarray(lag1),
        "spacing": np.asarray(spacing),
    }


def predicted_point(
    pt: PointTuple,
    *,
    replicas: int,
    seed: int,
    cap: int,
    cert_replicas: int,
    burn_factor: float,
    spacing_tau_int: float,
) -> dict[str, np.ndarray]:
    """One point of the predicted-law sets (issue 42): ``replicas`` spaced certified samples
    (:func:`spaced_samples`, ``spacing_tau_int`` predicted tau_int(N) apart) and the meeting time of
    the chain from the fluid point with each of them. Arrays as :data:`FIELDS` (the iact fields nan)
    plus ``lag1_N`` and ``spacing``."""
    spacing = max(1, int(math.ceil(spacing_tau_int * linear_noise(*pt).tau_int_steps)))
    s = spaced_samples(pt, samples=replicas, spacing=spacing, seed=seed, cap=cap,
                       cert_replicas=cert_replicas, burn_factor=burn_factor)
    T = good_start_times(pt, s["counts"], seed=named_seed("mixing_regime", "meeting", seed), cap=cap)
    nan = np.full((1, replicas), np.nan)
    return {
        "n": np.array([pt[0]]),
        "d": np.array([pt[1]]),
        "lam": np.array([pt[2]]),
        "T_bt": s["T_bt"][None],
        "burn": np.array([s["burn"]]),
        "certified": np.array([s["certified"]]),
        "T": T[None],
        "iact_N": nan,
        "iact_uk": nan,
        "iact_steps": np.array([0]),
        "samples_N": s["samples_N"][None],
        "counts": s["counts"],
        "lag1_N": np.array([s["lag1_N"]]),
        "spacing": np.array([spacing]),
    }


def good_start_times(
    pt: PointTuple, samples: np.ndarray, *, seed: int, cap: int, run_as: PointTuple | None = None
) -> np.ndarray:
    """Meeting times (replicas,) of the chain from the fluid point of ``pt`` with chains from
    ``samples`` (replicas, L+1), driven by the same draws (an unordered coupling); inf = not met
    within ``cap``. ``run_as``: the point whose dynamics drive both (a wrong model), default ``pt``."""
    n, d, lam = pt
    x = initial_counts(n, d, lam, "fluid")
    return meeting_times_many(
        [run_as or pt],
        replicas=samples.shape[0],
        top_length=0,
        max_steps=[cap],
        seeds=[seed],
        bottom=[x],
        top=[{"counts": samples}],
        ordered=False,
        progress=False,
    )[0]


def measure_point(
    pt: PointTuple,
    *,
    replicas: int,
    seed: int,
    cap: int,
    burn_factor: float,
    iact_length: float,
    iact_frames: int,
) -> dict[str, np.ndarray]:
    """One point of the sweep or the family: certified samples, the autocorrelation times of N and
    u_k over ``iact_length`` x n d^(k-1) steps of equilibrium (0: none), and the good-start meeting
    time from those samples. Arrays as :data:`FIELDS`."""
    steps = int(iact_length * relaxation_scale(*pt))
    s = certified_samples(
        pt,
        replicas=replicas,
        seed=seed,
        cap=cap,
        burn_factor=burn_factor,
        record=(steps, iact_frames) if steps > 0 else None,
    )
    if steps > 0:
        iact_N = integrated_autocorrelation_time(s["N"]) * float(s["every"])
        iact_uk = integrated_autocorrelation_time(s["uk"]) * float(s["every"])
    else:
        iact_N = iact_uk = np.full(replicas, np.nan)
    T = good_start_times(pt, s["counts"], seed=named_seed("mixing_regime", "meeting", seed), cap=cap)
    return {
        "n": np.array([pt[0]]),
        "d": np.array([pt[1]]),
        "lam": np.array([pt[2]]),
        "T_bt": s["T_bt"][None],
        "burn": np.array([s["burn"]]),
        "certified": np.array([s["certified"]]),
        "T": T[None],
        "iact_N": iact_N[None],
        "iact_uk": iact_uk[None],
        "iact_steps": np.array([steps]),
        "samples_N": s["counts"][:, 1:].sum(axis=1)[None],
        "counts": s["counts"],
    }


@dataclass(frozen=True)
class RegimePoints:
    """The measurements at P points: ``n``, ``d``, ``lam``, ``burn``, ``certified``, ``iact_steps``
    (P,); ``T_bt``, ``T`` (meeting times, steps; inf = not met), ``iact_N``, ``iact_uk`` (steps)
    (P, replicas); ``missing`` (P,) True where the long tier holds no fresh entry (then nan)."""

    n: np.ndarray
    d: np.ndarray
    lam: np.ndarray
    burn: np.ndarray
    certified: np.ndarray
    iact_steps: np.ndarray
    T_bt: np.ndarray
    T: np.ndarray
    iact_N: np.ndarray
    iact_uk: np.ndarray
    missing: np.ndarray
    #: the lag-one correlation of N between a point's spaced samples (issue 42's sets; else nan)
    lag1_N: np.ndarray | None = None

    @property
    def k(self) -> np.ndarray:
        return np.array([int(predicted_max_length(int(d), float(lam))) for d, lam in zip(self.d, self.lam)])


def _gather(points: Sequence[PointTuple], got: Sequence[dict | None], replicas: int) -> RegimePoints:
    nan = np.full(replicas, np.nan)
    g = [x or {} for x in got]
    row = lambda f, j, dflt: np.asarray(g[j].get(f, dflt), dtype=float).reshape(-1)  # noqa: E731
    return RegimePoints(
        n=np.array([p[0] for p in points]),
        d=np.array([p[1] for p in points]),
        lam=np.array([p[2] for p in points]),
        burn=np.array([row("burn", j, np.nan)[0] for j in range(len(points))]),
        certified=np.array([bool(row("certified", j, 0)[0]) for j in range(len(points))]),
        iact_steps=np.array([row("iact_steps", j, np.nan)[0] for j in range(len(points))]),
        T_bt=np.stack([row("T_bt", j, nan) for j in range(len(points))]),
        T=np.stack([row("T", j, nan) for j in range(len(points))]),
        iact_N=np.stack([row("iact_N", j, nan) for j in range(len(points))]),
        iact_uk=np.stack([row("iact_uk", j, nan) for j in range(len(points))]),
        missing=np.array([x is None for x in got]),
        lag1_N=np.array([row("lag1_N", j, np.nan)[0] for j in range(len(points))]),
    )


class _Clock:
    """The long tier's progress for this study: one line per computed point with an ETA for the whole
    study: the seconds per unit of a-priori cost (:func:`costs`) measured on the points done, times
    the cost of the points left (those the tiers already hold are skipped)."""

    def __init__(self, costs: dict, out=print):
        self.left, self.out = dict(costs), out
        self.done_cost, self.spent, self.count = 0.0, 0.0, 0

    def skip(self, key) -> None:
        self.left.pop(key, None)

    def tick(self, key, seconds: float) -> None:
        cost = self.left.pop(key, 0.0)
        self.count += 1
        self.done_cost += cost
        self.spent += seconds
        eta = self.spent / max(1e-9, self.done_cost) * sum(self.left.values())
        self.out(
            f"[qlib] regime: {key[0]} point {key[1]} done in {seconds / 60:.1f} min "
            f"({self.count} computed, {len(self.left)} left); ETA of the study {eta / 60:.0f} min",
            flush=True,
        )


def _entries(
    ctx: dict, name: str, params: Sequence[dict], seeds: Sequence[int], compute
) -> list[dict | None]:
    """Cached entries; in full mode outside the long tier only what results/long holds fresh (None
    for a point it lacks: its row says so), never a computation."""
    if ctx["read_only"]:
        got = [results.lookup(name, p, s, tiers=("long",)) for p, s in zip(params, seeds)]
        for p, s, g in zip(params, seeds, got):
            if g is not None:
                ctx["records"].append(results.entry("long", name, p, s).record())
        return got
    for i, (p, s) in enumerate(zip(params, seeds)):
        if results.lookup(name, p, s) is not None:
            ctx["clock"].skip((name, i))

    def timed(idx):
        t0 = time.perf_counter()
        out = compute(idx)
        for i in idx:
            ctx["clock"].tick((name, i), (time.perf_counter() - t0) / len(idx))
        return out

    return cache.cached_points(name, params, seeds, timed, group=1)


def _sweep(ctx: dict, name: str, points: Sequence[PointTuple], tag: str) -> list[dict | None]:
    """:func:`measure_point` at each point, capped at cap x k d^(k-1) n ln n."""
    P = ctx["P"]
    caps = [int(P["cap"] * reference_time(*q)) for q in points]
    seeds = [named_seed(P["stream"], tag, j, *p) for j, p in enumerate(points)]
    kw = dict(
        replicas=P["replicas"],
        burn_factor=P["burn_factor"],
        iact_length=P["iact_length"],
        iact_frames=P["iact_frames"],
    )
    params = [dict(kw, point=list(p), cap=c) for p, c in zip(points, caps)]

    def compute(idx):
        return [measure_point(points[i], seed=seeds[i], cap=caps[i], **kw) for i in idx]

    return _entries(ctx, name, params, seeds, compute)


def _on_samples(
    ctx: dict, name: str, points: Sequence[PointTuple], right: Sequence[dict | None], tag: str, *, model: str,
    R: int | None = None,
) -> list[dict | None]:
    """A counterfactual on the right model's certified samples, from its fluid point: ``model`` "jsq2"
    or "half_d" (JSQ(2) or JSQ(d/2) in place of JSQ(d) at each point, its first cf_replicas samples,
    capped at cf_cap x the right model's largest meeting time there) or "d_fixed" (d held at the first
    point's d: that point's samples and dynamics at every point, new coupling draws, capped as the
    point asked for)."""
    P = ctx["P"]
    if model in ("jsq2", "half_d"):
        todo = [j for j, r in enumerate(right) if r is not None]
        R = R or P["cf_replicas"]
        caps = {
            j: int(P["cf_cap"] * np.max(np.where(np.isfinite(right[j]["T"]), right[j]["T"], 0), initial=1))
            for j in todo
        }
        src = {j: j for j in todo}
    else:
        todo = list(range(len(points))) if right[0] is not None else []
        R = P["replicas"]
        caps = {j: int(P["cap"] * reference_time(*points[j])) for j in todo}
        src = {j: 0 for j in todo}
    seeds = [named_seed(P["stream"], tag, model, j) for j in todo]
    params = [dict(point=list(points[j]), cap=caps[j], replicas=R, model=model) for j in todo]

    def compute(idx):
        out = []
        for i in idx:
            j = todo[i]
            base = points[src[j]]
            run_as = base if model == "d_fixed" else point_of(model, base)
            T = good_start_times(
                base, np.asarray(right[src[j]]["counts"])[:R], seed=seeds[i], cap=caps[j], run_as=run_as
            )
            out.append(
                {
                    "n": np.array([base[0]]),
                    "d": np.array([run_as[1]]),
                    "lam": np.array([base[2]]),
                    "T": T[None],
                    "cap": np.array([caps[j]]),
                    "burn": np.asarray(right[src[j]]["burn"]).reshape(1),
                    "certified": np.asarray(right[src[j]]["certified"]).reshape(1),
                }
            )
        return out

    got = _entries(ctx, name, params, seeds, compute) if todo else []
    full: list[dict | None] = [None] * len(points)
    for j, g in zip(todo, got):
        full[j] = g
    return full


def _predicted(
    ctx: dict, name: str, points: Sequence[PointTuple], tag: str, replicas: int
) -> list[dict | None]:
    """:func:`predicted_point` at each point (issue 42's sets), capped at cap x k d^(k-1) n ln n."""
    P, Q = ctx["P"], ctx["P"]["predicted"]
    caps = [int(P["cap"] * reference_time(*q)) for q in points]
    seeds = [named_seed(Q["stream"], tag, j, *p) for j, p in enumerate(points)]
    kw = dict(replicas=replicas, cert_replicas=Q["cert_replicas"], burn_factor=P["burn_factor"],
              spacing_tau_int=Q["spacing_tau_int"])
    params = [dict(kw, point=list(p), cap=c) for p, c in zip(points, caps)]

    def compute(idx):
        return [predicted_point(points[i], seed=seeds[i], cap=caps[i], **kw) for i in idx]

    return _entries(ctx, name, params, seeds, compute)


def predicted_points(P: dict) -> list[PointTuple]:
    """The predicted-law family of ``PARAMETERS[mode]`` (k = 3 is decided by :mod:`qlib.studies.k3`)."""
    fam = P["predicted"]["family"]
    return [family_point(n, fam["alpha"], fam["beta"]) for n in fam["ns"]]


@dataclass(frozen=True)
class RegimeResult:
    """Everything of the study for one ``mode``: ``sweep`` (fixed n and 1 - lam, d varied),
    ``fixed`` (the same protocol with d held at the sweep's first value, on each point's caps),
    ``family`` (the gamma > 0 family), and JSQ(2) on the same protocol (``sweep_jsq2``,
    ``family_jsq2``: RegimePoints with only T); ``hyp`` per point of sweep and family."""

    mode: str
    parameters: dict
    sweep: RegimePoints
    fixed: RegimePoints
    family: RegimePoints
    sweep_jsq2: RegimePoints
    family_jsq2: RegimePoints
    hyp_sweep: list
    hyp_family: list
    #: issue 42's set, on fresh seeds: the family (with JSQ(d/2) from its samples)
    predicted_family: RegimePoints | None = None
    predicted_family_half: RegimePoints | None = None
    hyp_predicted_family: list | None = None
    #: where the long-tier entries read came from (empty when computed here)
    provenance: str = ""


def _points(P: dict) -> tuple[list[PointTuple], list[PointTuple]]:
    ds = P["d_sweep"]
    sweep = [(ds["n"], d, 1.0 - ds["one_minus_lam"]) for d in ds["ds"]]
    fam = P["family"]
    return sweep, [family_point(n, fam["alpha"], fam["beta"]) for n in fam["ns"]]


def costs(mode: str) -> dict[tuple[str, int], float]:
    """The a-priori cost (replica-steps, meeting times taken at k d^(k-1) n ln n) of each entry a full
    computation makes, by (cache name, point index)."""
    P = PARAMETERS[check_mode(mode)]
    sweep, family = _points(P)
    R, b = P["replicas"], P["burn_factor"]

    def one(p):
        return R * ((b + 2) * reference_time(*p) + P["iact_length"] * relaxation_scale(*p))

    out = {("02r_sweep", j): one(p) for j, p in enumerate(sweep)}
    out.update({("02r_fixed", j): R * reference_time(*sweep[0]) for j in range(len(sweep))})
    out.update(
        {
            ("02r_sweep_jsq2", j): P["cf_replicas"] * P["cf_cap"] * reference_time(*p)
            for j, p in enumerate(sweep)
        }
    )
    out.update({("02r_family", j): one(p) for j, p in enumerate(family)})
    out.update(
        {
            ("02r_family_jsq2", j): P["cf_replicas"] * P["cf_cap"] * reference_time(*p)
            for j, p in enumerate(family)
        }
    )
    Q = P["predicted"]
    pf = predicted_points(P)

    def spaced(p, R):  # certification (pairs of two chains, ~2 T each), burn-in, spacing, R meetings
        T = predicted_meeting_time(*p).steps
        spacing = Q["spacing_tau_int"] * linear_noise(*p).tau_int_steps
        return T * (4 * Q["cert_replicas"] + 2 * b + 2 * R) + R * spacing

    out.update({("02p_family", j): spaced(p, Q["replicas"]) for j, p in enumerate(pf)})
    out.update({("02p_family_half", j): 2 * Q["cf_replicas"] * predicted_meeting_time(*p).steps
                for j, p in enumerate(pf)})
    return out


def run(mode: str = "full", *, progress: bool = True) -> RegimeResult:
    """Compute (smoke mode, or full mode while ``make results-long`` writes the long tier) or read
    (full mode otherwise: from results/long only) every measurement of the study.

    Args:
        mode: "full" or "smoke".
        progress: print one line per computed point with the study's ETA.

    Returns:
        A :class:`RegimeResult`; points the long tier lacks are marked ``missing``.
    """
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    read_only = mode == "full" and results.write_tier() != "long"
    ctx = dict(
        P=P,
        records=[],
        read_only=read_only,
        clock=_Clock(
            costs(mode), out=print if progress or results.write_tier() == "long" else (lambda *a, **k: None)
        ),
    )
    sweep_pts, fam_pts = _points(P)
    R = P["replicas"]
    # cheapest first: a long run cut short keeps whole rows (the family's), then the sweep point by point
    family = _sweep(ctx, "02r_family", fam_pts, "family")
    fj = _on_samples(ctx, "02r_family_jsq2", fam_pts, family, "family", model="jsq2")
    sweep = _sweep(ctx, "02r_sweep", sweep_pts, "sweep")
    fixed_pts = [sweep_pts[0]] * len(sweep_pts)
    fixed = _on_samples(ctx, "02r_fixed", sweep_pts, sweep, "sweep", model="d_fixed")
    sj = _on_samples(ctx, "02r_sweep_jsq2", sweep_pts, sweep, "sweep", model="jsq2")
    Q = P["predicted"]
    pf_pts = predicted_points(P)
    pf = _predicted(ctx, "02p_family", pf_pts, "family", Q["replicas"])
    pf_half = _on_samples(ctx, "02p_family_half", pf_pts, pf, "family", model="half_d", R=Q["cf_replicas"])
    H = P["claims"]["hypotheses"]
    return RegimeResult(
        mode=mode,
        parameters=P,
        sweep=_gather(sweep_pts, sweep, R),
        fixed=_gather(fixed_pts, fixed, R),
        family=_gather(fam_pts, family, R),
        sweep_jsq2=_gather(sweep_pts, sj, P["cf_replicas"]),
        family_jsq2=_gather(fam_pts, fj, P["cf_replicas"]),
        hyp_sweep=[hypotheses(*p, **H) for p in sweep_pts],
        hyp_family=[hypotheses(*p, **H) for p in fam_pts],
        predicted_family=_gather(pf_pts, pf, Q["replicas"]),
        predicted_family_half=_gather(pf_pts, pf_half, Q["cf_replicas"]),
        hyp_predicted_family=[hypotheses(*p, **H) for p in pf_pts],
        provenance=provenance(ctx["records"]),
    )


def provenance(records: Sequence[dict]) -> str:
    """:func:`qlib.results.provenance_text` of the entries read, with this study's command."""
    return results.provenance_text(records, LONG_COMMAND)
