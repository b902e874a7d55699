"""The fluctuations study's runs: per point, stationary runs sized in predicted tau_int(N), one entry
of results/long each (SD design: the series of N; tau design: the autocovariance of N per replica,
from which tau_int is recomputed, and the old estimator on old-design pieces of the same series)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from qlib import results
from qlib._rng import named_seed
from qlib.results import cache
from qlib.stats import integrated_autocorrelation_time
from qlib.studies import check_mode, long_point, long_points_read
from qlib.studies.fluctuations.parameters import PARAMETERS
from qlib.studies.wrong_models import WRONG_MODELS
from qlib.supermarket import linear_noise, simulate
from qlib.supermarket.fluctuations import estimate_from_series
from qlib.supermarket.regime import family_hypotheses, family_point, fluctuation_view
from qlib.supermarket.regime import hypotheses as point_hypotheses
from qlib.supermarket.theory import predicted_max_length

#: the command that computes the full mode (the long tier)
LONG_COMMAND = "python -m qlib results-long --only fluctuations"
#: the tau design keeps the autocovariance of each replica up to this many predicted tau_int (Sokal's
#: window at c = 3 stops near 3 tau_int)
ACOV_TAUS = 10.0


def sokal_from_autocovariance(acov, window: float) -> np.ndarray:
    """Sokal's tau = 1 + 2 sum rho (in samples) of each row of ``acov`` (replicas, lags), the same rule
    as :func:`qlib.stats.integrated_autocorrelation_time` (the first lag M >= window x tau(M); the
    last lag kept if none is)."""
    acov = np.asarray(acov, dtype=float)
    out = np.full(acov.shape[0], np.nan)
    for r in range(acov.shape[0]):
        if acov[r, 0] <= 0:
            continue
        tau = 2.0 * np.cumsum(acov[r] / acov[r, 0]) - 1.0
        ok = np.nonzero(np.arange(acov.shape[1]) >= window * tau)[0]
        out[r] = tau[ok[0]] if ok.size else tau[-1]
    return out


def autocovariance(N, max_lag: int) -> np.ndarray:
    """(replicas, max_lag + 1): each row's autocovariance about its own mean, divided by the row's
    length (the FFT form of :func:`qlib.stats.integrated_autocorrelation_time`)."""
    x = np.asarray(N, dtype=float)
    m = x.shape[1]
    y = x - x.mean(axis=1, keepdims=True)
    f = np.fft.rfft(y, n=2 * m, axis=1)
    return np.fft.irfft(f * np.conj(f), axis=1)[:, : min(m, max_lag + 1)] / m


def relaxation_scale(n: int, d: int, lam: float) -> float:
    """n d^(k-1) steps: the unit of the old design."""
    return n * float(d) ** (int(predicted_max_length(d, lam)) - 1)


def _run(pt, *, replicas: int, tau_per_replica: float, frames_per_tau: int, burn_tau: float, seed: int):
    """Stationary series of N at ``pt``: (N (replicas, frames) int64, every, burn)."""
    th = linear_noise(*pt)
    every = max(1, int(th.tau_int_steps / frames_per_tau))
    frames = max(8, math.ceil(tau_per_replica * th.tau_int_steps / every))
    burn = int(math.ceil(burn_tau * th.tau_fluid_steps))
    r = simulate(*pt, steps=every * frames, burn_in=burn, replicas=replicas, seed=seed, initial="fluid",
                 record_every=every, progress=False)
    return r.trajectory[:, :, 1:].astype(np.int64).sum(axis=2), every, burn


def sd_entry(P: dict, pt) -> dict[str, np.ndarray]:
    """The SD design at ``pt``: the series of N (stored whole, int32) and its frame spacing."""
    S = P["sd"]
    params = dict(point=list(pt), replicas=S["replicas"], tau_per_replica=S["tau_per_replica"],
                  frames_per_tau=P["frames_per_tau"], burn_tau=P["burn_tau"])
    seed = named_seed(P["stream"], "sd", pt[0], pt[1])

    def compute(idx):
        N, every, burn = _run(pt, replicas=S["replicas"], tau_per_replica=S["tau_per_replica"],
                              frames_per_tau=P["frames_per_tau"], burn_tau=P["burn_tau"], seed=seed)
        return [{"N": N.astype(np.int32), "every": np.asarray(every), "burn": np.asarray(burn)}]

    return cache.cached_points("fluct_sd", [params], [seed], compute, group=1)[0]


def tau_entry(P: dict, pt) -> dict[str, np.ndarray]:
    """The tau design at ``pt``: per replica the autocovariance of N up to ACOV_TAUS predicted tau_int
    (tau_int is recomputed from it), tau_int itself, and the old estimator on old-design pieces."""
    T, O = P["tau"], P["old_design"]
    params = dict(point=list(pt), replicas=T["replicas"], tau_per_replica=T["tau_per_replica"],
                  frames_per_tau=P["frames_per_tau"], burn_tau=P["burn_tau"], window=T["window"],
                  old_design=dict(O))
    seed = named_seed(P["stream"], "tau", pt[0], pt[1])

    def compute(idx):
        N, every, burn = _run(pt, replicas=T["replicas"], tau_per_replica=T["tau_per_replica"],
                              frames_per_tau=P["frames_per_tau"], burn_tau=P["burn_tau"], seed=seed)
        acov = autocovariance(N, int(ACOV_TAUS * P["frames_per_tau"]))
        sd, tau = estimate_from_series(N, every, window=T["window"])
        # the old design: pieces of old_design.length n d^(k-1) steps, each its own series (own mean)
        piece = max(8, int(round(O["length"] * relaxation_scale(*pt) / every)))
        cut = N[:, : (N.shape[1] // piece) * piece].reshape(-1, piece)
        old = integrated_autocorrelation_time(cut, window=O["window"]) * every
        return [{"acov": acov, "mean": N.mean(axis=1), "sd": np.sqrt(((N - N.mean()) ** 2).mean(axis=1)),
                 "tau": sokal_from_autocovariance(acov, T["window"]) * every, "tau_old": old,
                 "every": np.asarray(every), "burn": np.asarray(burn), "frames": np.asarray(N.shape[1])}]

    return cache.cached_points("fluct_tau", [params], [seed], compute, group=1)[0]


@dataclass(frozen=True)
class FluctPoint:
    """One point: ``where`` (family name or "sweep"), n, d, lam, ``inside`` (H0-H3 hold), ``hyp``;
    the predictions (``pred``: sd (with the 1/n term), sd_lna, tau (steps), tau_fluid (steps),
    order2_ratio, and the wrong models' sd/tau: half_d, d-1, and sd for the scale 1/(1-lam),
    sqrt(n lam)/(1-lam)); the measurements, None where results/long lacks them: ``sd`` (replicas,)
    per-replica SD(N), ``tau_sd`` (replicas,) tau_int from the SD design's series, ``sd_taus``
    (predicted tau_int per replica of the SD design), ``tau`` (replicas,) and ``tau_old`` (pieces,)
    of the tau design (steps), ``acf`` (lags,) its autocorrelation of N averaged over replicas, lags
    ``acf_every`` steps apart; ``missing``: why a measurement is absent ("" if none)."""

    where: str
    n: int
    d: int
    lam: float
    inside: bool
    hyp: dict
    pred: dict
    sd: np.ndarray | None = None
    tau_sd: np.ndarray | None = None
    sd_taus: float = math.nan
    tau: np.ndarray | None = None
    tau_old: np.ndarray | None = None
    acf: np.ndarray | None = None
    acf_every: float = math.nan
    missing: str = ""
    records: list = field(default_factory=list)

    @property
    def k(self) -> int:
        return int(predicted_max_length(self.d, self.lam))


@dataclass(frozen=True)
class FluctuationsResult:
    """Everything of the study for one ``mode``: ``points`` (every point of every set, the in-regime
    ones first in each set's order) and the ``parameters``."""

    mode: str
    parameters: dict
    points: list
    provenance: str = ""

    def inside(self) -> list:
        return [p for p in self.points if p.inside]

    def outside(self) -> list:
        return [p for p in self.points if not p.inside]


def predictions(n: int, d: int, lam: float) -> dict[str, float]:
    """The linear-noise predictions at (n, d, lam) and at the wrong models' points (the model's d),
    from :func:`qlib.supermarket.regime.fluctuation_view` (linear_noise's numbers to 1e-8 in NumPy, tested:
    no compile per d, so reading the study costs seconds, not a compile per point)."""
    ln = fluctuation_view(n, d, lam)
    out = dict(sd=ln.sd_N, sd_lna=ln.sd_N_lna, tau=ln.tau_int_steps, tau_fluid=ln.tau_fluid_steps,
               order2_ratio=ln.order2_ratio, scale=math.sqrt(n * lam) / (1.0 - lam))
    for key in ("half_d", "d-1"):
        w = fluctuation_view(n, WRONG_MODELS[key].d_of(d), lam)
        out[f"sd_{key}"], out[f"tau_{key}"] = w.sd_N, w.tau_int_steps
    return out


def points_of(P: dict) -> list[tuple[str, tuple[int, int, float], bool, dict]]:
    """(where, point, inside, hypotheses) of every point of the design."""
    H = P["claims"]["hypotheses"]
    out = []
    for name, fam in P["families"].items():
        for n in fam["ns"]:
            pt = family_point(n, fam["alpha"], fam["beta"])
            h = family_hypotheses(*pt, fam["alpha"], fam["beta"], c_max=H["c_max"], gamma_min=H["gamma_min"])
            out.append((name, pt, all(h[x] for x in ("H0", "H1", "H2", "H3")), h))
    S = P["sweep"]
    for d in S["ds"]:
        pt = (S["n"], d, 1.0 - S["one_minus_lam"])
        h = point_hypotheses(*pt, c_max=H["c_max"], buffer_min=H["buffer_min"])
        out.append(("sweep", pt, all(h[x] for x in ("H0", "H1", "H2", "H3")), h))
    return out


def cost(mode: str = "full") -> dict[str, float]:
    """A-priori replica-steps of the design: {"sd": every point, "tau": the tau points, and per
    (where, n, d) each entry's}, from the predicted tau_int and tau_fluid."""
    P = PARAMETERS[check_mode(mode)]
    out: dict = {"sd": 0.0, "tau": 0.0}
    for where, pt, inside, _ in points_of(P):
        ln = fluctuation_view(*pt)
        S, T = P["sd"], P["tau"]
        c = S["replicas"] * (S["tau_per_replica"] * ln.tau_int_steps + P["burn_tau"] * ln.tau_fluid_steps)
        out["sd"] += c
        out[("sd", where, pt[0], pt[1])] = c
        if inside and pt[0] <= T["n_max"]:
            c = T["replicas"] * (T["tau_per_replica"] * ln.tau_int_steps + P["burn_tau"] * ln.tau_fluid_steps)
            out["tau"] += c
            out[("tau", where, pt[0], pt[1])] = c
    return out


def long_cost(mode: str = "full") -> float:
    """The replica-steps a long run of this study computes (every entry, a priori; the long run
    skips the entries results/long already holds, so this is an upper bound)."""
    c = cost(mode)
    return c["sd"] + c["tau"]


def run(mode: str = "full", *, progress: bool = True) -> FluctuationsResult:
    """Compute (smoke mode, or full mode while the long tier is written) or read (full mode
    otherwise: results/long only) every point. Cheapest points first, so a long run cut short keeps
    whole points; each is one entry.

    Args:
        mode: "full" or "smoke".
        progress: print one line per point.

    Returns:
        A :class:`FluctuationsResult`; a point results/long lacks carries ``missing``.
    """
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    read = long_points_read(mode)
    design = points_of(P)
    order = sorted(range(len(design)), key=lambda j: fluctuation_view(*design[j][1]).tau_int_steps)
    got: dict[int, FluctPoint] = {}
    records: list = []
    for j in order:
        where, pt, inside, h = design[j]
        pred = predictions(*pt)
        sd, rec, why = long_point(read, lambda pt=pt: sd_entry(P, pt), LONG_COMMAND)
        records += rec
        kw: dict = {}
        if sd is not None:
            N = np.asarray(sd["N"], dtype=float)
            e = float(sd["every"])
            kw.update(sd=np.sqrt(((N - N.mean()) ** 2).mean(axis=1)),
                      tau_sd=integrated_autocorrelation_time(N, window=P["tau"]["window"]) * e,
                      sd_taus=N.shape[1] * e / pred["tau"])
        missing = [why] if sd is None else []
        if inside and pt[0] <= P["tau"]["n_max"]:
            tau, rec, why = long_point(read, lambda pt=pt: tau_entry(P, pt), LONG_COMMAND)
            records += rec
            if tau is None:
                missing.append(why)
            else:
                acov = np.asarray(tau["acov"], float)
                kw.update(tau=np.asarray(tau["tau"], float), tau_old=np.asarray(tau["tau_old"], float),
                          acf=(acov / acov[:, :1]).mean(axis=0), acf_every=float(tau["every"]))
        got[j] = FluctPoint(where=where, n=pt[0], d=pt[1], lam=pt[2], inside=inside, hyp=h, pred=pred,
                            missing="; ".join(missing), **kw)
        if progress:
            print(f"[fluctuations] {where} n={pt[0]} d={pt[1]}: "
                  + ("missing" if missing else "done"), flush=True)
    prov = results.provenance_text(records, LONG_COMMAND) if records else ""
    return FluctuationsResult(mode=mode, parameters=P, points=[got[j] for j in range(len(design))],
                              provenance=prov)
