"""Execute the notebooks: smoke mode for the tests, full mode for the published figures.

Each notebook is a MyST Markdown text file ``notebooks/NN_name.md``: the notebook a user opens
(``make lab`` opens it as a notebook) and the one reviewed as text. ``notebooks/NN_name.ipynb`` is
its executed copy, written only by ``make figures`` (the same cells with the outputs of the full
run); the two are not paired by jupytext, so saving one in JupyterLab never rewrites the other
(docs/notebooks.md). Notebooks read ``QLIB_SMOKE`` in their parameters cell; this module sets
it for the kernel, and ``QLIB_PUBLISH=1`` for a full run that writes the executed copy (only then
do figures reach ``figures/``: :func:`qlib.plots.show`). It runs every cell with nbclient (a
failing cell raises), shows progress over cells, and writes the executed ``.ipynb`` so that the
same commit gives the same file: fixed cell ids, no execution timings, no widget state or widget
views (machine noise, random model ids, live progress bars), no stderr streams, stdout
normalised (consecutive stream outputs coalesced: how the kernel flushed them does not show;
progress lines dropped: :func:`normalise_streams`), and the kernelspec that JupyterLab writes
(so opening the copy does not modify it).
"""

from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path
from queue import Empty
from time import monotonic

from IPython.display import Markdown

from qlib._progress import progress_bar
from qlib._xla import flags as xla_flags
from qlib.claims_table import key_number, to_dataframe
from qlib.config import ROOT, SMOKE_ENV, current
from qlib.plots import PUBLISH_ENV

NOTEBOOK_DIR = ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: the kernelspec as ipykernel installs it and JupyterLab writes it on opening a notebook
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def notebook_paths() -> list[Path]:
    """The notebooks' sources, in reading order (notebooks/NN_name.md)."""
    return sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.md"))


def paired_ipynb(path: str | os.PathLike) -> Path:
    """The executed copy of a notebook source (same name, .ipynb: outputs of the full run)."""
    return Path(path).with_suffix(".ipynb")


#: the columns of a claim row that a notebook shows (claims.json keeps every field)
CLAIM_COLUMNS = ("claim", "measured", "threshold", "verdict")


def claims_table(rows, columns=CLAIM_COLUMNS):
    """A notebook's claim rows, compact: a pandas Styler of ``columns`` (claim, measured,
    threshold, verdict) whose text wraps to the notebook's width, with a fixed id (the same
    rows give the same HTML, so an executed notebook does not change between runs)."""
    df = to_dataframe(rows)
    df = df[[c for c in columns if c in df]]
    df.index = range(1, len(df) + 1)
    return (df.style.set_uuid("claims")
            .set_properties(**{"white-space": "normal", "text-align": "left", "vertical-align": "top"})
            .set_table_styles([{"selector": "th", "props": [("text-align", "left")]}]))


def what_we_found(rows) -> Markdown:
    """A notebook's closing section, rendered from its claim rows: one line per row, its verdict,
    its kind where it is not a claim, the claim, its parameters and the number the verdict rests on
    (:func:`qlib.claims_table.key_number`, as in the README's summary)."""
    lines = []
    for r in rows:
        kind = "" if r.kind == "claim" else f" ({r.kind})"
        lines.append(f"- **{r.verdict}**{kind} {r.claim} (*{r.parameters}*): {key_number(r)}")
    return Markdown("\n".join(lines))


# jupytext, nbformat and nbclient are imported where a notebook is read or run, not with this
# module: every notebook's first cell imports it for claims_table and what_we_found, and nbformat's
# jsonschema (building its rfc3987 grammar) was most of that cell's import time (issue 49, item 6)


def read(path: str | os.PathLike):
    """A notebook (nbformat node) from its .md source or an .ipynb, with fixed cell ids."""
    import jupytext
    import nbformat

    path = Path(path)
    nb = jupytext.read(path) if path.suffix == ".md" else nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


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


#: an object's address in its default repr, which changes from run to run
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


#: a progress line, "[study] ..." as the studies print while they run ("[fluctuations] A n=1000
#: d=15: done"): it says how the run went, not what it found, so the executed copy leaves it out
_PROGRESS_LINE = re.compile(r"^\[[A-Za-z][\w -]*\] ")


