"""The k = 3 study's runs, stored in pieces (issue 46): at each point the bottom/top certification
pairs, the burn-in of the sample chain, its blocks of spaced samples and the blocks of meeting
pairs are entries of their own, so a kill loses at most one piece and a rerun resumes bit for bit.

The sample chain of a point is one chain from the fluid point: burned in for ``burn_factor`` times
the largest bottom/top meeting time (certified: d_TV(sample, pi) <= P(T_bt > burn) + pi(a queue
above k + 1)), then advanced one spacing (``spacing_tau_int`` predicted tau_int(N)) at a time; its
state after each spacing is a sample, and each spacing's time averages (the fraction of queues at
each length, the fraction of time the maximum is each length) are a batch of the stationary run.
A piece of samples continues the chain from the previous piece's final counts and random state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from qlib import results
from qlib._rng import named_seed
from qlib.results import cache
from qlib.studies import check_mode, long_points_read
from qlib.studies.k3.parameters import PARAMETERS, DesignPoint, k_of, piece_costs
from qlib.studies.wrong_models import point_of
from qlib.supermarket import initial_counts, meeting_times_many, simulate
from qlib.supermarket.linear_noise import linear_noise
from qlib.supermarket.mixing_law import predicted_meeting_time
from qlib.supermarket.point import Point
from qlib.supermarket.regime import hypotheses
from qlib.supermarket.result import SupermarketResult

#: the command that computes the full mode (the long tier)
LONG_COMMAND = "make results-long ONLY=k3"
#: levels kept in every stored array (k = 3: lengths 0..7 hold every queue of a certified sample)
LEVELS = 8


def _pad(x: np.ndarray, width: int = LEVELS) -> np.ndarray:
    """``x`` (..., L) cut or zero-padded to ``width`` levels along its last axis."""
    x = np.asarray(x)
    if x.shape[-1] > width and np.any(x[..., width:]):
        raise ValueError(f"a queue longer than {width - 1} at a k = 3 point: raise LEVELS ({width})")
    out = np.zeros(x.shape[:-1] + (width,), dtype=x.dtype)
    w = min(width, x.shape[-1])
    out[..., :w] = x[..., :w]
    return out


def continued(
    pt: tuple[int, int, float], counts: np.ndarray, state: np.ndarray, seed: int
) -> SupermarketResult:
    """A one-replica result holding ``counts`` and random ``state``: passed as ``initial`` to
    :func:`qlib.supermarket.simulate`, the chain goes on exactly where a stored piece left it."""
    z = np.zeros((1, LEVELS))
    return SupermarketResult(
        point=Point(*pt),
        steps=0,
        burn_in=0,
        seed=int(seed),
        tail_fraction=z,
        max_length=np.zeros(1, int),
        max_length_distribution=z,
        counts=np.asarray(counts, np.int64).reshape(1, -1),
        batch_tail_fraction=z[:, None],
        state=np.asarray(state, np.uint64).reshape(1),
    )


def spacing_of(pt: tuple[int, int, float], P: dict) -> int:
    """Steps between samples: ``spacing_tau_int`` times the predicted tau_int(N)."""
    return max(1, int(math.ceil(P["spacing_tau_int"] * linear_noise(*pt).tau_int_steps)))


def cap_of(pt: tuple[int, int, float], P: dict) -> int:
    """A meeting's cap: ``cap_factor`` times T_pred (an unmet pair is inf and fails its row)."""
    return int(P["cap_factor"] * predicted_meeting_time(*pt).steps)


# --------------------------------------------------------------------------- the pieces


def cert_pair(pt, *, seed: int, cap: int) -> dict[str, np.ndarray]:
    """One bottom/top pair (all-empty, every queue at k + 1) run until it meets: ``T_bt`` (1,)."""
    T = meeting_times_many(
        [pt], replicas=1, top_length=k_of(pt) + 1, max_steps=[cap], seeds=[seed], progress=False
    )[0]
    return {"T_bt": np.asarray(T, float)}


def burn(pt, *, seed: int, steps: int) -> dict[str, np.ndarray]:
    """The sample chain from the fluid point, ``steps`` steps: its final ``counts`` and ``state``."""
    r = simulate(*pt, steps=max(1, steps), seed=seed, initial="fluid", progress=False)
    return {"counts": _pad(r.counts), "state": np.asarray(r.state, np.uint64), "steps": np.array([steps])}


