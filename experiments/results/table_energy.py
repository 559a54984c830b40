"""Energy per node to a target accuracy, stations moving away from the access point.

    nice .venv/bin/python -m experiments.results.table_energy [--methods fp32,dgc,lgc_ps]
    .venv/bin/python -m experiments.results.table_energy --report     # table from finished runs

Every method runs experiments/fashion_mobile.toml (Fashion-MNIST, cnn_fc, 8 workers in one
shared cell whose MCS follows each station's distance; the stations walk from 10 m to 80 m at
0.5 m/s; every worker a Raspberry Pi 4 energy profile) with only [compression] changed, the
DGC / LGC-PS options of the Fashion-MNIST method table (density 1%, warm-up 1/4 of the budget,
AE training 1/8). A run stops at the target accuracy (`run.stop_at_accuracy`), evaluated
every 25 iterations. One process, one thread; each finished run is written at once to
docs/results/table_energy_runs/<method>.json (rerunning skips those).

Per method: the iterations run and the virtual time at the first evaluation at or above the target,
the stations' distance then, and each worker's joules up to and including that iteration
(node_iterations.energy_j summed; mean over the 8 workers, and its radio / compute split).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from experiments.results.harness import DOCS_RESULTS, stage_lengths
from experiments.results.table_fashion import options
from testbed import api

BASE = "experiments/fashion_mobile.toml"
ITERATIONS = 600
LABELS = ["fp32", "dgc", "lgc_ps"]
RUNS = DOCS_RESULTS / "table_energy_runs"


def overrides(label: str, iterations: int) -> list[str]:
    warmup, ae = stage_lengths(iterations)
    sets = [f"run.iterations={iterations}"]
    for key, value in options(label, warmup, ae).items():
        sets.append(f'compression.{key}="{value}"' if isinstance(value, str) else f"compression.{key}={value}")
    return sets


def run_one(label: str, iterations: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run = api.run(BASE, store=Path(tmp) / "runs.db", overrides=overrides(label, iterations))
        wall = time.perf_counter() - t0
        its, nodes, evals = run.rows("iterations"), run.rows("nodes"), run.rows("evals")
        target = run.config["run"]["target_accuracy"]
    hit = next((e for e in evals if e["test_accuracy"] >= target), None)
    upto = hit["iteration"] if hit else its[-1]["iteration"]
    per = {}
    for n in nodes:
        if n["iteration"] <= upto:
            p = per.setdefault(n["node"], [0.0, 0.0, 0.0])
            p[0] += n["energy_j"]
            p[1] += n["radio_j"]
            p[2] += n["compute_j"]
    return {"method": label, "iterations": len(its), "target": target, "reached": hit is not None,
            "iteration": upto, "virtual_time_s": hit["virtual_time_s"] if hit else its[-1]["virtual_time_s"],
            "accuracy": (hit or evals[-1])["test_accuracy"], "energy_j": per,
            "bits": sum((r["bits_up"] or 0) + (r["bits_down"] or 0) for r in its if r["iteration"] <= upto),
            "wall_s": wall, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def distance_m(t: float) -> float:
    """The stations' distance from the access point at virtual time t (the file's paths)."""
    return min(80.0, 10.0 + 0.5 * t)


def table(rows: list[dict]) -> str:
    out = ["| method | reached 80% | iterations | virtual time s | distance then m | J per worker (mean) | radio J | compute J | J per worker min-max | bits up+down to it |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        e = list(r["energy_j"].values())
        mean = [sum(x[i] for x in e) / len(e) for i in range(3)]
        out.append(f"| {r['method']} | {'yes' if r['reached'] else 'no (' + format(100 * r['accuracy'], '.1f') + '%)'} "
                   f"| {r['iteration'] + 1} | {r['virtual_time_s']:.1f} | {distance_m(r['virtual_time_s']):.1f} "
                   f"| {mean[0]:.1f} | {mean[1]:.1f} | {mean[2]:.2f} "
                   f"| {min(x[0] for x in e):.1f}-{max(x[0] for x in e):.1f} | {r['bits']:,} |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table_energy")
    ap.add_argument("--methods", default=",".join(LABELS))
    ap.add_argument("--iterations", type=int, default=ITERATIONS)
    ap.add_argument("--report", action="store_true", help="only print the table of finished runs")
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    RUNS.mkdir(parents=True, exist_ok=True)
    labels = a.methods.split(",")
    for label in labels:
        path = RUNS / f"{label}.json"
        if a.report or path.exists():
            continue
        row = run_one(label, a.iterations)
        path.write_text(json.dumps(row, indent=1))
        print(f"{label}: iteration {row['iteration']}, {row['virtual_time_s']:.1f} s, wall {row['wall_s']:.0f} s", flush=True)
    rows = [json.loads((RUNS / f"{lab}.json").read_text()) for lab in labels if (RUNS / f"{lab}.json").exists()]
    print(table(rows))


if __name__ == "__main__":
    main()
