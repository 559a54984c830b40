"""Table 1 on Fashion-MNIST: fp32, top-k, DGC, LGC's ablation, LGC-PS, LGC-RAR, ScaleCom.

    nice .venv/bin/python -m experiments.results.table_fashion [--jobs 2] [--seeds 0,1,2,3,4] [--ray auto]
    .venv/bin/python -m experiments.results.table_fashion --report     # table from finished runs
    ... --methods lgc_ps,dgc --set dense_below=3000 --runs DIR --out DIR   # an option on top
    nice .venv/bin/python -m experiments.results.table_fashion --protocol plateau   # at fp32's plateau

Two protocols (`PROTOCOLS`): "early" (600 iterations, DGC/LGC warm-up a quarter of the budget
and AE training an eighth: how fast each method converges) and "plateau" (the budget at which
fp32 has converged, its last two evaluations within 0.2 points; warm-up and AE training about
one epoch each, a few percent of the budget, as in DGC's paper and reference code). Each has its
own folder of runs, so both columns are kept. Rows ending `_nomask` run the method with
`momentum_masking = false` (momentum kept where a coordinate is sent); the others are faithful
to DGC (masked).

Every method runs experiments/fashion_star.toml (Debian's Fashion-MNIST, the 139k-weight cnn_fc,
8 workers in one shared 20 Mbit/s cell, the parameter server at the access point; LGC-RAR's ring
runs over the same cell) with only [compression] changed: same seeds, data split, model,
optimizer and budget. Each finished run is written at once to
docs/results/table_fashion_runs/<method>_s<seed>.json; rerunning skips those, so the script can
be stopped and resumed, and --report builds the table from whatever has finished.

Per method: final test accuracy (10k test images) mean and sample sd over the finished seeds,
uplink bits per iteration (what the workers sent: every header, index, latent byte) and up +
down bits per iteration, both averaged over the final stage (from the end of LGC's AE training
on, the same iterations for every method), and ratios of those against fp32, DGC and the
ablation (lgc_ablation: LGC-PS's protocol with the leader's f16 values instead of the latent).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.results.harness import DOCS_RESULTS, RunSpec, mean_spread, run_many, stage_lengths
from experiments.results.tables import Column, emit, pick

BASE = "experiments/fashion_star.toml"
DENSITY = 0.01
LABELS = ["fp32", "topk", "dgc", "lgc_ablation", "lgc_ps", "lgc_rar", "lgc_rar_ablation",
          "scalecom", "dgc_nomask", "lgc_ablation_nomask", "lgc_ps_nomask", "lgc_rar_nomask"]
EPOCH = 234   # iterations per epoch of Fashion-MNIST's 60k images at 8 workers x batch 32


@dataclass(frozen=True)
class Protocol:
    """A budget and its stage lengths. `warmup`/`ae` None: a quarter and an eighth of the budget
    (harness.stage_lengths)."""
    iterations: int
    eval_every: int
    runs: Path
    labels: tuple[str, ...]               # the rows run when --methods is not given
    warmup: int | None = None
    ae: int | None = None

    def stages(self, iterations: int) -> tuple[int, int]:
        if self.warmup is None or self.ae is None:
            return stage_lengths(iterations)
        return self.warmup, self.ae


PROTOCOLS = {
    # lgc_rar_ablation (f16 values on the ring) on request
    "early": Protocol(600, 200, DOCS_RESULTS / "table_fashion_runs", tuple(LABELS[:6])),
    # fp32's plateau: measured 2026-12-04 (docs/results.md, section 2)
    "plateau": Protocol(4800, 400, DOCS_RESULTS / "plateau_runs",
                        ("fp32", "topk", "dgc", "dgc_nomask", "lgc_ablation", "lgc_ps", "lgc_rar",
                         "scalecom", "lgc_ablation_nomask", "lgc_ps_nomask", "lgc_rar_nomask"),
                        warmup=EPOCH, ae=EPOCH // 2),
}
ITERATIONS = PROTOCOLS["early"].iterations
RUNS = PROTOCOLS["early"].runs

COLUMNS = [
    Column("method", "method"), Column("n", "seeds"),
    Column("acc_mean", "acc mean %", lambda v: f"{100 * v:.2f}"),
    Column("acc_std", "acc sd", lambda v: f"{100 * v:.2f}"),
    Column("d_acc", "vs fp32 pts", lambda v: f"{100 * v:+.2f}"),
    Column("last_gain", "last eval gain pts", lambda v: f"{100 * v:+.2f}"),
    Column("up_final", "up bits/it", "{:,.0f}"), Column("total_final", "up+down bits/it", "{:,.0f}"),
    Column("up_x_fp32", "up x fp32", "{:.1f}"), Column("up_x_dgc", "up x DGC", "{:.2f}"),
    Column("up_x_abl", "up x abl", "{:.2f}"),
    Column("tot_x_fp32", "total x fp32", "{:.1f}"), Column("tot_x_dgc", "total x DGC", "{:.2f}"),
    Column("tot_x_abl", "total x abl", "{:.2f}"),
]


def options(label: str, warmup: int, ae_iters: int) -> dict:
    if label.endswith("_nomask"):
        return {**options(label[:-len("_nomask")], warmup, ae_iters), "momentum_masking": False}
    lgc = {"ratio": DENSITY, "warmup_iterations": warmup, "ae_iterations": ae_iters}
    table = {
        "fp32": {"method": "none"},
        "topk": {"method": "topk", "ratio": DENSITY},
        "dgc": {"method": "dgc", "ratio": DENSITY, "warmup_iterations": warmup},
        "lgc_ablation": {"method": "lgc_ablation", **lgc},
        "lgc_ps": {"method": "lgc_ps", **lgc},
        "lgc_rar": {"method": "lgc_rar", **lgc},
        "lgc_rar_ablation": {"method": "lgc_rar", **lgc, "coder": "none"},
        "scalecom": {"method": "scalecom", "ratio": DENSITY},
    }
    return table[label]


def spec(label: str, seed: int, iterations: int, extra: tuple[str, ...] = (),
         protocol: Protocol = PROTOCOLS["early"], base: tuple[str, ...] = ()) -> RunSpec:
    """`extra`: more `compression.KEY=VALUE` overrides on top of the method's own (--set);
    `base`: `SECTION.KEY=VALUE` overrides of the base file itself (--config: a model, a device)."""
    warmup, ae = protocol.stages(iterations)
    every = protocol.eval_every if iterations == protocol.iterations else max(1, iterations // 3)
    sets = [*base, f"run.iterations={iterations}", f"run.seed={seed}", f"run.eval_every={every}"]
    for key, value in options(label, warmup, ae).items():
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, str):
            value = f'"{value}"'
        sets.append(f"compression.{key}={value}")
    sets += [f"compression.{kv}" for kv in extra]
    return RunSpec(f"fashion[{label},s{seed}]", BASE, sets, tags={"method": label, "seed": seed})


def run_file(runs: Path, label: str, seed: int) -> Path:
    return runs / f"{label}_s{seed}.json"


def summary(result, iterations: int, final: int) -> dict:
    """What the table keeps of one run; bits averaged from iteration `final` (the final stage)."""
    return {"status": result.status, "note": result.note, "iterations": result.iterations,
            "evals": result.evals, "final_accuracy": result.final_accuracy,
            "up_final": mean_spread(result.bits_up[final:])[0],
            "total_final": mean_spread(result.bits[final:])[0],
            "wall_s": result.wall_s, "overrides": result.spec.overrides,
            "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}


def run_missing(labels, seeds, iterations, jobs, runs: Path, extra: tuple[str, ...] = (),
                protocol: Protocol = PROTOCOLS["early"], base: tuple[str, ...] = (),
                stores: Path | None = None, ray: str | None = None) -> None:
    """Every (label, seed) without a finished run file in `runs`, through the sweep engine
    (`jobs` at once, or on Ray with `ray`); each run's file is written as soon as it ends.
    `stores`: a folder whose `runs.db` keeps every run's rows (a run cut short keeps its rows
    in `runs.db.points/`)."""
    runs.mkdir(parents=True, exist_ok=True)
    todo = [(label, seed) for seed in seeds for label in labels  # seed-major: whole seeds first
            if not _finished(run_file(runs, label, seed), iterations)]
    print(f"{len(todo)} runs to do ({len(labels) * len(seeds) - len(todo)} already on disk)", flush=True)
    if not todo:
        return
    final = sum(protocol.stages(iterations))
    specs = [spec(label, seed, iterations, extra, protocol, base) for label, seed in todo]
    files = {s.label: run_file(runs, label, seed) for s, (label, seed) in zip(specs, todo)}

    def write(result) -> None:
        path = files[result.spec.label]
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary(result, iterations, final), indent=1))
        os.replace(tmp, path)   # a run is on disk whole or not at all
        print(time.strftime("%H:%M:%S", time.gmtime()), f"{result.spec.label}: {result.status}, "
              f"acc {result.final_accuracy}, {result.wall_s:.0f} s", flush=True)

    run_many(specs, jobs=jobs, store=str(stores / "runs.db") if stores else None, sink=write,
             log=lambda _line: None, ray=ray, sweep="fashion")


def _finished(path: Path, iterations: int) -> bool:
    if not path.exists():
        return False
    s = json.loads(path.read_text())
    return s["status"] == "completed" and s["iterations"] == iterations


def rows_of(labels, seeds, iterations, runs: Path) -> list[dict]:
    rows = []
    for label in labels:
        done = [json.loads(run_file(runs, label, s).read_text()) for s in seeds
                if _finished(run_file(runs, label, s), iterations)]
        done_seeds = [s for s in seeds if _finished(run_file(runs, label, s), iterations)]
        row = {"method": label, "n": len(done), "seeds": " ".join(map(str, done_seeds))}
        if done:
            row["acc_mean"], row["acc_std"] = mean_spread([d["final_accuracy"] for d in done])
            row["acc_per_seed"] = " ".join(f"{d['final_accuracy']:.4f}" for d in done)
            row["up_final"] = mean_spread([d["up_final"] for d in done])[0]
            row["total_final"] = mean_spread([d["total_final"] for d in done])[0]
            row["wall_s"] = sum(d["wall_s"] for d in done)
            # converged? the gain from the second-last to the last evaluation, mean over seeds
            steps = [d["evals"][-1]["test_accuracy"] - d["evals"][-2]["test_accuracy"]
                     for d in done if len(d["evals"]) >= 2]
            row["last_gain"] = mean_spread(steps)[0]
        rows.append(row)
    ref = {r["method"]: r for r in rows if r.get("up_final")}
    for row in rows:
        if not row.get("up_final"):
            continue
        if "fp32" in ref:
            row["d_acc"] = row["acc_mean"] - ref["fp32"]["acc_mean"]
        for base, tag in (("fp32", "fp32"), ("dgc", "dgc"), ("lgc_ablation", "abl")):
            if base in ref:
                row[f"up_x_{tag}"] = ref[base]["up_final"] / row["up_final"]
                row[f"tot_x_{tag}"] = ref[base]["total_final"] / row["total_final"]
    return rows


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table_fashion",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--protocol", choices=sorted(PROTOCOLS), default="early",
                    help="budget, stage lengths, evaluations, runs folder and rows (see PROTOCOLS)")
    ap.add_argument("--iterations", type=int, default=None, help="default: the protocol's")
    ap.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    ap.add_argument("--methods", default=None, help=f"comma-separated subset of: {', '.join(LABELS)}")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (one process each)")
    ap.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="run each run as a Ray task: alone, on a Ray started here with --jobs "
                         "CPUs; 'auto' or an address: on that cluster")
    ap.add_argument("--runs", default=None, help="folder of the per-run JSON files "
                                                 "(default: the protocol's)")
    ap.add_argument("--out", default=str(DOCS_RESULTS), help="folder for the table's CSV/Markdown")
    ap.add_argument("--report", action="store_true", help="only tabulate the runs on disk")
    ap.add_argument("--stem", default=None, help="file name of the table's CSV/Markdown "
                                                 "(default: table_fashion[_PROTOCOL])")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a [compression] option on top of every method's own (repeatable), "
                         "e.g. --set dense_below=3000; give such runs their own --runs folder")
    ap.add_argument("--config", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="an override of the base file for every run (repeatable), e.g. "
                         "--config model.name=resnet20 --config run.device=cuda; give such "
                         "runs their own --runs folder")
    args = ap.parse_args(argv)
    protocol = PROTOCOLS[args.protocol]
    iterations = args.iterations or protocol.iterations
    labels = pick(args.methods, LABELS, "methods") if args.methods else list(protocol.labels)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--seeds {args.seeds!r}: must be comma-separated integers, e.g. 0,1,2") from None
    runs = Path(args.runs) if args.runs else protocol.runs
    if not args.report:
        run_missing(labels, seeds, iterations, args.jobs, runs, tuple(args.set), protocol,
                    tuple(args.config), ray=args.ray)
    rows = rows_of(labels, seeds, iterations, runs)
    warmup, ae = protocol.stages(iterations)
    # the model the runs trained: the base file's, unless a --config replaced it
    model = next((c.split("=", 1)[1].strip('"') for c in args.config
                  if c.split("=", 1)[0].strip() == "model.name"), "cnn_fc (139k weights)")
    notes = [
        f"Fashion-MNIST (60k/10k), {model}, 8 workers, one shared 20 Mbit/s cell, "
        f"{iterations} iterations of batch 32 per worker, SGD lr 0.1 cosine; DGC/LGC warm-up "
        f"{warmup}, LGC AE training {ae}, final stage from {warmup + ae}; density {DENSITY}.",
        "_nomask: momentum_masking = false (momentum kept where a coordinate is sent); "
        "last eval gain: accuracy gained from the second-last to the last evaluation (converged "
        "when within 0.2 points).",
        "acc: final test accuracy over the seeds that finished (sd: sample standard deviation); "
        "vs fp32: mean difference in points.",
        "up bits/it: what the workers sent (all-reduce: the chunks each node sends); up+down adds "
        "what every node received; both over the final stage; every header, index, latent byte.",
        "x fp32 / x DGC / x abl: that method's bits per iteration over this row's.",
    ]
    if args.config:   # the first note describes the base file; say what replaced part of it
        notes.insert(1, "Base file overridden for every run: " + ", ".join(args.config) + ".")
    stem = args.stem or ("table_fashion" if args.protocol == "early" else f"table_fashion_{args.protocol}")
    emit(rows, COLUMNS, title=f"Fashion-MNIST methods, 8 workers, {iterations} iterations",
         notes=notes, out=Path(args.out) if args.out else None, stem=stem)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
