"""Batch means of the equilibrium estimates: pooled over replicas and batches, with the control
variate E[u_1] = lam n and Student-t intervals (:mod:`qlib.supermarket.equilibrium`)."""

from __future__ import annotations

import math

import numpy as np

from qlib import stats


def pad_levels(a: np.ndarray, L1: int) -> np.ndarray:
    out = np.zeros(a.shape[:-1] + (L1,))
    m = min(a.shape[-1], L1)
    out[..., :m] = a[..., :m]
    return out


def _pooled(batches: np.ndarray, control: np.ndarray | None, lam: float):
    """Mean and 95% half-width over pooled batch means ``batches`` (B, L+1); with ``control``
    (B,) the batch means of u_1/n, the control-variate estimator y - beta (c - lam)."""
    B = batches.shape[0]
    mean = batches.mean(axis=0)
    var = batches.var(axis=0, ddof=1) if B > 1 else np.full(batches.shape[1], np.inf)
    factor = np.ones(batches.shape[1])
    if control is not None and B > 3 and control.var(ddof=1) > 0:
        c = control - lam
        beta = ((batches - mean) * (c - c.mean())[:, None]).sum(axis=0) / ((c - c.mean()) ** 2).sum()
        adj = batches - beta[None, :] * c[:, None]
        v_adj = adj.var(axis=0, ddof=1)
        use = v_adj < var  # only where it helps (never at level 1 itself: there it is exact)
        use[:2] = False
        mean = np.where(use, adj.mean(axis=0), mean)
        factor = np.where(use, v_adj / np.where(var > 0, var, 1.0), 1.0)
        var = np.where(use, v_adj, var)
        dof = B - 2
    else:
        dof = B - 1
    half = stats.t_quantile(max(dof, 1)) * np.sqrt(var / B) if B > 1 else np.full_like(mean, np.inf)
    return mean, half, factor


def _lag1(x: np.ndarray) -> float:
    """Lag-1 autocorrelation of consecutive batch means (replicas, batches), pooled."""
    if x.shape[1] < 3:
        return float("nan")
    y = x - x.mean(axis=1, keepdims=True)
    den = (y**2).sum()
    return float((y[:, 1:] * y[:, :-1]).sum() / den) if den > 0 else 0.0


def flow_summary(tails: list[np.ndarray], flows: list[np.ndarray], lam: float) -> dict:
    """E[g(u_i)] and the level-flow residual Z_j = u_j/n - lam g(u_{j-1}) from the paired batch
    means of every round (replicas, m, L+1), pooled over replicas and batches (Student t)."""
    L1 = max(max(t.shape[2] for t in tails), max(f.shape[2] for f in flows)) + 1
    T = np.concatenate([pad_levels(t, L1) for t in tails], axis=1).reshape(-1, L1)
    F = np.concatenate([pad_levels(f, L1) for f in flows], axis=1).reshape(-1, L1)
    B = T.shape[0]
    Z = T[:, 1:] - lam * F[:, :-1]  # level j = 1..L1-1 at index j-1
    fmean = F.mean(axis=0)[:-1]
    zmean = Z.mean(axis=0)
    if B > 1:
        q = stats.t_quantile(B - 1)
        fse = F.std(axis=0, ddof=1)[:-1] / math.sqrt(B)
        zse = Z.std(axis=0, ddof=1) / math.sqrt(B)
    else:
        q, fse, zse = np.inf, np.full_like(fmean, np.inf), np.full_like(zmean, np.inf)
    return dict(flow_fraction=fmean, flow_ci_low=fmean - q * fse, flow_ci_high=fmean + q * fse,
                flow_residual=zmean, flow_residual_se=zse, flow_dof=B - 1)


def summarise(tails: list[np.ndarray], maxes: list[tuple[int, np.ndarray]], lam: float | None, level: int):
    """Pooled batch-means estimates of the tail from per-round (replicas, m, L_round+1) arrays;
    the law of the maximum from replica means over the whole run (R - 1 degrees of freedom)."""
    L1 = max(max(t.shape[2] for t in tails), max(m.shape[1] for _, m in maxes), level + 1)
    T = np.concatenate([pad_levels(t, L1) for t in tails], axis=1)  # (replicas, batches, L+1)
    R, B = T.shape[:2]
    flat = T.reshape(R * B, L1)
    control = flat[:, 1] if lam is not None else None  # lam None: no exact control variate
    mean, half, factor = _pooled(flat, control, lam)
    pflat = flat - np.concatenate([flat[:, 1:], np.zeros((flat.shape[0], 1))], axis=1)
    pmean, phalf, _ = _pooled(pflat, control, lam)
    w = np.array([s for s, _ in maxes], dtype=float)
    M = sum(wi * pad_levels(m, L1) for wi, (_, m) in zip(w, maxes)) / w.sum()  # (replicas, L+1)
    est = stats.replica_mean(M)
    return mean, half, factor, est.mean, est.halfwidth(), _lag1(T[:, :, level]), pmean, phalf
