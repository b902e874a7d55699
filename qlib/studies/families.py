"""Study: where the theorems hold — the scaling families lam = 1 - n^(-alpha), d = floor(n^beta).

Brightwell, Fairthorne & Luczak (2018) state, for "suitable pairs" (alpha, beta), that in
equilibrium with probability tending to 1 no queue is longer than k = ceil(alpha/beta) and at
least a fraction 1 - 2 n^(-alpha + (k-1) beta) of the queues have length exactly k
(docs/models.md#scaling-families). The pairs are not spelled out in what this project could
read; docs/models.md#hypotheses states the working hypotheses checked numerically per row:

- H0: alpha, beta in (0, 1], alpha/beta not an integer (k = ceil(alpha/beta) at every n run);
- H1 (regime R1): c = (1-lam) d^(k-1) <= ``c_max`` (the bound 1 - 2c is not vacuous);
- H2 (regime R2 at this n): the fluid maximum is k (n s_(k+1) < 1/2, i.e. (1-lam) d^k >~ log n);
- H3 (buffer over excursion): gamma = 1 - 2 alpha + (k-1) beta > 0. With (almost) no idle queue
  the number of customers N drifts back at rate about (1-lam) n and diffuses at rate about 2n,
  so its excursions are of order 1/(1-lam); the buffer that absorbs them is the
  n (1-lam) d^(k-1) queues shorter than k; their ratio is n (1-lam)^2 d^(k-1) = n^gamma.
  A heuristic, tested here: the measured standard deviation of N is reported beside
  1/(1-lam) and beside the buffer.

Rows along families inside H0-H3 are decided (PASS / FAIL / INCONCLUSIVE) against thresholds
fixed in :data:`PARAMETERS` before the run; rows along families outside them (gamma <= 0, or
H1/H2 failing at the largest n) are *findings*: what is seen, never a PASS.

Every point is an :func:`qlib.supermarket.estimate_equilibrium_many` estimate from empty with a
burn-in of 20 relaxation times (``burn_taus``), then ``batches`` batches of ``batch_taus`` tau
(:func:`qlib.studies.max_length.estimates`); the standard deviation of N comes from a separate
run of ``sd.replicas`` chains from empty (the same burn-in), recorded ``sd.samples`` times over
``sd.taus`` tau. The wrong models (far: JSQ(2), JSQ(d/2); near: d - 1, d x 0.9, the other
sampling rule) run at the largest n of each family inside the hypotheses, with the right
model's clock. Every set of runs draws from its own named stream (:func:`qlib._rng.named_seed`).

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS`, :func:`run`, :data:`CLAIMS`,
:func:`claim_rows`; figures in :mod:`qlib.plots.families`; :func:`findings_markdown` renders the
notebook's findings from the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from qlib import cache
from qlib._rng import named_seed
from qlib.claims import ClaimRow, ClaimSpec, Counterfactual, combine, decide, se_distance
from qlib.config import scale
from qlib.studies import ArrayResult, check_mode
from qlib.studies.max_length import Estimates, estimates, fluid_max_length
from qlib.studies.wrong_models import WRONG_MODELS, point_of, resolution
from qlib.supermarket import fluid_fixed_point, predicted_max_length, relaxation_time, simulate

#: The families: name -> (alpha, beta, ns). ``scaled`` adds n from ``--scale from_scale`` on.
_FULL_FAMILIES = {
    # k = 2, gamma > 0: the largest gamma (buffer/excursion n^0.4), c = (1-lam) d falls slowly (n^-0.1)
    "A": dict(alpha=0.5, beta=0.4, ns=[1_000, 3_000, 10_000]),
    # k = 2, gamma = 0.25, c falls as n^-0.15
    "B": dict(alpha=0.6, beta=0.45, ns=[1_000, 3_000, 10_000]),
    # k = 2, gamma = 0.2, c falls as n^-0.15 and (1-lam) d^k = n^0.35 is large: H2 holds from n = 1e3
    "C": dict(alpha=0.65, beta=0.5, ns=[1_000, 3_000, 10_000]),
    # k = 2, gamma = 0: the family of notebook 01(c) and of the mixing study (on the boundary of H3)
    "D": dict(alpha=0.75, beta=0.5, ns=[1_000, 3_000, 10_000]),
    # k = 2, gamma = -0.1: outside H3
    "E": dict(alpha=0.8, beta=0.5, ns=[1_000, 3_000]),
    # k = 3, gamma = 0.1 (H2 fails below n ~ 1e4: the fluid maximum is k + 1 there)
    "K3": dict(alpha=0.8, beta=0.35, ns=[1_000, 3_000]),
}

PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": {
        "families": {"A": dict(alpha=0.5, beta=0.4, ns=[300, 1_000]), "D": dict(alpha=0.75, beta=0.5, ns=[300]),
                     "K3": dict(alpha=0.8, beta=0.35, ns=[300])},
        "scaled": dict(from_scale=10.0, ns={}, extra={}),
        "replicas": 4, "burn_taus": 20.0, "batch_taus": 10.0, "batches": 1,
        "sd": dict(replicas=2, taus=2.0, samples=50),
        "wrong": dict(replicas=2, batches=1, batch_taus=10.0, models=["jsq2", "d-1"]),
        "claims": dict(p_min=0.95, p_halfwidth_target=0.05, slope_max=0.0, slack=2.0, boot=200,
                       hypotheses=dict(c_max=0.5, gamma_min=0.0)),
        "stream": "families/smoke",
    },
    "full": {
        "families": _FULL_FAMILIES,
        # from --scale 2: n = 1e4 for E and K3; from --scale 10: n = 3e4 and 1e5 for the k = 2 families
        # with gamma >= 0 (~1e10 replica-steps at n = 1e5 for C and D: minutes of a GPU, an hour of this
        # machine), n = 3e4 for E and K3 (their tau grows fast: ~1e11 replica-steps at n = 1e5)
        "scaled": dict(from_scale=10.0, ns={"A": [30_000, 100_000], "B": [30_000, 100_000], "C": [30_000, 100_000],
                                            "D": [30_000, 100_000], "E": [30_000], "K3": [30_000]},
                       extra={"E": [10_000], "K3": [10_000]}, extra_from=2.0),
        "replicas": 8, "burn_taus": 20.0, "batch_taus": 20.0, "batches": 1,
        "sd": dict(replicas=4, taus=10.0, samples=400),
        "wrong": dict(replicas=4, batches=1, batch_taus=10.0,
                      models=["jsq2", "half_d", "d-1", "d*0.9", "other_sampling"]),
        # fixed before the full run (commit "families: PARAMETERS and criteria fixed before the full run")
        "claims": dict(
            # "concentrates": the lower end of the 95% CI of P(max = k) at the largest n is >= 0.95 ...
            p_min=0.95,
            # the precision aimed at: 95% half-width of P(max = k) at the largest n (reported, reached or not)
            p_halfwidth_target=0.025,
            # ... and P(max != k) falls with n: the upper end of the 95% CI of its slope in log n < 0
            slope_max=0.0,
            # "most queues at k" (BFL18): the fraction at k >= 1 - slack (1-lam) d^(k-1) at every point
            slack=2.0,
            boot=2000,
            # where a row is a claim and not a finding (docs/models.md#hypotheses)
            hypotheses=dict(c_max=0.5, gamma_min=0.0)),
        "stream": "families",
    },
}

#: The wrong models (far and near): :data:`qlib.studies.wrong_models.WRONG_MODELS`.


def family_point(n: int, alpha: float, beta: float) -> tuple[int, int, float]:
    """(n, d, lam) = (n, floor(n^beta), 1 - n^-alpha) (d at least 2)."""
    return int(n), max(2, int(math.floor(n**beta + 1e-9))), 1.0 - float(n) ** (-alpha)


def gamma(alpha: float, beta: float) -> float:
    """The exponent of buffer/excursion n (1-lam)^2 d^(k-1) = n^gamma: 1 - 2 alpha + (k-1) beta."""
    k = math.ceil(alpha / beta - 1e-12)
    return 1.0 - 2.0 * alpha + (k - 1) * beta


def family_ns(mode: str, name: str) -> list[int]:
    """The n run for family ``name`` in ``mode``: its ``ns``, plus the ``scaled`` ones from the
    scales that add them."""
    P = PARAMETERS[check_mode(mode)]
    ns = list(P["families"][name]["ns"])
    if mode != "full":
        return ns
    sc = P["scaled"]
    if scale() >= sc.get("extra_from", sc["from_scale"]):
        ns += [n for n in sc["extra"].get(name, []) if n not in ns]
    if scale() >= sc["from_scale"]:
        ns += [n for n in sc["ns"].get(name, []) if n not in ns]
    return sorted(ns)


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
        """1/(1-lam): the heuristic size of N's excursions."""
        return float(1.0 / (1 - self.est.lam[j]))

    def inside(self, j: int | None = None) -> bool:
        """H0-H3 at point j (default: the largest n)."""
        j = self.est.n.size - 1 if j is None else j
        h = self.hyp[j]
        return bool(h["H0"] and h["H1"] and h["H2"] and h["H3"])