def sample_block(pt, *, prev: dict, seed: int, samples: int, spacing: int) -> dict[str, np.ndarray]:
    """``samples`` spacings of the sample chain continued from ``prev`` (a burn or block piece):
    ``samples`` (samples, L) the state after each spacing, ``tail`` and ``max_dist`` (samples, L) each
    spacing's time averages of u_i/n and of 1{max = i}, and the final ``counts`` and ``state``."""
    res = continued(pt, prev["counts"], prev["state"], seed)
    out_s, tail, mx = [], [], []
    for _ in range(samples):
        res = simulate(*pt, steps=spacing, initial=res, progress=False)
        out_s.append(_pad(res.counts[0]))
        tail.append(_pad(res.tail_fraction[0]))
        mx.append(_pad(res.max_length_distribution[0]))
    return {
        "samples": np.stack(out_s),
        "tail": np.stack(tail),
        "max_dist": np.stack(mx),
        "counts": out_s[-1][None],
        "state": np.asarray(res.state, np.uint64),
    }


def meeting_block(pt, samples: np.ndarray, *, seed: int, cap: int, run_as=None) -> dict[str, np.ndarray]:
    """Meeting times (pairs,) of the chain from the fluid point of ``pt`` with chains from ``samples``
    (pairs, L), driven by the same draws (unordered coupling; inf = not met within ``cap``);
    ``run_as``: the point whose dynamics drive both (a wrong model)."""
    x = initial_counts(*pt, "fluid")
    T = meeting_times_many(
        [run_as or pt],
        replicas=samples.shape[0],
        top_length=0,
        max_steps=[cap],
        seeds=[seed],
        bottom=[x],
        top=[{"counts": np.asarray(samples, np.int64)}],
        ordered=False,
        progress=False,
    )[0]
    return {"T": np.asarray(T, float)}


def half_max_block(pt, samples: np.ndarray, *, seed: int, steps: int) -> dict[str, np.ndarray]:
    """JSQ(d/2) run from ``samples`` (replicas, L) at the same n and lam: ``steps`` steps of burn-in,
    then ``steps`` measured: ``max_dist`` (replicas, L) the fraction of time the maximum is each length
    and ``tail`` the time averages of u_i/n."""
    half = point_of("half_d", pt)
    r = simulate(
        *half,
        steps=steps,
        burn_in=steps,
        replicas=samples.shape[0],
        seed=seed,
        initial=np.asarray(samples, np.int64),
        progress=False,
    )
    return {"max_dist": _pad(r.max_length_distribution), "tail": _pad(r.tail_fraction)}


# --------------------------------------------------------------------------- the store, piece by piece


class Clock:
    """The study's progress: one line per computed piece with the ETA of the whole study, the a-priori
    seconds of the pieces left (:func:`qlib.studies.k3.parameters.piece_costs`) scaled by the ratio of
    measured to a-priori seconds over the pieces done here."""

    def __init__(self, P: dict, out: Callable = print):
        self.left = {(c["name"], c["point"], i): c["seconds"] for i, c in enumerate(piece_costs(P))}
        self.order = {}
        for key in self.left:
            self.order.setdefault(key[:2], []).append(key)
        self.out, self.spent, self.expected, self.count = out, 0.0, 0.0, 0

    def _take(self, name: str, j: int) -> float:
        keys = self.order.get((name, j), [])
        return self.left.pop(keys.pop(0), 0.0) if keys else 0.0

    def skip(self, name: str, j: int) -> None:
        self._take(name, j)

    def tick(self, name: str, j: int, seconds: float) -> None:
        self.expected += self._take(name, j)
        self.spent += seconds
        self.count += 1
        scale = self.spent / self.expected if self.expected > 0 else 1.0
        eta = scale * sum(self.left.values())
        self.out(
            f"[qlib] k3: {name} point {j} piece done in {seconds / 60:.1f} min ({self.count} computed, "
            f"{len(self.left)} left, measured/expected {scale:.2f}); ETA of the study {eta / 60:.0f} min",
            flush=True,
        )


def _piece(ctx: dict, name: str, j: int, params: dict, seed: int, compute: Callable[[], dict]) -> dict | None:
    """One stored entry: read (full mode outside the long tier: results/long only, None if absent),
    or computed once and stored (the long tier, smoke mode)."""
    if ctx["read_only"]:  # results/long only, its records noted as the rows' data (qlib.criteria)
        try:
            with cache.stored_only("long") as read:
                got = cache.look_up(name, params, seed)
        except cache.NotStored:
            return None
        ctx["records"].extend(read)
        return got
    if results.lookup(name, params, seed) is not None:
        ctx["clock"].skip(name, j)

    def timed(idx):
        t0 = time.perf_counter()
        out = compute()
        ctx["clock"].tick(name, j, time.perf_counter() - t0)
        return [out]

    timed.__module__ = __name__
    return cache.cached_points(name, [params], [seed], timed, group=1)[0]


