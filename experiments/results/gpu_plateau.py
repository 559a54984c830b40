"""The plateau table on a GPU: the fp32, DGC and LGC-PS rows on ResNet-20.

    python -m experiments.results.gpu_plateau --iterations 1000 --seed 1 --data FASHION_DIR
    python -m experiments.results.gpu_plateau --iterations 1000 --seeds 2,3 --methods fp32,dgc,lgc_ps,lgc_ablation
    python -m experiments.results.gpu_plateau --report --iterations 1000 --seeds 0,1,2,3   # table of runs on disk

The runs are table_fashion's plateau protocol (experiments/fashion_plateau.toml: Fashion-MNIST
28x28, 8 workers in one shared 20 Mbit/s 802.11 cell with 1% loss; warm-up one epoch, AE
training half an epoch, density 1%; the table's whole-run bits, time and joules to target) with `model.name = "resnet20"` and `run.device = "cuda"`, the three methods at once
(one process each, one GPU). A GPU session is short, so the budget is measured rather than
assumed: each method first runs `--probe` iterations; the slowest one's wall seconds per
iteration, with a margin, set the largest budget (a multiple of the evaluation interval, at most
the protocol's 4,800) that ends inside `--seconds`. Every (method, seed) runs at once, one process
each: the GPU is far from busy with one ResNet-20 at batch 32, so the runs share it. The table says the budget it used. Every
run's rows are kept in `runs.db` beside the JSON files (`--runs`); a run cut short keeps its rows in
`runs.db.points/`, so it still shows its curve.
The probe is pessimistic: on an H200 (2026-12-04) it read 0.15 / 0.45 / 0.44 s per iteration for
fp32 / DGC / LGC-PS over 30 iterations, and whole 1,000-iteration runs then took 0.15-0.19,
0.15-0.17 and 0.26-0.28 s per iteration (the first iterations carry CUDA and numba warm-up), so
pass `--iterations` once the machine is known. Results: docs/results.md, "On a GPU: ResNet-20".
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from experiments.results import table_fashion as T
from experiments.results.harness import DOCS_RESULTS, run_many
from testbed import api

LABELS = ("fp32", "dgc", "lgc_ps")
RUNS = DOCS_RESULTS / "gpu_plateau_runs"
MARGIN = 1.35      # the LGC stage's coder and the evaluations cost more than the probe's DGC stage


def probe(labels, iterations: int, base: tuple[str, ...], folder: Path) -> dict[str, float]:
    """Wall seconds per iteration of each method, all running at once as in the real runs: the
    median gap between consecutive iterations' `wall_time_s` in the store (the first iterations'
    compilation of the link-layer engines and the evaluations left out)."""
    protocol = T.PROTOCOLS["plateau"]
    folder.mkdir(parents=True, exist_ok=True)
    store = str(folder / f"probe_{time.strftime('%Y%m%d_%H%M%S', time.gmtime())}.db")
    specs = [T.spec(label, 0, iterations, (), protocol, base) for label in labels]
    per_it = {}
    for label, r in zip(labels, run_many(specs, jobs=len(labels), store=store, sweep="probe")):
        if r.status != "completed":
            raise SystemExit(f"probe of {label} failed: {r.note}")
        walls = api.open_run(store, r.spec.label).column("iterations", "wall_time_s")
        per_it[label] = statistics.median(b - a for a, b in zip(walls, walls[1:]))
    return per_it


def budget(seconds_left: float, per_it: float, every: int, cap: int) -> int:
    """The largest multiple of `every`, at most `cap`, whose runs fit in `seconds_left`."""
    fits = int(seconds_left / (per_it * MARGIN)) // every * every
    return min(cap, fits)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.gpu_plateau",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=480, help="wall budget of the whole script")
    ap.add_argument("--probe", type=int, default=40, help="iterations of the timing probe")
    ap.add_argument("--model", default="resnet20", help="model.name (cnn_fc for a quick dry run)")
    ap.add_argument("--device", default="cuda", help="run.device (cuda, or cpu for a dry run)")
    ap.add_argument("--data", default=None, help="data.root (a folder of Fashion-MNIST's idx files)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--methods", default=",".join(LABELS),
                    help=f"comma-separated table_fashion labels (default {','.join(LABELS)})")
    ap.add_argument("--runs", default=str(RUNS), help="folder for the per-run JSON files and the runs' store")
    ap.add_argument("--out", default=str(DOCS_RESULTS), help="folder for the table")
    ap.add_argument("--report", action="store_true", help="only tabulate the runs on disk "
                                                          "(give --iterations and the seeds' runs)")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds to run or tabulate "
                                                  "(default: --seed)")
    ap.add_argument("--iterations", type=int, default=None, help="skip the probe: this budget")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    base = [f'model.name="{args.model}"', f'run.device="{args.device}"']
    if args.data:
        base.append(f'data.root="{Path(args.data).resolve()}"')
    protocol = T.PROTOCOLS["plateau"]
    labels = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(labels) - set(T.LABELS))
    if unknown:
        raise SystemExit(f"--methods: unknown {', '.join(unknown)}; allowed: {', '.join(T.LABELS)}")
    seeds = [int(s) for s in (args.seeds or str(args.seed)).split(",")]
    iterations = args.iterations
    if args.report and iterations is None:
        raise SystemExit("--report needs --iterations (the budget of the runs to tabulate)")
    if iterations is None:
        per_it = probe(labels, args.probe, tuple(base), Path(args.runs))
        left = args.seconds - (time.perf_counter() - t0) - 45   # 45 s: start-up and the table
        iterations = budget(left, max(per_it.values()), protocol.eval_every, protocol.iterations)
        print("probe, wall s/it:", {k: round(v, 4) for k, v in per_it.items()},
              f"-> {iterations} iterations", flush=True)
        if iterations < 2 * protocol.eval_every:
            raise SystemExit(f"only {iterations} iterations fit in {args.seconds:.0f} s: too few")
    runs = Path(args.runs)
    if not args.report:
        T.run_missing(labels, seeds, iterations, len(labels) * len(seeds), runs, (), protocol,
                      tuple(base), stores=runs)
    T.main(["--protocol", "plateau", "--report", "--methods", ",".join(labels),
            "--seeds", ",".join(map(str, seeds)), "--iterations", str(iterations),
            "--runs", str(runs), "--out", args.out, "--stem", "table_gpu_plateau",
            *[f"--config={c}" for c in base]])


if __name__ == "__main__":
    main(sys.argv[1:])
