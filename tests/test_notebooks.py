"""The notebooks: text sources beside their executed .ipynb, every one runs in smoke mode, and
running or opening them in JupyterLab changes no tracked file (docs/notebooks.md).

Each notebook is a MyST Markdown file (the notebook a user opens and runs) with an executed copy,
an .ipynb that keeps the outputs of the full run (written by `make figures` only); a copy whose
cells drift from the source fails here. Smoke runs send figures and caches to a temporary folder,
so the published figures are never overwritten by tiny runs.
Executing notebooks is slow: those tests carry ``@pytest.mark.slow`` (`pytest -m "not slow"`
skips them; `make test` runs everything).
"""

import importlib
import json
import re

import nbformat
import pytest

from qlib import notebooks, runner

PATHS = notebooks.notebook_paths()
IDS = [p.name for p in PATHS]
#: the cached studies each notebook draws: run first into the shared smoke cache (a cache hit when
#: the study tests already ran on either xdist worker), so the notebook reads their entries and the
#: study's smoke run is computed once per `make test`, whichever worker gets there first
STUDIES_OF = {"01_max_queue_length.md": ("max_length", "families", "fluctuations"),
              "02_mixing_time.md": ("mixing", "mixing_regime", "fluctuations"),
              "03_who_works_the_most.md": ("who_works_the_most",), "04_perfect_samples.md": ("perfect",)}


def _cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_there_are_notebooks():
    assert len(PATHS) >= 3, IDS
    assert all(p.suffix == ".md" for p in PATHS)
    assert set(STUDIES_OF) <= set(IDS), sorted(set(STUDIES_OF) - set(IDS))


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_text_source_and_ipynb_are_the_same_notebook(path):
    """The committed .ipynb has exactly the cells of its .md source; neither is paired with the
    other (saving one in JupyterLab must not rewrite the other), and both carry the kernelspec
    JupyterLab writes on opening (else opening marks them modified)."""
    ipynb = notebooks.paired_ipynb(path)
    assert ipynb.exists(), f"{ipynb.name} is missing: run `make figures`"
    src, copy = notebooks.read(path), notebooks.read(ipynb)
    assert _cells(src) == _cells(copy)
    for nb in (src, copy):
        assert "formats" not in nb.metadata.get("jupytext",
                                                {}), "a jupytext pairing makes a save write both files"
        assert nb.metadata["kernelspec"] == notebooks.KERNELSPEC


def _contents_manager(root):
    from jupyter_server.services.contents.filemanager import FileContentsManager
    from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

    return build_sync_jupytext_contents_manager_class(FileContentsManager)(root_dir=str(root))


