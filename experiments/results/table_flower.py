"""A Flower app on the emulated 802.11 cell: FedAvg and FedAdam, fp32 and top-k uplinks, to 85%.

    nice .venv/bin/python -m experiments.results.table_flower [--seeds 0,1,2]
    .venv/bin/python -m experiments.results.table_flower --report     # table from finished runs

Each run is the command a user types, `testbed flower run experiments/flower_app --network
experiments/flower_cell.toml` (the example app: an MLP on digits, 10 nodes, 5 trained and 3
evaluated per server round; a 20 Mbit/s DCF cell, reliable delivery), with at most 40 server
rounds, stopped at the first centralized evaluation at or above 85%; the strategy, the seed
(the app's and the run's) and, for top-k, the client mod's method and ratio set on the command
line. Each finished run is written at once to
docs/results/table_flower_runs/STRATEGY_UPLINK_seedS.json: the command, the commit, the store's
rows (per round: virtual time, bits up and down, joules) and the centralized evaluations with
their server round; rerunning skips those.

Per strategy and uplink, mean (min-max) over the seeds: the server round of the first evaluation
at or above 85%, the virtual seconds then, the joules of the 10 nodes up to it, and the bytes
on the wire (all, and the nodes' uplinks) up to it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from experiments.results.harness import DOCS_RESULTS, ROOT
from experiments.results.provenance import code_state, versions
from testbed.records.store import Store

RUNS = DOCS_RESULTS / "table_flower_runs"
TARGET = 0.85
MAX_ROUNDS = 40
STRATEGIES = ("fedavg", "fedadam")
UPLINKS = {"fp32": [], "topk": ['compression.method="topk"', "compression.ratio=0.1"]}
NAMES = {"fedavg": "FedAvg", "fedadam": "FedAdam", "fp32": "fp32", "topk": "top-k 10%"}


def command(strategy: str, uplink: str, seed: int, store: str) -> list[str]:
    sets = [f"run.seed={seed}", f"run.target_accuracy={TARGET}", "run.stop_at_accuracy=true",
            *UPLINKS[uplink]]
    return ["testbed", "flower", "run", "experiments/flower_app",
            "--network", "experiments/flower_cell.toml", "--store", store, "--quiet",
            *[a for c in (f"num-server-rounds={MAX_ROUNDS}", f"strategy={strategy}", f"seed={seed}")
              for a in ("--run-config", c)],
            *[a for s in sets for a in ("--set", s)]]


def run_one(strategy: str, uplink: str, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store_path = str(Path(tmp) / "runs.db")
        cmd = command(strategy, uplink, seed, store_path)
        subprocess.run([sys.executable, "-m", "testbed.cli", *cmd[1:]], cwd=ROOT, check=True)
        with Store(store_path) as store:
            its, evals = store.iterations(1), store.evals(1)
            rounds = {e["iteration"]: e["detail"]["server_round"] for e in store.events(1)
                      if e["kind"] == "flower_metrics" and e["detail"]["kind"] == "centralized"}
    return {"strategy": strategy, "uplink": uplink, "seed": seed,
            "command": " ".join(cmd[:6] + ["--store", "runs.db"] + cmd[8:]), **code_state(),
            "versions": versions(),
            "rounds": [{k: r[k] for k in ("iteration", "virtual_time_s", "bits_up", "bits_down",
                                          "energy_j")} for r in its],
            "evals": [{"iteration": e["iteration"], "virtual_time_s": e["virtual_time_s"],
                       "test_accuracy": e["test_accuracy"], "server_round": rounds.get(e["iteration"])}
                      for e in evals]}


def to_target(run: dict) -> dict:
    """The run's figures at its first evaluation at or above the target (None: never there)."""
    hit = next((e for e in run["evals"] if e["test_accuracy"] >= TARGET), None)
    if hit is None:
        return {"server_round": None}
    upto = [r for r in run["rounds"] if r["iteration"] <= hit["iteration"]]
    return {"server_round": hit["server_round"], "virtual_s": hit["virtual_time_s"],
            "joules": sum(r["energy_j"] or 0.0 for r in upto),
            "mb_wire": sum((r["bits_up"] or 0) + (r["bits_down"] or 0) for r in upto) / 8e6,
            "mb_up": sum(r["bits_up"] or 0 for r in upto) / 8e6}


def spread(values: list[float], digits: int) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.fmean(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(runs: list[dict]) -> str:
    lines = ["| strategy | uplink | seeds | rounds to 85% | virtual s | joules (10 nodes) | MB on wire | MB up |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for strategy in STRATEGIES:
        for uplink in UPLINKS:
            got = [to_target(r) for r in runs if (r["strategy"], r["uplink"]) == (strategy, uplink)]
            hit = [g for g in got if g["server_round"] is not None]
            if not got:
                continue
            seeds = f"{len(hit)}/{len(got)}" if len(hit) < len(got) else str(len(got))
            cells = ["-"] * 5 if not hit else [
                spread([g["server_round"] for g in hit], 1), spread([g["virtual_s"] for g in hit], 2),
                spread([g["joules"] for g in hit], 2), f"{statistics.fmean(g['mb_wire'] for g in hit):.2f}",
                f"{statistics.fmean(g['mb_up'] for g in hit):.2f}"]
            lines.append(f"| {NAMES[strategy]} | {NAMES[uplink]} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--report", action="store_true", help="only the table from finished runs")
    args = p.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds {args.seeds!r}: must be comma-separated integers, e.g. 0,1,2")
    RUNS.mkdir(parents=True, exist_ok=True)
    if not args.report:
        todo = [(s, u, seed) for seed in seeds for s in STRATEGIES for u in UPLINKS]
        for i, (strategy, uplink, seed) in enumerate(todo, 1):
            path = RUNS / f"{strategy}_{uplink}_seed{seed}.json"
            if path.exists():
                continue
            print(f"[{i}/{len(todo)}] {strategy} {uplink} seed {seed}", flush=True)
            path.write_text(json.dumps(run_one(strategy, uplink, seed), indent=1) + "\n")
    runs = [json.loads(f.read_text()) for f in sorted(RUNS.glob("*.json"))]
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
