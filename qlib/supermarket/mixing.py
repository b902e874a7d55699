"""Sweeps and fits for the mixing time of the supermarket model (Brightwell & Luczak, claim 3-4).

Time is counted in steps of the jump chain; one unit of model time is (1 + lam) n steps.

- :func:`meeting_sweep` — meeting times of the monotone coupling (bottom: all empty, top: all
  queues at ``top_length``) over a list of (n, d, lam), cached through :mod:`qlib.cache`.
  Claim: T_meet = O(k d^(k-1) n log n) steps, so in n (fixed d, lam) the fitted exponent lies
  between 1 and the local slope 1 + 1/ln n of n log n; in d at fixed k it grows like d^(k-1).
- :func:`drain_times` — the lower bound: from every queue at length k+1, the time until the
  fraction of queues longer than k is back within ``margin`` of its equilibrium value. The
  excess (about n customers) leaves at net rate about (1 - lam) n per unit time, so this takes
  order n/(1-lam) >= n d^(k-1) >= n (lam d)^(k-1) steps; the fluid ODE predicts it (n -> oo).
- :func:`fit_power_law` — exponent of E[T] in x with a bootstrap CI over replicas.
- :func:`tv_curve`, :func:`good_set_fraction` — the companions for figures (d) and (e).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from qlib import _validate as V
from qlib import cache
from qlib.supermarket import simulation as E
from qlib.supermarket.coupling import coupled_paths, meeting_times, tv_distance
from qlib.supermarket.theory import fluid_fixed_point, fluid_trajectory, predicted_max_length

__all__ = ["meeting_sweep", "fit_power_law", "PowerFit", "drain_times", "fluid_drain_time",
           "tv_curve", "good_set_fraction", "steps_per_time"]


def steps_per_time(n: int, lam: float) -> float:
    """Jump-chain steps per unit of model time: (1 + lam) n."""
    return (1.0 + lam) * n


# --------------------------------------------------------------------------- meeting sweeps

def meeting_sweep(points: Sequence[tuple[int, int, float]], *, replicas: int, seed: int,
                  top_extra: int = 1, max_steps_per_n: float = 1e4, name: str = "02_meeting",
                  progress: bool = True, use_cache: bool = True) -> dict[str, np.ndarray]:
    """Meeting times at each (n, d, lam) in ``points``; top start: all queues at k + ``top_extra``.

    Returns arrays ``n``, ``d``, ``lam``, ``k`` (one per point) and ``T`` of shape
    (points, replicas) in jump-chain steps (``inf`` = not met within max_steps_per_n * n * log n
    steps). Cached by (points, replicas, seed, top_extra, max_steps_per_n).
    """
    pts = [(V.integer("n", n, low=2), V.integer("d", d, low=2), V.real("lam", lam, low=0, high=1))
           for n, d, lam in points]
    replicas = V.integer("replicas", replicas, low=2)
    top_extra = V.integer("top_extra", top_extra, low=0)

    def compute():
        T = np.empty((len(pts), replicas))
        it = pts
        if progress:
            from tqdm.auto import tqdm
            it = tqdm(pts, desc="meeting sweep", leave=False)
        # one level count for the whole sweep: one compile (levels never change the result)
        L = max(int(predicted_max_length(d, lam)) for _, d, lam in pts) + top_extra + 3
        for j, (n, d, lam) in enumerate(it):
            k = int(predicted_max_length(d, lam))
            T[j] = meeting_times(n, d, lam, replicas=replicas, seed=seed + j, top_length=k + top_extra,
                                 max_steps=int(max_steps_per_n * n * max(1.0, math.log(n))),
                                 progress=progress, levels=L)
        return {"n": np.array([p[0] for p in pts]), "d": np.array([p[1] for p in pts]),
                "lam": np.array([p[2] for p in pts]),
                "k": np.array([int(predicted_max_length(d, lam)) for _, d, lam in pts]), "T": T}

    params = {"points": pts, "replicas": replicas, "top_extra": top_extra, "max_steps_per_n": max_steps_per_n}
    return cache.cached(name, params, seed, compute) if use_cache else compute()


@dataclass(frozen=True)
class PowerFit:
    """E[T] ~ prefactor * x^exponent, fitted by least squares on log mean against log x.

    ``ci`` is a 95% bootstrap interval (replicas resampled within each x); ``stderr`` is the
    bootstrap standard deviation of the exponent.
    """

    exponent: float
    stderr: float
    ci: tuple[float, float]
    prefactor: float

    def __str__(self) -> str:
        return f"{self.exponent:.3f} (95% CI {self.ci[0]:.3f} to {self.ci[1]:.3f})"


def fit_power_law(x: Any, samples: Any, *, boot: int = 2000, seed: int = 0) -> PowerFit:
    """Fit the exponent b in E[T(x)] = a x^b from replicas ``samples[j, r]`` at each ``x[j]``.

    The point estimate regresses log(mean_r samples[j]) on log x[j]; the CI resamples the
    replicas at every x (bootstrap, ``boot`` times, fixed ``seed``) and refits. All samples
    must be finite and positive (an unmet replica, T = inf, is an error: raise max_steps).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(samples, dtype=float)
    if x.ndim != 1 or x.size < 2 or np.any(x <= 0) or len(set(x.tolist())) < 2:
        raise ValueError("x must hold at least 2 distinct positive values")
    if y.ndim != 2 or y.shape[0] != x.size or y.shape[1] < 2:
        raise ValueError(f"samples must have shape (len(x), replicas >= 2) = ({x.size}, R); got {y.shape}")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("samples must be finite and positive (inf = a replica that never met: raise max_steps)")
    boot = V.integer("boot", boot, low=10)
    lx = np.log(x)

    def slope(means):
        b, a = np.polyfit(lx, np.log(means), 1)
        return b, a

    b, a = slope(y.mean(axis=1))
    rng = np.random.default_rng(seed)
    R = y.shape[1]
    idx = rng.integers(0, R, size=(boot, y.shape[0], R))
    means = np.take_along_axis(y[None], idx, axis=2).mean(axis=2)  # (boot, points)
    bs = np.polyfit(lx, np.log(means).T, 1)[0]
    lo, hi = np.quantile(bs, [0.025, 0.975])
    return PowerFit(exponent=float(b), stderr=float(bs.std(ddof=1)), ci=(float(lo), float(hi)),
                    prefactor=float(math.exp(a)))


