"""Writes notebooks/03_who_works_the_most.ipynb (run it, then execute the notebook)."""

from pathlib import Path

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell
cells = [
    md("""# 3. Who works the most? Heterogeneous servers and uninformed customers

Cabral (arXiv:0706.0560) studies an M/M/n queue whose servers differ: server *j* serves at rate
$\\mu_j$, customers arrive at rate $\\lambda<\\sum_j\\mu_j$, and — being **uninformed** — an arrival
that finds idle servers joins one of them **uniformly at random**; otherwise it waits in a single
FIFO queue taken by the first server to finish.

**Claims.** For any two servers with $\\mu_l>\\mu_m$:
1. $P_l < P_m$ — the faster server is busy *less* often;
2. $\\mu_l P_l > \\mu_m P_m$ — yet it does *more* work;
3. $(\\mu_m/\\mu_l)\\,P_m < P_l < P_m$.

**Theory.** The chain is reversible with a product-form law: a busy set $S$ with $|S|=k<n$ has
$\\pi(S)\\propto\\frac{(n-k)!}{n!}\\prod_{j\\in S}\\lambda/\\mu_j$, and with all busy and $q$ waiting
$\\pi\\propto\\frac1{n!}\\prod_j\\lambda/\\mu_j\\,\\rho^q$, $\\rho=\\lambda/\\sum\\mu$. The claims follow from
$\\mu_lP_l-\\mu_mP_m=(\\mu_l-\\mu_m)P(l,m\\text{ busy})$ and $P_m-P_l=(1-\\mu_m/\\mu_l)P(m\\text{ busy}, l\\text{ idle})$,
and $\\sum_j\\mu_jP_j=\\lambda$. `qlib.heterogeneous.busy_probabilities` evaluates $P_j$ in $O(n^2)$ via
elementary symmetric polynomials in log-space (stable for thousands of servers); the simulator
(`qlib.heterogeneous.simulate`) checks it, and also runs longest-idle routing (same law) and
informed customers (join the fastest idle server) for contrast."""),
    code("""import qlib.config
qlib.config.enable_compilation_cache()  # reruns skip XLA compiles

import matplotlib.pyplot as plt
import qlib.heterogeneous as H
from qlib.heterogeneous.claims import claim_rows
from qlib.claims import to_markdown
from qlib.plots import savefig
from qlib.plots import heterogeneous as hp"""),
    code("""# Parameters. QLIB_SMOKE=1 (the tests) picks tiny simulations.
SMOKE = qlib.config.smoke_mode()
N_SERVERS, SPREAD = 6, 10.0              # rates geometric from SPREAD down to 1
LOADS = (0.3, 0.6, 0.9)                  # rho = lam / sum(mu)
EVENTS = 20_000 if SMOKE else 500_000    # uniformised steps per replica
REPLICAS = 8 if SMOKE else 32"""),
    code("""data = H.figure_data(n=N_SERVERS, spread=SPREAD, loads=LOADS, events=EVENTS, replicas=REPLICAS)"""),
    md("""## P_j and μ_j P_j against μ_j
Lines are exact, points are simulations (mean ± 95% CI over independent replicas). Busy probability
falls with speed, work done rises with it: the fastest server is the least busy and the hardest working."""),
    code("""fig = hp.plot_busy_and_work(data.profiles, data.sims)
savefig(fig, "03_busy_and_work")
plt.show()"""),
    md("""## The band $(\\mu_m/\\mu_l)P_m < P_l < P_m$
For each adjacent pair of servers the faster one's busy probability sits strictly inside the band."""),
    code("""fig = hp.plot_band(data.profiles[-1])
savefig(fig, "03_band")
plt.show()"""),
    md("""## Informed against uninformed customers
If customers know the rates and join the fastest idle server, the ordering of $P_j$ flips at the top:
the fastest server becomes (one of) the busiest. There is no product form; the exact curve is a
generator solve over the $2^n$ busy sets."""),
    code("""fig = hp.plot_informed(data.profiles[-1], data.informed_sim)
savefig(fig, "03_informed")
plt.show()"""),
    md("""## Claims table rows
Simulation (± 95% CI) against exact theory, with the stated pass criterion."""),
    code("""from IPython.display import Markdown
Markdown(to_markdown(claim_rows(quick=SMOKE)))"""),
    md("""## Explore
Sliders redraw at once from the exact solution (`qlib.plots.heterogeneous.explorer_figure`);
the button adds a simulation at the current parameters (`qlib.heterogeneous.simulate_profile`)."""),
    code("""import ipywidgets as W
from IPython.display import display

n_w = W.IntSlider(value=6, min=2, max=60, description="servers n")
s_w = W.FloatLogSlider(value=10, base=10, min=0, max=3, description="spread")
r_w = W.FloatSlider(value=0.7, min=0.05, max=0.99, step=0.01, description="load rho")
button = W.Button(description="simulate")
out = W.Output()

def redraw(*_, sim=None):
    with out:
        out.clear_output(wait=True)
        fig = hp.explorer_figure(n_w.value, s_w.value, r_w.value, sim=sim)
        plt.show(fig)

def on_simulate(_):
    sim = H.simulate_profile(n_w.value, s_w.value, r_w.value,
                             events=20_000 if SMOKE else 200_000, replicas=16)
    redraw(sim=sim)

for w in (n_w, s_w, r_w):
    w.observe(redraw, names="value")
button.on_click(on_simulate)
display(W.VBox([W.HBox([n_w, s_w, r_w, button]), out]))
redraw()"""),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
nbf.write(nb, Path(__file__).with_name("03_who_works_the_most.ipynb"))
