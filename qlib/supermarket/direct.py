"""A plain queue-vector simulation of the supermarket model, for checking the count chain.

It keeps every queue's length and really samples d queue indices per arrival (NumPy, one
replica, one step at a time), so it shares no logic with :mod:`qlib.supermarket.chain`.
It is slow by design and meant for small n in tests and as the "plain loop" in benchmarks.
"""

from __future__ import annotations

import numpy as np

from qlib import _validate as V
from qlib.supermarket.point import Point


def direct_simulation(n: int, d: int, lam: float, *, steps: int, seed: int = 0, burn_in: int = 0,
                      replacement: bool = True, levels: int = 8) -> np.ndarray:
    """Time-average fraction of queues with length >= i of one replica: the plain reference.

    Same uniformisation as the count chain; ties among shortest sampled queues are broken by
    the first sampled, which does not matter for the counts.

    Args:
        n, d, lam, replacement: the point.
        steps: measured steps.
        seed: seed of the stream.
        burn_in: steps before the measured ones.
        levels: the last level reported.

    Returns:
        (levels + 1,) time-average u_i/n.

    Raises:
        ValueError: naming the parameter out of its range.
    """
    p = Point.simulation(n, d, lam, replacement=replacement)
    n, d, lam, replacement = p.n, p.d, p.lam, p.replacement
    steps = V.integer("steps", steps, low=1)
    burn_in = V.integer("burn_in", burn_in, low=0)
    seed = V.integer("seed", seed, low=0, high=2**63 - 1)
    levels = V.integer("levels", levels, low=0)
    V.memory("levels", 16.0 * (levels + 2), f"{levels + 2} levels x 16 bytes")
    V.memory("d", 16.0 * d, f"{d} sampled queue indices per arrival x 16 bytes")
    # a plain Python loop: about 1e6 steps/s at best, and an arrival costs O(d)
    V.work("steps", float(burn_in + steps) * (1.0 + d * lam / (1.0 + lam)), rate=1e6)
    rng = np.random.default_rng(seed)
    q = np.zeros(n, dtype=np.int64)
    acc = np.zeros(levels + 1)
    p_arr = lam / (1 + lam)
    B = 4096
    t = 0
    while t < burn_in + steps:
        ev = rng.random(B) < p_arr
        who = rng.integers(0, n, B)
        for j in range(B):
            if ev[j]:
                pick = rng.choice(n, size=d, replace=replacement)
                q[pick[np.argmin(q[pick])]] += 1
            elif q[who[j]] > 0:
                q[who[j]] -= 1
            t += 1
            if t > burn_in:
                acc += np.bincount(np.minimum(q, levels + 1), minlength=levels + 2)[::-1].cumsum()[::-1][
                    : levels + 1
                ]
            if t == burn_in + steps:
                break
    return acc / (steps * n)
