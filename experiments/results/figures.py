"""The figures of docs/results.md, drawn with plotly from the committed data files.

    .venv/bin/python -m experiments.results.figures [--only NAME,...] [--out docs/img/results]

Nothing is trained or simulated: each figure reads the tables and run files under docs/results/
that the result commands wrote (the report names the command behind each), and is rendered to
PNG by the system's headless Chromium, as `testbed export --format png` renders a run
(set TESTBED_CHROMIUM to use another browser binary). Figures:

  plateau_accuracy_bits       final test accuracy against uplink bits per iteration, plateau runs
  time_to_accuracy_bandwidth  virtual time to 95% accuracy against the shared cell's bandwidth
  energy_to_target            joules per worker to 80% accuracy, radio and compute, walking stations
  ns3_cell                    the 802.11 DCF cell against ns-3.37: throughput, collisions, speed
  ring_gap                    the ring's rows against fp32 at every evaluation, seed for seed
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "results"
OUT = ROOT / "docs" / "img" / "results"

NAMES = {"fp32": "fp32", "fp16": "fp16", "topk": "top-k 1%", "dgc": "DGC", "dgc_nomask": "DGC, no masking",
         "scalecom": "ScaleCom", "lgc_ablation": "LGC ablation", "lgc_ps": "LGC-PS", "lgc_rar": "LGC-RAR",
         "qsgd": "QSGD", "signsgd_ef": "EF-signSGD", "powersgd": "PowerSGD"}
SYMBOLS = {"fp32": "circle", "fp16": "circle-open", "topk": "square", "dgc": "diamond",
           "dgc_nomask": "diamond-open", "scalecom": "triangle-up", "lgc_ablation": "x",
           "lgc_ps": "star", "lgc_rar": "star-triangle-up", "qsgd": "hexagon",
           "signsgd_ef": "cross", "powersgd": "pentagon"}
COLORS = {"fp32": "#1f2937", "fp16": "#6b7280", "topk": "#2563eb", "dgc": "#059669",
          "dgc_nomask": "#34d399", "scalecom": "#7c3aed", "lgc_ablation": "#f59e0b",
          "lgc_ps": "#dc2626", "lgc_rar": "#db2777", "qsgd": "#0891b2", "signsgd_ef": "#65a30d",
          "powersgd": "#92400e"}
FONT = dict(family="DejaVu Sans, Arial, sans-serif", size=15)


def _style(fig, title: str, width: int, height: int):
    fig.update_layout(title=dict(text=title, x=0.01, xanchor="left"), template="plotly_white",
                      font=FONT, width=width, height=height, margin=dict(l=80, r=30, t=80, b=70))
    return fig


def _rows(name: str) -> list[dict]:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def plateau_accuracy_bits():
    """Two panels: cnn_fc at its 4,800-iteration plateau (CPU) and ResNet-20 (GPU, 1,000
    iterations); each method's mean final accuracy with its sample sd over seeds."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09, subplot_titles=(
        "cnn_fc, 4,800 iterations (5 seeds each)", "ResNet-20 on a GPU, 1,000 iterations"))
    for col, table, keep in ((1, "table_fashion_plateau.csv", lambda r: int(r["n"]) >= 5),
                             (2, "table_gpu_plateau.csv", lambda r: True)):
        for r in filter(keep, _rows(table)):
            m, n = r["method"], int(r["n"])
            label = NAMES.get(m, m) + ("" if col == 1 or n == 5 else f" ({n} seeds)")
            fig.add_trace(go.Scatter(
                x=[float(r["up_final"])], y=[100 * float(r["acc_mean"])],
                error_y=dict(type="data", array=[100 * float(r["acc_std"])], thickness=1.5, width=6),
                mode="markers", name=label, legendgroup=m, showlegend=col == 1 or n != 5,
                marker=dict(symbol=SYMBOLS.get(m, "circle"), size=14, color=COLORS.get(m),
                            line=dict(width=1.5, color=COLORS.get(m)))), row=1, col=col)
        fig.update_xaxes(type="log", dtick=1, exponentformat="SI", row=1, col=col,
                         title_text="uplink bits per iteration, all workers (log)")
    fig.update_yaxes(title_text="final test accuracy (%)", row=1, col=1)
    fig.update_yaxes(dtick=0.5, ticksuffix="")
    _style(fig, "Fashion-MNIST, 8 workers, one shared 20 Mbit/s cell: accuracy against uplink bits "
           "(mean ± sd over seeds)", 1400, 620)
    fig.update_layout(legend=dict(orientation="h", y=-0.2, x=0, xanchor="left"),
                      margin=dict(b=150))
    return fig