# --------------------------------------------------------------------------- drain (lower bound)

def _drain_threshold(d: int, lam: float, k: int, margin: float) -> float:
    return float(fluid_fixed_point(d, lam, k + 1)[k + 1] + margin)


def fluid_drain_time(d: int, lam: float, *, margin: float = 0.05) -> float:
    """Fluid-limit (n -> oo) model time for s_{k+1} to fall from 1 (all queues at k+1) to
    its fixed-point value plus ``margin``. Multiply by (1 + lam) n for steps."""
    d = V.integer("d", d, low=2)
    lam = V.real("lam", lam, low=0, high=1)
    margin = V.real("margin", margin, low=0, high=1)
    k = int(predicted_max_length(d, lam))
    thr = _drain_threshold(d, lam, k, margin)
    s0 = np.zeros(k + 4)
    s0[: k + 2] = 1.0
    horizon = 10.0 / (1 - lam) + 10
    times = np.linspace(0, horizon, 4001)
    s = fluid_trajectory(d, lam, times, s0)[:, k + 1]
    hit = np.nonzero(s <= thr)[0]
    if hit.size == 0:
        raise RuntimeError("fluid drain did not reach the threshold within 10/(1-lam) time units")
    j = hit[0]
    if j == 0:
        return 0.0
    # linear interpolation between the two grid points around the crossing
    t0, t1, s0_, s1_ = times[j - 1], times[j], s[j - 1], s[j]
    return float(t0 + (s0_ - thr) / (s0_ - s1_) * (t1 - t0))


