"""The parameters of the mixing study, per mode (the scales its rows divide by and the hypotheses
H0-H3 are the regime's: :mod:`qlib.supermarket.regime`)."""

from __future__ import annotations

from typing import Any

#: The thresholds of the claim rows, fixed before the run (read by claim_rows, the notebook and the
#: tests): ``growth`` "bounded" = the exponent of T / (k d^(k-1) n ln n) in n is at most 0.1 (upper
#: 95% CI end); ``d_exponent_tol``: row 12 passes when the exponent's CI lies within k - 1 +- 0.3
#: (two-sided: the exponent it claims is k - 1), fails when it is disjoint from that band;
#: ``drain_finding``: row 11 is a finding wherever the drain term (1+lam) n/(1-lam) is at least this
#: fraction of k d^(k-1) n ln n (then it is of the order of the bound, and the row cannot tell a
#: routing rule's mixing from conservation of customers); ``lower_min``: row 13's ratio; ``tail_bounds``,
#: ``tail_z``: row 14's bounds on P(T > 2m), P(T > 3m) and the binomial SEs they allow.
#: The hypotheses H0-H3 every mixing row checks per point (docs/models.md#hypotheses): H1 c =
#: (1-lam) d^(k-1) <= c_max; H3 n (1-lam)^2 d^(k-1) >= buffer_min, i.e. the buffer n (1-lam) d^(k-1)
#: is at least sqrt(buffer_min) excursions sqrt(n d^(k-1)) of N. A row with a point outside is a finding.
HYPOTHESES = dict(c_max=0.5, buffer_min=10.0)

CLAIM_THRESHOLDS = dict(hypotheses=HYPOTHESES, growth=0.1, d_exponent_tol=0.3, drain_finding=0.1,
                        lower_min=0.2,
                        # row 14: P(T > 2m) <= 1/4 and P(T > 3m) <= 1/8 at the median m, each plus z
                        # binomial SE
                        tail_bounds=(0.25, 0.125), tail_z=1.96)

#: Every parameter of the study, per mode. Run lengths are in relaxation times tau (model
#: time) or in multiples of the measured meeting times; full mode scales by --scale.
PARAMETERS: dict[str, dict[str, Any]] = {
    "smoke": {
        "family": dict(alpha=0.75, beta=0.5, ns=[100, 300, 1000], replicas=8, scaled_ns=[], scaled_from=2.0),
        "d_sweep": dict(n=300, one_minus_lam=1e-3, ds=[100, 141, 200], replicas=4),
        "lower": dict(ns=[100, 300], replicas=64, horizon_taus=10.0, frames=40, threshold=0.25),
        "tail": dict(n=300, replicas=64),
        "good_set": dict(ns=[100, 300, 1000], eps=0.2, horizon_taus=20.0, replicas=8),
        # rows 10, 13, 15 again on a family with gamma = 1 - 2 alpha + beta > 0 (docs/models.md#hypotheses)
        "family_pos": dict(alpha=0.5, beta=0.4, ns=[100, 300, 1000], lower_ns=[100, 300],
                           good_set_ns=[100, 300, 1000]),
        "claims": CLAIM_THRESHOLDS,
        "near": ["d-1"],
        "burn_taus": 20.0, "cap": 2.0, "counterfactual_replicas": 4, "stream": "mixing/smoke",
    },
    "full": {
        # n = 1e4 from --scale 2 (its good and bad starts cost ~1e9 replica-steps: room for the families
        # study)
        "family": dict(alpha=0.75, beta=0.5, ns=[100, 300, 1000, 3000], replicas=16, scaled_ns=[10_000],
                       scaled_from=2.0),
        "d_sweep": dict(n=3000, one_minus_lam=1e-3, ds=[100, 141, 200, 283], replicas=16),
        "lower": dict(ns=[300, 1000, 3000], replicas=128, horizon_taus=10.0, frames=100, threshold=0.25),
        "tail": dict(n=1000, replicas=256),
        "good_set": dict(ns=[100, 300, 1000, 3000], eps=0.2, horizon_taus=50.0, replicas=32),
        # rows 10, 13, 15 again on family A of the families study (alpha = 0.5, beta = 0.4: k = 2,
        # gamma = +0.4, buffer/excursion n^0.4), where the hypotheses H0-H3 hold from n ~ 1e3
        "family_pos": dict(alpha=0.5, beta=0.4, ns=[100, 300, 1000, 3000, 10_000], lower_ns=[300, 1000, 3000],
                           good_set_ns=[100, 300, 1000, 3000]),
        "claims": CLAIM_THRESHOLDS,
        # near wrong models of the good-start rows (qlib.studies.wrong_models), at the three smallest
        # n on the model's clock, capped like JSQ(2): the criterion bounds a growth exponent, which
        # JSQ(d-1) shares, so the rows are not expected to tell it apart (the identity rows do)
        "near": ["d-1"],
        "burn_taus": 20.0, "cap": 2.0, "counterfactual_replicas": 4, "stream": "mixing",
    },
}
