"""The families study's run: equilibrium estimates along each family (cached), the standard
deviation of the number of customers, the wrong models at the largest n, and the statistics the
rows use (its parameters: :mod:`qlib.studies.families.parameters`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qlib import results
from qlib._rng import named_seed
from qlib.config import scale
from qlib.results import cache
from qlib.studies import ArrayResult, check_mode, long_point, long_points_read
from qlib.studies.families.parameters import LONG_COMMAND, PARAMETERS, PointTuple, family_ns, long_read_only
from qlib.studies.max_length import Estimates, estimates
from qlib.studies.wrong_models import WRONG_MODELS, point_of
from qlib.supermarket import relaxation_time, simulate
from qlib.supermarket.regime import family_hypotheses, family_point, gamma

# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class CustomersSD(ArrayResult):
    """The number of customers N = sum_i u_i at points j: ``sd`` (P, R) its standard deviation per
    replica over the recorded samples, ``mean`` (P, R) its mean; ``taus`` (P,) covered."""

    sd: np.ndarray
    mean: np.ndarray
    taus: np.ndarray


@dataclass(frozen=True)
class Family:
    """One family's points: ``name``, ``alpha``, ``beta``, ``k`` = ceil(alpha/beta), ``gamma``;
    ``est`` the estimates at its n (arrays (P,...)); ``sd`` the standard deviation of N;
    ``wrong`` wrong model name -> Estimates at the largest n (empty if the family is outside the
    hypotheses); ``hyp`` per point: dict of H1, H2 booleans and numbers."""

    name: str
    alpha: float
    beta: float
    k: int
    gamma: float
    est: Estimates
    sd: CustomersSD
    wrong: dict
    hyp: list
    #: the design's n whose long-tier entry results/long lacks or holds stale: (n, why)
    missing: tuple = ()
    #: where the long-tier entries read came from ("" when none were read)
    provenance: str = ""
    #: H0-H3 at the design's largest n (whether or not it was run)
    design_hyp: dict | None = None
    #: the estimates at the same n on the family's fresh stream (issue 47: the rows whose criterion came
    #: after their data are judged on them), None until results/long holds every point
    fresh: Estimates | None = None
    #: the fresh points results/long lacks: (n, why)
    fresh_missing: tuple = ()

    @property
    def ns(self) -> np.ndarray:
        return self.est.n

    def p_k(self, j: int) -> tuple[float, float, float]:
        """P(max = k) at point j with its 95% CI."""
        k = self.k
        return float(self.est.max_dist[j, k]), float(self.est.max_low[j, k]), float(self.est.max_high[j, k])

    def p_k1(self, j: int) -> tuple[float, float, float]:
        k = self.k + 1
        return float(self.est.max_dist[j, k]), float(self.est.max_low[j, k]), float(self.est.max_high[j, k])

    def c(self, j: int) -> float:
        return float((1 - self.est.lam[j]) * self.est.d[j] ** (self.k - 1))

    def buffer(self, j: int) -> float:
        """n (1-lam) d^(k-1): the queues shorter than k (in the fluid limit, to first order)."""
        return float(self.est.n[j] * self.c(j))

    def excursion(self, j: int) -> float:
        """sqrt(n d^(k-1)): the size of N's excursions (N relaxes over about d^(k-1) time units while its
        variance grows at rate about 2n; docs/models.md#hypotheses)."""
        return float(math.sqrt(self.est.n[j] * float(self.est.d[j]) ** (self.k - 1)))

    def inside(self, j: int | None = None) -> bool:
        """H0-H3 at point j (default: the design's largest n, run or not)."""
        h = (self.design_hyp or self.hyp[-1]) if j is None else self.hyp[j]
        return bool(h["H0"] and h["H1"] and h["H2"] and h["H3"])


@dataclass(frozen=True)
class FamiliesResult:
    """Everything the families section of notebook 01 and its claim rows show."""

    mode: str
    parameters: dict
    families: list

    def family(self, name: str) -> Family:
        return next(f for f in self.families if f.name == name)