@dataclass(frozen=True)
class PointRuns:
    """Everything measured at one point (nan / empty where the long tier lacks a piece):
    ``T_bt`` (cert_pairs,), ``burn`` steps, ``certified`` (every pair met), ``samples`` (S, L),
    ``tail`` and ``max_dist`` (S, L) per spacing, ``T`` (pairs,) meeting times from the samples,
    ``T_half`` JSQ(d/2) meeting times (mixing set, first point) and ``half_max_dist`` (replicas, L)
    JSQ(d/2)'s maximum (maximum set) and ``half_tail`` its time averages of u_i/n; ``missing`` the
    number of pieces the long tier lacks."""

    n: int
    d: int
    lam: float
    replicas: int
    spacing: int
    T_bt: np.ndarray
    burn: float
    certified: bool
    samples: np.ndarray
    tail: np.ndarray
    max_dist: np.ndarray
    T: np.ndarray
    T_half: np.ndarray
    half_max_dist: np.ndarray
    half_tail: np.ndarray
    missing: int

    @property
    def point(self) -> tuple[int, int, float]:
        return self.n, self.d, self.lam

    @property
    def k(self) -> int:
        return k_of(self.point)


def point_runs(ctx: dict, tag: str, j: int, dp: DesignPoint) -> PointRuns:
    """Every piece of one point, in order: certification pairs, burn-in, sample blocks, then (mixing)
    meeting blocks and JSQ(d/2) meetings at the first point, or (maximum) JSQ(d/2)'s maximum."""
    P, stream = ctx["P"], ctx["P"]["stream"]
    pt = dp.point
    base = dict(point=list(pt))
    missing = 0
    cap = cap_of(pt, P)
    T_bt = []
    for i in range(P["cert_pairs"]):
        s = named_seed(stream, tag, j, "cert", i)
        got = _piece(
            ctx,
            f"k3_{tag}_cert",
            j,
            dict(base, pair=i, cap=2 * cap),
            s,
            lambda s=s: cert_pair(pt, seed=s, cap=2 * cap),
        )
        T_bt.append(got["T_bt"][0] if got is not None else np.nan)
        missing += got is None
    T_bt = np.array(T_bt)
    certified = bool(np.all(np.isfinite(T_bt)))
    spacing = spacing_of(pt, P)
    nan = np.full(dp.replicas, np.nan)
    empty = dict(
        samples=np.zeros((0, LEVELS)),
        tail=np.zeros((0, LEVELS)),
        max_dist=np.zeros((0, LEVELS)),
        T=nan,
        T_half=np.zeros(0),
        half_max_dist=np.zeros((0, LEVELS)),
        half_tail=np.zeros((0, LEVELS)),
    )
    if not certified:  # no burn-in can be set: the rest of the point waits for its certification
        left = 1 + math.ceil(dp.replicas / P["piece_samples"])
        return PointRuns(*pt, dp.replicas, spacing, T_bt, np.nan, False, missing=missing + left, **empty)
    n_burn = int(math.ceil(P["burn_factor"] * np.max(T_bt)))
    chain_seed = named_seed(stream, tag, j, "chain")
    prev = _piece(
        ctx,
        f"k3_{tag}_burn",
        j,
        dict(base, burn=n_burn),
        chain_seed,
        lambda: burn(pt, seed=chain_seed, steps=n_burn),
    )
    blocks = []
    per = P["piece_samples"]
    for b in range(math.ceil(dp.replicas / per)):
        if prev is None:
            missing += 1
            continue
        size = min(per, dp.replicas - b * per)
        prev = _piece(
            ctx,
            f"k3_{tag}_samples",
            j,
            dict(base, burn=n_burn, spacing=spacing, block=b, samples=size, per=per),
            chain_seed,
            lambda prev=prev, size=size: sample_block(
                pt, prev=prev, seed=chain_seed, samples=size, spacing=spacing
            ),
        )
        if prev is not None:
            blocks.append(prev)
        else:
            missing += 1
    cat = lambda f: np.concatenate([b[f] for b in blocks]) if blocks else empty[f]  # noqa: E731
    samples = cat("samples")
    out = dict(
        samples=samples,
        tail=cat("tail"),
        max_dist=cat("max_dist"),
        T=nan,
        T_half=np.zeros(0),
        half_max_dist=np.zeros((0, LEVELS)),
        half_tail=np.zeros((0, LEVELS)),
    )
    have = samples.shape[0] == dp.replicas
    src = dict(burn=n_burn, spacing=spacing)
    if tag == "mixing":
        T = []
        pp = P["piece_pairs"]
        for b in range(math.ceil(dp.replicas / pp)):
            s = named_seed(stream, tag, j, "meet", b)
            got = (
                _piece(
                    ctx,
                    "k3_mixing_meet",
                    j,
                    dict(base, **src, block=b, pairs=pp, cap=cap),
                    s,
                    lambda s=s, b=b: meeting_block(pt, samples[b * pp : (b + 1) * pp], seed=s, cap=cap),
                )
                if have
                else None
            )
            T.append(got["T"] if got is not None else np.full(min(pp, dp.replicas - b * pp), np.nan))
            missing += got is None
        out["T"] = np.concatenate(T)
        if j == 0:
            half = point_of("half_d", pt)
            hcap = cap_of(half, P)
            Th = []
            for b in range(math.ceil(P["half_pairs"] / pp)):
                s = named_seed(stream, tag, j, "half", b)
                sl = samples[(b * pp) % max(1, dp.replicas) :][:pp]
                got = (
                    _piece(
                        ctx,
                        "k3_mixing_half",
                        j,
                        dict(base, **src, block=b, pairs=pp, cap=hcap),
                        s,
                        lambda s=s, sl=sl: meeting_block(pt, sl, seed=s, cap=hcap, run_as=half),
                    )
                    if have
                    else None
                )
                Th.append(got["T"] if got is not None else np.full(pp, np.nan))
                missing += got is None
            out["T_half"] = np.concatenate(Th)
    else:
        half = point_of("half_d", pt)
        steps = int(predicted_meeting_time(*half).steps) // 2  # half burned in, half measured
        s = named_seed(stream, tag, j, "half")
        R = P["half_max"]
        got = (
            _piece(
                ctx,
                "k3_maximum_half",
                j,
                dict(base, **src, replicas=R, steps=steps),
                s,
                lambda: half_max_block(pt, samples[:R], seed=s, steps=steps),
            )
            if have
            else None
        )
        out["half_max_dist"] = got["max_dist"] if got is not None else np.zeros((0, LEVELS))
        out["half_tail"] = got["tail"] if got is not None else np.zeros((0, LEVELS))
        missing += got is None
    return PointRuns(*pt, dp.replicas, spacing, T_bt, float(n_burn), certified, missing=missing, **out)


