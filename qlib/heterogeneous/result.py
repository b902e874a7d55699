"""The result of a heterogeneous-server simulation and the chain state it ends in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from qlib.stats import Estimate, replica_mean

__all__ = ["ChainState", "SimulationResult"]


class ChainState(NamedTuple):
    """Where every replica's chain stands: host arrays, one row per replica, servers in input order.

    ``rng`` (R,) uint64: SplitMix64 state (the next step draws the two words after it);
    ``busy`` (R, n) bool: busy servers; ``queue`` (R,) int64: customers waiting;
    ``idle_order`` (R, n) int64, only for "longest_idle" (else None): the position of each idle
    server in the order of becoming idle (0 = idle the longest), -1 for a busy server.
    """

    rng: np.ndarray
    busy: np.ndarray
    queue: np.ndarray
    idle_order: np.ndarray | None


@dataclass(frozen=True)
class SimulationResult:
    """Time averages per replica (rows) from :func:`qlib.heterogeneous.simulate`, over the recorded steps.

    ``busy_fraction`` (R, n): fraction of time server j is busy (estimates Cabral's P_j);
    ``throughput`` (R, n): completions of server j per unit time (estimates mu_j P_j, counted
    independently of ``busy_fraction``); ``mean_queue`` (R,): time-average number waiting;
    ``wait_fraction`` (R,): fraction of arrivals that found every server busy (estimates
    P(wait)); ``arrivals`` (R,) int64: arrivals counted; ``time`` (R,): simulated time,
    steps/Lambda. ``state``: the final :class:`ChainState`, from which ``simulate(...,
    initial=result)`` continues. ``seed`` is the seed the chains started from (None when they
    were started from a bare :class:`ChainState`).
    """

    lam: float
    mus: np.ndarray
    policy: str
    steps: int
    burn_in: int
    seed: int | None
    busy_fraction: np.ndarray
    throughput: np.ndarray
    mean_queue: np.ndarray
    wait_fraction: np.ndarray
    arrivals: np.ndarray
    time: np.ndarray
    state: ChainState

    @property
    def replicas(self) -> int:
        return self.busy_fraction.shape[0]

    def arrays(self) -> dict[str, np.ndarray]:
        """Every field as a dict of arrays (the sweep cache's form: :func:`qlib.results.cache.cached`);
        :meth:`from_arrays` gives the same result back, bit for bit."""
        out = {f: np.asarray(getattr(self, f)) for f in _RESULT_ARRAYS}
        out |= {
            "lam": np.float64(self.lam),
            "mus": np.asarray(self.mus, np.float64),
            "policy": np.str_(self.policy),
            "steps": np.int64(self.steps),
            "burn_in": np.int64(self.burn_in),
            "seed": np.uint64(0 if self.seed is None else self.seed),
            "seeded": np.bool_(self.seed is not None),
        }
        return out | {f"state_{k}": np.asarray(v) for k, v in self.state._asdict().items() if v is not None}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> SimulationResult:
        """The result :meth:`arrays` was made from."""
        state = ChainState(*(a.get(f"state_{k}") for k in ChainState._fields))
        return cls(
            lam=float(a["lam"]),
            mus=np.asarray(a["mus"]),
            policy=str(a["policy"]),
            steps=int(a["steps"]),
            burn_in=int(a["burn_in"]),
            seed=int(a["seed"]) if bool(a["seeded"]) else None,
            state=state,
            **{f: np.asarray(a[f]) for f in _RESULT_ARRAYS},
        )

    def estimate(self, name: str) -> Estimate:
        """Mean over replicas with its standard error (needs replicas >= 2), e.g. "busy_fraction"."""
        return replica_mean(np.asarray(getattr(self, name)), axis=0)

    def to_dataframe(self):
        """A tidy pandas DataFrame: one row per (replica, server j), with lam, policy, seed,
        steps, burn_in, the server's rate ``mu``, its ``busy_fraction`` (P_j) and ``throughput``
        (mu_j P_j), and the replica's ``mean_queue``, ``wait_fraction``, ``arrivals`` and ``time``
        (repeated over its servers)."""
        import pandas as pd

        R, n = self.busy_fraction.shape
        mus = np.asarray(self.mus, dtype=float)
        return pd.DataFrame(
            {
                "lam": self.lam,
                "policy": self.policy,
                "seed": self.seed,
                "steps": self.steps,
                "burn_in": self.burn_in,
                "replica": np.repeat(np.arange(R), n),
                "server": np.tile(np.arange(n), R),
                "mu": np.tile(mus, R),
                "busy_fraction": np.asarray(self.busy_fraction).ravel(),
                "throughput": np.asarray(self.throughput).ravel(),
                "mean_queue": np.repeat(np.asarray(self.mean_queue), n),
                "wait_fraction": np.repeat(np.asarray(self.wait_fraction), n),
                "arrivals": np.repeat(np.asarray(self.arrivals), n),
                "time": np.repeat(np.asarray(self.time), n),
            }
        )


_RESULT_ARRAYS = ("busy_fraction", "throughput", "mean_queue", "wait_fraction", "arrivals", "time")