def time_to_accuracy_bandwidth():
    """Virtual seconds to 95% test accuracy per method at 1, 5, 20 and 100 Mbit/s (table 2)."""
    rows = _rows("table2_bandwidth.csv")
    bws = sorted({float(k[len("tta_s_"):]) for k in rows[0] if k.startswith("tta_s_")})
    fig = go.Figure()
    for r in rows:
        m = r["method"]
        xs = [bw for bw in bws if r.get(f"tta_s_{bw:g}")]
        fig.add_trace(go.Scatter(x=xs, y=[float(r[f"tta_s_{bw:g}"]) for bw in xs], name=NAMES.get(m, m),
                                 mode="lines+markers", line=dict(color=COLORS.get(m), width=2),
                                 marker=dict(symbol=SYMBOLS.get(m, "circle"), size=11, color=COLORS.get(m))))
    fig.update_xaxes(type="log", tickvals=bws, ticktext=[f"{b:g}" for b in bws],
                     title_text="bandwidth of the shared cell (Mbit/s, log)")
    fig.update_yaxes(type="log", tickvals=[1, 2, 5, 10, 20, 50, 100, 200, 500],
                     title_text="virtual time to 95% test accuracy (s, log)")
    _style(fig, "Time to 95% accuracy against bandwidth (digits, 8 workers, seed 0)", 1100, 620)
    fig.update_layout(legend=dict(x=1.02, y=1, xanchor="left"), margin=dict(r=170))
    return fig


def energy_to_target():
    """Each worker's joules up to the first evaluation at >= 80%, split into radio and compute."""
    runs = [json.loads((DATA / "table_energy_runs" / f"{m}.json").read_text()) for m in ("fp32", "dgc", "lgc_ps")]
    labels = [f"{NAMES[r['method']]}<br>{r['iteration'] + 1} it, {r['virtual_time_s']:.1f} virtual s" for r in runs]

    def mean(r, i):
        return statistics.fmean(v[i] for v in r["energy_j"].values())

    fig = go.Figure()
    for i, part, color in ((1, "radio (transmit, receive, idle listening)", "#2563eb"), (2, "compute", "#f59e0b")):
        fig.add_trace(go.Bar(x=labels, y=[mean(r, i) for r in runs], name=part, marker_color=color,
                             text=[f"{mean(r, i):.1f} J" for r in runs], textposition="inside"))
    fig.add_trace(go.Scatter(x=labels, y=[mean(r, 0) for r in runs], mode="text", showlegend=False,
                             text=[f"<b>{mean(r, 0):.1f} J</b>" for r in runs], textposition="top center"))
    fig.update_layout(barmode="stack", legend=dict(x=0.99, y=0.98, xanchor="right"))
    fig.update_yaxes(title_text="joules per worker to 80% (mean of 8 workers)", range=[0, 145])
    _style(fig, "Energy to 80% accuracy, stations walking from 10 m to 80 m (Fashion-MNIST, seed 0)", 1000, 600)
    return fig


def ns3_cell():
    """Saturation throughput, collided attempts per success and wall time per frame against N."""
    rows = json.loads((DATA / "ns3_validation.json").read_text())["dcf"]
    n = [r["n"] for r in rows]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=(
        "saturation throughput", "collided attempts per success", "wall time per successful frame"))
    for who, color, dash in (("ns3", "#1f2937", "solid"), ("ours", "#dc2626", "dot")):
        name = "ns-3.37" if who == "ns3" else "this testbed"
        for col, key, scale in ((1, "mbps", 1), (2, "collided_per_success", 1), (3, "wall_per_frame_s", 1e6)):
            fig.add_trace(go.Scatter(x=n, y=[scale * r[who][key] for r in rows], name=name,
                                     legendgroup=who, showlegend=col == 1, mode="lines+markers",
                                     line=dict(color=color, dash=dash, width=2),
                                     marker=dict(size=9, color=color)), row=1, col=col)
    for col in (1, 2, 3):
        fig.update_xaxes(type="log", tickvals=n, title_text="saturated stations N (log)", row=1, col=col)
    fig.update_yaxes(title_text="payload Mbit/s", range=[20, 32], row=1, col=1)
    fig.update_yaxes(title_text="collided attempts / success", row=1, col=2)
    fig.update_yaxes(type="log", title_text="wall µs per frame (log)", tickvals=[1, 10, 100, 1000, 10000],
                     ticktext=["1", "10", "100", "1,000", "10,000"], row=1, col=3)
    _style(fig, "802.11a DCF cell, 54 Mbit/s, 1500-byte payloads: this testbed against ns-3.37", 1500, 540)
    fig.update_layout(legend=dict(x=0.01, y=0.04, xanchor="left", yanchor="bottom",
                                  bgcolor="rgba(255,255,255,0.8)"))
    return fig


