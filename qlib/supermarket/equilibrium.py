"""Equilibrium of the supermarket model: profiles, the maximum queue length, finite-n effects.

Claims (Brightwell & Luczak, arXiv:1201.5523; MODELS.md section 1, claims 1-2): for lam -> 1 and
d -> oo the equilibrium maximum queue length concentrates on k = ceil(log(1/(1-lam))/log d);
most queues have length exactly k; the fraction at length i < k is about (1-lam) d^i. The
theory at finite n is the fluid fixed point s_i = lam^((d^i-1)/(d-1)) and its 1/n correction
(:mod:`qlib.supermarket.refined`).

Every simulation here starts at the fluid fixed point (``initial="fluid"``), so equilibrium
is reached after the slow relaxation of the O(1/n) offset, not after filling n queues from
empty; run lengths are set in model time (one unit = one mean service time) as multiples of
the linearised relaxation time tau = 1/min|Re eig Df(s*)| (:func:`relaxation_time`).

Sweep runners go through :func:`qlib.cache.cached`, so the notebook and the claims table share
results and reruns are free.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from qlib import _validate as V
from qlib import stats
from qlib.cache import cached
from qlib.supermarket.simulation import SupermarketResult, check_parameters, simulate
from qlib.supermarket.refined import refined_mean_field
from qlib.supermarket.refined import relaxation_time as _relaxation_time
from qlib.supermarket.theory import (asymptotic_profile, boundary_distance, fluid_fixed_point,
                                     predicted_max_length)

# --------------------------------------------------------------------------- theory helpers


def relaxation_time(d: int, lam: float) -> float:
    """tau = 1/min|Re eig A|, A the Jacobian of the fluid drift at its fixed point (model time).

    The slowest linear mode of the fluid ODE: a run started at the fluid fixed point reaches
    the finite-n equilibrium after a few tau. It grows like 1/(1-lam) as lam -> 1.
    """
    return _relaxation_time(d, lam)


def fluid_max_length(n: int, d: int, lam: float) -> int:
    """The largest i with n s_i >= 1/2: the maximum queue length that the fluid fixed point
    predicts for n queues (the level where the expected count of longer queues drops below 1/2).

    For fixed (lam, d) it grows like log log n / log d, so at finite n it can exceed k for
    small d: this explains the mismatches of the map in figure (a).
    """
    n, d, lam, _ = check_parameters(n, d, lam)
    if d == 1:
        return int(math.floor(math.log(0.5 / n) / math.log(lam)))
    L = 4
    while True:
        s = fluid_fixed_point(d, lam, L)
        if n * s[-1] < 0.5:
            return int(np.nonzero(n * s >= 0.5)[0][-1])
        L *= 2


def _exact_lengths(tail: np.ndarray) -> np.ndarray:
    return tail - np.append(tail[1:], 0.0)


def profile_view(one_minus_lam: float, d: int, n: int) -> dict:
    """Everything the sliders show for (1-lam, d, n), with no simulation (pure, fast).

    Returns a dict: ``lam``, ``k`` (predicted max), ``boundary_distance``, ``fluid_max``
    (:func:`fluid_max_length`), ``tau`` (relaxation time), ``levels`` (0..L), and per level the
    fraction of queues with length exactly i: ``fluid`` (fixed point), ``refined`` (with the
    1/n term at this n) and ``asymptotic`` (Brightwell-Luczak formulas; NaN beyond k+1).
    """
    eps = V.real("one_minus_lam", one_minus_lam, low=0.0, high=1.0)
    d = V.integer("d", d, low=2)
    n = V.integer("n", n, low=1)
    lam = 1.0 - eps
    k = int(predicted_max_length(d, lam))
    r = refined_mean_field(d, lam)
    L = max(k + 2, int(np.nonzero(r.fixed_point > 1e-12)[0][-1]) + 2)
    L = min(L, r.levels)
    fluid = _exact_lengths(r.fixed_point)[: L + 1]
    refined = r.queue_length_distribution(n)[: L + 1]
    asym = np.full(L + 1, np.nan)
    a = asymptotic_profile(d, lam)
    m = min(a.size, L + 1)
    asym[:m] = a[:m]
    return {"lam": lam, "d": d, "n": n, "k": k, "boundary_distance": boundary_distance(d, lam),
            "fluid_max": fluid_max_length(n, d, lam),
            "tau": r.relaxation_time,
            "levels": np.arange(L + 1), "fluid": fluid, "refined": refined, "asymptotic": asym}


# --------------------------------------------------------------------------- simulation


def run_equilibrium(n: int, d: int, lam: float, *, time: float, burn_in_time: float = 0.0,
                    replicas: int = 4, seed: int = 0, batches: int = 1,
                    progress: bool | None = None) -> SupermarketResult:
    """Simulate from the fluid fixed point: ``burn_in_time`` then ``time`` units of model time.

    One unit of model time is (1 + lam) n steps of the count chain.
    """
    n, d, lam, _ = check_parameters(n, d, lam)
    time = V.real("time", time, low=0.0)
    burn_in_time = V.real("burn_in_time", burn_in_time, low=0.0, low_open=False)
    per_unit = (1.0 + lam) * n
    steps = max(int(round(time * per_unit)), batches)
    return simulate(n, d, lam, steps=steps, burn_in=int(round(burn_in_time * per_unit)),
                    replicas=replicas, seed=seed, initial="fluid", batches=batches,
                    progress=progress)


def summarize(res: SupermarketResult, levels: int) -> dict[str, np.ndarray]:
    """Replica means and standard errors of one run, padded/cut to levels 0..``levels``.

    Keys: ``p``/``p_se`` (fraction of queues with length exactly i), ``tail``/``tail_se``
    (length >= i), ``max_dist`` (fraction of time the maximum equals i, averaged over replicas),
    ``modal_max`` (argmax of max_dist).
    """
    def fit(a):
        out = np.zeros((a.shape[0], levels + 1))
        m = min(a.shape[1], levels + 1)
        out[:, :m] = a[:, :m]
        return out

    tail = fit(res.tail_fraction)
    p = fit(res.queue_length_distribution)
    md = fit(res.max_length_distribution)
    if res.replicas >= 2:
        t_est, p_est = stats.replica_mean(tail), stats.replica_mean(p)
        t_mean, t_se, p_mean, p_se = t_est.mean, t_est.stderr, p_est.mean, p_est.stderr
    else:
        t_mean, p_mean = tail[0], p[0]
        t_se = p_se = np.full(levels + 1, np.nan)
    mdm = md.mean(axis=0)
    return {"p": p_mean, "p_se": p_se, "tail": t_mean, "tail_se": t_se, "max_dist": mdm,
            "max_dist_se": (md.std(axis=0, ddof=1) / np.sqrt(md.shape[0]) if md.shape[0] > 1
                            else np.full(levels + 1, np.nan)),
            "modal_max": np.asarray(int(np.argmax(mdm)))}


def _progress(it, on: bool, desc: str):
    if not on:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, leave=False)


def _run_time(d: int, lam: float, n: int, taus: float, min_time: float, max_time: float,
              max_steps: float) -> tuple[float, float]:
    """(burn-in, measured) model time: ``taus`` relaxation times, clipped to the budgets."""
    tau = relaxation_time(d, lam)
    total = float(np.clip(taus * tau, min_time, max_time))
    total = min(total, max_steps / ((1.0 + lam) * n))
    burn = min(tau, total / 4)
    return burn, total - burn


def max_length_map(one_minus_lams: Sequence[float], ds: Sequence[int], n: int, *,
                   taus: float = 10.0, min_time: float = 20.0, max_time: float = 200.0,
                   replicas: int = 2, seed: int = 0, progress: bool = True) -> dict[str, np.ndarray]:
    """Figure (a): predicted k and the simulated modal maximum over a grid of (1-lam, d).

    Each point runs ``taus`` relaxation times from the fluid fixed point (clipped to
    [min_time, max_time] model time, burn-in = min(tau, total/4)). Returns arrays of shape
    (len(one_minus_lams), len(ds)): ``k``, ``fluid_max``, ``modal_max``, ``frac_max_k``
    (fraction of time the maximum equals k), ``tau``, ``time`` (model time simulated),
    ``boundary_distance``. Cached.
    """
    eps = [V.real("one_minus_lams", e, low=0.0, high=1.0) for e in one_minus_lams]
    ds = [V.integer("ds", d, low=2) for d in ds]
    n = V.integer("n", n, low=1)
    params = dict(one_minus_lams=eps, ds=ds, n=n, taus=taus, min_time=min_time,
                  max_time=max_time, replicas=replicas)

    def compute():
        shape = (len(eps), len(ds))
        out = {key: np.zeros(shape) for key in
               ("k", "fluid_max", "modal_max", "frac_max_k", "tau", "time", "boundary_distance")}
        cells = [(i, j) for i in range(len(eps)) for j in range(len(ds))]
        for c, (i, j) in enumerate(_progress(cells, progress, "map (1-lam, d)")):
            lam, d = 1.0 - eps[i], ds[j]
            k = int(predicted_max_length(d, lam))
            burn, t = _run_time(d, lam, n, taus, min_time, max_time, np.inf)
            res = run_equilibrium(n, d, lam, time=t, burn_in_time=burn, replicas=replicas,
                                  seed=seed + c, progress=False)
            sm = summarize(res, max(res.levels, k + 1))
            out["k"][i, j] = k
            out["fluid_max"][i, j] = fluid_max_length(n, d, lam)
            out["modal_max"][i, j] = sm["modal_max"]
            out["frac_max_k"][i, j] = sm["max_dist"][k]
            out["tau"][i, j] = relaxation_time(d, lam)
            out["time"][i, j] = burn + t
            out["boundary_distance"][i, j] = boundary_distance(d, lam)
        out["one_minus_lam"] = np.asarray(eps)
        out["d"] = np.asarray(ds, dtype=float)
        return out

    return cached("01a_max_length_map", params, seed, compute)


def profile_sweep(cases: Sequence[tuple[float, int]], ns: Sequence[int], *, levels: int,
                  taus: float = 5.0, min_time: float = 10.0, max_time: float = 500.0,
                  max_steps: float = 4e7, replicas: int = 4, seed: int = 0,
                  progress: bool = True) -> dict[str, np.ndarray]:
    """Figure (b): the equilibrium fraction of queues at each length, per (1-lam, d) case and n.

    Returns ``p``/``p_se``/``max_dist`` of shape (cases, ns, levels+1), ``fluid``, ``asymptotic``
    (NaN where the formulas say nothing) and ``refined`` (cases, ns, levels+1), ``k`` (cases,),
    ``time`` (cases, ns) model time simulated. Run length: ``taus`` relaxation times, at most
    ``max_steps`` steps per replica (so large n runs are shorter than tau: their O(1/n) starting
    offset from equilibrium is correspondingly small). Cached.
    """
    cases = [(V.real("1-lam", e, low=0.0, high=1.0), V.integer("d", d, low=2)) for e, d in cases]
    ns = [V.integer("ns", n, low=1) for n in ns]
    levels = V.integer("levels", levels, low=1)
    params = dict(cases=cases, ns=ns, levels=levels, taus=taus, min_time=min_time,
                  max_time=max_time, max_steps=max_steps, replicas=replicas)

    def compute():
        C, N, L1 = len(cases), len(ns), levels + 1
        out = {"p": np.zeros((C, N, L1)), "p_se": np.zeros((C, N, L1)),
               "max_dist": np.zeros((C, N, L1)), "refined": np.zeros((C, N, L1)),
               "fluid": np.zeros((C, L1)), "asymptotic": np.full((C, L1), np.nan),
               "k": np.zeros(C), "time": np.zeros((C, N))}
        jobs = [(c, m) for c in range(C) for m in range(N)]
        for idx, (c, m) in enumerate(_progress(jobs, progress, "profiles")):
            eps, d = cases[c]
            lam, n = 1.0 - eps, ns[m]
            burn, t = _run_time(d, lam, n, taus, min_time, max_time, max_steps)
            res = run_equilibrium(n, d, lam, time=t, burn_in_time=burn, replicas=replicas,
                                  seed=seed + idx, progress=False)
            sm = summarize(res, levels)
            out["p"][c, m], out["p_se"][c, m], out["max_dist"][c, m] = sm["p"], sm["p_se"], sm["max_dist"]
            out["time"][c, m] = burn + t
            r = refined_mean_field(d, lam, levels=max(levels + 1, 4))
            out["refined"][c, m] = r.queue_length_distribution(n)[:L1]
        for c, (eps, d) in enumerate(cases):
            lam = 1.0 - eps
            out["fluid"][c] = _exact_lengths(fluid_fixed_point(d, lam, levels + 1))[:L1]
            a = asymptotic_profile(d, lam)
            out["asymptotic"][c, : min(a.size, L1)] = a[:L1]
            out["k"][c] = predicted_max_length(d, lam)
        out["one_minus_lam"] = np.array([e for e, _ in cases])
        out["d"] = np.array([d for _, d in cases], dtype=float)
        out["n"] = np.asarray(ns, dtype=float)
        return out

    return cached("01b_profiles", params, seed, compute)


def concentration_sweep(alpha: float, beta: float, ns: Sequence[int], *, taus: float = 5.0,
                        min_time: float = 10.0, max_time: float = 500.0, max_steps: float = 4e7,
                        replicas: int = 4, seed: int = 0, progress: bool = True) -> dict[str, np.ndarray]:
    """Figure (c): along lam = 1 - n^(-alpha), d = floor(n^beta) (k = ceil(alpha/beta) for large
    n), the fraction of time the maximum equals k and the fraction of queues at exactly k.

    Returns per n: ``k``, ``frac_max_k``/``frac_max_k_se`` (over replicas), ``p_k``/``p_k_se``,
    ``fluid_p_k``, ``asym_p_k`` = 1 - (1-lam) d^(k-1), ``lam``, ``d``, ``time``, and
    ``poisson_max_k`` = exp(-n (s_{k+1} + V_{k+1}/n)): P(max == k) if the queues above k were
    Poisson with the refined mean count (a heuristic, not an oracle). Cached.
    """
    alpha = V.real("alpha", alpha, low=0.0)
    beta = V.real("beta", beta, low=0.0)
    ns = [V.integer("ns", n, low=2) for n in ns]
    params = dict(alpha=alpha, beta=beta, ns=ns, taus=taus, min_time=min_time, max_time=max_time,
                  max_steps=max_steps, replicas=replicas, version=2)

    def compute():
        keys = ("k", "frac_max_k", "frac_max_k_se", "p_k", "p_k_se", "fluid_p_k", "asym_p_k",
                "lam", "d", "time", "poisson_max_k")
        out = {key: np.zeros(len(ns)) for key in keys}
        for m, n in enumerate(_progress(ns, progress, "concentration")):
            lam, d = 1.0 - n ** (-alpha), max(2, int(math.floor(n**beta + 1e-9)))
            k = int(predicted_max_length(d, lam))
            burn, t = _run_time(d, lam, n, taus, min_time, max_time, max_steps)
            res = run_equilibrium(n, d, lam, time=t, burn_in_time=burn, replicas=replicas,
                                  seed=seed + m, progress=False)
            sm = summarize(res, max(res.levels, k + 1))
            s = fluid_fixed_point(d, lam, k + 1)
            vals = dict(k=k, frac_max_k=sm["max_dist"][k], frac_max_k_se=sm["max_dist_se"][k],
                        p_k=sm["p"][k], p_k_se=sm["p_se"][k], fluid_p_k=s[k] - s[k + 1],
                        asym_p_k=1.0 - (1.0 - lam) * float(d) ** (k - 1), lam=lam, d=d,
                        time=burn + t,
                        poisson_max_k=math.exp(-n * refined_mean_field(d, lam, levels=k + 3)
                                               .tail_fraction(n)[k + 1]))
            for key, v in vals.items():
                out[key][m] = v
        out["n"] = np.asarray(ns, dtype=float)
        return out

    return cached("01c_concentration", params, seed, compute)


def finite_n_sweep(d: int, lam: float, ns: Sequence[int], *, level: int = 3, taus: float = 8.0,
                   max_steps: float = 1.5e8, replicas: int = 4, seed: int = 0,
                   progress: bool = True) -> dict[str, np.ndarray]:
    """Figure (d): the equilibrium tail E[u_level]/n against n, with fluid and refined theory.

    MODELS.md: at lam = 0.999, d = 100, n = 1e5 the tail at length 3 is ~25x the fluid value.
    Each n runs ``taus`` relaxation times from the fluid fixed point (burn-in one tau), at most
    ``max_steps`` steps per replica. Returns per n: ``tail``/``tail_se`` (over replicas),
    ``refined`` (s + V/n), ``taus_covered``; scalars ``fluid``, ``correction`` (V_level). Cached.
    """
    d = V.integer("d", d, low=2)
    lam = V.real("lam", lam, low=0.0, high=1.0)
    ns = [V.integer("ns", n, low=1) for n in ns]
    level = V.integer("level", level, low=1)
    params = dict(d=d, lam=lam, ns=ns, level=level, taus=taus, max_steps=max_steps,
                  replicas=replicas)

    def compute():
        r = refined_mean_field(d, lam, levels=max(level + 1, 4))
        tau = relaxation_time(d, lam)
        out = {key: np.zeros(len(ns)) for key in ("tail", "tail_se", "refined", "taus_covered")}
        for m, n in enumerate(_progress(ns, progress, "finite n")):
            burn, t = _run_time(d, lam, n, taus, 0.0, np.inf, max_steps)
            res = run_equilibrium(n, d, lam, time=t, burn_in_time=burn, replicas=replicas,
                                  seed=seed + m, progress=False)
            sm = summarize(res, level)
            out["tail"][m], out["tail_se"][m] = sm["tail"][level], sm["tail_se"][level]
            out["refined"][m] = r.tail_fraction(n)[level]
            out["taus_covered"][m] = (burn + t) / tau
        out["fluid"] = np.asarray(r.fixed_point[level])
        out["correction"] = np.asarray(r.correction[level])
        out["n"] = np.asarray(ns, dtype=float)
        return out

    return cached("01d_finite_n", params, seed, compute)


def from_empty_run(n: int, d: int, lam: float, *, time: float, points: int = 200,
                   replicas: int = 4, seed: int = 0, progress: bool = True) -> dict[str, np.ndarray]:
    """The one run that starts from empty: u_i/n over time, with the fluid ODE from empty.

    Shows how long the system takes to reach equilibrium (claim 3's territory; here only as
    context). Returns ``t`` (model time), ``sim`` (replica mean, shape (points, levels+1)),
    ``fluid`` (same shape) and ``fixed_point``. Cached.
    """
    n, d, lam, _ = check_parameters(n, d, lam)
    time = V.real("time", time, low=0.0)
    points = V.integer("points", points, low=2)
    params = dict(n=n, d=d, lam=lam, time=time, points=points, replicas=replicas)

    def compute():
        from qlib.supermarket.theory import fluid_trajectory

        per_unit = (1.0 + lam) * n
        every = max(1, int(round(time * per_unit / points)))
        res = simulate(n, d, lam, steps=every * points, replicas=replicas, seed=seed,
                       initial="empty", record_every=every, progress=progress)
        traj = res.trajectory.astype(float) / n  # (replicas, points, levels+1)
        t = np.arange(1, points + 1) * every / per_unit
        L = traj.shape[2] - 1
        s0 = np.zeros(L + 1)
        s0[0] = 1.0
        fl = fluid_trajectory(d, lam, t, s0)
        return {"t": t, "sim": traj.mean(axis=0), "fluid": fl,
                "fixed_point": fluid_fixed_point(d, lam, L)}

    return cached("01e_from_empty", params, seed, compute)


def interactive_run(one_minus_lam: float, d: int, n: int, *, max_steps: float = 2e6,
                    taus: float = 5.0, replicas: int = 4, seed: int = 0,
                    progress: bool = True) -> dict:
    """The notebook button: one run from the fluid fixed point for the sliders' (1-lam, d, n).

    Runs ``taus`` relaxation times but at most ``max_steps`` steps per replica (a few seconds),
    and returns :func:`summarize`'s dict over levels 0..L of :func:`profile_view`, plus
    ``replicas``, ``time`` (model time simulated) and ``taus_covered``.
    """
    view = profile_view(one_minus_lam, d, n)
    lam = view["lam"]
    burn, t = _run_time(d, lam, n, taus, 0.0, np.inf, V.real("max_steps", max_steps, low=1.0))
    res = run_equilibrium(n, d, lam, time=t, burn_in_time=burn, replicas=replicas, seed=seed,
                          progress=progress)
    out = summarize(res, int(view["levels"][-1]))
    out.update(replicas=replicas, time=burn + t, taus_covered=(burn + t) / view["tau"])
    return out


def grid(lo: float, hi: float, num: int, *, integer: bool = False) -> np.ndarray:
    """Log-spaced grid from lo to hi (rounded to distinct integers if ``integer``)."""
    g = np.geomspace(lo, hi, num)
    return np.unique(np.rint(g).astype(int)) if integer else g


__all__: Iterable[str] = [
    "relaxation_time", "fluid_max_length", "profile_view", "run_equilibrium", "summarize",
    "max_length_map", "profile_sweep", "concentration_sweep", "finite_n_sweep",
    "from_empty_run", "interactive_run", "grid",
]