@dataclass(frozen=True)
class FamiliesResult:
    """Everything the families section of notebook 01 and its claim rows show."""

    mode: str
    parameters: dict
    families: list

    def family(self, name: str) -> Family:
        return next(f for f in self.families if f.name == name)


def hypotheses(n: int, d: int, lam: float, alpha: float, beta: float, *, c_max: float,
               gamma_min: float) -> dict[str, Any]:
    """The working hypotheses H0-H3 at (n, d, lam) on the family (alpha, beta), each a boolean,
    with the numbers they compare (docs/models.md#hypotheses)."""
    k_fam = math.ceil(alpha / beta - 1e-12)
    k = int(predicted_max_length(d, lam))
    eps = 1.0 - lam
    c = eps * d ** (k - 1)
    fm = fluid_max_length(n, d, lam)
    g = gamma(alpha, beta)
    return {"H0": bool(0 < alpha <= 1 and 0 < beta <= 1 and abs(alpha / beta - round(alpha / beta)) > 1e-9
                       and k == k_fam),
            "H1": bool(c <= c_max), "H2": bool(fm == k), "H3": bool(g > gamma_min),
            "k": k, "c": c, "eps_dk": eps * d**k, "log_n": math.log(n), "fluid_max": fm, "gamma": g,
            "buffer_over_excursion": n * eps**2 * d ** (k - 1)}


