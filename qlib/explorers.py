"""The notebooks' slider explorers: theory that redraws at once, figures updated in place.

A slider change recomputes theory in NumPy (no JAX compile per value: the 1/n and 1/n^2 terms
of the refined mean field from closed-form derivatives, :func:`refined_profile`), moves the
existing artists of one figure (``set_data``), and sends the figure to an ``ipywidgets.Image``
(:class:`Canvas`): no new figure, no cleared output. Sliders update on release
(``continuous_update=False``), so a drag costs one redraw. A "simulate" button runs the study's
short simulation, with its progress shown, and overlays it.

The functions are the unit-tested part (tests/test_explorers.py checks them against
:func:`qlib.studies.max_length.profile_view` and :func:`qlib.supermarket.refined_mean_field`);
the classes wire them to widgets.
"""

from __future__ import annotations

import io

import numpy as np

from qlib.supermarket.regime import (  # noqa: F401  (re-exported: the explorers' tested functions)
    ProfileView,
    RefinedProfile,
    exact_lengths,
    falling_factorial,
    fluctuation_view,
    fluid_max_length,
    mixing_scales,
    power_derivative,
    profile_view,
    pure_derivatives,
    refined_profile,
)
from qlib.supermarket.theory import predicted_max_length

# --------------------------------------------------------------------------- widgets


def fmt(x: float, digits: int = 4) -> str:
    """A parameter for a title: ``digits`` significant digits, no float noise (0.91, not
    0.9099999999999999)."""
    return f"{float(x):.{digits}g}"


