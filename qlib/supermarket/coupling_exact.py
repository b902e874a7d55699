"""Exact meeting-time law of the monotone coupling for small n: the test oracle of
:mod:`qlib.supermarket.coupling`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from qlib import _validate as V
from qlib.supermarket.point import Point
from qlib.supermarket.theory import all_sampled_at_least

__all__ = ["ExactCoupling", "exact_coupling"]


@dataclass(frozen=True)
class ExactCoupling:
    """Exact law of the coupled pair (bottom, top) for small n (see :func:`exact_coupling`).

    ``survival[t]`` = P(T_meet > t), t = 0..steps; ``mean`` = E[T_meet]; ``bottom_law[t, v]``
    and ``top_law[t, v]`` = P(u_level = v) for each chain at step t.
    """

    survival: np.ndarray
    mean: float
    bottom_law: np.ndarray
    top_law: np.ndarray
    states: int


def _level_exact(u: tuple, arrival: bool, x: float, n: int, g) -> int:
    """The chain's level rule in exact arithmetic: x is U (arrival) or the rank r (departure)."""
    if arrival:
        return sum(1 for ui in u if x < g[ui])
    return sum(1 for ui in u if x < ui)


def exact_coupling(n: int, d: int, lam: float, *, bottom: Sequence[int], top: Sequence[int],
                   steps: int, level: int = 1, cap: int = 12, replacement: bool = True) -> ExactCoupling:
    """Exact meeting-time law of the monotone coupling, for small n (the test oracle).

    The pair (bottom, top) of count vectors u_1..u_cap is a Markov chain: with probability
    lam/(1+lam) both see the same arrival uniform U, otherwise the same departure rank r,
    uniform on {0..n-1}. Levels touched are as in the chain kernel: #{i: U < g(u_i)} and
    #{i: r < u_i}. For each event, the pair's next state is constant on the intervals between
    the breakpoints g(u_i), g(u'_i), so transition probabilities are exact interval lengths.
    Arrivals at length ``cap`` are lost (keep ``cap`` well above every length you expect).
    ``bottom``/``top`` are counts u_0..u_m (u_0 = n). Returns an :class:`ExactCoupling`.

    Args:
        n, d, lam, replacement: the point (small n).
        bottom, top: the starts, counts u_0..u_m (u_0 = n).
        steps: steps of the law to compute.
        level: the level whose laws are reported.
        cap: the largest length kept, in [1, 40].

    Returns:
        An :class:`ExactCoupling`.

    Raises:
        ValueError: naming the parameter out of its range, or ``steps`` when the laws would not fit.
    """
    point = Point.simulation(n, d, lam, replacement=replacement)
    n, d, lam, replacement = point.n, point.d, point.lam, point.replacement
    steps = V.integer("steps", steps, low=0)
    cap = V.integer("cap", cap, low=1, high=40)
    level = V.integer("level", level, low=1, high=cap)
    if n > 6:
        raise ValueError(f"n must be an integer in [1, 6] for the exact pair chain; got {n}")
    g = all_sampled_at_least(np.arange(n + 1) / n, d, replacement=replacement, n=n)

    V.memory("steps", 8.0 * (steps + 1) * (2 * n + 3), f"the laws at {steps + 1} steps")
    start = (_start_counts("bottom", bottom, n, cap), _start_counts("top", top, n, cap))
    if any(a > b for a, b in zip(*start)):
        raise ValueError("bottom must be <= top in every count")
    states, P = _pair_chain(start, n, g, cap, lam / (1 + lam))
    S = len(states)
    met = np.array([lo == hi for lo, hi in states])
    # E[T] from the start: (I - Q) m = 1 on the unmet states
    keep = np.nonzero(~met)[0]
    mean = 0.0
    if not met[0]:
        Q = P[keep][:, keep]
        m = spla.spsolve((sp.identity(keep.size) - Q).tocsc(), np.ones(keep.size))
        mean = float(m[0])
    u_lo = np.array([lo[level - 1] for lo, _ in states])
    u_hi = np.array([hi[level - 1] for _, hi in states])
    PT = P.T.tocsr()
    mu = np.zeros(S)
    mu[0] = 1.0
    surv, blaw, tlaw = [], [], []
    for _ in range(steps + 1):
        surv.append(mu[~met].sum())
        blaw.append(np.bincount(u_lo, weights=mu, minlength=n + 1))
        tlaw.append(np.bincount(u_hi, weights=mu, minlength=n + 1))
        mu = PT @ mu
    return ExactCoupling(survival=np.array(surv), mean=mean, bottom_law=np.array(blaw),
                         top_law=np.array(tlaw), states=S)


def _start_counts(name: str, u, n: int, cap: int) -> tuple:
    """u_1..u_cap of a start given as counts u_0..u_m (u_0 = n), validated."""
    a = V.int_array(name, u)
    if a.ndim != 1 or a.size < 1 or a[0] != n or np.any(a < 0) or np.any(np.diff(a) > 0):
        raise ValueError(f"{name} must be counts u_0..u_m with u_0 = n = {n}, non-negative and "
                         f"non-increasing; got {u!r}")
    u = [int(v) for v in a[1:]] + [0] * cap
    return tuple(u[:cap])


def _move(u: tuple, arrival: bool, lv: int, cap: int) -> tuple:
    """The counts after an arrival at (or a departure from) level lv; arrivals at cap are lost."""
    u = list(u)
    if arrival:
        if lv < cap:
            u[lv] += 1  # u_{lv+1}: index lv in u_1..u_cap
    elif lv >= 1:
        u[lv - 1] -= 1
    return tuple(u)


def _pair_chain(start: tuple, n: int, g: np.ndarray, cap: int, pa: float):
    """(states, P): the pair chain's states reachable from ``start`` and its transition matrix."""
    index, states, trans = {start: 0}, [start], []
    j = 0
    while j < len(states):
        lo, hi = states[j]
        out: dict = {}
        # met pairs keep moving (together): their marginals still evolve
        cuts = sorted({0.0, 1.0} | {float(g[v]) for v in lo + hi})
        for a, b in zip(cuts[:-1], cuts[1:]):
            if b > a:
                x = (a + b) / 2
                nxt = (_move(lo, True, _level_exact(lo, True, x, n, g), cap),
                       _move(hi, True, _level_exact(hi, True, x, n, g), cap))
                out[nxt] = out.get(nxt, 0.0) + pa * (b - a)
        for r in range(n):
            nxt = (_move(lo, False, _level_exact(lo, False, r, n, g), cap),
                   _move(hi, False, _level_exact(hi, False, r, n, g), cap))
            out[nxt] = out.get(nxt, 0.0) + (1 - pa) / n
        for s, p in out.items():
            if s not in index:
                index[s] = len(states)
                states.append(s)
            trans.append((j, index[s], p))
        j += 1
        if len(states) > 300_000:
            raise ValueError(f"n = {n}, cap = {cap}: the pair chain has too many states; lower cap")
    rows, cols, vals = zip(*trans)
    return states, sp.csr_matrix((vals, (rows, cols)), shape=(len(states), len(states)))
