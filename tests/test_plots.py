"""qlib.plots (issue 20, item 5): the house style applies inside the figure functions and
savefig only; importing the plot modules leaves matplotlib's global rcParams alone."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")


def test_import_changes_no_rcparams():
    code = ("import matplotlib; matplotlib.use('Agg'); before = dict(matplotlib.rcParams)\n"
            "import qlib.plots, qlib.plots.max_length, qlib.plots.mixing, qlib.plots.who_works_the_most\n"
            "after = dict(matplotlib.rcParams)\n"
            "print(sorted(k for k in before if before[k] != after[k]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_figures_and_savefig_get_the_style(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from qlib import plots
    from qlib.plots import who_works_the_most as W
    from qlib.studies.who_works_the_most import profile

    monkeypatch.setenv("QLIB_FIGURES", str(tmp_path))
    grid_default = matplotlib.rcParams["axes.grid"]
    fig = W.band_figure(profile(4, 3.0, 0.5))
    ax = fig.axes[0]
    assert ax.xaxis._major_tick_kw.get("gridOn") is True  # axes.grid at creation
    assert not ax.spines["top"].get_visible()
    assert matplotlib.rcParams["axes.grid"] == grid_default  # and nothing leaked
    svg = plots.savefig(fig, "style_check", formats=("svg",))[0].read_text()
    plt.close(fig)
    fig2 = W.band_figure(profile(4, 3.0, 0.5))
    svg2 = plots.savefig(fig2, "style_check", formats=("svg",))[0].read_text()
    plt.close(fig2)
    assert svg == svg2  # the hash salt is applied at save time: same figure, same file



def _tiny_figure():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    return fig


def test_show_writes_figures_only_when_publishing(tmp_path, monkeypatch):
    """Running a notebook never changes the repository: figures reach figures/ only under
    QLIB_PUBLISH=1 (the runner of make figures), or the folder QLIB_FIGURES names."""
    from qlib import config, plots

    monkeypatch.delenv("QLIB_FIGURES", raising=False)
    monkeypatch.delenv("QLIB_PUBLISH", raising=False)
    monkeypatch.delenv("QLIB_SMOKE", raising=False)
    published = config.ROOT / "figures"
    before = {p: p.stat().st_mtime_ns for p in published.glob("*")}
    assert plots.save_target() is None
    plots.show(_tiny_figure(), "show_check")
    assert {p: p.stat().st_mtime_ns for p in published.glob("*")} == before
    monkeypatch.setenv("QLIB_FIGURES", str(tmp_path))
    plots.show(_tiny_figure(), "show_check")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["show_check.png", "show_check.svg"]
    monkeypatch.delenv("QLIB_FIGURES")
    monkeypatch.setenv("QLIB_PUBLISH", "1")
    assert plots.save_target() == published


def test_smoke_figures_say_smoke(monkeypatch):
    from qlib import plots

    monkeypatch.delenv("QLIB_FIGURES", raising=False)
    monkeypatch.delenv("QLIB_PUBLISH", raising=False)
    fig = _tiny_figure()
    monkeypatch.setenv("QLIB_SMOKE", "0")
    plots.show(fig, "smoke_check")
    assert not fig.texts
    monkeypatch.setenv("QLIB_SMOKE", "1")
    plots.show(fig, "smoke_check")
    assert any("smoke run" in t.get_text() for t in fig.texts)