def customers_sd(name: str, points: Sequence[tuple[int, int, float]], *, replicas: int, seeds: Sequence[int],
                 burn_taus: float, taus: float, samples: int) -> CustomersSD:
    """The standard deviation of N = sum_i u_i per replica: from empty, ``burn_taus`` tau of
    burn-in, then ``samples`` records over ``taus`` tau. Cached per point."""
    params = [dict(point=list(p), replicas=replicas, burn_taus=burn_taus, taus=taus, samples=samples) for p in points]

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


def run(mode: str = "full", *, progress: bool = True) -> FamiliesResult:
    """Every estimate of the study for ``mode``; full-mode batches are multiplied by
    :func:`qlib.config.scale` (and larger n join from the ``scaled`` scales)."""
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    nb = P["batches"] * (max(1, int(round(scale()))) if mode == "full" else 1)
    H = P["claims"]["hypotheses"]
    out = []
    for name, fam in P["families"].items():
        a, b = fam["alpha"], fam["beta"]
        pts = [family_point(n, a, b) for n in family_ns(mode, name)]
        seeds = [named_seed(P["stream"], name, n) for n, _, _ in pts]
        est = estimates(f"families_{name}", pts, replicas=P["replicas"], seeds=seeds, batches=nb,
                        burn_taus=P["burn_taus"], batch_taus=P["batch_taus"], progress=progress)
        sdp = P["sd"]
        sd = customers_sd(f"families_sd_{name}", pts, replicas=sdp["replicas"],
                          seeds=[named_seed(P["stream"], name, n, "sd") for n, _, _ in pts],
                          burn_taus=P["burn_taus"], taus=sdp["taus"], samples=sdp["samples"])
        hyp = [hypotheses(n, d, lam, a, b, **H) for n, d, lam in pts]
        k = math.ceil(a / b - 1e-12)
        wrong = {}
        if all(hyp[-1][h] for h in ("H0", "H1", "H2", "H3")):
            W = P["wrong"]
            top = pts[-1]
            for wm in W["models"]:
                wp = point_of(wm, top)
                wrong[wm] = estimates(f"families_wrong_{name}_{wm.replace('*', 'x')}", [wp], replicas=W["replicas"],
                                      seeds=[named_seed(P["stream"], name, top[0], wm)], batches=W["batches"],
                                      burn_taus=P["burn_taus"], batch_taus=W["batch_taus"], taus_of=[top],
                                      replacement=not WRONG_MODELS[wm].flip, progress=progress)
        out.append(Family(name=name, alpha=a, beta=b, k=k, gamma=gamma(a, b), est=est, sd=sd, wrong=wrong, hyp=hyp))
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


