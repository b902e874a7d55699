#!/usr/bin/env python
"""Real-browser check of the notebooks: JupyterLab in headless Chromium (``make browser-test``).

What a researcher does, on the repository itself: ``make lab``'s JupyterLab (the project's Jupyter
config in .jupyter/, autosave on) opens each ``notebooks/NN_*.md`` as a notebook, waits until its
kernel is connected and idle (the server's kernel API: one connection, execution state idle),
runs all cells from the Run menu (timed), fails on any traceback, then moves every slider of the
explorer with the keyboard several times and measures, in the page, the time from key press to
the new figure (the explorer's image changes): median <= 250 ms and max <= 500 ms per explorer.
It clicks the explorer's button once (timed). Afterwards ``git status --porcelain`` must be what
it was before (running notebooks changes no tracked file), and the rendered ``figures/claims.md``
and ``README.md`` must fit a 1000 px pane. Screenshots and a report (``report.json``,
``report.txt``) go to ``browser-screenshots/``; the exit code is 0 only if every check passes.

Modes: full by default (the notebooks as a user opens them, drawing from the stored results in
``results/``: Run All takes seconds); ``--mode smoke`` sets ``QLIB_SMOKE=1``; the sweep cache
is a temporary folder unless ``--cache`` names one. QLIB_FIGURES is not set: a figure that reached
``figures/`` would show in git status. Chromium comes from Debian (``apt-get install chromium``),
never from ``playwright install``; without it (and without a way to install it) the test is skipped
with the reason printed (exit 0 under ``--skip-without-chromium``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
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
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STDERR_OUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'

# JupyterLab user settings for the run (autosave stays on, as a user has it): no news/update
# fetch (no network, no toast over the figures), all cells attached to the DOM.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


# ----------------------------------------------------------------------------- environment


def ensure_chromium(timeout: float = 900) -> str | None:
    """Install Debian's chromium when it is missing (needs root and Debian's archive); None when
    it is there, else the reason it is not."""
    if os.path.exists(CHROMIUM):
        return None
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return f"{CHROMIUM} is missing and apt-get (as root) is not available to install it"
    log("installing Debian's chromium (apt-get) ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        r = subprocess.run(
            cmd, env=env, timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        if r.returncode != 0:
            return f"{' '.join(cmd)} failed: {r.stderr.strip()[-300:]}"
    return None if os.path.exists(CHROMIUM) else f"apt-get install chromium did not provide {CHROMIUM}"


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


class Lab:
    """A JupyterLab server on 127.0.0.1:<free port> with a random token; always shut down."""

    def __init__(
        self,
        tmp: Path,
        root_dir: Path,
        start_timeout: float,
        *,
        smoke: bool = True,
        cache: Path | None = None,
    ):
        self.smoke, self.cache = smoke, cache or tmp / "cache"
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.tmp, self.root_dir, self.start_timeout = tmp, root_dir, start_timeout
        self.proc: subprocess.Popen | None = None
        self.log_path = tmp / "jupyterlab.log"

    def __enter__(self) -> Lab:
        settings, workspaces = self.tmp / "lab-settings", self.tmp / "lab-workspaces"
        for rel, value in LAB_SETTINGS.items():
            (settings / rel).parent.mkdir(parents=True, exist_ok=True)
            (settings / rel).write_text(json.dumps(value))
        workspaces.mkdir(exist_ok=True)
        env = dict(
            os.environ,
            QLIB_CACHE=str(self.cache),
            JUPYTER_RUNTIME_DIR=str(self.tmp / "runtime"),
            PYTHONUNBUFFERED="1",
            JUPYTER_CONFIG_PATH=str(ROOT / ".jupyter"),
        )
        env.pop("QLIB_FIGURES", None)
        env.pop("QLIB_PUBLISH", None)
        if self.smoke:
            env["QLIB_SMOKE"] = "1"
        else:
            env.pop("QLIB_SMOKE", None)
        cmd = jupyter_executable() + [
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={workspaces}",
        ]
        if os.geteuid() == 0:  # containers/CI run as root; Jupyter refuses that without the flag
            cmd.append("--allow-root")
        log(f"starting JupyterLab on {self.base} (log: {self.log_path})")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.root_dir,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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
        req = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
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

# Notebook state as seen on the page: input prompts of the code cells, tracebacks, dialogs.
STATE_JS = (
    """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return null;
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
  const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const sel = '%s, .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]';
  const errors = [...panel.querySelectorAll(sel)]
                   .map(e => e.textContent)
                   .filter(t => /Traceback|^\\w*(Error|Exception): /m.test(t)).map(t => t.slice(0, 3000));
  const dialog = document.querySelector('.jp-Dialog');
  return {prompts, indicator: ind ? ind.getAttribute('data-status') : null, errors,
          dialog: dialog ? dialog.textContent.slice(0, 500) : null};
}"""  # noqa: UP031  (a JavaScript text full of braces)
    % STDERR_OUT
)

DONE_PROMPT = re.compile(r"^\[\d+\]:$")

# Key press (or click) to redraw, measured in the page: the clock starts at the keydown/mousedown
# event and stops when the explorer's <img> gets a new src. Armed before the press, read after it.
ARM_JS = """([img, budget]) => {
  let t0 = null;
  const start = () => { if (t0 === null) t0 = performance.now(); };
  document.addEventListener('keydown', start, {once: true, capture: true});
  document.addEventListener('mousedown', start, {once: true, capture: true});
  const before = img.src;
  window.__qlibRedraw = new Promise(resolve => {
    const obs = new MutationObserver(() => {
      if (img.src !== before) { obs.disconnect(); resolve(t0 === null ? null : performance.now() - t0); }
    });
    obs.observe(img, {attributes: true, attributeFilter: ['src']});
    setTimeout(() => { obs.disconnect(); resolve(null); }, budget);
  });
}"""


@dataclass
class Result:
    name: str
    passed: bool = False
    reason: str = ""
    run_s: float = float("nan")
    cells: int = 0
    latencies_ms: dict = field(default_factory=dict)
    median_ms: float = float("nan")
    max_ms: float = float("nan")
    button_s: float = float("nan")
    shots: list[str] = field(default_factory=list)


def kernel_ready(lab: Lab, path: str) -> bool:
    """The server's view of the notebook's kernel: connected (a websocket open) and idle."""
    for sess in lab.api("GET", "/api/sessions"):
        if sess.get("path", "").lstrip("/") == path:
            k = lab.api("GET", f"/api/kernels/{sess['kernel']['id']}")
            return k.get("connections", 0) >= 1 and k.get("execution_state") == "idle"
    return False


def wait_for(
    page, predicate, timeout: float, what: str, poll: float = 0.5, lab: Lab | None = None, path: str = ""
):
    """Poll ``predicate(state)`` on the notebook state (and the kernel, when ``lab`` is given);
    raise on timeout, dialog or traceback."""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(STATE_JS)
        if state is not None:
            if state["errors"]:
                raise AssertionError("traceback in the notebook:\n" + state["errors"][0])
            if state["dialog"]:
                raise AssertionError(f"JupyterLab dialog while waiting for {what}: {state['dialog']!r}")
            if predicate(state) and (lab is None or kernel_ready(lab, path)):
                return state
        page.wait_for_timeout(poll * 1000)
    raise TimeoutError(
        f"timed out after {timeout:.0f}s waiting for {what}; last state: "
        f"{json.dumps(state)[:600] if state else None}"
    )


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


def timed(page, img, action, budget_ms: int) -> float | None:
    """Milliseconds from the key press or click that ``action()`` makes to the explorer's new
    image (None if none came within ``budget_ms``)."""
    page.evaluate(ARM_JS, [img.element_handle(), budget_ms])
    action()
    return page.evaluate("() => window.__qlibRedraw")


def check_notebook(context, lab: Lab, name: str, args) -> Result:
    res = Result(name)
    stem = Path(name).stem

    def shot(tag: str) -> Path:
        return SHOTS / f"{stem}-{tag}.png"

    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(
            f"{lab.base}/lab/workspaces/{stem}/tree/notebooks/{name}?token={lab.token}",
            wait_until="domcontentloaded",
            timeout=60_000,
        )
        state = wait_for(
            page,
            lambda s: len(s["prompts"]) > 0 and s["indicator"] == "idle",
            args.kernel_timeout,
            "the notebook to open and its kernel to be connected and idle",
            lab=lab,
            path=f"notebooks/{name}",
        )
        res.cells = len(state["prompts"])
        log(f"{name}: {res.cells} code cells, kernel connected and idle; Run > Run All Cells")
        t = time.monotonic()
        run_all_cells(page)
        wait_for(page, lambda s: any(p != "[ ]:" for p in s["prompts"]), 30, "execution to start")
        wait_for(
            page,
            lambda s: s["indicator"] == "idle" and all(DONE_PROMPT.match(p) for p in s["prompts"]),
            args.run_timeout,
            "all cells to run",
            poll=1.0,
            lab=lab,
            path=f"notebooks/{name}",
        )
        res.run_s = time.monotonic() - t
        log(f"{name}: Run All took {res.run_s:.1f}s, no traceback")
        page.screenshot(path=shot("0-top"))
        res.shots.append(str(shot("0-top")))

        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first
        cell = panel.locator(".jp-CodeCell").filter(has=page.locator(".widget-slider")).last
        img = cell.locator("img.widget-image, .widget-image img, img").first
        img.wait_for(timeout=30_000)
        img.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        cell.screenshot(path=shot("1-explorer-before"))
        res.shots.append(str(shot("1-explorer-before")))
        sliders = cell.locator(".widget-slider")
        for i in range(sliders.count()):
            s = sliders.nth(i)
            label = (s.locator(".widget-label").first.text_content() or f"slider {i}").strip()
            handle = s.locator(".noUi-handle").first
            times = []
            for key in (["ArrowRight", "ArrowLeft"] * args.presses)[: 2 * args.presses]:
                ms = timed(page, img, lambda: handle.press(key),  # noqa: B023  (called within this iteration)
                           int(args.redraw_timeout * 1000))
                times.append(ms)
                page.wait_for_timeout(150)
            res.latencies_ms[label] = times
            log(
                f"{name}: slider {label!r}: key press to redraw "
                f"{[None if x is None else round(x) for x in times]} ms"
            )
        cell.screenshot(path=shot("2-explorer-after"))
        res.shots.append(str(shot("2-explorer-after")))
        button = cell.locator("button.jupyter-button, .widget-button").first
        if button.count():
            ms = timed(page, img, button.click, int(args.button_timeout * 1000))
            res.button_s = (ms / 1000) if ms is not None else float("nan")
            page.wait_for_timeout(300)
            cell.screenshot(path=shot("3-explorer-simulated"))
            res.shots.append(str(shot("3-explorer-simulated")))
            log(f"{name}: button to new figure {res.button_s:.2f}s")
        wait_for(page, lambda s: True, 5, "the notebook state")  # a traceback in a callback fails
        flat = [x for v in res.latencies_ms.values() for x in v]
        if not flat:
            raise AssertionError("no slider in the explorer cell")
        if any(x is None for x in flat):
            raise AssertionError(f"a key press did not redraw within {args.redraw_timeout:.0f}s")
        res.median_ms, res.max_ms = float(statistics.median(flat)), float(max(flat))
        problems = []
        if res.median_ms > args.median_ms:
            problems.append(f"median redraw {res.median_ms:.0f} ms > {args.median_ms:.0f} ms")
        if res.max_ms > args.max_ms:
            problems.append(f"max redraw {res.max_ms:.0f} ms > {args.max_ms:.0f} ms")
        if not res.button_s <= args.button_s:
            problems.append(f"button {res.button_s:.1f} s > {args.button_s:.0f} s")
        if problems:
            raise AssertionError("; ".join(problems))
        res.passed = True
        res.reason = f"redraw median {res.median_ms:.0f} ms, max {res.max_ms:.0f} ms"
    except Exception as e:
        res.reason = f"{type(e).__name__}: {e}"
        try:
            page.screenshot(path=shot("failure"))
            res.shots.append(str(shot("failure")))
        except Exception:
            pass
    finally:
        try:  # close the tab (a save, if any, happens now) before the kernels go
            page.close()
        except Exception:
            pass
        lab.shutdown_kernels()
    log(f"{name}: {'PASS' if res.passed else 'FAIL'} - {res.reason.splitlines()[0] if res.reason else ''}")
    return res


# ----------------------------------------------------------------------------- rendered markdown

GITHUB_CSS = """body{margin:0;font:16px/1.5 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif}
main{width:1000px;box-sizing:border-box;padding:32px;overflow:visible}
table{border-collapse:collapse;display:block;max-width:100%;overflow:auto}
td,th{border:1px solid #d0d7de;padding:6px 13px}img{max-width:100%}
pre{overflow:auto;background:#f6f8fa;padding:16px}code{font-size:85%}"""


def check_markdown(context, path: Path, width: int = 1000) -> dict:
    """Render ``path`` as GitHub does (CommonMark + tables, its CSS rules for wide tables and
    images) in a ``width`` px pane; screenshot it; the widest element must fit."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(path.read_text())
    page = context.new_page()
    try:
        page.set_viewport_size({"width": width, "height": 1200})
        page.goto(path.parent.resolve().as_uri() + "/")  # relative images resolve beside the file
        page.set_content(
            f"<html><head><style>{GITHUB_CSS}</style></head><body><main>{html}</main></body></html>"
        )
        page.wait_for_timeout(500)
        m = page.evaluate("""() => { const main = document.querySelector('main');
            let widest = main.scrollWidth; for (const e of main.querySelectorAll('*'))
              widest = Math.max(widest, e.getBoundingClientRect().right + 32);
            return {scroll: main.scrollWidth, widest: Math.round(widest),
                    height: document.body.scrollHeight}; }""")
        out = SHOTS / f"markdown-{path.stem}.png"
        page.screenshot(path=out, full_page=True)
        fits = m["widest"] <= width + 1
        return {
            "file": str(path.relative_to(ROOT)),
            "pane_px": width,
            "widest_px": m["widest"],
            "height_px": m["height"],
            "fits": fits,
            "screenshot": str(out),
        }
    finally:
        page.close()


def git_status() -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.splitlines()


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pattern", default="[0-9][0-9]_*.md", help="which notebooks (glob in notebooks/)")
    ap.add_argument(
        "--mode",
        choices=("smoke", "full"),
        default="full",
        help="full: the notebooks as a user opens them, drawing from the stored results (default); "
        "smoke: QLIB_SMOKE=1",
    )
    ap.add_argument("--cache", type=Path, help="QLIB_CACHE for the kernels (default: a temporary folder)")
    ap.add_argument("--presses", type=int, default=3, help="key presses each way per slider")
    ap.add_argument("--median-ms", type=float, default=250, help="budget: median key press to redraw")
    ap.add_argument("--max-ms", type=float, default=500, help="budget: slowest key press to redraw")
    ap.add_argument("--button-s", type=float, default=5, help="budget: button click to new figure")
    ap.add_argument("--run-timeout", type=float, default=900, help="seconds for Run All Cells, per notebook")
    ap.add_argument(
        "--kernel-timeout",
        type=float,
        default=180,
        help="seconds for a notebook to open and its kernel to be connected and idle",
    )
    ap.add_argument("--redraw-timeout", type=float, default=10, help="seconds for a figure to redraw")
    ap.add_argument("--button-timeout", type=float, default=60, help="seconds for the button's figure")
    ap.add_argument("--total-timeout", type=float, default=3600, help="hard limit for the whole run")
    ap.add_argument(
        "--skip-without-chromium",
        action="store_true",
        help="exit 0 with the reason printed when chromium cannot be had (CI)",
    )
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary folder (server log)")
    args = ap.parse_args()

    def _alarm(*_):
        raise TimeoutError(f"browser test exceeded --total-timeout={args.total_timeout:.0f}s")

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(args.total_timeout))

    reason = ensure_chromium()
    if reason:
        print(f"BROWSER TEST SKIPPED: {reason}")
        return 0 if args.skip_without_chromium else 1
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    tmp = Path(tempfile.mkdtemp(prefix="qlib-browser-"))
    names = [p.name for p in sorted(NOTEBOOKS.glob(args.pattern))]
    results: list[Result] = []
    markdown: list[dict] = []
    status_before = git_status()
    status_after: list[str] = []
    error = ""
    try:
        with (
            Lab(tmp, ROOT, start_timeout=120, smoke=args.mode == "smoke", cache=args.cache) as lab,
            sync_playwright() as pw,
        ):
            context = pw.chromium.launch_persistent_context(
                str(tmp / "chromium-profile"),
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 1000},
                timeout=60_000,
            )
            try:
                for name in names:
                    results.append(check_notebook(context, lab, name, args))
                for md in (ROOT / "figures" / "claims.md", ROOT / "README.md"):
                    if md.exists():
                        markdown.append(check_markdown(context, md))
                        log(
                            f"{md.name}: widest {markdown[-1]['widest_px']} px in a 1000 px pane, "
                            f"{markdown[-1]['height_px']} px tall"
                        )
            finally:
                context.close()
            time.sleep(2)  # any last autosave has landed
            status_after = git_status()
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
        log(f"aborted: {error}")
    finally:
        signal.alarm(0)
        if args.keep_tmp:
            log(f"temporary folder kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    changed = sorted(set(status_after) ^ set(status_before)) if not error else ["(not checked: aborted)"]
    ok = (
        not error
        and len(results) == len(names)
        and all(r.passed for r in results)
        and not changed
        and all(m["fits"] for m in markdown)
    )
    report = {
        "mode": args.mode,
        "passed": ok,
        "error": error,
        "budgets": {"median_ms": args.median_ms, "max_ms": args.max_ms, "button_s": args.button_s},
        "notebooks": [r.__dict__ for r in results],
        "markdown": markdown,
        "git_status_before": status_before,
        "git_status_changed": changed,
        "load_average": os.getloadavg(),
        "total_s": time.monotonic() - T0,
    }
    (SHOTS / "report.json").write_text(json.dumps(report, indent=1, default=str))
    lines = [
        f"== browser test (JupyterLab + headless Chromium, {args.mode} mode; "
        f"load {os.getloadavg()[0]:.1f}) =="
    ]
    for r in results:
        lines.append(
            f"{'PASS' if r.passed else 'FAIL'}  {r.name}: Run All {r.run_s:.0f} s ({r.cells} code cells); "
            f"slider redraw median {r.median_ms:.0f} ms, max {r.max_ms:.0f} ms; button {r.button_s:.1f} s"
        )
        for label, ts in r.latencies_ms.items():
            lines.append(f"      {label}: {[None if x is None else round(x) for x in ts]} ms")
        if not r.passed:
            lines.append("      " + r.reason.replace("\n", "\n      "))
    for m in markdown:
        lines.append(
            f"{'PASS' if m['fits'] else 'FAIL'}  {m['file']}: widest {m['widest_px']} px in a "
            f"{m['pane_px']} px pane, {m['height_px']} px tall"
        )
    lines.append(
        ("PASS" if not changed else "FAIL")
        + "  git status --porcelain unchanged by the run"
        + ("" if not changed else f": {changed}")
    )
    if error:
        lines.append(f"ABORTED: {error}")
    lines.append(f"screenshots and report: {SHOTS}/; total {time.monotonic() - T0:.0f} s")
    lines.append("BROWSER TEST " + ("PASSED" if ok else "FAILED"))
    (SHOTS / "report.txt").write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