# the ring's rows of the plateau grid and where their run files are (docs/results.md, "LGC on the
# ring, like for like"), with the parameter server's LGC-PS beside them
RING_GAP = (("dgc_ring_nowarmup", "plateau_cell_runs", "DGC on the ring", "#059669", "solid"),
            ("scalecom", "plateau_cell_runs", "ScaleCom", "#7c3aed", "solid"),
            ("lgc_ps_nowarmup", "plateau_cell_runs", "LGC-PS (parameter server)", "#dc2626", "solid"),
            ("lgc_rar_nowarmup", "plateau_cell_runs", "LGC-RAR", "#db2777", "solid"),
            ("lgc_rar_l4_nowarmup", "rar_latent_runs", "LGC-RAR, k/4 latent", "#db2777", "dot"),
            ("lgc_rar_l16_nowarmup", "rar_l16_runs", "LGC-RAR, k/16 latent", "#db2777", "dash"),
            ("lgc_rar_ablation_nowarmup", "rar_ablation_runs", "f16 values at the shared positions",
             "#f59e0b", "solid"))


def _seeds(folder: str, method: str) -> dict[int, dict]:
    return {int(p.stem.rsplit("_s", 1)[1]): json.loads(p.read_text())
            for p in sorted((DATA / folder).glob(f"{method}_s*.json"))}


def ring_gap():
    """Each ring row's test accuracy minus fp32's on the same seed at every evaluation, mean
    over the seeds, all without DGC's warm-up (ScaleCom has none)."""
    fp32 = _seeds("plateau_cell_runs", "fp32")
    fig = go.Figure()
    for method, folder, name, color, dash in RING_GAP:
        runs = _seeds(folder, method)
        if not runs:
            continue
        its = [e["iteration"] + 1 for e in fp32[0]["evals"]]
        gap = [statistics.fmean(100 * (runs[s]["evals"][i]["test_accuracy"] - fp32[s]["evals"][i]["test_accuracy"])
                                for s in runs) for i in range(len(its))]
        fig.add_trace(go.Scatter(x=its, y=gap, name=f"{name} ({len(runs)} seeds)", mode="lines+markers",
                                 line=dict(color=color, dash=dash, width=2), marker=dict(size=7, color=color)))
    fig.add_hline(y=-0.5, line=dict(color="#6b7280", dash="dot", width=1),
                  annotation_text="0.5 points below fp32", annotation_position="top left")
    fig.update_xaxes(title_text="iterations done", tickvals=list(range(400, 4801, 800)) + [4800])
    fig.update_yaxes(title_text="test accuracy minus fp32's, same seed (points)", range=[-9, 0.5])
    _style(fig, "The ring against fp32, seed for seed (Fashion-MNIST plateau, 8 workers, no warm-up)",
           1200, 620)
    fig.update_layout(legend=dict(x=0.99, y=0.02, xanchor="right", yanchor="bottom",
                                  bgcolor="rgba(255,255,255,0.8)"))
    return fig


FIGURES = {f.__name__: f for f in (plateau_accuracy_bits, time_to_accuracy_bandwidth, energy_to_target, ns3_cell,
                                   ring_gap)}


def find_chromium() -> str | None:
    """The system's Chromium (or $TESTBED_CHROMIUM), as the testbed's PNG export looks for it."""
    env = os.environ.get("TESTBED_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render_png(fig, path: Path, browser: str) -> Path:
    """Render one plotly figure to `path` with headless Chromium at the figure's own size."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "plot.html"
        fig.write_html(page, include_plotlyjs=True, full_html=True, config={"staticPlot": True})
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--hide-scrollbars", "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp}/profile",
               f"--window-size={fig.layout.width},{fig.layout.height}",
               "--virtual-time-budget=5000", f"--screenshot={path}", page.as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"Chromium ({browser}) could not render {path.name}: {e}") from None
        if proc.returncode != 0 or not path.exists():
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            raise RuntimeError(f"Chromium ({browser}) could not render {path.name}: exit {proc.returncode} {last}")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.figures",
                                 description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="figures: " + ", ".join(FIGURES))
    ap.add_argument("--only", default=None, help="comma-separated subset of the figures (default all)")
    ap.add_argument("--out", default=str(OUT), help=f"folder for the PNGs (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    names = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else list(FIGURES)
    bad = [n for n in names if n not in FIGURES]
    if bad:
        print(f"--only {bad[0]!r}: must be one of {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    browser = find_chromium()
    if browser is None:
        print("figures need Chromium to render PNGs (Debian: apt-get install chromium, or set "
              "TESTBED_CHROMIUM)", file=sys.stderr)
        return 1
    for name in names:
        try:
            path = render_png(FIGURES[name](), Path(args.out) / f"{name}.png", browser)
        except (OSError, RuntimeError, KeyError, ValueError) as e:
            print(f"{name}: {e}", file=sys.stderr)
            return 1
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
