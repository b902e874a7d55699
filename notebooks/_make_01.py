"""Generate notebooks/01_max_queue_length.ipynb (outputs are not committed; `make figures` runs it).

Run: .venv/bin/python notebooks/_make_01.py
"""

from pathlib import Path

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell

cells = [
    md(r"""# 01 — The maximum queue length concentrates on k

**Model** (Brightwell & Luczak, *The supermarket model with arrival rate tending to one*, arXiv:1201.5523).
n single-server FIFO queues with Exp(1) service; customers arrive at rate λn; each samples d queues
uniformly (with replacement) and joins a shortest. We simulate the exact count chain
u_i = #queues with length ≥ i (`qlib.supermarket.simulate`); one unit of time is one mean service time.

**Claims** (λ → 1, d → ∞):
1. in equilibrium the maximum queue length concentrates on **k = ⌈log(1/(1−λ)) / log d⌉**;
2. most queues have length exactly k, and the counts of shorter queues are small and predictable.

**Theory.** The fluid fixed point s_i = λ^((d^i−1)/(d−1)) (fraction of queues with length ≥ i) gives,
when (1−λ)d^(k−1) → 0 and (1−λ)d^k → ∞: idle fraction 1−λ (exactly, for every n), fraction (1−λ)dⁱ at
length i < k, 1−(1−λ)d^(k−1) at k, and exp(−(1−λ)d^k) above k. These are sharp only away from the
integer boundaries (1−λ)d^j = 1, and only as n → ∞: we show both effects. The 1/n correction is the
*refined mean field* of Gast & Van Houdt (2017): E[u_i]/n = s_i + V_i/n with
V = −A⁻¹·½·Σ_jk B_{·jk} W_jk, where A and B are the Jacobian and Hessian of the fluid drift
(JAX autodiff) and W solves the Lyapunov equation AW + WAᵀ + Q = 0 (`qlib.supermarket.refined_mean_field`).

Every run starts at the fluid fixed point and lasts a stated number of relaxation times
τ = 1/min|Re eig A| (model time), so equilibrium studies are cheap even at n = 10⁷."""),
    code("""import numpy as np
import matplotlib.pyplot as plt

import qlib
import qlib.config
from qlib.plots import savefig
from qlib.plots import max_length as P
from qlib.supermarket import equilibrium as eq
from qlib.supermarket import claims as C

qlib.config.enable_compilation_cache()"""),
    md("## Parameters\n`SMOKE` (env `QLIB_SMOKE=1`) picks tiny runs that only check the notebook executes."),
    code("""SMOKE = qlib.config.smoke_mode()
SEED = 0
if SMOKE:
    MAP = dict(one_minus_lams=[1e-1, 1e-2], ds=[10, 100], n=1_000, taus=1.0, min_time=2.0, max_time=5.0, replicas=2)
    PROFILES = dict(cases=[(10**-1.6, 10), (1e-2, 10), (10**-2.4, 10)], ns=[1_000], levels=6,
                    taus=1.0, min_time=2.0, max_time=5.0, max_steps=2e4, replicas=2)
    CONC = dict(alpha=0.75, beta=0.5, ns=[100, 1_000], taus=1.0, min_time=2.0, max_time=5.0, max_steps=2e4, replicas=2)
    FINITE = dict(d=100, lam=0.999, ns=[1_000, 3_000], level=3, taus=0.5, max_steps=2e5, replicas=2, seed=4)
    EMPTY = dict(n=1_000, d=10, lam=0.99, time=5.0, points=20, replicas=2)
else:
    MAP = dict(one_minus_lams=list(eq.grid(1e-1, 1e-4, 8)), ds=[int(x) for x in eq.grid(2, 1000, 8, integer=True)],
               n=10_000, taus=10.0, min_time=20.0, max_time=200.0, replicas=2)
    # either side of the boundary (1-lam) d^2 = 1 at d = 10, and on it
    PROFILES = dict(cases=[(10**-1.6, 10), (1e-2, 10), (10**-2.4, 10)], ns=[1_000, 10_000, 100_000, 1_000_000],
                    levels=6, taus=5.0, min_time=10.0, max_time=500.0, max_steps=1e7, replicas=4)
    # lam = 1 - n^-0.75, d = floor(n^0.5): k = ceil(1.5) = 2, (1-lam)d = n^-0.25 -> 0, (1-lam)d^2 = n^0.25 -> oo
    CONC = dict(alpha=0.75, beta=0.5, ns=[100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000],
                taus=5.0, min_time=10.0, max_time=500.0, max_steps=2e7, replicas=4)
    FINITE = dict(C.FINITE_N, **C.FINITE_N_RUN)  # the same (cached) sweep as the claims table
    EMPTY = dict(n=10_000, d=10, lam=0.99, time=300.0, points=150, replicas=4)"""),
    md("## Compute (cached in `.qlib_cache/`: reruns are free)"),
    code("""fmap = eq.max_length_map(**MAP, seed=SEED)
prof = eq.profile_sweep(**PROFILES, seed=SEED)
conc = eq.concentration_sweep(**CONC, seed=SEED)
fin = eq.finite_n_sweep(**FINITE)
empty = eq.from_empty_run(**EMPTY, seed=SEED)"""),
    md(r"""## (a) The map over (1−λ, d)

Colour: predicted k; black lines: the boundaries (1−λ)d^j = 1 where k jumps. Markers: the simulated
modal maximum (the length the maximum takes most of the time) at n = 10⁴, filled where it equals k.
Red rings mark a modal maximum different from k, with its value; hollow markers: runs shorter than
5 relaxation times τ (τ reaches 10⁴ time units in the small-d, small-(1−λ) corner).

**What the map shows.** At n = 10⁴ the modal maximum equals k only for large d, away from the
boundaries (in the full run: about a third of the grid). Elsewhere it is k + 1 or more, because the
asymptotic statement needs (1−λ)d^k ≫ log n: for small d the fluid tail s_{k+1} ≈ exp(−(1−λ)d^k) is
not small against 1/n. The fluid profile at this n predicts the observed maximum almost everywhere:
the largest i with n·s_i ≥ ½ (black crosses mark the few points where even that is off; the count
is printed below). This is a finite-n statement, not a failure of the theorem, which is about
λ → 1, d → ∞ jointly with n."""),
    code("""fig = P.map_figure(fmap, n=MAP["n"])
savefig(fig, "01a_max_length_map")
plt.show()
agree_k = (fmap["modal_max"] == fmap["k"])
agree_fluid = (fmap["modal_max"] == fmap["fluid_max"])
print(f"modal max == k at {agree_k.sum()} of {agree_k.size} grid points; "
      f"== fluid finite-n maximum at {agree_fluid.sum()} of {agree_fluid.size}")"""),
    md(r"""## (b) The equilibrium profile, on either side of a boundary and on it

Fraction of queues with length exactly i at d = 10 for log(1/(1−λ))/log d = 1.6, 2 (a boundary) and
2.4; simulation at n = 10³…10⁶ (95% CI over replicas), the fluid fixed point (black bars) and the
asymptotic formulas (green squares). On the boundary (1−λ)d² = 1 two levels share the mass: the
asymptotic formulas (which put ~all mass at k) are not sharp there. At d = 10 they are only
first-order accurate even away from it: (1−λ)d^(k−1) is not small."""),
    code("""fig = P.profiles_figure(prof)
savefig(fig, "01b_profiles")
plt.show()"""),
    md(r"""## (c) Concentration as n grows

Along λ = 1 − n^(−α), d = ⌊n^β⌋ with α = 0.75, β = 0.5 (k = 2 throughout): the fraction of queues at
exactly k tends to 1 at the slow rate set by (1−λ)d^(k−1) = n^(−1/4), following the fluid and
asymptotic values. The fraction of time the maximum equals k is **not** monotone: at n ≤ 10⁵ the
finite-n effect of (d) puts a few queues at k + 1 much of the time (the expected number above k,
from the refined mean field, is of order one there: red dash-dotted curve, a Poisson heuristic);
only from n ≈ 10⁶ does the maximum sit at k. Caveat, stated plainly: the n = 10⁶ and 10⁷ runs are
shorter than τ (model time printed below); they start at the fluid fixed point, and the refined
mean field puts the equilibrium mean number of queues above k at n·(s₃ + V₃/n) ≈ 10⁻⁵ or less there."""),
    code("""fig = P.concentration_figure(conc, CONC["alpha"], CONC["beta"], CONC["replicas"])
savefig(fig, "01c_concentration")
plt.show()
print("n:", conc["n"].astype(int), "\\nd:", conc["d"].astype(int), "\\nmodel time simulated:", conc["time"].round(1))"""),
    md(r"""## (d) The finite-n effect and the refined mean field

At λ = 0.999, d = 100 the fluid tail at length 3 is s₃ ≈ 4·10⁻⁵, but at finite n the simulated tail is
larger — by orders of magnitude at n ≤ 3·10⁴. The mechanism is in the exact stationary identity
E[u₃] = λn·E[(u₂/n)^d]: u₂/n fluctuates (variance W₂₂/n with W₂₂ ≈ 90 from the Lyapunov equation, on
the slow time scale τ ≈ 93), and x ↦ x^100 is so convex that these fluctuations raise the mean.
The refined mean field s₃ + V₃/n is the first term of that effect in 1/n. It undershoots badly at
n ≤ 3·10⁴ (where d²W₂₂/(n s₂²) ≳ 1 and higher orders dominate) and agrees with the simulation, within
its 95% CI, at n = 10⁵. Note: MODELS.md quotes "~25× fluid at n = 10⁵"; with 12 replicas × 5 τ we
measure a smaller factor (printed below, with its CI). The estimate is noisy because rare excursions
of u₂ drive the tail; the error bars are over independent replicas."""),
    code("""fig = P.finite_n_figure(fin, FINITE["replicas"], level=FINITE["level"], lam=FINITE["lam"], d=FINITE["d"])
savefig(fig, "01d_finite_n")
plt.show()
for n, t, se, r, c in zip(fin["n"], fin["tail"], fin["tail_se"], fin["refined"], fin["taus_covered"]):
    print(f"n = {n:8.0f}: tail {t:.2e} ± {se:.1e} (SE) = {t / fin['fluid']:6.1f}x fluid; "
          f"refined {r / fin['fluid']:6.1f}x fluid; run {c:.1f} tau")"""),
    md(r"""## (e) From empty to equilibrium

The one run that starts from empty queues (n = 10⁴, d = 10, λ = 0.99): u_i/n against time,
with the fluid ODE from empty (dashed). Equilibrium studies above start at the fluid fixed point instead."""),
    code("""fig = P.from_empty_figure(empty, EMPTY["n"], EMPTY["d"], EMPTY["lam"])
savefig(fig, "01e_from_empty")
plt.show()"""),
    md("""## Claims table rows

Computed by `qlib.supermarket.claims.max_length_rows` (the same function `python -m qlib reproduce`
calls; in full mode the finite-n row reuses the cached sweep of figure (d)). Skipped in smoke mode."""),
    code("""from qlib.claims import to_markdown
from IPython.display import Markdown, display

if SMOKE:
    print("smoke mode: claims rows skipped (tests/test_max_length.py runs them in quick mode)")
else:
    rows = C.max_length_rows(quick=False)
    display(Markdown(to_markdown(rows)))"""),
    md(r"""## Explore

Move 1−λ (log scale), d and n: the fluid profile, its 1/n refinement at this n, the asymptotic
formulas and the predicted k update at once (`eq.profile_view`). The button runs a short simulation
from the fluid fixed point (`eq.interactive_run`, at most 2·10⁶ steps per replica) and overlays it."""),
    code("""import ipywidgets as W
from IPython.display import display

s_eps = W.FloatLogSlider(value=1e-2, base=10, min=-4, max=-1, step=0.05, description="1 - lam")
s_d = W.IntSlider(value=10, min=2, max=1000, description="d")
s_n = W.FloatLogSlider(value=1e4, base=10, min=2, max=7, step=0.5, description="n")
button = W.Button(description="simulate")
out = W.Output()
state = {"sim": None}

def redraw(*_):
    state["sim"] = None if _ else state["sim"]
    with out:
        out.clear_output(wait=True)
        view = eq.profile_view(s_eps.value, s_d.value, int(s_n.value))
        P.profile_view_figure(view, state["sim"])
        plt.show()

def run_sim(_):
    with out:
        state["sim"] = eq.interactive_run(s_eps.value, s_d.value, int(s_n.value), progress=True)
    redraw()

for s in (s_eps, s_d, s_n):
    s.observe(redraw, names="value")
button.on_click(run_sim)
display(W.VBox([W.HBox([s_eps, s_d, s_n, button]), out]))
redraw()"""),
]

nb = nbf.v4.new_notebook(cells=cells)
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
path = Path(__file__).with_name("01_max_queue_length.ipynb")
nbf.write(nb, path)
print("wrote", path)
