"""A run's dashboard figures as one file (`testbed export RUN --format html|png`).

HTML: every figure of the live view that applies to the run (each panel of
`dashboards.panels.PANELS`, in its order)
in one self-contained page (plotly.js inlined once, so it opens offline). PNG: that page
rendered by a headless Chromium (the system's; nothing is downloaded).
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import plotly.io as pio

from dashboards import panels
from dashboards.panel import Rows, View
from testbed.records.store import Store
from testbed.records.summary import run_summary, summary_text

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _open(store):
    return (store, False) if isinstance(store, Store) else (Store(store), True)


def run_figures(store, run_ref) -> tuple[dict, list]:
    """(run, [figures]) for one run: every live panel (dashboards.panels) drawn from all its
    rows, once per x axis it exports."""
    store, owned = _open(store)
    try:
        run = store.run(run_ref)
        rid = run["id"]
        its, links = store.iterations(rid), store.links(rid)
        last = its[-1]["iteration"] if its else -1
        rows = Rows(run, iterations=its, nodes=store.node_iterations(rid), links=links,
                    evals=store.evals(rid), events=store.events(rid),
                    window=[r for r in links if r["iteration"] > last - 10],
                    window_label=f"over the last 10 iterations (to {last})" if last >= 0 else "")
        figs = [p.draw(rows, View(x=x) if x else View(), False) for p in panels.PANELS
                if p.applies_to(run) for x in p.exports]
        return run, figs
    finally:
        if owned:
            store.close()


def export_html(store, run_ref, path, *, toolbar: bool = True) -> Path:
    """Write the run's figures to one HTML file; return its path. `toolbar`: plotly's mode bar
    over each figure (zoom, pan, download); the PNG export renders the page without it."""
    run, figs = run_figures(store, run_ref)
    store, owned = _open(store)
    try:
        headline = summary_text(run_summary(store, run["id"]))
    finally:
        if owned:
            store.close()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    title = f"Run #{run['id']} {run['name']} ({run.get('method') or '?'}, {run['status']})"
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}</title>"
             "<style>body{font-family:system-ui,sans-serif;margin:16px;background:#fafafa}"
             ".fig{background:white;border:1px solid #e5e7eb;margin:10px 0}</style></head><body>",
             f"<h2>{_esc(title)}</h2>", f"<p class='summary'>{_esc(headline)}</p>"]
    if run.get("error"):
        parts.append(f"<p style='color:#b91c1c'>failed: {_esc(run['error'])}</p>")
    for i, fig in enumerate(figs):
        parts.append("<div class='fig'>" + pio.to_html(fig, full_html=False, include_plotlyjs=(i == 0),
                                                       config={"displaylogo": False,
                                                               **({} if toolbar else {"displayModeBar": False})})
                     + "</div>")
    parts.append("</body></html>")
    path.write_text("".join(parts), encoding="utf-8")
    return path


def _esc(text) -> str:
    return html.escape(str(text))


def find_chromium() -> str | None:
    env = os.environ.get("TESTBED_CHROMIUM")
    if env:
        return env
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def export_png(store, run_ref, path, *, width: int = 1280, height: int | None = None,
               timeout_s: float = 60.0) -> Path:
    """Render the run's HTML export with headless Chromium into one PNG; return its path."""
    path = Path(path).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        page = export_html(store, run_ref, Path(tmp) / "run.html", toolbar=False)
        n_figs = page.read_text(encoding="utf-8").count("class='fig'")
        screenshot(page, path, width, height or 90 + 470 * n_figs, tmp, timeout_s)
    return path


def screenshot(page: Path, path: Path, width: int, height: int, tmp, timeout_s: float = 60.0) -> None:
    """An HTML page rendered by headless Chromium into a PNG at `path` (a profile kept in `tmp`)."""
    browser = find_chromium()
    if browser is None:
        raise RuntimeError("PNG export needs Chromium (Debian: `apt-get install chromium`, or run "
                           ".ci/install-browser.sh; or set TESTBED_CHROMIUM); HTML export needs nothing")
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--hide-scrollbars", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp}/profile",
           f"--window-size={width},{height}", "--virtual-time-budget=5000",
           f"--screenshot={path}", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0 or not path.exists():
        raise RuntimeError(f"Chromium could not render {page}: exit {proc.returncode}: "
                           f"{proc.stderr.strip().splitlines()[-1:] or ''}")
