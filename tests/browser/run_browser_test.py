#!/usr/bin/env python
"""Real-browser check of the notebooks: JupyterLab in headless Chromium (``make browser-test``).

For every ``notebooks/NN_*.ipynb`` this script opens the notebook in JupyterLab, runs all cells
from the Run menu, waits until every code cell has run, fails on any traceback, scrolls to the
first ipywidgets slider, screenshots the figure that the slider's cell shows, moves the slider
with the keyboard, waits for the kernel to redraw, screenshots again and asserts that the figure
changed (Pillow pixel diff above a threshold). Screenshots go to ``browser-screenshots/``; the
exit code is 0 only if every notebook passes.

Isolation, so the run can neither touch the shared working tree nor be fooled by it:
- JupyterLab serves a temporary copy of ``notebooks/`` whose notebooks are stripped of outputs
  and widget state (stale ``[n]:`` prompts would look finished; no autosave or checkpoint can
  reach the real files; a notebook regenerated meanwhile cannot raise a "changed on disk" dialog).
- ``QLIB_SMOKE=1`` and ``QLIB_FIGURES``/``QLIB_CACHE`` in a temporary folder: smoke runs never
  overwrite the published figures or the sweep cache.
- Fresh JupyterLab settings/workspace folders and a fresh Chromium profile.
Every wait is bounded, and the server, kernels and browser are shut down on every exit path.

Chromium comes from Debian (``apt-get install chromium``), never from ``playwright install``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SHOTS = ROOT / "browser-screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STDERR_OUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'

# JupyterLab user settings for the run: no autosave (belt and braces: it serves a copy anyway),
# no news/update fetch (no network, no toast over the figures), all cells attached to the DOM.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


# ----------------------------------------------------------------------------- environment


def ensure_chromium(timeout: float = 900) -> None:
    """Install Debian's chromium when it is missing (needs root and Debian's archive)."""
    if os.path.exists(CHROMIUM):
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        sys.exit(f"{CHROMIUM} is missing; install Debian's chromium (apt-get install chromium) as root")
    log("installing Debian's chromium (apt-get) ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        subprocess.run(cmd, check=True, env=env, timeout=timeout, stdout=subprocess.DEVNULL)
    if not os.path.exists(CHROMIUM):
        sys.exit(f"apt-get install chromium did not provide {CHROMIUM}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jupyter_executable() -> list[str]:
    """JupyterLab of the environment running this script (the repo's .venv under `make`)."""
    for cand in (Path(sys.executable).parent / "jupyter", ROOT / ".venv" / "bin" / "jupyter"):
        if cand.exists():
            return [str(cand)]
    return [sys.executable, "-m", "jupyter"]


def notebook_copies(src: Path, dest: Path, pattern: str) -> dict[str, int]:
    """Copy notebooks/ to ``dest``; notebooks matching ``pattern`` lose outputs and widget state.

    Returns {notebook name: number of code cells}.
    """
    import nbformat

    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    names = {}
    for path in sorted(dest.glob(pattern)):
        nb = nbformat.read(path, as_version=4)
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            cell.metadata.pop("widgets", None)
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nbformat.write(nb, path)
        names[path.name] = sum(c.cell_type == "code" for c in nb.cells)
    return names


class Lab:
    """A JupyterLab server on 127.0.0.1:<free port> with a random token; always shut down."""

    def __init__(self, tmp: Path, root_dir: Path, start_timeout: float):
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.tmp, self.root_dir, self.start_timeout = tmp, root_dir, start_timeout
        self.proc: subprocess.Popen | None = None
        self.log_path = tmp / "jupyterlab.log"

    def __enter__(self) -> "Lab":
        settings, workspaces = self.tmp / "lab-settings", self.tmp / "lab-workspaces"
        for rel, value in LAB_SETTINGS.items():
            (settings / rel).parent.mkdir(parents=True, exist_ok=True)
            (settings / rel).write_text(json.dumps(value))
        workspaces.mkdir(exist_ok=True)
        env = dict(os.environ, QLIB_SMOKE="1", QLIB_FIGURES=str(self.tmp / "figures"),
                   QLIB_CACHE=str(self.tmp / "cache"), JUPYTER_RUNTIME_DIR=str(self.tmp / "runtime"),
                   PYTHONUNBUFFERED="1")
        cmd = jupyter_executable() + [
            "lab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}", f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={workspaces}"]
        if os.geteuid() == 0:  # containers/CI run as root; Jupyter refuses that without the flag
            cmd.append("--allow-root")
        log(f"starting JupyterLab on {self.base} (log: {self.log_path})")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=self.root_dir, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if (rc := self.proc.poll()) is not None:
                self.__exit__(None, None, None)
                raise RuntimeError(f"JupyterLab exited with {rc}; see {self.log_path}")
            try:
                self.api("GET", "/api/status")
                log("JupyterLab answers")
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        self.__exit__(None, None, None)
        raise TimeoutError(f"JupyterLab did not answer within {self.start_timeout:.0f}s; see {self.log_path}")

    def api(self, method: str, path: str, timeout: float = 10):
        req = urllib.request.Request(self.base + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        try:
            for s in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{s['id']}", timeout=30)
        except Exception as e:  # best effort: the server shutdown below stops them anyway
            log(f"could not shut the kernels down through the API: {e!r}")

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.api("POST", "/api/shutdown", timeout=10)
            except Exception:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                # Our own server runs in its own session: stop that group (server + kernels).
                for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                    try:
                        os.killpg(self.proc.pid, sig)
                        self.proc.wait(timeout=wait)
                        break
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        continue
        self._log.close()
        log(f"JupyterLab stopped (exit {self.proc.returncode})")
        self.proc = None


# ----------------------------------------------------------------------------- page helpers

# Notebook state as seen on the page: input prompts of the code cells, kernel status, tracebacks.
STATE_JS = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return null;
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
  // Kernel status: the status bar ("Python 3 (ipykernel) | Idle") knows when the kernel is
  // connected; the toolbar's execution indicator alone may say idle before that.
  const sb = document.querySelector('#jp-main-statusbar');
  const m = sb && sb.textContent.match(/\\|\\s*(Idle|Busy|Starting|Connecting|Restarting|Initializing|Unknown|Dead)\\b/);
  let status = m ? m[1].toLowerCase() : null;
  const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const indStatus = ind ? ind.getAttribute('data-status') : null;
  if (status === null || (status === 'idle' && indStatus && indStatus !== 'idle')) status = indStatus;
  const errors = [...panel.querySelectorAll('%s')].map(e => e.textContent)
                   .filter(t => /Traceback|^\\w*(Error|Exception): /m.test(t)).map(t => t.slice(0, 3000));
  const dialog = document.querySelector('.jp-Dialog');
  return {prompts, status, errors, dialog: dialog ? dialog.textContent.slice(0, 500) : null};
}""" % STDERR_OUT

DONE_PROMPT = re.compile(r"^\[\d+\]:$")


@dataclass
class Result:
    name: str
    passed: bool = False
    reason: str = ""
    run_s: float = float("nan")
    cells: int = 0
    slider: str = ""
    value_before: str = ""
    value_after: str = ""
    diff_fraction: float = float("nan")
    redraw_s: float = float("nan")
    shots: list[str] = field(default_factory=list)


def wait_for(page, predicate, timeout: float, what: str, poll: float = 0.5):
    """Poll ``predicate(state)`` on the notebook state; raise on timeout, dialog or traceback."""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(STATE_JS)
        if state is not None:
            if state["errors"]:
                raise AssertionError("traceback in the notebook:\n" + state["errors"][0])
            if state["dialog"]:
                raise AssertionError(f"JupyterLab dialog while waiting for {what}: {state['dialog']!r}")
            if predicate(state):
                return state
        page.wait_for_timeout(poll * 1000)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last state: "
                       f"{json.dumps(state)[:600] if state else None}")


def run_all_cells(page) -> None:
    """Run > Run All Cells from the menu bar; the command palette if the menu is not there."""
    try:
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).first.click(timeout=10_000)
        page.locator("li.lm-Menu-item").filter(
            has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))
        ).first.click(timeout=10_000)
        return
    except Exception as e:
        log(f"  menu Run > Run All Cells failed ({type(e).__name__}); using the command palette")
        page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+C")
    page.locator(".lm-CommandPalette-input").fill("Run All Cells")
    page.locator('.lm-CommandPalette-item[data-command="notebook:run-all-cells"]').first.click()


def figure_locator(cell):
    """The figure a slider drives: an <img> in an Output widget of the slider's cell."""
    out_imgs = cell.locator(".jp-Cell-outputArea .widget-output img")
    return out_imgs.first if out_imgs.count() else cell.locator(".jp-Cell-outputArea img").first


def img_signature(img) -> str:
    src = img.get_attribute("src", timeout=5_000) or ""
    return hashlib.sha1(src.encode()).hexdigest()


def pixel_diff(a: Path, b: Path, out: Path, tol: int) -> float:
    """Fraction of pixels whose largest channel difference exceeds ``tol`` (sizes padded white)."""
    import numpy as np
    from PIL import Image

    A, B = Image.open(a).convert("RGB"), Image.open(b).convert("RGB")
    size = (max(A.width, B.width), max(A.height, B.height))

    def pad(im):
        canvas = Image.new("RGB", size, "white")
        canvas.paste(im)
        return np.asarray(canvas, dtype=np.int16)

    x, y = pad(A), pad(B)
    mask = np.abs(x - y).max(axis=2) > tol
    # Diff picture for a human: the new figure faded, changed pixels in red.
    vis = (255 - (255 - y) * 0.35).astype(np.uint8)
    vis[mask] = (220, 0, 0)
    Image.fromarray(vis).save(out)
    return float(mask.mean())


def check_notebook(context, lab: Lab, name: str, n_code: int, args) -> Result:
    res = Result(name, cells=n_code)
    stem = Path(name).stem
    shot = lambda tag: SHOTS / f"{stem}-{tag}.png"
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        # A workspace of its own per notebook: no tab of a previous notebook is restored.
        page.goto(f"{lab.base}/lab/workspaces/{stem}/tree/{name}?token={lab.token}",
                  wait_until="domcontentloaded", timeout=60_000)
        wait_for(page, lambda s: s["status"] == "idle" and len(s["prompts"]) == n_code,
                 args.kernel_timeout, f"the notebook ({n_code} code cells) to load and its kernel to start")
        log(f"{name}: {n_code} code cells loaded, kernel idle; Run > Run All Cells")

        t = time.monotonic()
        for attempt in range(3):  # a click that lands while the kernel connects is lost: retry
            run_all_cells(page)
            try:
                wait_for(page, lambda s: any(p != "[ ]:" for p in s["prompts"]), 15, "execution to start")
                break
            except TimeoutError:
                if attempt == 2:
                    raise
                log(f"  {name}: Run All Cells did not start the cells; retrying")
        state = wait_for(page, lambda s: s["status"] == "idle" and len(s["prompts"]) == n_code
                         and all(DONE_PROMPT.match(p) for p in s["prompts"]),
                         args.run_timeout, "all cells to run", poll=1.0)
        res.run_s = time.monotonic() - t
        log(f"{name}: all {res.cells} cells ran in {res.run_s:.1f}s, no traceback")

        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first
        slider = panel.locator(".widget-slider").first
        try:
            slider.wait_for(timeout=10_000)
        except Exception:
            raise AssertionError("no ipywidgets slider (.widget-slider) rendered") from None
        slider.scroll_into_view_if_needed()
        res.slider = slider.locator(".widget-label").first.text_content(timeout=5_000).strip() or "?"
        readout = slider.locator(".widget-readout").first
        res.value_before = readout.text_content().strip()
        cell = panel.locator(".jp-CodeCell").filter(has=page.locator(".widget-slider")).first
        outputs = cell.locator(".jp-Cell-outputArea").first
        fig = figure_locator(cell)
        try:
            fig.wait_for(timeout=args.redraw_timeout * 1000)
        except Exception:
            raise AssertionError(f"the cell of slider {res.slider!r} shows no figure") from None
        page.wait_for_timeout(500)
        outputs.screenshot(path=shot("1-widget-before"))
        fig.screenshot(path=shot("1-figure-before"))
        res.shots += [str(shot("1-widget-before")), str(shot("1-figure-before"))]
        sig = img_signature(fig)

        # Move the slider: keyboard on its noUiSlider handle (one PageUp = 5 steps, one redraw);
        # back down when the slider already sits at its maximum.
        handle = slider.locator(".noUi-handle").first
        t = time.monotonic()
        for key in (args.key, "PageDown"):
            handle.press(key)
            page.wait_for_timeout(300)
            res.value_after = readout.text_content().strip()
            if res.value_after != res.value_before:
                break
        if res.value_after == res.value_before:
            raise AssertionError(f"slider {res.slider!r} did not move on {args.key}/PageDown")
        log(f"{name}: slider {res.slider!r} {res.value_before} -> {res.value_after}; waiting for the redraw")

        deadline = time.monotonic() + args.redraw_timeout
        changed_at = None
        while time.monotonic() < deadline:
            state = wait_for(page, lambda s: True, 10, "the notebook state")
            fig = figure_locator(cell)
            new = img_signature(fig) if fig.count() else None
            if new and new != sig and state["status"] == "idle":
                # settled: same figure on two polls in a row
                if changed_at is not None and new == changed_at:
                    break
                changed_at = new
            page.wait_for_timeout(700)
        res.redraw_s = time.monotonic() - t
        page.wait_for_timeout(500)
        fig.scroll_into_view_if_needed()
        outputs.screenshot(path=shot("2-widget-after"))
        fig.screenshot(path=shot("2-figure-after"))
        res.shots += [str(shot("2-widget-after")), str(shot("2-figure-after"))]
        wait_for(page, lambda s: True, 5, "the notebook state")  # a traceback in the callback fails
        res.diff_fraction = pixel_diff(shot("1-figure-before"), shot("2-figure-after"), shot("3-diff"),
                                       args.pixel_tolerance)
        res.shots.append(str(shot("3-diff")))
        if changed_at is None:
            raise AssertionError(f"the figure was not redrawn within {args.redraw_timeout:.0f}s "
                                 f"after moving {res.slider!r}")
        if res.diff_fraction <= args.threshold:
            raise AssertionError(f"figure changed in only {res.diff_fraction:.3%} of pixels "
                                 f"(threshold {args.threshold:.3%})")
        res.passed = True
        res.reason = f"figure changed in {res.diff_fraction:.2%} of pixels"
    except Exception as e:
        res.reason = f"{type(e).__name__}: {e}"
        try:
            page.screenshot(path=shot("failure"), full_page=False)
            res.shots.append(str(shot("failure")))
        except Exception:
            pass
    finally:
        lab.shutdown_kernels()
        try:
            page.close()
        except Exception:
            pass
    log(f"{name}: {'PASS' if res.passed else 'FAIL'} - {res.reason.splitlines()[0] if res.reason else ''}")
    return res


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebooks-dir", type=Path, default=NOTEBOOKS,
                    help="folder of the notebooks (default: notebooks/; another one to check this script)")
    ap.add_argument("--pattern", default="[0-9][0-9]_*.ipynb", help="which notebooks (glob in that folder)")
    ap.add_argument("--key", default="PageUp", help="key pressed on the slider handle (PageUp = 5 steps)")
    ap.add_argument("--threshold", type=float, default=0.002,
                    help="minimal fraction of figure pixels that must change")
    ap.add_argument("--pixel-tolerance", type=int, default=24, help="channel difference counted as a change")
    ap.add_argument("--run-timeout", type=float, default=420, help="seconds for Run All Cells, per notebook")
    ap.add_argument("--kernel-timeout", type=float, default=120,
                    help="seconds for a notebook to load and its kernel to start")
    ap.add_argument("--redraw-timeout", type=float, default=120, help="seconds for the figure to redraw")
    ap.add_argument("--total-timeout", type=float, default=1500, help="hard limit for the whole run")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder (server log, copies)")
    args = ap.parse_args()

    # Last-resort bound on the whole run; the finally blocks still stop the browser and server.
    def _alarm(*_):
        raise TimeoutError(f"browser test exceeded --total-timeout={args.total_timeout:.0f}s")
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(args.total_timeout))

    ensure_chromium()
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    tmp = Path(tempfile.mkdtemp(prefix="qlib-browser-"))
    results: list[Result] = []
    names: dict[str, int] = {}
    try:
        names = notebook_copies(args.notebooks_dir, tmp / "notebooks", args.pattern)
        if not names:
            log(f"no notebook matches {args.notebooks_dir}/{args.pattern}")
            return 1
        with Lab(tmp, tmp / "notebooks", start_timeout=90) as lab, sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(tmp / "chromium-profile"), executable_path=CHROMIUM, headless=True,
                args=CHROMIUM_ARGS, viewport={"width": 1500, "height": 1100}, timeout=60_000)
            try:
                for name, n_code in names.items():
                    results.append(check_notebook(context, lab, name, n_code, args))
            finally:
                context.close()
    except Exception as e:
        log(f"aborted: {type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        smoke_figures = len(list((tmp / "figures").glob("*.png")))
        if args.keep_tmp:
            log(f"temporary folder kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print("\n== browser test summary (JupyterLab + headless Chromium, QLIB_SMOKE=1) ==")
    for r in results:
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.name}: {r.cells} code cells ran in {r.run_s:.0f}s; "
              f"slider {r.slider!r} {r.value_before} -> {r.value_after}; redraw {r.redraw_s:.1f}s; "
              f"figure pixels changed {r.diff_fraction:.2%}")
        if not r.passed:
            print("      " + r.reason.replace("\n", "\n      "))
    print(f"smoke-mode figures written to the temporary QLIB_FIGURES (not figures/): {smoke_figures}")
    print(f"screenshots: {SHOTS}/ ({len(list(SHOTS.glob('*.png')))} files)")
    print(f"total {time.monotonic() - T0:.0f}s")
    ok = bool(results) and all(r.passed for r in results) and len(results) == len(names)
    print("BROWSER TEST", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