def drain_times(n: int, d: int, lam: float, *, replicas: int, seed: int, margin: float = 0.05,
                frames: int = 400) -> np.ndarray:
    """Steps until u_{k+1}/n <= s*_{k+1} + ``margin``, starting from every queue at length k+1.

    Runs :func:`qlib.supermarket.simulate` recording u every ``horizon/frames`` steps, with a
    horizon of 3 times the fluid prediction, so the result has a resolution of
    horizon/frames steps (it is the first recorded step at or below the threshold; ``inf`` if
    none). Returns one value per replica.
    """
    n, d, lam, _ = E.check_parameters(n, d, lam)
    k = int(predicted_max_length(d, lam))
    thr = _drain_threshold(d, lam, k, margin)
    every = max(1, int(3 * fluid_drain_time(d, lam, margin=margin) * steps_per_time(n, lam) / frames))
    from qlib.supermarket.simulation import simulate

    r = simulate(n, d, lam, steps=every * frames, replicas=replicas, seed=seed,
                 initial=E.counts_all_at(n, k + 1), record_every=every, levels=k + 4)
    frac = r.trajectory[:, :, k + 1] / n  # (replicas, frames) at steps every, 2 every, ...
    below = frac <= thr
    first = np.where(below.any(axis=1), (np.argmax(below, axis=1) + 1) * every, np.inf)
    return first.astype(float)


# --------------------------------------------------------------------------- TV and good set