def customers_sd(name: str, points: Sequence[tuple[int, int, float]], *, replicas: int, seeds: Sequence[int],
                 burn_taus: float, taus: float, samples: int) -> CustomersSD:
    """The standard deviation of N = sum_i u_i per replica: from empty, ``burn_taus`` tau of
    burn-in, then ``samples`` records over ``taus`` tau. Cached per point."""
    params = [dict(point=list(p), replicas=replicas, burn_taus=burn_taus, taus=taus, samples=samples)
              for p in points]

    def compute(idx):
        out = []
        for i in idx:
            n, d, lam = points[i]
            per_tau = relaxation_time(d, lam) * (1.0 + lam) * n
            every = max(1, int(taus * per_tau / samples))
            r = simulate(n, d, lam, steps=every * samples, burn_in=int(math.ceil(burn_taus * per_tau)),
                         replicas=replicas, seed=seeds[i], record_every=every, progress=False)
            N = r.trajectory[:, :, 1:].astype(float).sum(axis=2)  # (R, samples)
            out.append({"sd": N.std(axis=1, ddof=1), "mean": N.mean(axis=1),
                        "taus": np.asarray(every * samples / per_tau)})
        return out

    got = cache.cached_points(name, params, list(seeds), compute, group=len(points))
    return CustomersSD.from_arrays({f: np.stack([g[f] for g in got]) for f in got[0]})


def _estimates_and_sd(mode: str, name: str, pts: Sequence[PointTuple], batches: int, *,
                      progress: bool) -> tuple[Estimates, CustomersSD]:
    """The equilibrium estimates and SD(N) at ``pts`` of family ``name`` (cached per point)."""
    P = PARAMETERS[mode]
    sdp = P["sd"]
    seeds = [named_seed(P["stream"], name, n) for n, _, _ in pts]
    est = estimates(f"families_{name}", pts, replicas=P["replicas"], seeds=seeds, batches=batches,
                    burn_taus=P["burn_taus"], batch_taus=P["batch_taus"], progress=progress)
    sd = customers_sd(f"families_sd_{name}", pts, replicas=sdp["replicas"],
                      seeds=[named_seed(P["stream"], name, n, "sd") for n, _, _ in pts],
                      burn_taus=P["burn_taus"], taus=sdp["taus"], samples=sdp["samples"])
    return est, sd


def long_cost(mode: str = "full") -> float:
    """The replica-steps of the long-tier points results/long does not hold yet (a-priori: replicas
    x relaxation times x steps per relaxation time), what ``make results-long``'s ETA is sized by."""
    P = PARAMETERS[check_mode(mode)]
    L, sdp, W = P["long"], P["sd"], P["long"]["wrong"]
    total = 0.0
    for name, ns in L["ns"].items():
        fam = P["families"][name]
        for i, n in enumerate(ns):
            pt = family_point(n, fam["alpha"], fam["beta"])
            per_tau = relaxation_time(pt[1], pt[2]) * (1.0 + pt[2]) * pt[0]
            try:
                with cache.stored_only("long"):
                    _estimates_and_sd(mode, name, [pt], L["batches"], progress=False)
            except cache.NotStored:
                total += per_tau * (P["replicas"] * (P["burn_taus"] + L["batches"] * P["batch_taus"])
                                    + sdp["replicas"] * (P["burn_taus"] + sdp["taus"]))
            if i == len(ns) - 1:
                for wm in W["models"]:  # each entry results/long lacks
                    try:
                        with cache.stored_only("long"):
                            _wrong_one(P, name, wm, pt, True, progress=False)
                    except cache.NotStored:
                        w = _wrong_run(P, name, wm, True)
                        total += per_tau * w["replicas"] * (P["burn_taus"] + w["batches"] * w["batch_taus"])
    for name in L["fresh"]["families"]:  # issue 47's fresh points results/long lacks
        fam = P["families"][name]
        for n in list(fam["ns"]) + list(L["ns"].get(name, [])):
            try:
                with cache.stored_only("long"):
                    _fresh_one(P, name, fam, n)
            except cache.NotStored:
                pt = family_point(n, fam["alpha"], fam["beta"])
                b = L["batches"] if n in L["ns"].get(name, []) else P["batches"]
                total += (relaxation_time(pt[1], pt[2]) * (1.0 + pt[2]) * pt[0] * P["replicas"]
                          * (P["burn_taus"] + b * P["batch_taus"]))
    return total