def _not_k(f: Family) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(max != k) at every point with its 95% CI (from that of P(max = k))."""
    k = f.k
    return 1 - f.est.max_dist[:, k], 1 - f.est.max_high[:, k], 1 - f.est.max_low[:, k]


# --------------------------------------------------------------------------- claim rows

REF = ("Brightwell, Fairthorne & Luczak 2018 (abstract); Brightwell & Luczak arXiv:1201.5523; "
       "docs/models.md#scaling-families")
def methods_markdown(mode: str) -> str:
    """Notebook 01's scaling-families paragraph, its numbers read from PARAMETERS[mode] (the
    thresholds fixed before the run, the run lengths)."""
    P = PARAMETERS[check_mode(mode)]
    H, C, sd = P["claims"]["hypotheses"], P["claims"], P["sd"]
    d0 = [f for f in P["families"].values() if abs(1 - 2 * f["alpha"] + f["beta"]) < 1e-12]
    zero = (f"The family α = {d0[0]['alpha']:g}, β = {d0[0]['beta']:g} of (c) has γ = 0. " if d0 else "")
    return ("Brightwell, Fairthorne & Luczak state the concentration for λ = 1 − n^(−α), d = ⌊n^β⌋ and \"suitable "
            "pairs\" (α, β) (`docs/models.md#scaling-families`). The pairs are not spelled out in what this project "
            "could read, so `qlib.studies.families` states working hypotheses and checks them at every point "
            f"(`docs/models.md#hypotheses`): H0 k = ⌈α/β⌉ away from the boundary; H1 c = (1−λ)d^(k−1) ≤ "
            f"{H['c_max']:g}; H2 the fluid maximum is k at this n; H3 γ = 1 − 2α + (k−1)β > {H['gamma_min']:g}. "
            "H3 is a heuristic: the number of customers N makes excursions of order 1/(1−λ) above its mean, "
            "absorbed by the n(1−λ)d^(k−1) queues shorter than k; buffer over excursion is n^γ. " + zero +
            "Rows inside H0–H3 are decided against thresholds fixed in `families.PARAMETERS` before the run "
            f"(P(max = k) ≥ {C['p_min']:g} at the largest n and a falling P(max ≠ k); the fraction at k ≥ 1 − "
            f"{C['slack']:g}(1−λ)d^(k−1)); rows outside are findings. Every point: `estimate_equilibrium` from "
            f"empty, {P['burn_taus']:g} τ of burn-in, {P['batches']} batch(es) of {P['batch_taus']:g} τ, "
            f"{P['replicas']} replicas; the standard deviation of N from {sd['replicas']} more replicas recorded "
            f"over {sd['taus']:g} τ ({mode} mode).")


def _start(parameters: dict) -> str:
    """How the runs began, from the burn-in in PARAMETERS (the one place it is set)."""
    return f"empty; {parameters['burn_taus']:g} τ burn-in"


def _fam_text(f: Family) -> str:
    ns = ", ".join(f"{int(n):.0e}".replace("e+0", "e") for n in f.ns)
    return (f"family {f.name}: lam = 1 - n^-{f.alpha:g}, d = floor(n^{f.beta:g}), k = {f.k}, "
            f"gamma = {f.gamma:+.2f}; n = {ns}")


def _hyp_text(f: Family) -> str:
    parts = []
    for j, h in enumerate(f.hyp):
        bad = [x for x in ("H0", "H1", "H2", "H3") if not h[x]]
        parts.append(f"n={int(f.ns[j])}: c = {h['c']:.2f}, (1-lam) d^k = {h['eps_dk']:.1f} (log n = {h['log_n']:.1f}), "
                     f"fluid max {h['fluid_max']}, buffer/excursion {h['buffer_over_excursion']:.2g}"
                     + (f" [outside: {', '.join(bad)}]" if bad else " [H0-H3 hold]"))
    return "; ".join(parts)


def _measured_max(f: Family) -> str:
    return "; ".join(f"n={int(f.ns[j])}: P(max = {f.k}) = {f.p_k(j)[0]:.3f} ({f.p_k(j)[1]:.3f} to {f.p_k(j)[2]:.3f}), "
                     f"P(max = {f.k + 1}) = {f.p_k1(j)[0]:.3f}" for j in range(f.ns.size))


def _wrong_rows(f: Family, judge: Callable[[Estimates, int], tuple[str, str, float | None]]) -> tuple:
    cfs = []
    for wm, e in f.wrong.items():
        far, label = WRONG_MODELS[wm].far, WRONG_MODELS[wm].label
        v, text, se = judge(e, 0)
        # a wrong model is rejected only when the criterion FAILs on it: an INCONCLUSIVE one is not
        # told apart (so it counts as passing: conservative for soundness and resolution)
        cfs.append(Counterfactual(f"{label} (d = {int(e.d[0])}) at n = {int(e.n[0])}, same steps, {int(e.replicas[0])} "
                                  "replicas", f"{text} [{v}]", v != "FAIL", near=not far, se_distance=se))
    return tuple(cfs)



def concentration_rows(result: FamiliesResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Per family: P(max != k) falls with n (slope CI below ``slope_max``) and P(max = k) >= p_min
    at the largest n (lower CI end); a finding outside the hypotheses."""
    C = result.parameters["claims"]
    thr = spec.threshold_text(result.parameters)
    rows = []
    for f in result.families:
        q, qlo, qhi = _not_k(f)
        b, blo, bhi = slope_ci(f.ns, q, qlo, qhi, boot=C["boot"], seed=named_seed(result.parameters["stream"], f.name,
                                                                                   "slope"))
        p, plo, phi = f.p_k(f.ns.size - 1)
        v_p = decide(plo, phi, C["p_min"])
        v_s = decide(blo, bhi, C["slope_max"], above=False) if math.isfinite(blo) else "INCONCLUSIVE"
        inside = f.inside()
        outcome = combine([v_p, v_s]) if inside else "finding"

        def judge(e, j, k=f.k):
            lo, hi, m = float(e.max_low[j, k]), float(e.max_high[j, k]), float(e.max_dist[j, k])
            return (decide(lo, hi, C["p_min"]), f"P(max = {k}) = {m:.3f} ({lo:.3f} to {hi:.3f})",
                    se_distance(m, lo, hi, C["p_min"]))

        cfs = _wrong_rows(f, judge)
        rows.append(ClaimRow(
            claim=spec.claim.format(k=f.k) + ("" if inside else " — outside the hypotheses: a finding"),
            parameters=f"{_fam_text(f)}; {int(f.est.replicas[0])} replicas. Hypotheses: {_hyp_text(f)}",
            theory=f"P(max = k) -> 1 as n -> oo (k = ceil(alpha/beta) = {f.k}) for suitable pairs",
            measured=f"{_measured_max(f)}; slope of log P(max != k) in log n: {b:.2f} (95% CI {blo:.2f} to {bhi:.2f}); "
                     f"half-width of P(max = k) at the largest n {(phi - plo) / 2:.3f} (target "
                     f"{C['p_halfwidth_target']:g}: {'reached' if (phi - plo) / 2 <= C['p_halfwidth_target'] else 'not reached'} "
                     f"within the step budget of {result.parameters['batches']} x {result.parameters['batch_taus']:g} τ)",
            passed=outcome == "PASS", outcome=outcome, criterion=spec.criterion_text(result.parameters), threshold=thr,
            taus=float(f.est.taus.min()), start=_start(result.parameters), reference=spec.reference, counterfactuals=cfs,
            resolution=resolution(cfs)))
    return rows


