"""Federated training over one shared cell: FedAvg with fp32, top-k, DGC-style and
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

Two more tables on the same runs' harness (`--table`):
dp   against synchronous data-parallel SGD on the same data (experiments/dp_fashion.toml: the
     same Dirichlet(0.5) Fashion-MNIST, cnn_fc, lr and cell, 10 workers, each one batch-32
     gradient per iteration). One round = 5 data-parallel iterations (50 batch-32 gradients,
     as many as a federated round's 10 clients x 5 local steps): bits and virtual seconds per
     round are 5 iterations' worth, evaluations every 10 rounds (50 iterations), DGC's warm-up
     125 iterations (25 rounds). Shown beside the FedAvg rows of the same compressors.
het  heterogeneous devices: a seeded device trace (`make_trace`: each of the 100 clients one
     compute speed drawn log-normal, median 1, sigma 1, written to
     docs/results/table_federated_trace.json) at 1 GFLOPS per unit of speed (5 local steps at
     speed 1: 1.07 virtual s), fp32 deltas; sync rounds without and with a deadline, and
     FedBuff (K = 10 of 20 in flight), evaluations every 5 rounds / server steps.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from experiments.results.harness import (
    DOCS_RESULTS,
    TableRun,
    mean_spread,
    run_one,
    stage_lengths,
)
from experiments.results.tables import Column, emit, pick

BASE = "experiments/fed_fashion.toml"
DP_BASE = "experiments/dp_fashion.toml"
RUNS = DOCS_RESULTS / "table_federated_runs"
TRACE = DOCS_RESULTS / "table_federated_trace.json"
DENSITY = 0.01
TARGET = 0.70
DP_PER_ROUND = 5     # data-parallel iterations per round: 10 workers x 5 = one round's 50 steps
HET_GFLOPS = 1.0     # an edge device's training throughput at speed 1 (5 steps: 1.07 s)
HET_SIGMA = 1.0      # log-normal sigma of the clients' speeds (median 1)
HET_DEADLINE_S = 5.0  # from a round's start: download, compute and the shared uplink
TABLES = {
    "fed": ["fp32", "topk", "dgc", "lgc_ps", "fedbuff_fp32"],
    "dp": ["fp32", "dp_fp32", "topk", "dp_topk", "dgc", "dp_dgc"],
    "het": ["het_sync", "het_deadline", "het_fedbuff"],
}
LABELS = list(dict.fromkeys(label for rows in TABLES.values() for label in rows))

COLUMNS = [
    Column("row", "row"), Column("n", "seeds"),
    Column("acc_mean", "acc mean %", lambda v: f"{100 * v:.2f}"),
    Column("acc_std", "acc sd", lambda v: f"{100 * v:.2f}"),
    Column("up_final", "up bits/round", "{:,.0f}"), Column("total_final", "up+down bits/round", "{:,.0f}"),
    Column("up_x_fp32", "up x fp32", "{:.1f}"),
    Column("round_s", "virtual s/round", "{:.2f}"),
    Column("tta_s", f"virtual s to {100 * TARGET:.0f}%", "{:,.0f}"), Column("tta_n", "reached"),
]
# the dp and het tables: time to a lower target too (a non-iid population's evaluations swing)
LOW = 0.65
MORE = [Column("tta_low_s", f"virtual s to {100 * LOW:.0f}%", "{:,.0f}"),
        Column("tta_low_n", "reached")]


def make_trace(path: Path, clients: int = 100, sigma: float = HET_SIGMA, seed: int = 26) -> Path:
    """A device trace (testbed/emulation/device_trace.py) of `clients` clients c0.., each one compute
    speed drawn log-normal (median 1), as FedScale's client profiles spread compute times."""
    speeds = np.random.default_rng(seed).lognormal(0.0, sigma, clients)
    nodes = {f"c{c}": {"speed": [[0, round(float(v), 6)]]} for c, v in enumerate(speeds)}
    path.write_text(json.dumps({"nodes": nodes}, indent=1))
    return path


def per_round(label: str) -> int:
    """Store iterations per round of the row."""
    return DP_PER_ROUND if label.startswith("dp_") else 1


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
    het = ['compression.method="none"', f'run.device_trace="{TRACE}"',
           f"run.device_gflops={HET_GFLOPS}"]
    table |= {f"dp_{k}": table[k] for k in ("fp32", "topk", "dgc")}
    table |= {"het_sync": het, "het_deadline": [*het, f"run.deadline_s={HET_DEADLINE_S}"],
              "het_fedbuff": [*het, 'federated.mode="fedbuff"']}
    return table[label]


