"""The notebooks: text sources paired with their executed .ipynb, and every one runs in smoke mode.

Each notebook is a MyST Markdown file (the source) paired by jupytext with an .ipynb that keeps
the outputs of the full run; a pair that drifts apart fails here. Smoke runs send figures and
caches to a temporary folder, so the published figures are never overwritten by tiny runs.
Executing notebooks is slow: those tests carry ``@pytest.mark.slow`` (`pytest -m "not slow"`
skips them; `make test` runs everything).
"""

import importlib
import json

import nbformat
import pytest

from qlib import notebooks

PATHS = notebooks.notebook_paths()
IDS = [p.name for p in PATHS]
#: the cached studies each notebook draws: run first into the shared smoke cache (a cache hit when
#: the study tests already ran on either xdist worker), so the notebook reads their entries and the
#: study's smoke run is computed once per `make test`, whichever worker gets there first
STUDIES_OF = {"01_max_queue_length.md": ("max_length", "families"), "02_mixing_time.md": ("mixing",),
              "03_who_works_the_most.md": ("who_works_the_most",), "04_perfect_samples.md": ("perfect",)}


def _cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_there_are_notebooks():
    assert len(PATHS) >= 3, IDS
    assert all(p.suffix == ".md" for p in PATHS)
    assert set(STUDIES_OF) <= set(IDS), sorted(set(STUDIES_OF) - set(IDS))


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_text_source_and_ipynb_are_the_same_notebook(path):
    """The committed .ipynb has exactly the cells of its .md source (jupytext pairing)."""
    ipynb = notebooks.paired_ipynb(path)
    assert ipynb.exists(), f"{ipynb.name} is missing: run `make figures` (or jupytext --sync)"
    assert _cells(notebooks.read(path)) == _cells(notebooks.read(ipynb))
    assert notebooks.read(path).metadata["jupytext"]["formats"] == "ipynb,md:myst"


def test_drift_is_detected(tmp_path):
    """The pairing test can fail: one edited source line makes the pair differ."""
    src = PATHS[0].read_text()
    edited = tmp_path / PATHS[0].name
    edited.write_text(src.replace("import numpy as np", "import numpy as np  # edited", 1))
    assert _cells(notebooks.read(edited)) != _cells(notebooks.read(notebooks.paired_ipynb(PATHS[0])))


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_notebook_runs_in_smoke_mode(path, tmp_path, smoke_cache, monkeypatch):
    # the smoke cache the study tests fill: the notebook draws and checks its figures from those
    # entries instead of recomputing them
    monkeypatch.setenv("QLIB_CACHE", str(smoke_cache))
    for name in STUDIES_OF.get(path.name, ()):
        importlib.import_module(f"qlib.studies.{name}").run("smoke", progress=False)
    nb = notebooks.execute(path, smoke=True, timeout=600,
                           extra_env={"QLIB_FIGURES": str(tmp_path / "figures"),
                                      "QLIB_CACHE": str(smoke_cache)})
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert list((tmp_path / "figures").glob("*.png")), "the notebook saved no figure"
    out = tmp_path / "run.ipynb"
    nbformat.write(nb, out)
    text = out.read_text()
    assert str(tmp_path) not in text and str(smoke_cache) not in text, "an absolute path of this machine leaked into the outputs"
    assert notebooks.WIDGET_VIEW not in text and '"execution"' not in text


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_committed_notebook_has_no_widget_state(path):
    raw = json.loads(notebooks.paired_ipynb(path).read_text())
    assert "widgets" not in raw.get("metadata", {})
    assert all("widgets" not in c.get("metadata", {}) for c in raw["cells"])


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_notebook_reads_smoke_mode_in_one_parameters_cell(path):
    nb = notebooks.read(path)
    cells = [c for c in nb.cells if c.cell_type == "code" and "smoke_mode()" in c.source]
    assert len(cells) == 1
    assert any(c.cell_type == "markdown" for c in nb.cells[:2]), "a notebook opens with its claim"


def test_kernel_runs_over_ipc_without_the_tcp_warning(tmp_path):
    """The local kernel talks over IPC (issue 20, item 7): no "running over TCP without
    encryption" warning per notebook; and it gets qlib's XLA flags."""
    import subprocess
    import sys

    src = tmp_path / "tiny.md"
    src.write_text("---\njupyter:\n  jupytext:\n    text_representation:\n      extension: .md\n"
                   "      format_name: myst\n  kernelspec:\n    display_name: Python 3\n    language: python\n"
                   "    name: python3\n---\n\n```{code-cell} ipython3\nimport os\nprint(os.environ.get('XLA_FLAGS'))\n```\n")
    code = (f"from qlib import notebooks\nnb = notebooks.execute({str(src)!r}, smoke=True)\n"
            "print(nb.cells[0].outputs[0]['text'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "without encryption" not in out.stderr
    assert "xla_cpu_small_while_loop_byte_threshold" in out.stdout