def new_figure(figsize: tuple[float, float], ncols: int = 1, dpi: int = 90):
    """A figure on its own Agg canvas, outside pyplot (never shown twice, never closed by it),
    and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, ncols)


class Canvas:
    """One matplotlib figure shown as an ``ipywidgets.Image`` and redrawn in place.

    Callers change the artists, then :meth:`draw`. The ``animated`` artists (what a slider moves:
    lines, markers, a title text) are drawn over a cached background of the rest (axes, ticks,
    labels, legend: the costly text layout), which is redrawn only when it changes (limits,
    titles, legend texts). The PNG goes to the same widget.
    """

    def __init__(self, fig, animated=()):
        import ipywidgets as W

        self.fig, self.animated = fig, list(animated)
        for a in self.animated:
            a.set_animated(True)
        self._bg, self._key = None, None
        self.widget = W.Image(format="png")
        self.draw()

    def _static_key(self):
        key = []
        for ax in self.fig.axes:
            leg = ax.get_legend()
            key.append(
                (
                    tuple(ax.get_xlim()),
                    tuple(ax.get_ylim()),
                    ax.get_title(),
                    tuple(t.get_text() for t in leg.get_texts()) if leg else (),
                )
            )
        return tuple(key)

    def png(self) -> bytes:
        from PIL import Image

        c = self.fig.canvas
        key = self._static_key()
        if self._bg is None or key != self._key:
            c.draw()  # everything but the animated artists
            self._bg, self._key = c.copy_from_bbox(self.fig.bbox), key
        else:
            c.restore_region(self._bg)
        for a in self.animated:
            if a.get_visible():
                self.fig.draw_artist(a)
        w, h = c.get_width_height(physical=True)
        buf = io.BytesIO()
        Image.frombuffer("RGBA", (w, h), c.buffer_rgba()).save(buf, format="png", compress_level=1)
        return buf.getvalue()

    def draw(self) -> None:
        self.widget.value = self.png()


def _title(ax, fontsize: float = 9):
    """A title that a slider changes: an animated text where the (blank, static) title sits."""
    ax.set_title(" ", fontsize=fontsize)
    return ax.text(0.5, 1.02, "", transform=ax.transAxes, ha="center", va="bottom", fontsize=fontsize)


def _slider_kw() -> dict:
    return dict(continuous_update=False, style={"description_width": "initial"})


def _connect(explorer, sliders) -> None:
    """Draw ``explorer`` once, redraw it when a slider is released, run its simulation on the
    button; its widget is the sliders and the button above the figure and the log."""
    import ipywidgets as W

    explorer.update()
    for s in sliders:
        s.observe(explorer.update, names="value")
    explorer.button.on_click(explorer.run_simulation)
    explorer.widget = W.VBox([W.HBox([*sliders, explorer.button]), explorer.canvas.widget, explorer.log])


class ProfileExplorer:
    """Notebook 01: sliders for 1-lam, d, n redraw the fluid, refined and asymptotic profiles
    (:func:`profile_view`); "simulate" overlays ``study.interactive_run`` at the sliders' values.

    ``simulate``: a callable (one_minus_lam, d, n) -> an InteractiveRun-like result (``p``,
    ``p_se``, ``taus``, ``burn_taus``), e.g. ``qlib.studies.max_length.interactive_run``.
    """

    def __init__(self, simulate=None, one_minus_lam: float = 1e-2, d: int = 10, n: float = 1e4):
        import ipywidgets as W

        from qlib.plots import style  # matplotlib only once a widget is built (optional extra)

        self.simulate_fn = simulate
        self.eps = W.FloatLogSlider(
            value=one_minus_lam,
            base=10,
            min=-4,
            max=-1,
            step=0.05,
            description="1 − λ",
            readout_format=".2g",
            **_slider_kw(),
        )
        self.d = W.IntSlider(value=d, min=2, max=1000, description="d", **_slider_kw())
        self.n = W.FloatLogSlider(
            value=n, base=10, min=2, max=7, step=0.5, description="n", readout_format=".0e", **_slider_kw()
        )
        self.button = W.Button(description="simulate", tooltip="a short run from empty (seconds)")
        self.log = W.Output()
        with style():
            fig, ax = new_figure((6.4, 3.8))
            (self.fluid,) = ax.plot([], [], "o-", label="fluid fixed point")
            (self.refined,) = ax.plot([], [], "^--", label="refined (1/n, 1/n²)")
            (self.asym,) = ax.plot(
                [], [], "s", mfc="none", mec="tab:green", ms=9, label="asymptotic formulas"
            )
            (self.sim,) = ax.plot([], [], "ko", ms=4, label="simulation (the button)")
            self.k_line = ax.axvline(0, color="grey", ls=":", label="predicted k")
            ax.set(
                yscale="log",
                ylim=(1e-6, 1.5),
                xlim=(-0.5, 10.5),
                xlabel="queue length $i$",
                ylabel="fraction of queues with length $i$",
            )
            self.title = _title(ax)
            ax.legend(fontsize=7, loc="upper right")
            fig.tight_layout()
        self.ax = ax
        self.canvas = Canvas(
            fig, animated=[self.fluid, self.refined, self.asym, self.sim, self.k_line, self.title]
        )
        _connect(self, (self.eps, self.d, self.n))

    def update(self, change=None) -> None:
        """Recompute the theory at the sliders' values and move the artists (a simulation of
        other parameters is removed)."""
        v = profile_view(self.eps.value, self.d.value, int(self.n.value))
        self.view = v
        self.fluid.set_data(v.levels, v.fluid)
        self.refined.set_data(v.levels, v.refined)
        self.asym.set_data(v.levels, v.asymptotic)
        if change is not None:
            self.sim.set_data([], [])
            self.log.clear_output()
        self.k_line.set_xdata([v.k, v.k])
        self.ax.set_xlim(-0.5, max(10, v.levels[-1]) + 0.5)  # a new background only past 10 levels
        sd = f", SD(N) ≈ {fmt(fluctuation_view(int(v.n), v.d, v.lam).sd_N, 3)}" if v.d >= 2 else ""
        self.title.set_text(
            f"λ = {fmt(v.lam, 6)}, d = {v.d}, n = {fmt(v.n, 3)}: k = {v.k}, "
            f"fluid max at n: {v.fluid_max}, τ = {fmt(v.tau, 3)}{sd}"
        )
        self.canvas.draw()

    def run_simulation(self, _=None) -> None:
        """The button: a short simulation at the sliders' values (progress shown below the figure)."""
        if self.simulate_fn is None:
            return
        self.log.clear_output()
        with self.log:
            print("simulating at the sliders' values ...", flush=True)
            r = self.simulate_fn(self.eps.value, self.d.value, int(self.n.value))
        m = min(len(r.p), self.view.levels.size)
        self.sim.set_data(self.view.levels[:m], r.p[:m])
        with self.log:
            print(f"simulation: {r.taus:.1f} τ measured after a {r.burn_taus:.1f} τ burn-in")
        self.canvas.draw()


