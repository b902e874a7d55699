"""Generate notebooks/02_mixing_time.ipynb (outputs are not committed; `make figures` runs it)."""

from pathlib import Path

import nbformat as nbf

md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell

cells = [
    md("""# 02 — Mixing time of the supermarket model, by monotone coupling

Brightwell & Luczak (arXiv:1201.5523), claims 3–4 of `shared/MODELS.md`: from a good initial state the
supermarket model mixes in **O(k d^(k−1) n log n)** steps of the jump chain, and the mixing time is at least
**Ω(n (λd)^(k−1))**; once near equilibrium it stays there for a long time.

**Time unit.** Every time axis counts *steps of the uniformised jump chain*: each step is an arrival
(probability λ/(1+λ)) or a potential departure. One unit of model time (one mean service time) is **(1+λ)n steps**.

**Method.** The count chain u_i = #queues of length ≥ i has a *monotone coupling*: drive copies with the same
random draws and u ≤ u′ is preserved. Start one copy empty (bottom) and one with every queue at k+1 (top);
every start in between is sandwiched, and once bottom and top meet all have coalesced. Hence
d_TV(t) ≤ P(T_meet > t) (+ the negligible stationary mass above the top). The code is
`qlib.supermarket.meeting_times`; it is tested against the exact law of the coupled pair for n ≤ 3."""),
    code("""import numpy as np
import matplotlib.pyplot as plt
import qlib.config
qlib.config.enable_compilation_cache()
from qlib.plots import savefig
from qlib.plots import mixing as P
from qlib.supermarket import mixing as M
from qlib.supermarket.mixing_claims import mixing_rows
from qlib.claims import to_markdown"""),
    md("## Parameters\nSmoke mode (`QLIB_SMOKE=1`) uses small sweeps; full mode is what `make figures` publishes."),
    code("""SMOKE = qlib.config.smoke_mode()
QUICK = SMOKE            # the study's small parameter set
SEED = 2024
M.study_parameters(QUICK)"""),
    md("## Compute (cached: a rerun reuses `.qlib_cache/`)"),
    code("""study = {part: M.run_study(part, QUICK, seed=SEED)
         for part in ("n_sweep", "d_sweep", "k_sweep", "drain", "tv", "good_set")}"""),
    md("""## (a) T_meet against n

At fixed (d, λ) the bound is ∝ n log n. The top chain first sheds its excess of about n customers at net rate
about (1−λ)n per unit time (a term linear in n), then the pair coalesces on the log n scale, so the local slope
of log T_meet against log n lies between 1 and 1 + 1/ln n."""),
    code("""fig = P.fig_meeting_vs_n(study["n_sweep"]); savefig(fig, "02a_meeting_vs_n"); plt.show()"""),
    md("""## (b) T_meet against d at fixed k, then against k

Within one window of d at fixed λ (k fixed), the bound grows like d^(k−1). We measure the bottom/top meeting
time and a *good-start* meeting time (a chain from the fluid fixed point against one from a stationary sample;
unordered, so meeting is detected by equality). **Observed:** at fixed λ neither grows with d — the relaxation
is set by 1/(1−λ), not by d^(k−1), so the upper bound is respected but not tight here. Against k (λ moved to the
middle of each k-window, λ = 1 − d^−(k−1/2)) the time grows steeply, roughly parallel to k d^(k−1) n ln n and
above both the net-drain time (1+λ)n/(1−λ) and the lower bound n(λd)^(k−1) (constants are not given by the paper)."""),
    code("""fig = P.fig_meeting_vs_d_k(study["d_sweep"], study["k_sweep"]); savefig(fig, "02b_meeting_vs_d_k"); plt.show()"""),
    md("""## (c) The lower bound: draining from all queues at k+1

From every queue at length k+1, the excess above level k (about n customers) can only leave at net rate
≤ (1−λ)n per unit time. T_drain is the first step at which the fraction of queues longer than k is within 0.05
of its equilibrium value. It exceeds n(λd)^(k−1) at every point, and T_drain/((1+λ)n) converges to the fluid
ODE's drain time: the drain time is of order n."""),
    code("""fig = P.fig_drain(study["drain"]); savefig(fig, "02c_drain_lower_bound"); plt.show()"""),
    md("""## (d) Good against bad initial states

Three starts driven by the same draws: the fluid fixed point (good), every queue at k+5, and half the queues
empty with half at 2k+10 (the same number of customers). Left: TV distance between the law of u_k(t) over
replicas and its equilibrium law (cells of equal equilibrium mass; a lower bound on d_TV, up to the marked
sampling noise floor), with the coupling upper bound P(T_meet > t) for bottom = empty, top = all at 2k+10.
Right: L1 distance Σ_i |u_i − u′_i|/n between each bad chain and the good one."""),
    code("""tv = study["tv"]
p = M.study_parameters(QUICK)["tv"]
fig = P.fig_tv(tv, tv["T_meet"], n=p["n"], lam=p["lam"]); savefig(fig, "02d_good_vs_bad_starts"); plt.show()"""),
    md("""## (e) Staying near equilibrium

Started at the fluid point, the fraction of each long window spent in the good set
N^ε = {max_i |u_i/n − s*_i| ≤ ε} (s* the fluid fixed point). Finite-n fluctuations are of order 1/√n, so very
small ε are rarely met; for ε above that, the chain stays in N^ε for the whole run."""),
    code("""g = study["good_set"]; q = M.study_parameters(QUICK)["good_set"]
fig = P.fig_good_set(g, n=q["n"], lam=q["lam"]); savefig(fig, "02e_good_set"); plt.show()"""),
    md("## Claims table rows (criteria stated in each row)"),
    code("""from IPython.display import Markdown
rows = mixing_rows(quick=QUICK)
Markdown(to_markdown(rows))"""),
    md("""## Explore: sliders for n, d, λ

Each change runs `qlib.supermarket.mixing.explore` (tested directly): the meeting-time survival
P(T_meet > t) — an upper bound on d_TV(t) — and the L1 distance of the bottom/top pair."""),
    code("""import ipywidgets as w
def show(n, d, lam):
    fig = P.fig_explore(M.explore(int(n), int(d), float(lam), replicas=8 if SMOKE else 16))
    plt.show()
w.interact(show, n=w.IntSlider(value=300, min=50, max=5000, step=50),
           d=w.IntSlider(value=5, min=2, max=20), lam=w.FloatSlider(value=0.9, min=0.5, max=0.97, step=0.01));"""),
]

nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
out = Path(__file__).with_name("02_mixing_time.ipynb")
nbf.write(nb, out)
print(f"wrote {out}")