def normalise_streams(outputs: list) -> list:
    """One cell's outputs with its stream outputs as a kernel would give them if it flushed only
    at the end: consecutive streams of the same name coalesced into one (a line the kernel sent
    as its text and then its newline is one line), carriage-return redraws resolved to what a
    terminal shows, progress lines (``[name] ...``) dropped, and empty streams removed."""
    merged: list = []
    for o in outputs:
        if (o.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == o.get("name")):
            merged[-1]["text"] = _text(merged[-1]) + _text(o)
        else:
            merged.append(o)
    kept = []
    for o in merged:
        if o.get("output_type") == "stream":
            # lines split at "\n" only: a bare "\r" is a redraw of the same line, not a new one
            lines = [line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r\n") else line
                     for line in re.findall(r"[^\n]*\n|[^\n]+$", _text(o))]
            o["text"] = "".join(line for line in lines if not _PROGRESS_LINE.match(line))
            if not o["text"]:
                continue
        kept.append(o)
    return kept


def _text(output) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def strip_machine_noise(nb) -> None:
    """Drop what differs between two runs of the same commit: widget state and views (random
    model ids; progress bars with timings), stderr streams, execution timings, object
    addresses in plain-text reprs ("<pandas...Styler at 0x7f8b...>" beside its HTML), and how
    stdout was flushed and what progress it printed (:func:`normalise_streams`)."""
    nb.metadata.pop("widgets", None)
    nb.metadata.get("jupytext", {}).pop("formats", None)  # an executed copy pairs with nothing
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in nb.cells:
        cell.metadata.pop("widgets", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        cell.outputs = [o for o in cell.get("outputs", [])
                        if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
                        and WIDGET_VIEW not in o.get("data", {})]
        cell.outputs = normalise_streams(cell.outputs)
        for o in cell.outputs:
            text = o.get("data", {}).get("text/plain")
            if isinstance(text, str) and _ADDRESS.search(text):
                o["data"]["text/plain"] = _ADDRESS.sub(" at 0x…>", text)


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
    """Run every cell of one notebook (its .md source or an .ipynb) in a fresh kernel; return
    the executed notebook, machine noise stripped (:func:`strip_machine_noise`).

    ``smoke`` sets QLIB_SMOKE=1 for the kernel, and the kernel gets qlib's XLA flags
    (:func:`qlib.configure_xla`). ``output`` (optional) is where the executed notebook is
    written as .ipynb; a full run with an ``output`` publishes its figures (QLIB_PUBLISH=1),
    any other run does not. A failing cell raises ``CellExecutionError``.

    The kernel talks to this process over IPC (Unix sockets in a private temporary folder), not
    TCP: nothing listens on a port, and the kernel has no reason to print its "running over TCP
    without encryption" warning once per notebook.
    """
    path = Path(path)
    nb = read(path)
    with tempfile.TemporaryDirectory(prefix="qlib-kernel-") as sockets:
        return _execute(path, nb, smoke=smoke, output=output, timeout=timeout, progress=progress,
                        extra_env=extra_env, sockets=sockets)


def _execute(path: Path, nb, *, smoke, output, timeout, progress, extra_env, sockets: str):
    import jupytext
    from nbclient import NotebookClient
    from traitlets.config import Config

    bar = progress_bar(sum(c.cell_type == "code" for c in nb.cells), show=progress, desc=path.name,
                       unit="cell")
    cfg = Config()
    cfg.KernelManager.transport = "ipc"
    cfg.KernelManager.ip = os.path.join(sockets, "kernel")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}}, config=cfg)
    client.on_cell_executed = lambda **kw: bar.update(1)

    def patch_channels(**_):
        if not getattr(client.kc, "_qlib_sliced", False):
            _poll_in_slices(client.kc.shell_channel)
            _poll_in_slices(client.kc.iopub_channel)
            client.kc._qlib_sliced = True

    client.on_cell_start = patch_channels
    publish = "1" if output is not None and not smoke else None
    # the kernel reads the run's configuration from its environment (qlib.config.RunConfig)
    env = current().to_environ() | {SMOKE_ENV: "1" if smoke else None, "XLA_FLAGS": xla_flags(),
                                     PUBLISH_ENV: publish} | (extra_env or {})
    with _env(**env):
        try:
            client.execute()
        finally:
            bar.close()
    strip_machine_noise(nb)
    if output is not None:
        jupytext.write(nb, output)
    return nb
