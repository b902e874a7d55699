"""Every notebook runs top to bottom in smoke mode; a failing cell fails the test.

Figures and caches of the smoke run go to a temporary folder, so the published figures are
never overwritten by tiny-parameter runs. The committed notebooks carry no widget state.
"""

import json

import nbformat
import pytest

from qlib import notebooks

PATHS = notebooks.notebook_paths()


def test_there_are_notebooks():
    assert len(PATHS) >= 3, [p.name for p in PATHS]


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_notebook_runs_in_smoke_mode(path, tmp_path):
    nb = notebooks.execute(path, smoke=True, timeout=600,
                           extra_env={"QLIB_FIGURES": str(tmp_path / "figures"),
                                      "QLIB_CACHE": str(tmp_path / "cache")})
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert list((tmp_path / "figures").glob("*.png")), "the notebook saved no figure"


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_committed_notebook_has_no_widget_state(path):
    raw = json.loads(path.read_text())
    assert "widgets" not in raw.get("metadata", {})
    assert all("widgets" not in c.get("metadata", {}) for c in raw["cells"])


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_notebook_reads_smoke_mode_in_one_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "smoke_mode()" in c.source]
    assert len(cells) == 1
    assert any(c.cell_type == "markdown" for c in nb.cells[:2]), "a notebook opens with its claim"