def spec(label: str, seed: int, rounds: int) -> TableRun:
    k = per_round(label)
    warmup, ae = stage_lengths(rounds * k)
    every = k * max(1, rounds // (20 if label.startswith("het_") else 10))
    sets = [f"run.iterations={rounds * k}", f"run.seed={seed}", f"run.eval_every={every}",
            *overrides(label, warmup, ae)]
    if label.startswith("het_") and not TRACE.exists():
        make_trace(TRACE)
    return TableRun(f"fed[{label},s{seed}]", DP_BASE if k > 1 else BASE, sets,
                   tags={"row": label, "seed": seed})


def run_file(runs: Path, label: str, seed: int) -> Path:
    return runs / f"{label}_s{seed}.json"


def _finished(path: Path, iterations: int) -> bool:
    if not path.exists():
        return False
    s = json.loads(path.read_text())
    return s["status"] == "completed" and s["iterations"] == iterations


def first_at(evals: list[dict], target: float) -> float | None:
    """Virtual seconds at the first evaluation at or above `target` (None: never)."""
    return next((e["virtual_time_s"] for e in evals if e["test_accuracy"] >= target), None)


def run_missing(labels, seeds, rounds, runs: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    runs.mkdir(parents=True, exist_ok=True)
    todo = [(label, seed) for seed in seeds for label in labels   # whole seeds first
            if not _finished(run_file(runs, label, seed), rounds * per_round(label))]
    print(f"{len(todo)} runs to do", flush=True)
    for label, seed in todo:
        k = per_round(label)
        final = sum(stage_lengths(rounds * k))
        r = run_one(spec(label, seed, rounds))
        summary = {"status": r.status, "note": r.note, "iterations": r.iterations, "evals": r.evals,
                   "final_accuracy": r.final_accuracy,
                   "up_final": k * mean_spread(r.bits_up[final:])[0] if r.iterations else None,
                   "total_final": k * mean_spread(r.bits[final:])[0] if r.iterations else None,
                   "round_s": k * r.virtual_time_s / max(1, r.iterations),
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
                if _finished(run_file(runs, label, s), rounds * per_round(label))]
        row = {"row": label, "n": len(done)}
        if done:
            row["acc_mean"], row["acc_std"] = mean_spread([d["final_accuracy"] for d in done])
            row["acc_per_seed"] = " ".join(f"{d['final_accuracy']:.4f}" for d in done)
            for key in ("up_final", "total_final", "round_s"):
                row[key] = mean_spread([d[key] for d in done])[0]
            for key, target in (("tta", TARGET), ("tta_low", LOW)):
                reached = [t for t in (first_at(d["evals"], target) for d in done) if t is not None]
                row[f"{key}_n"] = f"{len(reached)}/{len(done)}"
                row[f"{key}_s"] = mean_spread(reached)[0] if reached else None
        rows.append(row)
    for row in rows:   # against fp32 in the same mode (dp rows: dp_fp32; het rows: het_sync)
        ref = {"dp": "dp_fp32", "het": "het_sync"}.get(row["row"].split("_")[0], "fp32")
        base = next((r for r in rows if r["row"] == ref and r.get("up_final")), None)
        if base and row.get("up_final"):
            row["up_x_fp32"] = base["up_final"] / row["up_final"]
    return rows


def notes_of(table: str, rounds: int) -> list[str]:
    warmup, ae = stage_lengths(rounds)
    every = max(1, rounds // 10)
    fed = (f"{BASE}: Fashion-MNIST, Dirichlet alpha 0.5 over 100 clients, 10 per round, 5 local "
           f"SGD steps (lr 0.05, batch 32), FedAvg (server lr 1), cnn_fc, one shared 20 Mbit/s "
           f"cell; {rounds} rounds; DGC/LGC warm-up {warmup} rounds, LGC AE training {ae}; "
           f"density {DENSITY}; bits over the final stage (from round {warmup + ae}).")
    reach = (f"virtual s to a target: first evaluation (every {every} rounds) at or above it, "
             "mean over the seeds that reached it.")
    if table == "dp":
        return [fed, (f"dp_*: {DP_BASE}, 10 workers on a Dirichlet(0.5) split, one batch-32 "
                      f"gradient each per iteration; a round = {DP_PER_ROUND} iterations (50 "
                      f"gradients, a FedAvg round's 10 x 5 local steps): {rounds * DP_PER_ROUND} "
                      "iterations, bits and virtual s per round summed over 5 iterations."), reach]
    if table == "het":
        return [fed, (f"het_*: fp32; device trace {TRACE.name} (log-normal speeds, median 1, "
                      f"sigma {HET_SIGMA}, seed 26) at {HET_GFLOPS} GFLOPS per unit of speed; "
                      f"het_deadline: run.deadline_s = {HET_DEADLINE_S} from each round's start; "
                      "het_fedbuff: 20 in flight, K = 10, weights 1/sqrt(1 + staleness); "
                      f"evaluations every {max(1, rounds // 20)} rounds/steps.")]
    return [fed, ("up+down: the fp32 model download to each client, the deltas up, the aggregate "
                  "down, every header, index and latent byte; fedbuff_fp32: 20 clients in flight, "
                  "K = 10 per server step, updates weighted 1/sqrt(1 + staleness)."), reach]


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table_federated",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--table", default="fed", choices=list(TABLES),
                    help="fed: the federated rows; dp: against data-parallel; het: heterogeneous devices")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rows", default=None, help=f"comma-separated subset of: {', '.join(LABELS)}")
    ap.add_argument("--runs", default=str(RUNS))
    ap.add_argument("--out", default=str(DOCS_RESULTS))
    ap.add_argument("--report", action="store_true", help="only tabulate the runs on disk")
    args = ap.parse_args(argv)
    labels = pick(args.rows, TABLES[args.table], "rows") if args.rows else TABLES[args.table]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    runs = Path(args.runs)
    if not args.report:
        run_missing(labels, seeds, args.rounds, runs)
    rows = rows_of(labels, seeds, args.rounds, runs)
    columns = COLUMNS if args.table == "fed" else COLUMNS + MORE
    stem = "table_federated" if args.table == "fed" else f"table_federated_{args.table}"
    emit(rows, columns, title=f"Federated Fashion-MNIST{'' if args.table == 'fed' else f' ({args.table})'}, "
         f"{args.rounds} rounds",
         notes=notes_of(args.table, args.rounds), out=Path(args.out) if args.out else None, stem=stem)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
