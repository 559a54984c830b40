"""Federated training over one shared cell (issue 26): FedAvg with fp32, top-k, DGC-style and
LGC-PS deltas, and one FedBuff row, on experiments/fed_fashion.toml (Fashion-MNIST, Dirichlet
alpha 0.5 over 100 clients, 10 per round, 5 local steps, cnn_fc, a shared 20 Mbit/s cell).

    nice .venv/bin/python -m experiments.results.table_federated [--rounds 100] [--seeds 0,1,2]
    .venv/bin/python -m experiments.results.table_federated --report    # table from finished runs

Each finished run is written at once to docs/results/table_federated_runs/<row>_s<seed>.json;
rerunning skips those (stop and resume at will), and --report tabulates what has finished.
Per row: final test accuracy (mean, sample sd over the seeds), bits per round (up, and up +
down: the model download, the deltas, the aggregate) over the final stage (from the end of
LGC's AE training on, the same rounds for every row), virtual seconds per round, and the
virtual time to the target accuracy (first evaluation at or above it; mean over the seeds that
reached it). FedBuff: a "round" is a server step of K = 10 updates (20 clients in flight).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from experiments.results.harness import (
    DOCS_RESULTS,
    RunSpec,
    _execute_safe,
    mean_spread,
    stage_lengths,
)
from experiments.results.tables import Column, emit, pick

BASE = "experiments/fed_fashion.toml"
RUNS = DOCS_RESULTS / "table_federated_runs"
DENSITY = 0.01
TARGET = 0.70
LABELS = ["fp32", "topk", "dgc", "lgc_ps", "fedbuff_fp32"]

COLUMNS = [
    Column("row", "row"), Column("n", "seeds"),
    Column("acc_mean", "acc mean %", lambda v: f"{100 * v:.2f}"),
    Column("acc_std", "acc sd", lambda v: f"{100 * v:.2f}"),
    Column("up_final", "up bits/round", "{:,.0f}"), Column("total_final", "up+down bits/round", "{:,.0f}"),
    Column("up_x_fp32", "up x fp32", "{:.1f}"),
    Column("round_s", "virtual s/round", "{:.2f}"),
    Column("tta_s", f"virtual s to {100 * TARGET:.0f}%", "{:,.0f}"), Column("tta_n", "reached"),
]


def overrides(label: str, warmup: int, ae: int) -> list[str]:
    lgc = [f"compression.ratio={DENSITY}", f"compression.warmup_iterations={warmup}",
           f"compression.ae_iterations={ae}"]
    table = {
        "fp32": ['compression.method="none"'],
        "topk": ['compression.method="topk"', f"compression.ratio={DENSITY}"],
        "dgc": ['compression.method="dgc"', f"compression.ratio={DENSITY}",
                f"compression.warmup_iterations={warmup}"],
        "lgc_ps": ['compression.method="lgc_ps"', *lgc],
        "fedbuff_fp32": ['compression.method="none"', 'federated.mode="fedbuff"'],
    }
    return table[label]


def spec(label: str, seed: int, rounds: int) -> RunSpec:
    warmup, ae = stage_lengths(rounds)
    sets = [f"run.iterations={rounds}", f"run.seed={seed}", f"run.eval_every={max(1, rounds // 10)}",
            *overrides(label, warmup, ae)]
    return RunSpec(f"fed[{label},s{seed}]", BASE, sets, tags={"row": label, "seed": seed})


def run_file(runs: Path, label: str, seed: int) -> Path:
    return runs / f"{label}_s{seed}.json"


def _finished(path: Path, rounds: int) -> bool:
    if not path.exists():
        return False
    s = json.loads(path.read_text())
    return s["status"] == "completed" and s["iterations"] == rounds


def run_missing(labels, seeds, rounds, runs: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    runs.mkdir(parents=True, exist_ok=True)
    final = sum(stage_lengths(rounds))
    todo = [(label, seed) for seed in seeds for label in labels   # whole seeds first
            if not _finished(run_file(runs, label, seed), rounds)]
    print(f"{len(todo)} runs to do", flush=True)
    for label, seed in todo:
        r = _execute_safe(spec(label, seed, rounds), None)
        summary = {"status": r.status, "note": r.note, "iterations": r.iterations, "evals": r.evals,
                   "final_accuracy": r.final_accuracy,
                   "up_final": mean_spread(r.bits_up[final:])[0],
                   "total_final": mean_spread(r.bits[final:])[0],
                   "round_s": r.virtual_time_s / max(1, r.iterations),
                   "tta_s": r.time_to_accuracy(TARGET), "wall_s": r.wall_s,
                   "overrides": r.spec.overrides,
                   "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
        path = run_file(runs, label, seed)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary, indent=1))
        os.replace(tmp, path)   # a run is on disk whole or not at all
        print(time.strftime("%H:%M:%S", time.gmtime()), f"{label} s{seed}: {r.status}, acc "
              f"{r.final_accuracy}, {r.wall_s:.0f} s wall", (r.note or "")[:200], flush=True)


def rows_of(labels, seeds, rounds, runs: Path) -> list[dict]:
    rows = []
    for label in labels:
        done = [json.loads(run_file(runs, label, s).read_text()) for s in seeds
                if _finished(run_file(runs, label, s), rounds)]
        row = {"row": label, "n": len(done)}
        if done:
            row["acc_mean"], row["acc_std"] = mean_spread([d["final_accuracy"] for d in done])
            row["acc_per_seed"] = " ".join(f"{d['final_accuracy']:.4f}" for d in done)
            for key in ("up_final", "total_final", "round_s"):
                row[key] = mean_spread([d[key] for d in done])[0]
            reached = [d["tta_s"] for d in done if d["tta_s"] is not None]
            row["tta_n"] = f"{len(reached)}/{len(done)}"
            row["tta_s"] = mean_spread(reached)[0] if reached else None
        rows.append(row)
    fp32 = next((r for r in rows if r["row"] == "fp32" and r.get("up_final")), None)
    for row in rows:
        if fp32 and row.get("up_final"):
            row["up_x_fp32"] = fp32["up_final"] / row["up_final"]
    return rows


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table_federated",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rows", default=None, help=f"comma-separated subset of: {', '.join(LABELS)}")
    ap.add_argument("--runs", default=str(RUNS))
    ap.add_argument("--out", default=str(DOCS_RESULTS))
    ap.add_argument("--report", action="store_true", help="only tabulate the runs on disk")
    args = ap.parse_args(argv)
    labels = pick(args.rows, LABELS, "rows") if args.rows else LABELS
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    runs = Path(args.runs)
    if not args.report:
        run_missing(labels, seeds, args.rounds, runs)
    rows = rows_of(labels, seeds, args.rounds, runs)
    warmup, ae = stage_lengths(args.rounds)
    every = max(1, args.rounds // 10)
    notes = [
        (f"{BASE}: Fashion-MNIST, Dirichlet alpha 0.5 over 100 clients, 10 per round, 5 local "
         f"SGD steps (lr 0.05, batch 32), FedAvg (server lr 1), cnn_fc, one shared 20 Mbit/s "
         f"cell; {args.rounds} rounds; DGC/LGC warm-up {warmup} rounds, LGC AE training {ae}; "
         f"density {DENSITY}; bits over the final stage (from round {warmup + ae})."),
        ("up+down: the fp32 model download to each client, the deltas up, the aggregate down, "
         "every header, index and latent byte; fedbuff_fp32: 20 clients in flight, K = 10 per "
         "server step, updates weighted 1/sqrt(1 + staleness)."),
        (f"virtual s to {100 * TARGET:.0f}%: first evaluation (every {every} rounds) at or above "
         "it, mean over the seeds that reached it."),
    ]
    emit(rows, COLUMNS, title=f"Federated Fashion-MNIST, {args.rounds} rounds", notes=notes,
         out=Path(args.out) if args.out else None, stem="table_federated")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