def _fresh_points(mode: str, name: str, fam: dict, *, progress: bool) -> tuple:
    """(Estimates on the family's fresh stream at every n of its design, or None; the points
    results/long lacks; the records read): each point one long-tier entry, computed only by
    ``make results-long ONLY=families``."""
    P = PARAMETERS[mode]
    L, F = P["long"], P["long"]["fresh"]
    if name not in F["families"]:
        return None, (), []
    ests, missing, records = [], [], []
    for n in list(fam["ns"]) + list(L["ns"].get(name, [])):
        got, read, why = long_point(long_read_only(mode), lambda n=n: _fresh_one(P, name, fam, n, progress),
                                    LONG_COMMAND)
        if got is None:
            missing.append((n, why))
            continue
        records += read
        ests.append(got)
    return (Estimates.concat(ests) if ests and not missing else None), tuple(missing), records


def _fresh_one(P: dict, name: str, fam: dict, n: int, progress: bool = False) -> Estimates:
    L = P["long"]
    pt = family_point(n, fam["alpha"], fam["beta"])
    b = L["batches"] if n in L["ns"].get(name, []) else P["batches"]
    return estimates(f"families_fresh_{name}", [pt], replicas=P["replicas"],
                     seeds=[named_seed(L["fresh"]["stream"], name, n)], batches=b, burn_taus=P["burn_taus"],
                     batch_taus=P["batch_taus"], progress=progress)


def fresh_cost(mode: str = "full") -> dict[str, float]:
    """Replica-steps of each family's fresh points (issue 47), stored or not: replicas x (burn-in +
    batches x batch) relaxation times x steps per relaxation time."""
    P = PARAMETERS[check_mode(mode)]
    L = P["long"]
    out = {}
    for name in L["fresh"]["families"]:
        fam = P["families"][name]
        total = 0.0
        for n in list(fam["ns"]) + list(L["ns"].get(name, [])):
            pt = family_point(n, fam["alpha"], fam["beta"])
            per_tau = relaxation_time(pt[1], pt[2]) * (1.0 + pt[2]) * pt[0]
            b = L["batches"] if n in L["ns"].get(name, []) else P["batches"]
            total += per_tau * P["replicas"] * (P["burn_taus"] + b * P["batch_taus"])
        out[name] = total
    return out


def _family_points(mode: str, name: str, fam: dict, *, progress: bool) -> tuple:
    """The estimates and SD(N) at the family's default-tier n (one call: cached together) and at
    each long-tier n (one entry per point, so a killed long run resumes): (points, Estimates,
    CustomersSD, missing, records)."""
    P = PARAMETERS[mode]
    L = P["long"]
    a, b = fam["alpha"], fam["beta"]
    # --scale lengthens the default-tier points, except in the long run (it reads them from results/default)
    nb = P["batches"] * (max(1, int(round(scale()))) if long_points_read(mode) else 1)

    def one(pts, batches):
        return _estimates_and_sd(mode, name, pts, batches, progress=progress)

    pts = [family_point(n, a, b) for n in fam["ns"]]
    est, sd = one(pts, nb)
    ests, sds, missing, records = [est], [sd], [], []
    for n in L["ns"].get(name, []):
        pt = family_point(n, a, b)
        got, read, why = long_point(long_read_only(mode), lambda pt=pt: one([pt], L["batches"]), LONG_COMMAND)
        if got is None:
            missing.append((n, why))
            continue
        records += read
        pts.append(pt)
        ests.append(got[0])
        sds.append(got[1])
    return pts, Estimates.concat(ests), CustomersSD.concat(sds), tuple(missing), records


def _wrong_run(P: dict, name: str, wm: str, long: bool) -> dict:
    """Wrong model ``wm``'s run at family ``name``'s largest n: replicas, batches, batch_taus and the
    cache name's and seed's suffix ("" or "_decide": the long tier's ``decide`` runs, issue 41)."""
    W = P["long"]["wrong"] if long else P["wrong"]
    D = P["long"]["decide"].get(name, {}) if long else {}
    if wm in D.get("models", ()):
        return dict(replicas=D["replicas"], batches=D["batches"], batch_taus=D["batch_taus"], tag="_decide")
    return dict(replicas=W["replicas"], batches=W["batches"], batch_taus=W["batch_taus"], tag="")


def _wrong_one(P: dict, name: str, wm: str, top: PointTuple, long: bool, *, progress: bool) -> Estimates:
    """Wrong model ``wm`` at family ``name``'s largest n ``top`` (cached)."""
    w = _wrong_run(P, name, wm, long)
    seed = named_seed(P["stream"], name, top[0], wm, *(["decide"] if w["tag"] else []))
    return estimates(f"families_wrong_{name}_{wm.replace('*', 'x')}{w['tag']}", [point_of(wm, top)],
                     replicas=w["replicas"], seeds=[seed], batches=w["batches"], burn_taus=P["burn_taus"],
                     batch_taus=w["batch_taus"], taus_of=[top], replacement=not WRONG_MODELS[wm].flip,
                     progress=progress)


