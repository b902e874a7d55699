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
from queue import Empty
from time import monotonic

import nbformat
from nbclient import NotebookClient

from qlib.config import ROOT, SMOKE_ENV

NOTEBOOK_DIR = ROOT / "notebooks"


def notebook_paths() -> list[Path]:
    """The published notebooks, in reading order (NN_name.ipynb)."""
    return sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def _poll_in_slices(channel, slice_s: float = 0.5) -> None:
    """Make ``channel.get_msg`` wait in short slices instead of one long poll.

    With widget cells, an asyncio zmq poll can miss a message that has already arrived and
    then sit until its timeout (nbclient issue #312): the run stalls for minutes after the
    cell is done. Re-polling every half second picks the message up.
    """
    get_msg = channel.get_msg

    async def sliced(timeout: float | None = None):
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            step = slice_s if deadline is None else max(0.0, min(slice_s, deadline - monotonic()))
            try:
                return await get_msg(timeout=step)
            except Empty:
                if deadline is not None and monotonic() >= deadline:
                    raise

    channel.get_msg = sliced


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

    def patch_channels(**_):
        if not getattr(client.kc, "_qlib_sliced", False):
            _poll_in_slices(client.kc.shell_channel)
            _poll_in_slices(client.kc.iopub_channel)
            client.kc._qlib_sliced = True

    client.on_cell_start = patch_channels
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
