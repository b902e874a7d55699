"""The families study's parameters, per mode: the families (alpha, beta, the n of each tier), the
thresholds of its rows, and which n of a family belong to its design."""

from __future__ import annotations

from typing import Any

from qlib.studies import check_mode, long_points_read

PointTuple = tuple[int, int, float]

#: the command that computes the long-tier points
LONG_COMMAND = "make results-long ONLY=families"

#: The families: name -> (alpha, beta, ns); the long tier adds PARAMETERS[mode]["long"]["ns"].
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
        "families": {"A": dict(alpha=0.5, beta=0.4, ns=[300, 1_000]),
                     "D": dict(alpha=0.75, beta=0.5, ns=[300]), "K3": dict(alpha=0.8, beta=0.35, ns=[300])},
        "long": dict(ns={}, batches=1, wrong=dict(replicas=2, batches=1, batch_taus=10.0, models=["jsq2"]),
                     decide={}, fresh=dict(stream="families/smoke/issue47", families=[])),
        "replicas": 4, "burn_taus": 20.0, "batch_taus": 10.0, "batches": 1,
        "sd": dict(replicas=2, taus=2.0, samples=50),
        "wrong": dict(replicas=2, batches=1, batch_taus=10.0, models=["jsq2", "d-1"]),
        "claims": dict(p_min=0.95, p_halfwidth_target=0.05, slope_max=0.0, slack=2.0, model_error=0.01,
                       neighbour_levels=[-1, 1], boot=200,
                       hypotheses=dict(c_max=0.5, gamma_min=0.0), sd_band=dict(low=1 / 3, high=3.0)),
        "stream": "families/smoke",
    },
    "full": {
        "families": _FULL_FAMILIES,
        # The long tier (make results-long ONLY=families; fixed before that run, issue 30): n = 3e4 and
        # 1e5 for the three families inside H0-H3 (A, B, C), 2 batches of 20 tau after the 20 tau
        # burn-in (~6e10 replica-steps in all). Their rows are judged at the largest n of this design;
        # outside the long run they read results/long and compute nothing (a point it lacks makes the
        # row INCONCLUSIVE). The wrong models at 1e5: the far ones only (JSQ(2), JSQ(d/2)), 2 replicas
        # of 10 tau: the near ones (d - 1, 0.9 d, the other rule: d ~ 100-316) satisfy the same theorem
        # and were not told apart at n = 1e4; their evidence is the level-flow identity rows.
        "long": dict(ns={"A": [30_000, 100_000], "B": [30_000, 100_000], "C": [30_000, 100_000]},
                     batches=2,
                     wrong=dict(replicas=2, batches=1, batch_taus=10.0, models=["jsq2", "half_d"]),
                     # issue 41, row 12 (fixed before its run): family C's JSQ(d/2) at 1e5 ran 2 replicas x
                     # 10 tau above, a CI (0 to 1 for P(max = k)) that cannot fail its rows. It runs again,
                     # 8 replicas x 30 tau after the burn-in (~2.1e10 replica-steps), under its own cache
                     # name and seed (families_wrong_C_half_d_decide), so the entries above stay as
                     # stored; C's rows judge JSQ(d/2) from it (A and B keep theirs).
                     decide={"C": dict(replicas=8, batches=1, batch_taus=30.0, models=["half_d"])},
                     # issue 47 (fixed before its run): the most-at-k rows of A, B and C (rows 16-18) were
                     # judged by a clause committed after their data (model_error, 52d21b2) and now also by
                     # the neighbour levels. They are judged again on a stream of their own, at every n of
                     # the family (the default tier's and the long tier's), with the design above (8
                     # replicas, 20 tau burn-in, 1 batch of 20 tau below 3e4, 2 from 3e4): one long-tier
                     # entry per point, families_fresh_<family> (cost: families.fresh_cost()). Until every
                     # point is stored, those rows read "criterion after data".
                     fresh=dict(stream="families/issue47", families=["A", "B", "C"])),
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
            # ... and, at the largest n, a prediction (issue 41): the fraction at k within model_error + its
            # 95% CI half-width of the refined mean field (order 1/n). 0.01 is below a third of the
            # smallest gap JSQ(d x 0.75) or JSQ(d x 1.25) opens in the fluid at n = 1e5 (0.036: B, d x 1.25)
            model_error=0.01,
            # ... and the fractions at k-1 and k+1 the same way (issue 47, fixed before the fresh-seed run
            # below): with the fraction at k alone, JSQ(22), JSQ(46-48) and JSQ(61-63) pass rows 16-18 beside
            # the band around d (the fraction at k is not monotone in d'); with k-1 and k+1 too, a scan of
            # every d' in [1, 4d] at the stored points leaves the band around d alone
            neighbour_levels=[-1, 1],
            boot=2000,
            # where a row is a claim and not a finding (docs/models.md#hypotheses)
            hypotheses=dict(c_max=0.5, gamma_min=0.0), sd_band=dict(low=1 / 3, high=3.0)),
        "stream": "families",
    },
}

#: The wrong models (far and near): :data:`qlib.studies.wrong_models.WRONG_MODELS`.


def family_ns(mode: str, name: str) -> list[int]:
    """The n of family ``name`` in ``mode``'s design: its ``ns`` (the default tier) and the long
    tier's ``long.ns`` (computed only by ``make results-long``, read from results/long otherwise)."""
    P = PARAMETERS[check_mode(mode)]
    return sorted(set(P["families"][name]["ns"]) | set(P["long"]["ns"].get(name, [])))


def long_read_only(mode: str) -> bool:
    """Whether the long-tier points are read from results/long (:func:`qlib.studies.long_points_read`)."""
    return long_points_read(mode)