def most_at_k_rows(result: FamiliesResult, spec: ClaimSpec) -> list[ClaimRow]:
    """Per family: the fraction of queues at k >= 1 - slack (1-lam) d^(k-1) at every point."""
    C = result.parameters["claims"]
    rows = []
    for f in result.families:
        k = f.k
        vs, parts = [], []
        judged = [j for j, h in enumerate(f.hyp) if h["H0"] and h["H1"] and h["H3"]]
        for j in range(f.ns.size):
            bound = 1 - C["slack"] * f.c(j)
            lo, hi, m = float(f.est.p_low[j, k]), float(f.est.p_high[j, k]), float(f.est.p[j, k])
            if j in judged:
                vs.append(decide(lo, hi, bound))
            parts.append(f"n={int(f.ns[j])}: {m:.3f} ({lo:.3f} to {hi:.3f}) vs {bound:.3f}"
                         + ("" if j in judged else " (outside H0, H1, H3: not judged)"))
        inside = bool(judged)
        outcome = combine(vs) if inside else "finding"

        def judge(e, j, kk=k):
            bound = 1 - C["slack"] * f.c(f.ns.size - 1)
            lo, hi, m = float(e.p_low[j, kk]), float(e.p_high[j, kk]), float(e.p[j, kk])
            return (decide(lo, hi, bound), f"{m:.3f} ({lo:.3f} to {hi:.3f}) vs {bound:.3f}",
                    se_distance(m, lo, hi, bound))

        cfs = _wrong_rows(f, judge)
        rows.append(ClaimRow(
            claim=spec.claim.format(k=k) + ("" if inside else " — outside the hypotheses: a finding"),
            parameters=f"{_fam_text(f)}; {int(f.est.replicas[0])} replicas",
            theory=f"fraction at k >= 1 - 2 n^(-alpha+(k-1)beta) ~ 1 - 2 (1-lam) d^(k-1) (BFL18), fluid 1 - (1-lam) d^(k-1)",
            measured="; ".join(parts), passed=outcome == "PASS", outcome=outcome, criterion=spec.criterion_text(result.parameters),
            threshold=spec.threshold_text(result.parameters),
            taus=float(f.est.taus.min()), start=_start(result.parameters), reference=spec.reference, counterfactuals=cfs,
            resolution=resolution(cfs)))
    return rows


