"""Study: where the theorems hold — the scaling families lam = 1 - n^(-alpha), d = floor(n^beta).

Brightwell, Fairthorne & Luczak (2018) state, for "suitable pairs" (alpha, beta), that in
equilibrium with probability tending to 1 no queue is longer than k = ceil(alpha/beta) and at
least a fraction 1 - 2 n^(-alpha + (k-1) beta) of the queues have length exactly k
(docs/models.md#scaling-families). The pairs are not spelled out in what this project could
read; docs/models.md#hypotheses states the working hypotheses checked numerically per row:

- H0: alpha, beta in (0, 1], alpha/beta not an integer (k = ceil(alpha/beta) at every n run);
- H1 (regime R1): c = (1-lam) d^(k-1) <= ``c_max`` (the bound 1 - 2c is not vacuous);
- H2 (regime R2 at this n): the fluid maximum is k (n s_(k+1) < 1/2, i.e. (1-lam) d^k >~ log n);
- H3 (buffer over excursion): gamma = 1 - 2 alpha + (k-1) beta > 0. The number of customers N
  diffuses at rate about 2n and relaxes over about d^(k-1) time units, so its excursions are of
  order sqrt(n d^(k-1)); the buffer that absorbs them is the n (1-lam) d^(k-1) queues shorter
  than k; their ratio is sqrt(n (1-lam)^2 d^(k-1)) = n^(gamma/2). A heuristic, judged here: the
  measured standard deviation of N over sqrt(n d^(k-1)) must lie in a pre-set band.

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

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS` and :func:`run` (``compute``),
:data:`CLAIMS` and :func:`claim_rows` (``claims``), :func:`methods_markdown`,
:func:`findings_markdown` and :func:`summary` (``prose``); figures in :mod:`qlib.plots.families`.
"""

from qlib.studies.families.claims import CLAIMS, claim_rows
from qlib.studies.families.compute import (
    CustomersSD,
    FamiliesResult,
    Family,
    customers_sd,
    long_cost,
    run,
    slope_ci,
)
from qlib.studies.families.parameters import PARAMETERS, family_ns, long_read_only
from qlib.studies.families.prose import (
    findings_markdown,
    long_points_markdown,
    methods_markdown,
    summary,
    summary_table,
)
from qlib.studies.wrong_models import WRONG_MODELS

__all__ = ["methods_markdown", "PARAMETERS", "CLAIMS", "WRONG_MODELS", "Family", "FamiliesResult",
           "CustomersSD", "run", "claim_rows", "family_ns", "slope_ci",
           "long_cost", "long_read_only", "long_points_markdown",
           "summary_table", "summary", "findings_markdown", "customers_sd"]