@pytest.mark.parametrize("jupytext_version", ["locked", "9.99.1"], ids=["jupytext-locked", "jupytext-other"])
@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_running_in_jupyterlab_rewrites_nothing(path, jupytext_version, tmp_path, monkeypatch):
    """What JupyterLab does to an opened, run and autosaved notebook, through jupytext's contents
    manager: kernel metadata, outputs, execution counts and cell metadata added, then saved. The .md
    comes back byte for byte and its executed copy is not touched: with the locked jupytext and with
    another (the version a header would name is the one jupytext.header writes), since the project's
    jupytext configuration (pyproject.toml, copied beside the notebook as it sits above it in the
    repository) filters the version out of the header."""
    import shutil

    import jupytext.header

    if jupytext_version != "locked":
        monkeypatch.setattr(jupytext.header, "__version__", jupytext_version)
    for p in (path, notebooks.paired_ipynb(path), notebooks.ROOT / "pyproject.toml"):
        shutil.copy(p, tmp_path / p.name)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    cm = _contents_manager(tmp_path)
    nb = cm.get(path.name, content=True, type="notebook")["content"]
    nb.metadata["kernelspec"] = dict(notebooks.KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = [nbformat.v4.new_output("stream", text="typed by nobody")]
            c.execution_count = 7
            c.metadata["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
            c.metadata["scrolled"] = True
    cm.save({"type": "notebook", "format": "json", "content": nb}, path.name)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before


def test_without_the_project_configuration_a_save_writes_the_version(tmp_path, monkeypatch):
    """The round-trip test can fail: with no metadata filter (no pyproject.toml above the notebook)
    jupytext writes its version into the header, and another version dirties the file."""
    import shutil

    import jupytext.header

    monkeypatch.setattr(jupytext.header, "__version__", "9.99.1")
    shutil.copy(PATHS[0], tmp_path / PATHS[0].name)
    cm = _contents_manager(tmp_path)
    nb = cm.get(PATHS[0].name, content=True, type="notebook")["content"]
    cm.save({"type": "notebook", "format": "json", "content": nb}, PATHS[0].name)
    assert "jupytext_version: 9.99.1" in (tmp_path / PATHS[0].name).read_text()


def test_an_edit_is_saved(tmp_path):
    """The round-trip test can fail: a typed cell changes the .md (and only the .md)."""
    import shutil

    shutil.copy(PATHS[0], tmp_path / PATHS[0].name)
    cm = _contents_manager(tmp_path)
    nb = cm.get(PATHS[0].name, content=True, type="notebook")["content"]
    nb.cells.append(nbformat.v4.new_code_cell("1 + 1"))
    cm.save({"type": "notebook", "format": "json", "content": nb}, PATHS[0].name)
    assert (tmp_path / PATHS[0].name).read_text() != PATHS[0].read_text()
    assert not (tmp_path / notebooks.paired_ipynb(PATHS[0]).name).exists()


def test_make_lab_refuses_to_save_an_executed_copy():
    import importlib.util

    from tornado.web import HTTPError

    spec = importlib.util.spec_from_file_location("hooks", notebooks.ROOT / ".jupyter" / "qlib_lab_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    with pytest.raises(HTTPError, match="make figures"):
        hooks.refuse_executed_copies({}, "/notebooks/01_max_queue_length.ipynb", None)
    hooks.refuse_executed_copies({}, "notebooks/01_max_queue_length.md", None)
    hooks.refuse_executed_copies({}, "scratch/01_mine.ipynb", None)


def test_drift_is_detected(tmp_path):
    """The pairing test can fail: one edited source line makes the pair differ."""
    src = PATHS[0].read_text()
    edited = tmp_path / PATHS[0].name
    edited.write_text(src.replace("import matplotlib.pyplot as plt",
                                  "import matplotlib.pyplot as plt  # edited", 1))
    assert _cells(notebooks.read(edited)) != _cells(notebooks.read(notebooks.paired_ipynb(PATHS[0])))


#: the notebook executed twice (the cheapest on a warm cache: about 20 s a run on the 2-core machine)
TWICE = "04_perfect_samples.md"


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_notebook_runs_in_smoke_mode(path, tmp_path, smoke_cache, monkeypatch):
    # the smoke cache the study tests fill: the notebook draws and checks its figures from those
    # entries instead of recomputing them
    monkeypatch.setenv("QLIB_CACHE", str(smoke_cache))
    for name in STUDIES_OF.get(path.name, ()):
        runner.run(importlib.import_module(f"qlib.studies.{name}"), "smoke", progress=False)
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
    assert str(tmp_path) not in text and str(smoke_cache) not in text, \
        "an absolute path of this machine leaked into the outputs"
    assert notebooks.WIDGET_VIEW not in text and '"execution"' not in text
    if path.name == TWICE:
        # executed twice, the copy written as make figures writes it is the same bytes (issue 49:
        # a stream flushed in two pieces once dirtied the repository)
        copies = [tmp_path / "first.ipynb", tmp_path / "second.ipynb"]
        for copy in copies:
            notebooks.execute(path, smoke=True, timeout=600, output=copy,
                              extra_env={"QLIB_FIGURES": str(tmp_path / "figures"),
                                         "QLIB_CACHE": str(smoke_cache)})
        assert copies[0].read_bytes() == copies[1].read_bytes()


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_committed_notebook_has_no_widget_state(path):
    raw = json.loads(notebooks.paired_ipynb(path).read_text())
    assert "widgets" not in raw.get("metadata", {})
    assert all("widgets" not in c.get("metadata", {}) for c in raw["cells"])
    assert not re.search(r" at 0x[0-9a-f]+>", notebooks.paired_ipynb(path).read_text())  # no address


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
                   "      format_name: myst\n  kernelspec:\n    display_name: Python 3\n    language: "
                   "python\n    name: python3\n---\n\n```{code-cell} ipython3\nimport "
                   "os\nprint(os.environ.get('XLA_FLAGS'))\n```\n")
    code = (f"from qlib import notebooks\nnb = notebooks.execute({str(src)!r}, smoke=True)\n"
            "print(nb.cells[0].outputs[0]['text'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "without encryption" not in out.stderr
    assert "xla_cpu_small_while_loop_byte_threshold" in out.stdout


def test_machine_noise_is_stripped_from_an_executed_notebook():
    """Two runs of the same commit write the same .ipynb: object addresses in plain-text reprs, widget
    views and stderr go."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("df.style")
    cell.outputs = [nbformat.v4.new_output("execute_result", data={
        "text/html": "<table></table>", "text/plain": "<pandas.io.formats.style.Styler at 0x7f8ba2339590>"}),
        nbformat.v4.new_output("stream", name="stderr", text="warning")]
    nb.cells = [cell]
    notebooks.strip_machine_noise(nb)
    assert [o["output_type"] for o in nb.cells[0].outputs] == ["execute_result"]
    assert nb.cells[0].outputs[0]["data"]["text/plain"] == "<pandas.io.formats.style.Styler at 0x…>"


def _stream(text, name="stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_streams_are_normalised_as_if_flushed_once():
    """However the kernel flushed stdout, the stored outputs are the same: consecutive streams
    coalesced, carriage-return redraws resolved, progress lines ("[study] ...") dropped."""
    figure = nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>"})
    once = [_stream("[fluctuations] A n=100000 d=100: missing\nk = 2\n"), figure]
    twice = [_stream("[fluctuations] A n=100000 d=100: missing"), _stream("\n"), _stream("k = "),
             _stream("2\n"), figure]
    redrawn = [_stream("10%\r50%\rk = 2\n"), figure]
    for outputs in (once, twice, redrawn):
        cell = nbformat.v4.new_code_cell("run()")
        cell.outputs = outputs
        nb = nbformat.v4.new_notebook(cells=[cell])
        notebooks.strip_machine_noise(nb)
        assert nb.cells[0].outputs == [_stream("k = 2\n"), figure]
    only_progress = [_stream("[qlib] checking ...\n"), _stream("[fluctuations] B n=1000 d=22: done\n")]
    assert notebooks.normalise_streams(only_progress) == []
    # stdout around stderr (stripped first) is one stream; a figure between two prints keeps them apart
    mixed = [_stream("a\n"), _stream("warn\n", "stderr"), _stream("b\n"), figure, _stream("c\n")]
    cell = nbformat.v4.new_code_cell("run()")
    cell.outputs = mixed
    nb = nbformat.v4.new_notebook(cells=[cell])
    notebooks.strip_machine_noise(nb)
    assert nb.cells[0].outputs == [_stream("a\nb\n"), figure, _stream("c\n")]
