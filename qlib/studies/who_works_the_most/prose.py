"""The who-works-the-most study's prose: notebook 03's findings rendered from the result (no number
typed in the notebook), and :func:`summary`, its numbers as a table."""

from __future__ import annotations

import numpy as np

from qlib import _validate
from qlib.studies.who_works_the_most.claims import adjacent_pairs, near_z, pair_gammas
from qlib.studies.who_works_the_most.compute import WhoWorksTheMostResult, gamma_key
from qlib.studies.who_works_the_most.parameters import FAMILIES


def findings_markdown(result: WhoWorksTheMostResult, section: str) -> str:
    """The notebook's findings as Markdown, rendered from ``result`` (no number typed by hand).

    ``section``: "grid" (the exact evaluation over the grid), "informed" (who is busiest under
    informed routing), "near" (how far the mu^gamma routing rules sit from the exact P_j)."""
    _validate.choice("section", section, ("grid", "informed", "near"))
    g = result.grid
    if section == "grid":
        v = [int(getattr(g, f"violations{c}").sum()) for c in (1, 2, 3)]
        i1, i2 = int(np.argmin(g.min_rel1)), int(np.argmin(g.min_rel2))
        where = lambda i: f"{FAMILIES[g.family[i]]} rates, n = {g.n[i]}, ρ = {g.rho[i]:g}"  # noqa: E731
        return (f"Over {g.n.size} grid points and {int(g.pairs.sum())} adjacent pairs the margins of claims "
                f"1 and 2 have {v[0]} and {v[1]} violations (claim 3 is the two together: {v[2]} pairs "
                f"outside the band). The smallest relative margins are {g.min_rel1[i1]:.1e} (claim 1; "
                f"{where(i1)}) and {g.min_rel2[i2]:.1e} (claim 2; {where(i2)}), which is why they are "
                "computed from the identities and not from differences of rounded $P_j$. This evaluates the "
                "closed form: it checks the numerics, not the claim, since every product form whose weights "
                "depend only on $|S|$ gives these signs; only the simulations below test the routing.")
    if section == "informed":
        lines = []
        for p in result.profiles:
            if p.informed_busy is None:
                continue
            L, M = adjacent_pairs(p.mus)
            broken = int(np.sum(p.informed_busy[M] - p.informed_busy[L] <= 0))
            lines.append(f"- ρ = {p.rho:g}: busiest server under informed routing "
                         f"{int(np.argmax(p.informed_busy)) + 1}, under uniform routing "
                         f"{int(np.argmax(p.busy)) + 1} (server 1 is the fastest); informed routing breaks "
                         f"claim 1 for {broken} of {L.size} adjacent pairs (P_1 = {p.informed_busy[0]:.3f}, "
                         f"smallest P_j = {p.informed_busy.min():.3f}, largest {p.informed_busy.max():.3f}).")
        return "\n".join(lines)
    rows = ["| servers | load | "
            + " | ".join(f"μ^{gm:g}: claim 1, claim 2" for gm in pair_gammas(result.cases))
            + " |", "|---|---|" + "---|" * len(pair_gammas(result.cases))]
    for c in result.cases:
        cells = [f"{near_z(c, gamma_key(gm), 1):.1f}, {near_z(c, gamma_key(gm), 2):.1f}"
                 for gm in pair_gammas(result.cases)]
        rows.append(f"| {c.n} | {c.rho:g} | " + " | ".join(cells) + " |")
    return ("Largest |sim − exact| / SE of the adjacent-pair margins when arrivals pick idle server j with "
            "probability ∝ μ_j^γ (the same runs, criterion and replicas as uniform routing; 5 SE tells a "
            "rule apart):\n\n" + "\n".join(rows))


#: the columns of :func:`summary`
SUMMARY_COLUMNS = ("rho", "server", "mu", "busy", "work", "informed_busy", "informed_work", "busiest_uniform",
                   "busiest_informed")


def summary(result: WhoWorksTheMostResult):
    """The exact profiles notebook 03 shows, one row per load and server (servers fastest first).

    Args:
        result: a :class:`WhoWorksTheMostResult`.

    Returns:
        A pandas DataFrame with :data:`SUMMARY_COLUMNS`: ``busy`` P_j and ``work`` mu_j P_j under uniform
        routing, ``informed_busy``/``informed_work`` when customers join the fastest idle server (NaN
        beyond the informed rules' exact range), and whether server j is the busiest under each.
    """
    import pandas as pd

    out = []
    for p in result.profiles:
        ib = p.informed_busy
        for j in range(p.n):
            out.append(dict(rho=p.rho, server=j + 1, mu=float(p.mus[j]), busy=float(p.busy[j]),
                            work=float(p.work[j]), informed_busy=float("nan") if ib is None else float(ib[j]),
                            informed_work=float("nan") if ib is None else float(p.mus[j] * ib[j]),
                            busiest_uniform=bool(j == int(np.argmax(p.busy))),
                            busiest_informed=bool(ib is not None and j == int(np.argmax(ib)))))
    return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))