def buffer_rows(result: FamiliesResult, spec: ClaimSpec) -> list[ClaimRow]:
    """One finding over all families: the standard deviation of N against 1/(1-lam) and the
    buffer, and P(max != k) against buffer/excursion (a heuristic, not a theorem)."""
    parts = []
    for f in result.families:
        for j in range(f.ns.size):
            sd = f.sd.sd[j]
            parts.append(f"{f.name} n={int(f.ns[j])}: SD(N) = {sd.mean():.3g} (replicas {sd.min():.3g} to {sd.max():.3g}) "
                         f"= {sd.mean() * (1 - f.est.lam[j]):.2f}/(1-lam), buffer/SD(N) = {f.buffer(j) / sd.mean():.2g}, "
                         f"P(max != k) = {1 - f.p_k(j)[0]:.3f}")
    return [ClaimRow(
        claim=spec.claim, parameters="every point of every family; SD(N) from "
        f"{int(result.parameters['sd']['replicas'])} replicas x {result.parameters['sd']['samples']} records over "
        f"{result.parameters['sd']['taus']:g} τ after 20 τ from empty",
        theory="heuristic: SD(N) ~ 1/(1-lam); buffer n (1-lam) d^(k-1); buffer/excursion = n^gamma",
        measured="; ".join(parts), passed=False, outcome="finding", criterion=spec.criterion_text(result.parameters),
        threshold=spec.threshold_text(result.parameters), taus=float(min(f.sd.taus.min() for f in result.families)),
        start=_start(result.parameters), reference=spec.reference)]


#: The study's claims, as data: one spec per claim (criterion, PARAMETERS keys of its
#: thresholds, wrong models, the function that makes its rows).
CLAIMS: dict[str, ClaimSpec] = {
    "concentration": ClaimSpec(
        key="concentration", claim="the maximum queue length concentrates on k = {k}",
        criterion="inside H0-H3 at the largest n: the lower end of the 95% CI of P(max = k) at the largest n "
                  ">= p_min, and the upper end of the 95% bootstrap CI of the slope of log P(max != k) in log n "
                  "< slope_max (PASS: both decided; FAIL: either decided against; INCONCLUSIVE: a CI straddles); "
                  "outside: a finding",
        thresholds=(("p_min",), ("slope_max",), ("p_halfwidth_target",), ("hypotheses", "c_max"),
                    ("hypotheses", "gamma_min")),
        threshold="P(max = k) lower 95% end >= {p_min:g} at the largest n; slope upper 95% end < {slope_max:g}",
        wrong_models=("jsq2", "half_d", "d-1", "d*0.9", "other_sampling"), rows=concentration_rows, reference=REF),
    "most_at_k": ClaimSpec(
        key="most_at_k", claim="most queues have length exactly k = {k}: a fraction >= 1 - 2(1-lam) d^(k-1)",
        criterion="at every point inside H0, H1, H3 (a finding if there is none): the lower end of the 95% CI of the fraction at k >= "
                  "1 - slack (1-lam) d^(k-1) at every n (FAIL: an upper end below; INCONCLUSIVE: a CI straddles); "
                  "outside: a finding",
        thresholds=(("slack",), ("hypotheses", "c_max"), ("hypotheses", "gamma_min")),
        threshold="bound 1 - {slack:g} (1-lam) d^(k-1) at every point (lower 95% end)",
        wrong_models=("jsq2", "half_d", "d-1", "d*0.9", "other_sampling"), rows=most_at_k_rows, reference=REF),
    "buffer": ClaimSpec(
        key="buffer", claim="the buffer/excursion heuristic: SD(N) against 1/(1-lam) and the buffer n (1-lam) d^(k-1)",
        criterion="a finding: the measured standard deviation of N and P(max != k) beside buffer/excursion",
        threshold="— (a finding: no threshold)",
        rows=buffer_rows, reference="docs/models.md#hypotheses"),
}