@dataclass(frozen=True)
class K3Result:
    """The study for one ``mode``: ``mixing`` and ``maximum`` (one :class:`PointRuns` per design
    point), the hypotheses at each point (``hyp_mixing``, ``hyp_maximum``) and where the long-tier
    entries read came from (``provenance``; empty when computed here)."""

    mode: str
    parameters: dict
    mixing: list
    maximum: list
    hyp_mixing: list
    hyp_maximum: list
    provenance: str = ""

    @property
    def missing(self) -> int:
        """Pieces the long tier lacks (0 when every row can be judged)."""
        return sum(p.missing for p in self.mixing + self.maximum)


def order(P: dict) -> list[tuple[str, int, DesignPoint]]:
    """The order of computation: the cheap mixing points, the maximum point, the costliest last,
    so a run cut short keeps whole points."""
    mix = list(enumerate(P["mixing"]))
    by_cost = sorted(mix, key=lambda t: t[1].n * t[1].d ** 2)
    return (
        [("mixing", j, dp) for j, dp in by_cost[:-1]]
        + [("maximum", j, dp) for j, dp in enumerate(P["maximum"])]
        + [("mixing", j, dp) for j, dp in by_cost[-1:]]
    )


def run(mode: str = "full", *, progress: bool = True, only: Sequence[str] | None = None) -> K3Result:
    """Compute (smoke mode, or full mode while ``make results-long`` writes the long tier) or read
    (full mode otherwise: from results/long only) every piece of the study.

    Args:
        mode: "full" or "smoke".
        progress: print one line per computed piece with the study's ETA.
        only: compute only these sets ("mixing", "maximum"); the others are read as stored.

    Returns:
        A :class:`K3Result`; pieces the long tier lacks are counted in ``missing``.
    """
    mode = check_mode(mode)
    P = PARAMETERS[mode]
    quiet = not progress and results.write_tier() != "long"
    ctx = dict(
        P=P,
        records=[],
        read_only=long_points_read(mode),
        clock=Clock(P, out=(lambda *a, **k: None) if quiet else print),
    )
    got: dict[tuple[str, int], PointRuns] = {}
    for tag, j, dp in order(P):
        sub = dict(ctx, read_only=True) if only and tag not in only else ctx
        got[(tag, j)] = point_runs(sub, tag, j, dp)
    H = P["claims"]["hypotheses"]
    return K3Result(
        mode=mode,
        parameters=P,
        mixing=[got[("mixing", j)] for j in range(len(P["mixing"]))],
        maximum=[got[("maximum", j)] for j in range(len(P["maximum"]))],
        hyp_mixing=[hypotheses(*dp.point, **H) for dp in P["mixing"]],
        hyp_maximum=[hypotheses(*dp.point, **H) for dp in P["maximum"]],
        provenance=results.provenance_text(ctx["records"], LONG_COMMAND),
    )


def long_cost() -> float:
    """Replica-steps of every piece of the full mode, a priori (the long tier's ETA; an upper bound
    once some pieces are stored: the study's own clock counts what is left)."""
    return float(sum(c["steps"] for c in piece_costs(PARAMETERS["full"])))
