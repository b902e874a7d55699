#!/usr/bin/env python
"""The book in headless Chromium (``make book-test``, after ``make book``): links that hold.

The site ``build/book/html`` is served on 127.0.0.1 (a local HTTP server, as GitHub Pages serves it)
and every page of it is opened in Chromium, found by following the site's own links from the
landing page. On each page, every image must have loaded (``naturalWidth > 0``: a figure whose file
is missing or broken fails) and every link into the site must answer (the server's status for its
path, without its #fragment: a 404 fails), and nothing may be requested from outside the site (it
must read offline: MathJax and the theme's fonts are served from it). The landing page, the four
notebooks, the claims table (with its first collapsible row opened) and the API reference are
screenshotted at 1280 px, their top and, for the notebooks, their first figure. Screenshots and
``report.json`` / ``report.txt`` go to ``browser-screenshots/book/``; the exit code is 0 only if
every check passes.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_browser_test import CHROMIUM, CHROMIUM_ARGS, ROOT, ensure_chromium, log  # noqa: E402

SITE = ROOT / "build" / "book" / "html"
SHOTS = ROOT / "browser-screenshots" / "book"
#: the pages screenshotted (the issue's list), by their path in the site
SHOT_PAGES = {
    "landing": "index.html",
    "notebook-01": "notebooks/01_max_queue_length.html",
    "notebook-02": "notebooks/02_mixing_time.html",
    "notebook-03": "notebooks/03_who_works_the_most.html",
    "notebook-04": "notebooks/04_perfect_samples.html",
    "claims": "figures/claims.html",
    "api": "reference.html",
    "api-supermarket": "_autosummary/qlib.supermarket.html",
}

PAGE_CHECK = """() => {
  const images = [...document.images].map(
    i => ({src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0}));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  return {images, links, width: document.documentElement.scrollWidth};
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the report lists what failed; the server says nothing
        pass


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, default=SITE, help="the built site (make book)")
    ap.add_argument("--max-pages", type=int, default=500, help="stop crawling after this many pages")
    ap.add_argument("--skip-without-chromium", action="store_true",
                    help="exit 0 with the reason printed when chromium cannot be had (CI)")
    args = ap.parse_args()
    if not (args.site / "index.html").exists():
        print(f"BOOK TEST FAILED: {args.site}/index.html is missing: run `make book` first")
        return 1
    reason = ensure_chromium()
    if reason:
        print(f"BOOK TEST SKIPPED: {reason}")
        return 0 if args.skip_without_chromium else 1
    from playwright.sync_api import sync_playwright

    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    server, base = serve(args.site)
    pages: dict[str, dict] = {}
    link_status: dict[str, int] = {}
    shots: dict[str, list[str]] = {}
    outside: set[str] = set()
    todo = [base + "index.html"] + [base + p for p in SHOT_PAGES.values()]
    t0 = time.monotonic()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            # the site must work offline: whatever a page requests from elsewhere is reported
            page.on("request", lambda r: r.url.startswith(base) or r.url.startswith("data:")
                    or outside.add(r.url))
            while todo and len(pages) < args.max_pages:
                url = urldefrag(todo.pop(0))[0]
                if url in pages:
                    continue
                response = page.goto(url, wait_until="load")
                # a lazy image loads only when scrolled to: load them all, then wait for each
                page.evaluate("() => document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
                page.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=60_000)
                got = page.evaluate(PAGE_CHECK)
                path = url[len(base):]
                internal = sorted({urldefrag(h)[0] for h in got["links"] if h.startswith(base)})
                for link in internal:
                    if link not in link_status:
                        link_status[link] = status(link)
                    if link.endswith(".html") and link not in pages:
                        todo.append(link)
                pages[url] = {
                    "path": path,
                    "status": response.status if response else None,
                    "images": len(got["images"]),
                    "broken_images": [i["src"] for i in got["images"] if not i["ok"]],
                    "broken_links": [link for link in internal if link_status[link] >= 400],
                    "scroll_width": got["width"],
                }
                name = next((k for k, v in SHOT_PAGES.items() if v == path), None)
                if name:
                    shots[name] = screenshot(page, name)
                    pages[url]["screenshots"] = shots[name]
            browser.close()
    finally:
        server.shutdown()

    bad = {p["path"]: {k: p[k] for k in ("status", "broken_images", "broken_links")}
           for p in pages.values() if p["broken_images"] or p["broken_links"] or p["status"] != 200}
    missing_shots = sorted(set(SHOT_PAGES) - set(shots))
    ok = not bad and not missing_shots and not outside
    report = {"passed": ok, "pages": list(pages.values()), "failures": bad,
              "missing_screenshots": missing_shots, "links_checked": len(link_status),
              "requests_outside_the_site": sorted(outside), "load_average": os.getloadavg(),
              "total_s": time.monotonic() - t0}
    (SHOTS / "report.json").write_text(json.dumps(report, indent=1))
    images = sum(p["images"] for p in pages.values())
    lines = [f"== book test (headless Chromium, {args.site}; load {os.getloadavg()[0]:.1f}) ==",
             f"{'PASS' if not bad else 'FAIL'}  {len(pages)} pages, {images} images loaded, "
             f"{len(link_status)} internal links answered"]
    for path, why in bad.items():
        lines.append(f"      {path}: {why}")
    lines.append(f"{'PASS' if not outside else 'FAIL'}  requests outside the site (offline): "
                 f"{len(outside)}" + (f": {sorted(outside)[:5]}" if outside else ""))
    lines.append(f"{'PASS' if not missing_shots else 'FAIL'}  screenshots at 1280 px: "
                 f"{', '.join(sorted(shots))}" + (f"; missing {missing_shots}" if missing_shots else ""))
    lines.append(f"screenshots and report: {SHOTS}/; total {time.monotonic() - t0:.0f} s")
    lines.append("BOOK TEST " + ("PASSED" if ok else "FAILED"))
    (SHOTS / "report.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


def screenshot(page, name: str) -> list[str]:
    """The page's top at 1280 x 1000; for a notebook, also its first figure; for the claims table,
    its first collapsible row opened."""
    out = [SHOTS / f"{name}.png"]
    page.screenshot(path=out[0])
    if name.startswith("notebook"):
        figure = page.locator("article img").first
        if figure.count():
            figure.scroll_into_view_if_needed()
            out.append(SHOTS / f"{name}-figure.png")
            page.screenshot(path=out[-1])
    if name == "claims":
        details = page.locator("article details").first  # not the sidebar's toggles
        if details.count():
            details.locator("summary").click()
            details.scroll_into_view_if_needed()
            out.append(SHOTS / f"{name}-row-opened.png")
            page.screenshot(path=out[-1])
    log(f"{name}: {', '.join(p.name for p in out)}")
    return [str(p) for p in out]


if __name__ == "__main__":
    sys.exit(main())