def tv_curve(n: int, d: int, lam: float, starts: dict[str, Any], *, steps: int, frames: int,
             replicas: int, seed: int, level: int | None = None, bins: int = 10,
             reference_steps: int | None = None) -> dict[str, np.ndarray]:
    """Binned TV distance between the law of u_level(t) from each start and its equilibrium law.

    ``starts`` maps a label to a start (see :func:`coupled_paths`); all are driven by the same
    draws. The reference law pools ``frames`` samples per replica of an independent run from
    the fluid point after a burn-in of ``steps`` steps. Returns ``times`` (steps), one TV
    curve per label (a lower bound on d_TV of the full state, up to sampling noise), the
    ``noise`` floor of :func:`tv_noise_floor` for ``bins`` equal-mass cells, the L1 distance
    mean ``l1_<label>`` between each start's chain and the first start's, and the labels.
    """
    from qlib.supermarket.coupling import l1_distance, tv_noise_floor
    from qlib.supermarket.simulation import simulate

    k = int(predicted_max_length(d, lam)) if level is None else V.integer("level", level, low=1)
    every = max(1, steps // frames)
    labels = list(starts)
    p = coupled_paths(n, d, lam, [starts[s] for s in labels], steps=every * frames, replicas=replicas,
                      seed=seed, record_every=every)
    ref = simulate(n, d, lam, steps=reference_steps or every * frames, replicas=replicas, seed=seed + 1,
                   burn_in=steps, initial="fluid", record_every=max(1, (reference_steps or every * frames) // frames),
                   levels=p.counts.shape[-1] - 1)
    ref_u = ref.trajectory[:, :, k].ravel()
    out: dict[str, Any] = {"times": p.times, "labels": np.array(labels)}
    for c, lab in enumerate(labels):
        out[lab] = tv_distance(p.counts[c, :, :, k].T, ref_u, bins=bins)
        out["l1_" + lab] = l1_distance(p.counts[c], p.counts[0]).mean(axis=0) / n
    out["noise"] = np.array(tv_noise_floor(np.full(bins, 1.0 / bins), replicas, ref_u.size))
    return out


def good_set_fraction(n: int, d: int, lam: float, *, eps: Sequence[float], windows: int, window_steps: int,
                      replicas: int, seed: int, record_every: int | None = None) -> dict[str, np.ndarray]:
    """Fraction of time in the good set N^eps = {max_i |u_i/n - s*_i| <= eps}, per window.

    Starts at the fluid point (s* = fluid fixed point) and runs ``windows`` consecutive windows
    of ``window_steps`` steps, sampling u every ``record_every`` steps. Returns ``frac`` of shape
    (len(eps), replicas, windows) and ``eps``, ``window_steps``.
    """
    from qlib.supermarket.simulation import simulate

    n, d, lam, _ = E.check_parameters(n, d, lam)
    windows = V.integer("windows", windows, low=1)
    window_steps = V.integer("window_steps", window_steps, low=1)
    every = record_every or max(1, window_steps // 200)
    every = V.integer("record_every", every, low=1, high=window_steps)
    per = window_steps // every
    r = simulate(n, d, lam, steps=every * per * windows, replicas=replicas, seed=seed,
                 initial="fluid", record_every=every)
    L = r.trajectory.shape[-1] - 1
    s = fluid_fixed_point(d, lam, L)
    dist = np.abs(r.trajectory / n - s[None, None]).max(axis=-1)  # (replicas, frames)
    dist = dist.reshape(replicas, windows, per)
    eps = np.asarray(eps, dtype=float)
    frac = (dist[None] <= eps[:, None, None, None]).mean(axis=-1)
    return {"frac": frac, "eps": eps, "window_steps": np.array(every * per), "dist_mean": dist.mean(axis=-1)}


# --------------------------------------------------------------------------- the study (notebook 02, claims)

def study_parameters(quick: bool) -> dict[str, Any]:
    """Parameters shared by notebook 02 and :func:`qlib.supermarket.mixing_claims.mixing_rows`
    (same parameters, same cache entries). ``quick``: small, for smoke runs and tests."""
    if quick:
        return {"n_sweep": dict(d=5, lam=0.9, ns=[100, 316, 1000, 3162], replicas=8),
                "d_sweep": dict(n=300, lam=0.95, ds=[5, 9, 16], replicas=8),
                "k_sweep": dict(n=300, d=5, ks=[1, 2, 3], replicas=8),
                "drain": dict(points=[(1000, 5, 0.9), (3000, 5, 0.9)], replicas=4),
                "tv": dict(n=100, d=5, lam=0.9, replicas=64, frames=20, bins=5),
                "good_set": dict(n=500, d=5, lam=0.9, eps=[0.02, 0.05, 0.1], windows=3, window_time=10.0,
                                 replicas=4)}
    return {"n_sweep": dict(d=5, lam=0.9, ns=[100, 316, 1000, 3162, 10_000, 31_623, 100_000], replicas=16),
            "d_sweep": dict(n=1000, lam=0.99, ds=[12, 18, 27, 40, 60, 90], replicas=16),
            "k_sweep": dict(n=1000, d=5, ks=[1, 2, 3, 4], replicas=16),
            "drain": dict(points=[(1000, 5, 0.9), (4000, 5, 0.9), (16_000, 5, 0.9), (4000, 3, 0.9),
                                  (4000, 2, 0.9), (2000, 20, 0.99)], replicas=8),
            "tv": dict(n=1000, d=5, lam=0.9, replicas=300, frames=60, bins=8),
            "good_set": dict(n=10_000, d=5, lam=0.9, eps=[0.01, 0.02, 0.05], windows=10, window_time=50.0,
                             replicas=8)}


def lam_for_k(d: int, k: int) -> float:
    """lam in the middle of the k-window of d (log(1/(1-lam))/log d = k - 1/2): 1 - d^-(k-1/2)."""
    return 1.0 - float(d) ** -(k - 0.5)


def good_start_meetings(n: int, d: int, lam: float, *, replicas: int, seed: int,
                        max_steps: int) -> np.ndarray:
    """Meeting times of a chain from the fluid point (a good start) with one from a stationary
    sample (the end of a run from the fluid point after a burn-in of 2 (1+lam) n ln n/(1-lam)
    steps, several times the bottom/top meeting time measured here). The starts are not
    ordered, so meeting is detected by equality (``ordered=False``)."""
    from qlib.supermarket.simulation import initial_counts, simulate

    burn = int(2 * steps_per_time(n, lam) * math.log(n) / (1 - lam))
    y = simulate(n, d, lam, steps=1, replicas=replicas, seed=seed + 10**6, burn_in=burn, initial="fluid").counts
    x = initial_counts(n, d, lam, "fluid")
    return meeting_times(n, d, lam, replicas=replicas, seed=seed, top_length=0, max_steps=max_steps,
                         bottom=x, top={"counts": y}, ordered=False, progress=False)


def run_study(part: str, quick: bool, *, seed: int = 2024, progress: bool = True) -> dict[str, np.ndarray]:
    """One cached sweep of the study: ``part`` in "n_sweep", "d_sweep", "k_sweep", "drain",
    "tv" (figure d), "good_set" (figure e)."""
    V.choice("part", part, ("n_sweep", "d_sweep", "k_sweep", "drain", "tv", "good_set"))
    P = study_parameters(quick)[part]
    if part == "tv":
        return cache.cached("02_tv", P, seed, lambda: _tv_study(P, seed))
    if part == "good_set":
        n, d, lam = P["n"], P["d"], P["lam"]

        def compute():
            w = int(P["window_time"] * steps_per_time(n, lam))
            return good_set_fraction(n, d, lam, eps=P["eps"], windows=P["windows"], window_steps=w,
                                     replicas=P["replicas"], seed=seed)
        return cache.cached("02_good_set", P, seed, compute)
    if part == "n_sweep":
        return meeting_sweep([(n, P["d"], P["lam"]) for n in P["ns"]], replicas=P["replicas"], seed=seed,
                             name="02_n_sweep", progress=progress)
    if part == "d_sweep":
        pts = [(P["n"], d, P["lam"]) for d in P["ds"]]

        def compute():
            top = meeting_sweep(pts, replicas=P["replicas"], seed=seed, progress=progress, use_cache=False)
            good = np.stack([good_start_meetings(n, d, lam, replicas=P["replicas"], seed=seed + 7 * j,
                                                 max_steps=int(1e4 * n * math.log(n)))
                             for j, (n, d, lam) in enumerate(pts)])
            return {**top, "T_good": good}
        return cache.cached("02_d_sweep", P, seed, compute)
    if part == "k_sweep":
        pts = [(P["n"], P["d"], lam_for_k(P["d"], k)) for k in P["ks"]]
        return meeting_sweep(pts, replicas=P["replicas"], seed=seed, name="02_k_sweep", progress=progress)

    def compute():
        T = np.stack([drain_times(n, d, lam, replicas=P["replicas"], seed=seed + j)
                      for j, (n, d, lam) in enumerate(P["points"])])
        fl = np.array([fluid_drain_time(d, lam) for _, d, lam in P["points"]])
        return {"n": np.array([p[0] for p in P["points"]]), "d": np.array([p[1] for p in P["points"]]),
                "lam": np.array([p[2] for p in P["points"]]),
                "k": np.array([int(predicted_max_length(d, lam)) for _, d, lam in P["points"]]),
                "T": T, "fluid_time": fl}
    return cache.cached("02_drain", P, seed, compute)


def explore(n: int, d: int, lam: float, *, replicas: int = 16, seed: int = 0, frames: int = 100,
            levels: int | None = None) -> dict[str, Any]:
    """Slider callback data: meeting times (bottom all empty, top all at k+1) and the mean L1
    distance between the pair over time, for one (n, d, lam). Cost ~ replicas * T_meet steps."""
    n, d, lam, _ = E.check_parameters(n, d, lam)
    if d < 2:
        raise ValueError(f"d must be an integer >= 2 here (k is finite only then); got {d}")
    k = int(predicted_max_length(d, lam))
    top = E.counts_all_at(n, k + 1)
    T = meeting_times(n, d, lam, replicas=replicas, seed=seed, top_length=k + 1,
                      max_steps=int(1e4 * n * max(1.0, math.log(n))), progress=False, levels=levels)
    horizon = int(np.max(T[np.isfinite(T)], initial=1000))
    every = max(1, -(-horizon // frames))
    p = coupled_paths(n, d, lam, ["empty", top], steps=every * frames, replicas=replicas, seed=seed,
                      record_every=every, levels=levels)
    from qlib.supermarket.coupling import l1_distance

    return {"n": n, "d": d, "lam": lam, "k": k, "T": T, "times": p.times,
            "l1": l1_distance(p.counts[1], p.counts[0]).mean(axis=0) / n}


def _tv_study(P: dict, seed: int) -> dict[str, np.ndarray]:
    """Figure (d): a good start (fluid point) against two bad ones with the same number of
    customers (all queues at k+5; half empty and half at 2k+10), plus the bottom/top meeting
    times with top = all queues at 2k+10, which bound d_TV from all three."""
    n, d, lam = P["n"], P["d"], P["lam"]
    k = int(predicted_max_length(d, lam))
    long = 2 * k + 10
    half = np.where(np.arange(n) < n // 2, 0, long)
    T = meeting_times(n, d, lam, replicas=P["replicas"], seed=seed, top_length=long,
                      max_steps=int(1e4 * n * math.log(n)), progress=True)
    steps = int(1.2 * np.max(T))
    starts = {"fluid (good)": "fluid", f"all at k+5={k + 5}": E.counts_all_at(n, k + 5),
              f"half empty, half at {long}": {"lengths": half}}
    res = tv_curve(n, d, lam, starts, steps=steps, frames=P["frames"], replicas=P["replicas"],
                   seed=seed + 1, bins=P["bins"])
    return {**res, "T_meet": T, "k": np.array(k)}