class ServersExplorer:
    """Notebook 03: sliders for the number of servers, the spread of their rates and the load
    redraw the exact P_j and mu_j P_j, and informed against uninformed routing (n <= 10);
    "simulate" overlays a simulation (``simulate(n, spread, rho)`` -> a SimulationResult)."""

    def __init__(self, simulate=None, n: int = 6, spread: float = 10.0, rho: float = 0.7):
        import ipywidgets as W

        from qlib.plots import style  # matplotlib only once a widget is built (optional extra)

        self.simulate_fn = simulate
        self.n_w = W.IntSlider(value=n, min=2, max=60, description="servers n", **_slider_kw())
        self.s_w = W.FloatLogSlider(
            value=spread, base=10, min=0, max=3, description="spread", readout_format=".3g", **_slider_kw()
        )
        self.r_w = W.FloatSlider(
            value=rho, min=0.05, max=0.99, step=0.01, description="load ρ", **_slider_kw()
        )
        self.button = W.Button(description="simulate")
        self.log = W.Output()
        with style():
            fig, (ax, bx) = new_figure((9.0, 3.6), ncols=2)
            (self.busy,) = ax.plot([], [], "o-", ms=4, label="$P_j$")
            (self.work,) = ax.plot([], [], "s-", ms=4, label=r"$\mu_j P_j / \max_i \mu_i$")
            (self.sim_busy,) = ax.plot([], [], "kx", label="simulation")
            (self.sim_work,) = ax.plot([], [], "kx")
            # against the server's rank (j - 1/2)/n: fixed limits whatever n and the spread
            rank = "server rank $(j - \\frac{1}{2})/n$, fastest first"
            ax.set(xlabel=rank, xlim=(0, 1), ylim=(0, 1.02))
            ax.legend(fontsize=8, loc="upper left")
            (self.unin,) = bx.plot([], [], "o-", ms=4, label="uninformed (uniform idle)")
            (self.inf,) = bx.plot([], [], "s--", ms=4, label="informed (fastest idle)")
            self.note = bx.text(0.5, 0.5, "", ha="center", transform=bx.transAxes)
            bx.set(xlabel=rank, ylabel="$P_j$", xlim=(0, 1), ylim=(0, 1.02))
            bx.legend(fontsize=8, loc="lower right")
            self.title = _title(ax)
            fig.tight_layout()
        self.ax, self.bx = ax, bx
        self.canvas = Canvas(
            fig,
            animated=[
                self.busy,
                self.work,
                self.sim_busy,
                self.sim_work,
                self.unin,
                self.inf,
                self.note,
                self.title,
            ],
        )
        _connect(self, (self.n_w, self.s_w, self.r_w))

    def update(self, change=None) -> None:
        from qlib.studies.who_works_the_most import profile  # the study (and JAX) only at a redraw

        p = profile(self.n_w.value, self.s_w.value, self.r_w.value)
        self.p = p
        order = np.argsort(-p.mus, kind="stable")  # fastest first
        self.order = order
        x = (np.arange(p.n) + 0.5) / p.n
        self.x = x
        self.busy.set_data(x, p.busy[order])
        self.work.set_data(x, p.work[order] / p.mus.max())
        if change is not None:
            for a in (self.sim_busy, self.sim_work):
                a.set_data([], [])
        self.title.set_text(f"n = {p.n}, λ = {fmt(p.lam)}, P(wait) = {p.wait:.3f}")
        j = x
        self.unin.set_data(j, p.busy[order])
        if p.informed_busy is not None:
            self.inf.set_data(j, p.informed_busy[order])
            self.note.set_text("")
        else:
            self.inf.set_data([], [])
            self.note.set_text("informed: exact solve only for n ≤ 10")
        self.canvas.draw()

    def run_simulation(self, _=None) -> None:
        if self.simulate_fn is None:
            return
        self.log.clear_output()
        with self.log:
            print("simulating at the sliders' values ...", flush=True)
            sim = self.simulate_fn(self.n_w.value, self.s_w.value, self.r_w.value)
        o = np.argsort(-np.asarray(sim.mus), kind="stable")
        x = (np.arange(len(o)) + 0.5) / len(o)
        self.sim_busy.set_data(x, np.asarray(sim.estimate("busy_fraction").mean)[o])
        self.sim_work.set_data(x, np.asarray(sim.estimate("throughput").mean)[o] / self.p.mus.max())
        self.canvas.draw()


