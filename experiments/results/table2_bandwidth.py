"""Table 2: virtual time to a target accuracy against the bandwidth of the shared cell.

    .venv/bin/python -m experiments.results.table2_bandwidth [--quick] [--jobs 2]

Each method trains on digits with 8 workers in one shared star cell of 1, 5, 20 and 100 Mbit/s
(reliable delivery) until the test accuracy first reaches the target (checked every
`eval_every` iterations; the run stops there) or the budget ends. The figure is the virtual
clock at that evaluation: compute from the step's FLOPs plus every phase on the emulated link.
Writes table2_bandwidth.csv/.md, and the plot as table2_bandwidth.html and .png (the PNG is the
HTML rendered by the system's headless Chromium, as `testbed export --format png` does; without
a Chromium only the HTML is written).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import plotly.graph_objects as go

from experiments.results import methods as M
from experiments.results.figures import find_chromium, render_png
from experiments.results.harness import TableRun, run_many, stage_lengths
from experiments.results.tables import Column, common_args, emit, out_dir, pick, seeds_of

STAR = "experiments/results_star.toml"
BANDWIDTHS = [1.0, 5.0, 20.0, 100.0]
FULL_ITERATIONS, QUICK_ITERATIONS = 240, 40
TARGET, QUICK_TARGET = 0.95, 0.5
QUICK_METHODS, QUICK_BANDWIDTHS = ["fp32", "topk", "dgc", "lgc_ps"], [1.0, 20.0]


def specs(labels, bandwidths, seed, iterations, target, eval_every) -> list[TableRun]:
    warmup, ae = stage_lengths(iterations)
    return [TableRun(f"t2[{label},{bw:g}Mbps]", STAR,
                    [f"run.iterations={iterations}", f"run.seed={seed}",
                     f"run.eval_every={eval_every}", f"run.target_accuracy={target}",
                     "run.stop_at_accuracy=true", f"network.link.bandwidth_mbps={bw}",
                     *M.overrides(label, warmup, ae)],
                    tags={"method": label, "bandwidth_mbps": bw})
            for label in labels for bw in bandwidths]


def rows_of(results, labels, bandwidths, target) -> list[dict]:
    rows = []
    for label in labels:
        row = {"method": label}
        for bw in bandwidths:
            r = next(x for x in results if x.spec.tags == {"method": label, "bandwidth_mbps": bw})
            key = f"{bw:g}"
            tta = r.time_to_accuracy(target) if r.status == "completed" else None
            row[f"tta_s_{key}"] = tta
            row[f"iterations_{key}"] = (next(e["iteration"] + 1 for e in r.evals
                                             if e["test_accuracy"] >= target) if tta is not None else None)
            row[f"best_acc_{key}"] = max((e["test_accuracy"] for e in r.evals), default=None)
            row[f"status_{key}"] = r.status if r.status != "completed" else (
                "reached" if tta is not None else f"not reached in {r.iterations} it")
        rows.append(row)
    return rows


def columns(bandwidths) -> list[Column]:
    cols = [Column("method", "method")]
    for bw in bandwidths:
        cols.append(Column(f"tta_s_{bw:g}", f"{bw:g} Mbit/s: s", "{:.2f}"))
        cols.append(Column(f"iterations_{bw:g}", "it", "{:d}"))
    return cols


def figure(rows, bandwidths, target):
    fig = go.Figure()
    for row in rows:
        xs = [bw for bw in bandwidths if row.get(f"tta_s_{bw:g}") is not None]
        ys = [row[f"tta_s_{bw:g}"] for bw in xs]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=row["method"]))
    fig.update_layout(
        title=f"Virtual time to {target:.0%} test accuracy (digits, 8 workers, shared cell)",
        xaxis=dict(title="cell bandwidth (Mbit/s)", type="log", tickvals=bandwidths),
        yaxis=dict(title="virtual time to target (s, log)", type="log"),
        template="plotly_white", width=900, height=560)
    return fig


def write_plot(fig, out: Path, stem: str) -> list[Path]:
    """HTML always; PNG when a headless Chromium can render it."""
    out.mkdir(parents=True, exist_ok=True)
    html = out / f"{stem}.html"
    # plotly.js from its CDN keeps the committed page small; the PNG is the offline copy.
    fig.write_html(html, include_plotlyjs="cdn", full_html=True)
    written = [html]
    browser = find_chromium()
    if browser is None:
        print("no Chromium found: wrote the HTML plot only (set TESTBED_CHROMIUM for the PNG)")
        return written
    try:
        written.append(render_png(fig, out / f"{stem}.png", browser))
    except RuntimeError as e:
        print(f"{e}: HTML only")
    return written


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table2_bandwidth",
                                 description=__doc__.split("\n")[0])
    common_args(ap, methods=M.LABELS)
    ap.add_argument("--target", type=float, default=None, help=f"target accuracy (default {TARGET})")
    ap.add_argument("--bandwidths", default=None, help="comma-separated Mbit/s (default 1,5,20,100)")
    args = ap.parse_args(argv)
    iterations = args.iterations or (QUICK_ITERATIONS if args.quick else FULL_ITERATIONS)
    target = args.target or (QUICK_TARGET if args.quick else TARGET)
    seed = seeds_of(args.seeds, [0])[0]
    labels = pick(args.methods, M.LABELS, "methods") if args.methods or not args.quick else QUICK_METHODS
    bandwidths = ([float(b) for b in args.bandwidths.split(",")] if args.bandwidths
                  else QUICK_BANDWIDTHS if args.quick else BANDWIDTHS)
    eval_every = max(1, min(5, iterations // 8))
    results = run_many(specs(labels, bandwidths, seed, iterations, target, eval_every),
                       jobs=args.jobs, store=args.store, ray=args.ray, sweep="table2")
    rows = rows_of(results, labels, bandwidths, target)
    warmup, ae = stage_lengths(iterations)
    notes = [f"virtual seconds to the first evaluation (every {eval_every} iterations) with test "
             f"accuracy >= {target}; '-' = not reached within {iterations} iterations; it = "
             "iterations to that evaluation. digits, cnn, 8 workers, seed "
             f"{seed}, one shared cell (TDMA, server at the access point), reliable delivery, 2 ms delay; "
             f"DGC/LGC warm-up {warmup}, LGC autoencoder training {ae}.",
             "lgc_rar on a star cell: its ring all-reduce is relayed hop by hop through the access point."]
    for row in rows:
        for bw in bandwidths:
            st = row[f"status_{bw:g}"]
            if st not in ("reached",) and not st.startswith("not reached"):
                notes.append(f"{row['method']} at {bw:g} Mbit/s: {st}")
    out = out_dir(args)
    emit(rows, columns(bandwidths), title=f"Table 2: virtual time to {target:.0%} accuracy against bandwidth",
         notes=notes, out=out, stem="table2_bandwidth")
    if out is not None:
        for p in write_plot(figure(rows, bandwidths, target), out, "table2_bandwidth"):
            print(f"wrote {p}")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
