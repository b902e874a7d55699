"""Execute the notebooks: smoke mode for the tests, full mode for the published figures.

Notebooks read ``QLIB_SMOKE`` in their parameters cell; this module sets it for the kernel,
runs every cell with nbclient (a failing cell raises), shows progress over cells, and writes
the executed notebook back with ``metadata.widgets`` stripped (widget state is machine noise
and breaks GitHub's renderer).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from qlib.config import ROOT, SMOKE_ENV

NOTEBOOK_DIR = ROOT / "notebooks"


def notebook_paths() -> list[Path]:
    """The published notebooks, in reading order (NN_name.ipynb)."""
    return sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def strip_widget_state(nb) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("widgets", None)


@contextmanager
def _env(**values: str | None):
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute(path: str | os.PathLike, *, smoke: bool, output: str | os.PathLike | None = None,
            timeout: int = 3600, progress: bool = False, extra_env: dict | None = None):
    """Run every cell of one notebook in a fresh kernel; return the executed notebook.

    ``smoke`` sets QLIB_SMOKE=1 for the kernel. ``output`` (optional) is where the executed
    notebook is written, widget state stripped. A failing cell raises ``CellExecutionError``.
    """
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(c.cell_type == "code" for c in nb.cells), desc=path.name, unit="cell")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    if bar is not None:
        client.on_cell_executed = lambda **kw: bar.update(1)
    env = {SMOKE_ENV: "1" if smoke else None} | (extra_env or {})
    with _env(**env):
        try:
            client.execute()
        finally:
            if bar is not None:
                bar.close()
    strip_widget_state(nb)
    if output is not None:
        nbformat.write(nb, output)
    return nb