class MixingExplorer:
    #: the time axis (steps), wide enough for every slider setting's scales: fixed, so that a
    #: slider moves lines over a cached background
    XLIM = (1e1, 1e10)

    """Notebook 02: sliders for n, d and lam move the theory's time scales (:func:`mixing_scales`)
    at once; "simulate" runs the coupled pair (``simulate(n, d, lam)`` -> an Exploration of
    ``qlib.studies.mixing.explore``: meeting times ``T``, ``times``, ``l1``) and draws the
    survival of the meeting time and the L1 distance of the pair against those scales."""

    def __init__(self, simulate=None, n: int = 300, d: int = 5, lam: float = 0.9):
        import ipywidgets as W

        from qlib.plots import style  # matplotlib only once a widget is built (optional extra)

        self.simulate_fn = simulate
        self.n_w = W.IntSlider(value=n, min=50, max=5000, step=50, description="n", **_slider_kw())
        # up to the k = 3 window: d = 21, lam = 0.999 is k = 3 with (1-lam) d^2 = 0.44 (docs/models.md)
        self.d_w = W.IntSlider(value=d, min=2, max=40, description="d", **_slider_kw())
        self.lam_w = W.FloatSlider(value=lam, min=0.5, max=0.999, step=0.0005, description="λ",
                                   readout_format=".4f", **_slider_kw())
        self.button = W.Button(description="simulate")
        self.log = W.Output()
        with style():
            fig, (ax, bx) = new_figure((9.0, 3.4), ncols=2)
            (self.surv,) = ax.plot(
                [], [], drawstyle="steps-post", color="k", label="simulated $P(T_{meet} > t)$"
            )
            (self.l1,) = bx.plot([], [], color="k", label="simulated")
            self.lines = {}
            for a in (ax, bx):
                for key, c, lab in (
                    ("lower", "tab:blue", r"$n(\lambda d)^{k-1}$"),
                    ("upper", "tab:red", r"$k d^{k-1} n \ln n$"),
                    ("drain", "tab:grey", r"$(1+\lambda)n/(1-\lambda)$"),
                    ("tau_int", "tab:green", r"$\tau_{\rm int}(N)$, linear noise"),
                    ("predicted", "tab:purple", r"$\tau_{fluid} \ln SD(N)$: the mixing time predicted"),
                ):
                    self.lines[a, key] = a.axvline(1, color=c, ls="--", lw=1, label=lab)
            ax.set(xscale="log", ylim=(0, 1.02), xlabel="t (steps)", ylabel=r"$P(T_{meet} > t)$")
            bx.set(xscale="log", ylim=(0, 1.02), xlabel="t (steps)", ylabel=r"$E\sum_i |u_i - u'_i| / n$")
            for a in (ax, bx):
                a.set_xlim(*self.XLIM)
            ax.legend(fontsize=7, loc="lower left")
            self.title = _title(ax)
            fig.tight_layout()
        self.ax, self.bx = ax, bx
        self.canvas = Canvas(fig, animated=[self.surv, self.l1, self.title, *self.lines.values()])
        _connect(self, (self.n_w, self.d_w, self.lam_w))

    def update(self, change=None) -> None:
        s = mixing_scales(self.n_w.value, self.d_w.value, self.lam_w.value)
        self.scales = s
        for (_a, key), line in self.lines.items():
            line.set_xdata([s[key], s[key]])
        if change is not None:
            self.surv.set_data([], [])
            self.l1.set_data([], [])
        self.title.set_text(
            f"n = {self.n_w.value}, d = {self.d_w.value}, λ = {fmt(self.lam_w.value)}: k = {s['k']}, "
            f"SD(N) ≈ {fmt(s['sd_N'], 3)}"
        )
        self.canvas.draw()

    def run_simulation(self, _=None) -> None:
        if self.simulate_fn is None:
            return
        self.log.clear_output()
        with self.log:
            print("running the coupled pair at the sliders' values ...", flush=True)
            x = self.simulate_fn(self.n_w.value, self.d_w.value, self.lam_w.value)
        T = np.sort(np.asarray(x.T, float))
        self.surv.set_data(np.concatenate([[1.0], T]), 1 - np.arange(T.size + 1) / T.size)
        t = np.asarray(x.times, float)
        keep = t > 0
        self.l1.set_data(t[keep], np.asarray(x.l1)[keep])
        self.bx.set_ylim(0, max(1e-9, float(np.max(x.l1))) * 1.05)
        self.canvas.draw()


