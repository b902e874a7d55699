"""Study: who works the most? Heterogeneous servers and uninformed customers (notebook 03).

Claims (Cabral, arXiv:0706.0560; docs/models.md#cabral-claims): in an M/M/n queue whose
arrivals join a uniformly random idle server, for any two servers with mu_l > mu_m:
1. P_l < P_m (the faster server is busy less often);
2. mu_l P_l > mu_m P_m (yet it does more work);
3. (mu_m/mu_l) P_m < P_l < P_m.

The evidence (docs/models.md#claims-and-evidence):

- **exact, over a grid**: the three margins (:func:`qlib.heterogeneous.pair_margins`, computed
  from the identities of docs/models.md#cabral-identities so their signs are right even for
  nearly equal rates) for n = 2..1000 servers, loads 0.01..0.999 and three rate families
  (geometric, nearly equal, one fast server among slow ones), counting every adjacent pair;
- **simulation** (:func:`qlib.heterogeneous.simulate`) at the figure's point and at n = 50
  servers, each margin's 95% CI over replicas above zero and the simulation within 5 SE of the
  exact value;
- **counterfactuals**: the same criteria on wrong routing rules that a wrong model would
  follow: informed customers (``"fastest"``: fastest idle server) break claims 1 and 3, a
  slowest-idle-first rule (``"slowest"``) breaks claim 2;
- longest-idle-first routing (same stationary law, Doroudi & Gopalakrishnan) as a claim with
  the informed rule as its counterfactual; the identities sum_j mu_j P_j = lam and those behind
  the claims are listed as identities (they hold for every routing rule).

The study's shape (see :mod:`qlib.studies`): :data:`PARAMETERS` and :func:`run` (``compute``),
:data:`CLAIMS` and :func:`claim_rows` (``claims``), the notebook's prose and :func:`summary`
(``prose``); figures in :mod:`qlib.plots.who_works_the_most`.
"""

from qlib.studies.who_works_the_most.claims import CLAIMS, WRONG_RULES, claim_rows
from qlib.studies.who_works_the_most.compute import (
    ClaimsGrid,
    Profile,
    SimulatedCase,
    WhoWorksTheMostResult,
    chain_relaxation_time,
    claims_grid,
    family_rates,
    gamma_key,
    geometric_rates,
    profile,
    routed_stationary,
    run,
    simulate_profile,
    swap_residual,
)
from qlib.studies.who_works_the_most.parameters import CLAIM_THRESHOLDS, FAMILIES, INFORMED_MAX_N, PARAMETERS
from qlib.studies.who_works_the_most.prose import SUMMARY_COLUMNS, findings_markdown, summary

__all__ = ["PARAMETERS", "CLAIMS", "CLAIM_THRESHOLDS", "WRONG_RULES", "FAMILIES", "INFORMED_MAX_N",
           "ClaimsGrid", "Profile", "SimulatedCase", "WhoWorksTheMostResult", "chain_relaxation_time",
           "claims_grid", "family_rates", "gamma_key", "geometric_rates", "profile", "routed_stationary",
           "run", "simulate_profile", "swap_residual", "claim_rows", "findings_markdown", "summary",
           "SUMMARY_COLUMNS"]
