"""Edge table: virtual time to a target accuracy on Fashion-MNIST, per method, station count
and cell sharing, and with a device trace and a deadline.

    .venv/bin/python -m experiments.results.table_edge --iterations 200 --stations 4,8 --out docs/results

The base is experiments/results_star.toml with Fashion-MNIST and the MLP; N stations share one
20 Mbit/s cell, by turns (TDMA) or contending (CSMA, where the link layer has `sharing =
"csma"`; a link layer without it is reported as such). The edge rows add, at each N, a
device trace written next to the table, alone and with a deadline of 1.5x the fp32 TDMA run's
median iteration at that N, on the cells `--edge` names (default: TDMA with the trace, TDMA
and CSMA with the trace and the deadline; the same trace and deadline on both cells). In the trace w0 is a straggler (its speed makes one step
take 2 fp32 iterations: without a deadline every iteration waits for it, with one it is left
out) and w1 is away 30% of every period of 50 fp32 iterations. Every run is appended to table_edge.jsonl as soon as it ends, so a run cut short
leaves the ones before it on disk, and a second call with the same --out skips the runs
already there (it resumes).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from experiments.results import methods as M
from experiments.results.harness import TableRun, run_one, stage_lengths
from nodes.flops import train_step_flops
from nodes.models import build_model

STAR = "experiments/results_star.toml"
LABELS = ["fp32", "dgc", "lgc_ps"]
TARGET = 0.80


def base(n: int, sharing: str, iterations: int, eval_every: int, target: float) -> list[str]:
    return ["data.dataset=fashion_mnist", "model.name=mlp", f"network.workers={n}",
            f'network.sharing="{sharing}"', f"run.iterations={iterations}",
            f"run.eval_every={eval_every}", f"run.target_accuracy={target}",
            "run.stop_at_accuracy=true"]


def step_seconds() -> float:
    """The MLP's step on Fashion-MNIST (batch 32) at the default 20 GFLOP/s, speed 1."""
    return train_step_flops(build_model("mlp", (1, 28, 28), 10), (1, 28, 28), 32) / 20e9


def edge_trace(path: Path, iteration_s: float) -> Path:
    period = 50 * iteration_s
    path.write_text(json.dumps({"nodes": {
        "w0": {"speed": [[0, step_seconds() / (2 * iteration_s)]]},
        "w1": {"available": [[0, 0.7 * period]], "period_s": period}}}, indent=1))
    return path


def record(out: Path, result, extra: dict) -> dict:
    row = {"label": result.spec.label, "status": result.status, "note": result.note.splitlines()[0] if result.note else "",
           "iterations": result.iterations, "final_accuracy": result.final_accuracy,
           "virtual_time_s": result.virtual_time_s, "wall_s": round(result.wall_s, 1),
           "median_iteration_s": statistics.median(result.virtual_s) if result.virtual_s else None,
           **extra}
    with open(out / "table_edge.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)
    return row


def render(path: Path, target: float) -> str:
    """The markdown table of a table_edge.jsonl: per station count and method, the virtual
    seconds to the target (iterations in brackets; '-' = not reached, final accuracy shown)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cols = [(s, e) for s, e in (("tdma", ""), ("csma", ""), ("tdma", "trace"), ("tdma", "trace+deadline"),
                                ("csma", "trace"), ("csma", "trace+deadline"))
            if any(r["sharing"] == s and r["edge"] == e for r in rows)]
    names = {("tdma", ""): "TDMA", ("csma", ""): "CSMA", ("tdma", "trace"): "TDMA + device trace",
             ("tdma", "trace+deadline"): "TDMA + trace + deadline", ("csma", "trace"): "CSMA + device trace",
             ("csma", "trace+deadline"): "CSMA + trace + deadline"}
    out = ["| stations | method | " + " | ".join(names[c] for c in cols) + " |",
           "|---|---|" + "---|" * len(cols)]

    def cell(r):
        if r is None:
            return "not run"
        if r["status"] != "completed":
            return r["status"]
        if r["time_to_target_s"] is None:
            return f"- ({r['final_accuracy']:.1%} at {r['iterations']} it)"
        return f"{r['time_to_target_s']:.1f} s ({r['iterations']} it)"
    for n in sorted({r["stations"] for r in rows}):
        for m in dict.fromkeys(r["method"] for r in rows if r["stations"] == n):
            found = {(r["sharing"], r["edge"]): r for r in rows if r["stations"] == n and r["method"] == m}
            out.append(f"| {n} | {m} | " + " | ".join(cell(found.get(c)) for c in cols) + " |")
    return "\n".join(out)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table_edge", description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--target", type=float, default=TARGET)
    ap.add_argument("--stations", default="4,8,16")
    ap.add_argument("--sharings", default="tdma,csma")
    ap.add_argument("--methods", default=",".join(LABELS))
    ap.add_argument("--edge", default="tdma:trace,tdma:trace+deadline,csma:trace+deadline",
                    help="the edge columns, SHARING:trace or SHARING:trace+deadline, comma-separated")
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--render", action="store_true", help="print the markdown table of --out's jsonl")
    args = ap.parse_args(argv)
    edges = [tuple(c.split(":", 1)) for c in args.edge.split(",") if c]
    for c in edges:
        if len(c) != 2 or c[0] not in ("tdma", "csma") or c[1] not in ("trace", "trace+deadline"):
            ap.error(f"--edge = {args.edge!r}: each column must be tdma|csma:trace|trace+deadline")
    out = Path(args.out)
    if args.render:
        print(render(out / "table_edge.jsonl", args.target))
        return []
    out.mkdir(parents=True, exist_ok=True)
    warmup, ae = stage_lengths(args.iterations)
    done_path = out / "table_edge.jsonl"
    done = {json.loads(line)["label"]: json.loads(line) for line in
            (done_path.read_text().splitlines() if done_path.exists() else []) if line.strip()}
    rows = []

    def run(spec: TableRun, extra: dict) -> dict:
        if spec.label in done:  # resuming: this run is on disk already
            return done[spec.label]
        r = run_one(spec)
        return record(out, r, {**extra, "time_to_target_s": r.time_to_accuracy(args.target)})
    for n in [int(s) for s in args.stations.split(",")]:
        fp32_iteration = None
        for sharing in args.sharings.split(","):
            for label in args.methods.split(","):
                spec = TableRun(f"edge[{label},{sharing},{n}]", STAR,
                               base(n, sharing, args.iterations, args.eval_every, args.target)
                               + M.overrides(label, warmup, ae))
                row = run(spec, {"method": label, "sharing": sharing, "stations": n, "edge": ""})
                rows.append(row)
                if label == "fp32" and sharing == "tdma" and row["median_iteration_s"]:
                    fp32_iteration = row["median_iteration_s"]
        if fp32_iteration is None:
            continue
        trace = edge_trace(out / f"table_edge_trace_{n}.json", fp32_iteration)
        deadline = 1.5 * fp32_iteration
        for sharing, edge in edges:
            extra = [f"run.deadline_s={deadline!r}"] if edge == "trace+deadline" else []
            for label in args.methods.split(","):
                spec = TableRun(f"edge[{label},{sharing},{n},{edge}]", STAR,
                               base(n, sharing, args.iterations, args.eval_every, args.target)
                               + [f'run.device_trace="{trace}"', *extra] + M.overrides(label, warmup, ae))
                rows.append(run(spec, {"method": label, "sharing": sharing, "stations": n, "edge": edge,
                                       "deadline_s": deadline if extra else None}))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