class PerfectExplorer:
    """Notebook 04: sliders for n, d, lam and the capacity L move the fluid prediction (the
    predicted maximum k and the fluid maximum at n) at once; "sample" draws exact samples
    (``sample(n, d, lam, capacity)`` -> an Exploration of ``qlib.studies.perfect.explore``) and
    shows the law of their longest queue."""

    def __init__(self, sample=None, n: int = 100, d: int = 5, lam: float = 0.9, capacity: int = 4):
        import ipywidgets as W

        from qlib.plots import style  # matplotlib only once a widget is built (optional extra)

        self.sample_fn = sample
        self.n_w = W.IntSlider(value=n, min=10, max=2000, step=10, description="n", **_slider_kw())
        self.d_w = W.IntSlider(value=d, min=2, max=20, description="d", **_slider_kw())
        self.lam_w = W.FloatSlider(value=lam, min=0.5, max=0.98, step=0.01, description="λ", **_slider_kw())
        self.cap_w = W.IntSlider(value=capacity, min=1, max=8, description="capacity L", **_slider_kw())
        self.button = W.Button(description="sample")
        self.log = W.Output()
        with style():
            fig, ax = new_figure((6.0, 3.4))
            (self.law,) = ax.plot([], [], "o", color="C2", ms=7, label="exact samples")
            self.lo_hi = ax.vlines([], [], [], color="C2")
            self.k_line = ax.axvline(0, color="grey", ls=":", label=r"predicted $k$")
            self.fl_line = ax.axvline(0, color="tab:red", ls="--", lw=1, label="fluid maximum at $n$")
            ax.set(xlabel="longest queue", ylabel="fraction of samples", ylim=(0, 1.05))
            ax.legend(fontsize=7, loc="upper left")
            self.title = _title(ax, 8)
            fig.tight_layout()
        self.ax = ax
        self.canvas = Canvas(fig, animated=[self.law, self.lo_hi, self.k_line, self.fl_line, self.title])
        _connect(self, (self.n_w, self.d_w, self.lam_w, self.cap_w))

    def update(self, change=None) -> None:
        n, d, lam, L = self.n_w.value, self.d_w.value, self.lam_w.value, self.cap_w.value
        k = min(int(predicted_max_length(d, lam)), L)
        fl = min(fluid_max_length(n, d, lam), L)
        self.k_line.set_xdata([k, k])
        self.fl_line.set_xdata([fl + 0.08, fl + 0.08])  # beside k when they agree
        if change is not None:
            self.law.set_data([], [])
            self.lo_hi.set_segments([])
        self.ax.set_xlim(-0.5, L + 0.5)
        self.title.set_text(f"n = {n}, d = {d}, λ = {fmt(lam)}, L = {L}: predicted k = {k}")
        self.canvas.draw()

    def run_simulation(self, _=None) -> None:
        if self.sample_fn is None:
            return
        self.log.clear_output()
        with self.log:
            print("drawing exact samples at the sliders' values ...", flush=True)
            x = self.sample_fn(self.n_w.value, self.d_w.value, self.lam_w.value, self.cap_w.value)
        i = np.arange(np.asarray(x.max_law).size)
        self.law.set_data(i, x.max_law)
        self.lo_hi.set_segments([[(j, lo), (j, hi)] for j, lo, hi in zip(i, x.max_low, x.max_high)])
        self.title.set_text(
            f"{self.title.get_text()}; {np.shape(x.samples)[0]} exact samples, mean "
            f"coalescence {np.mean(x.coalescence):.3g} steps"
        )
        self.canvas.draw()