def claim_rows(result: FamiliesResult) -> list[ClaimRow]:
    """The rows of every spec of :data:`CLAIMS`, in order."""
    rows: list[ClaimRow] = []
    for spec in CLAIMS.values():
        rows.extend(spec.rows(result, spec))
    return rows


# --------------------------------------------------------------------------- notebook prose

def summary_table(result: FamiliesResult) -> list[dict[str, Any]]:
    """One dict per (family, n): the numbers the notebook and the report quote."""
    out = []
    for f in result.families:
        for j in range(f.ns.size):
            p, lo, hi = f.p_k(j)
            p1 = f.p_k1(j)
            s = fluid_fixed_point(int(f.est.d[j]), float(f.est.lam[j]), f.k + 2)
            out.append(dict(family=f.name, alpha=f.alpha, beta=f.beta, k=f.k, gamma=f.gamma, n=int(f.ns[j]),
                            d=int(f.est.d[j]), p_k=p, p_k_low=lo, p_k_high=hi, p_k1=p1[0], p_k1_low=p1[1],
                            p_k1_high=p1[2], frac_k=float(f.est.p[j, f.k]), frac_k_low=float(f.est.p_low[j, f.k]),
                            frac_k_high=float(f.est.p_high[j, f.k]), c=f.c(j),
                            tail_k1=float(f.est.tail[j, f.k + 1]), fluid_k1=float(s[f.k + 1]),
                            sd_n=float(f.sd.sd[j].mean()), excursion=f.excursion(j), buffer=f.buffer(j),
                            inside=bool(f.inside(j)), taus=float(f.est.taus[j])))
    return out


def findings_markdown(result: FamiliesResult) -> str:
    """The notebook's "what the families show", rendered from the result (no number typed by hand)."""
    rows = summary_table(result)
    lines = ["| family | alpha, beta | k | gamma | n | d | P(max = k) (95% CI) | P(max = k+1) | fraction at k "
             "| 1 - 2c | E[u_(k+1)]/n / fluid s_(k+1) | SD(N)·(1-lam) | buffer/SD(N) | H0-H3 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["tail_k1"] / r["fluid_k1"] if r["fluid_k1"] > 0 else float("inf")
        lines.append(f"| {r['family']} | {r['alpha']:g}, {r['beta']:g} | {r['k']} | {r['gamma']:+.2f} | {r['n']} | "
                     f"{r['d']} | {r['p_k']:.3f} ({r['p_k_low']:.3f} to {r['p_k_high']:.3f}) | {r['p_k1']:.3f} | "
                     f"{r['frac_k']:.3f} | {1 - 2 * r['c']:.3f} | {ratio:.3g} | {r['sd_n'] / r['excursion']:.2f} | "
                     f"{r['buffer'] / r['sd_n']:.2g} | {'yes' if r['inside'] else 'no'} |")
    rws = claim_rows(result)
    conc = [r for r in rws if r.claim.startswith("the maximum")]
    lines += ["", "Verdicts of the concentration rows, fixed criteria (see the claims table): "
              + "; ".join(f"{f.name}: **{r.verdict}**" for f, r in zip(result.families, conc)) + "."]
    return "\n".join(lines)


__all__ = ["methods_markdown", "PARAMETERS", "CLAIMS", "WRONG_MODELS", "Family", "FamiliesResult", "CustomersSD", "run", "claim_rows",
           "family_point", "family_ns", "gamma", "hypotheses", "slope_ci", "summary_table", "findings_markdown",
           "customers_sd"]