def _wrong_models(mode: str, name: str, top: PointTuple, long: bool, *, progress: bool) -> tuple[dict, list]:
    """The wrong models at the family's largest n (``long``: the long tier's, with its wrong-model
    run lengths and its ``decide`` runs, read from results/long outside the long run): (model ->
    Estimates, records read); ({}, []) if results/long lacks one."""
    P = PARAMETERS[mode]
    W = P["long"]["wrong"] if long else P["wrong"]

    def compute():
        return {wm: _wrong_one(P, name, wm, top, long, progress=progress) for wm in W["models"]}

    out, read, _ = long_point(long and long_read_only(mode), compute, LONG_COMMAND)
    return ({}, []) if out is None else (out, read)


def run(mode: str = "full", *, progress: bool = True) -> FamiliesResult:
    """Every estimate of the study for ``mode``.

    Args:
        mode: "full" or "smoke".
        progress: show the simulations' progress.

    Returns:
        A :class:`FamiliesResult`. In full mode the default-tier points' batches are multiplied by
        :func:`qlib.config.scale`; the long-tier points (``PARAMETERS["full"]["long"]``) are computed
        only while ``make results-long`` writes the long tier and read from results/long otherwise
        (a point it lacks is listed in the family's ``missing``).
    """
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    H = P["claims"]["hypotheses"]
    out = []
    for name, fam in P["families"].items():
        a, b = fam["alpha"], fam["beta"]
        pts, est, sd, missing, records = _family_points(mode, name, fam, progress=progress)
        fresh, fresh_missing, fresh_read = _fresh_points(mode, name, fam, progress=progress)
        hyp = [family_hypotheses(n, d, lam, a, b, **H) for n, d, lam in pts]
        design_top = family_point(family_ns(mode, name)[-1], a, b)
        design_hyp = family_hypotheses(*design_top, a, b, **H)
        wrong = {}
        if all(design_hyp[h] for h in ("H0", "H1", "H2", "H3")) and not missing:
            wrong, read = _wrong_models(mode, name, design_top, bool(P["long"]["ns"].get(name)),
                                        progress=progress)
            records += read
        out.append(Family(name=name, alpha=a, beta=b, k=math.ceil(a / b - 1e-12), gamma=gamma(a, b), est=est,
                          sd=sd, wrong=wrong, hyp=hyp, missing=missing,
                          provenance=results.provenance_text(records, LONG_COMMAND),
                          design_hyp=design_hyp, fresh=fresh, fresh_missing=fresh_missing))
    return FamiliesResult(mode=mode, parameters=P, families=out)


# --------------------------------------------------------------------------- statistics

def slope_ci(ns: np.ndarray, p: np.ndarray, low: np.ndarray, high: np.ndarray, *, boot: int, seed: int,
             floor: float = 1e-6) -> tuple[float, float, float]:
    """Slope of log q against log n with a 95% parametric-bootstrap CI, for q = P(max != k) at
    each n with its 95% CI [low, high] (a normal draw of standard error (high - low)/3.92 per
    point, floored at ``floor``). Returns (slope, lower, upper); NaNs with fewer than 2 points."""
    ns, p, low, high = (np.asarray(x, dtype=float) for x in (ns, p, low, high))
    if ns.size < 2:
        return float("nan"), float("nan"), float("nan")
    lx = np.log(ns)
    b = float(np.polyfit(lx, np.log(np.maximum(p, floor)), 1)[0])
    se = np.maximum((high - low) / (2 * 1.959963984540054), 0.0)
    rng = np.random.default_rng(seed)
    draws = np.maximum(p[None] + se[None] * rng.standard_normal((boot, p.size)), floor)
    bs = np.polyfit(lx, np.log(draws).T, 1)[0]
    lo, hi = np.quantile(bs, [0.025, 0.975])
    return b, float(lo), float(hi)


def not_k(f: Family) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(max != k) at every point with its 95% CI (from that of P(max = k))."""
    k = f.k
    return 1 - f.est.max_dist[:, k], 1 - f.est.max_high[:, k], 1 - f.est.max_low[:, k]
