"""Table 1 on Fashion-MNIST: fp32, top-k, DGC, LGC's ablation, LGC-PS, LGC-RAR, ScaleCom.

    nice .venv/bin/python -m experiments.results.table_fashion [--jobs 2] [--seeds 0,1,2,3,4] [--ray auto]
    .venv/bin/python -m experiments.results.table_fashion --report     # table from finished runs
    ... --methods lgc_ps,dgc --set dense_below=3000 --runs DIR --out DIR   # an option on top
    nice .venv/bin/python -m experiments.results.table_fashion --protocol plateau   # at fp32's plateau
    ... --protocol plateau --iterations 60 --scale-stages --runs DIR --out DIR   # its smoke run

The plateau grid in the background (resumable: rerun the same line after a stop; each finished
run is written at once, with its provenance, to docs/results/plateau_cell_runs/):
    OMP_NUM_THREADS=1 nohup nice -n 15 .venv/bin/python -m experiments.results.table_fashion \
        --protocol plateau --jobs 1 > plateau.log 2>&1 &

Two protocols (`PROTOCOLS`): "early" (600 iterations, DGC/LGC warm-up a quarter of the budget
and AE training an eighth: how fast each method converges) and "plateau" (the budget at which
fp32 has converged, its last two evaluations within 0.2 points; warm-up and AE training about
one epoch each, a few percent of the budget, as in DGC's paper and reference code). Each has its
own folder of runs, so both columns are kept. Rows ending `_nomask` run the method with
`momentum_masking = false` (momentum kept where a coordinate is sent); the others are faithful
to DGC (masked). Rows ending `_nowarmup` skip DGC's sparsity warm-up (`warmup_iterations = 0`):
the final density from the first iteration, LGC's coder trained from there.

Every method runs experiments/fashion_star.toml (Debian's Fashion-MNIST, the 139k-weight cnn_fc,
8 workers in one shared 20 Mbit/s cell, the parameter server at the access point; LGC-RAR's ring
runs over the same cell) with only [compression] changed: same seeds, data split, model,
optimizer and budget. Each finished run is written at once to
docs/results/table_fashion_runs/<method>_s<seed>.json; rerunning skips those, so the script can
be stopped and resumed, and --report builds the table from whatever has finished.

Per method: final test accuracy (10k test images) mean and sample sd over the finished seeds and
the paired difference to fp32; uplink bits per iteration (what the workers sent: every header,
index, latent byte) over the final stage (from the end of LGC's AE training on, the same
iterations for every method) and over the whole run (warm-up, coder training and the coder's
shipment included), up + down bits over the whole run, and ratios against DGC and against
lgc_scaled (LGC-PS's protocol with the leader's values times one fitted scalar: the baseline the
learned coder must beat at equal format) on both; ring rows also against DGC all-gathered on the
ring; virtual time and the workers' joules to the protocol's target accuracy; the commit that
made each row (rows made by older code are marked). The plateau protocol runs on
experiments/fashion_plateau.toml: a 20 Mbit/s shared 802.11 (CSMA) cell, 1% loss, 8 stations.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from experiments.results.harness import DOCS_RESULTS, TableRun, mean_spread, run_many, stage_lengths
from experiments.results.provenance import code_state, marks, provenance
from experiments.results.tables import Column, emit, pick

BASE = "experiments/fashion_star.toml"
PLATEAU_BASE = "experiments/fashion_plateau.toml"   # the named cell: 802.11 CSMA, 1% loss, 8 stations
DENSITY = 0.01
REFRESH_EVERY = 10    # the _refresh rows: the coder (or scalar) refreshed every 10th LGC iteration
LABELS = ["fp32", "topk", "dgc", "lgc_ablation", "lgc_ps", "lgc_rar", "lgc_rar_ablation",
          "scalecom", "dgc_nomask", "lgc_ablation_nomask", "lgc_ps_nomask", "lgc_rar_nomask",
          "lgc_scaled", "lgc_scaled_refresh", "lgc_ps_refresh", "lgc_ps_paper", "lgc_rar_nl",
          "dgc_ring", "topk_ring", "lgc_scaled_momentum",
          "dgc_nowarmup", "lgc_ps_nowarmup", "lgc_scaled_nowarmup",
          "lgc_rar_nowarmup", "dgc_ring_nowarmup", "lgc_rar_scaled", "lgc_rar_scaled_nowarmup",
          "lgc_rar_l4", "lgc_rar_l4_nowarmup", "lgc_rar_ablation_nowarmup",
          "lgc_rar_nomask_nowarmup", "lgc_rar_l16", "lgc_rar_l16_nowarmup"]
# rows whose messages travel on the ring (all-reduce or all-gather): compared with ring DGC
RING = ("lgc_rar", "lgc_rar_ablation", "lgc_rar_nl", "scalecom", "dgc_ring", "topk_ring",
        "lgc_rar_nowarmup", "dgc_ring_nowarmup", "lgc_rar_scaled", "lgc_rar_scaled_nowarmup",
        "lgc_rar_l4", "lgc_rar_l4_nowarmup", "lgc_rar_ablation_nowarmup", "lgc_rar_nomask_nowarmup",
        "lgc_rar_l16", "lgc_rar_l16_nowarmup")
# the per-node baselines (each node's own top-k): LGC's ratios are also stated against the one
# of these that sends the fewest uplink bits over the whole run
PER_NODE = ("topk", "dgc", "dgc_nowarmup")
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
    base: str = BASE                      # the experiment file every row runs
    target: float = 0.85                  # the accuracy that time and joules are measured to

    def stages(self, iterations: int) -> tuple[int, int]:
        if self.warmup is None or self.ae is None:
            return stage_lengths(iterations)
        return self.warmup, self.ae


PROTOCOLS = {
    # lgc_rar_ablation (f16 values on the ring) on request
    "early": Protocol(600, 200, DOCS_RESULTS / "table_fashion_runs", tuple(LABELS[:6])),
    # fp32's plateau: measured 2026-12-04 (docs/results.md, "LGC at its plateau"), on the named
    # cell (experiments/fashion_plateau.toml); time and joules to 90% test accuracy
    "plateau": Protocol(4800, 400, DOCS_RESULTS / "plateau_cell_runs",
                        ("fp32", "topk", "dgc", "scalecom", "lgc_ablation", "lgc_scaled", "lgc_ps",
                         "lgc_ps_paper", "lgc_rar", "lgc_rar_nl", "lgc_scaled_momentum", "dgc_ring"),
                        warmup=EPOCH, ae=EPOCH // 2, base=PLATEAU_BASE, target=0.90),
}
ITERATIONS = PROTOCOLS["early"].iterations
RUNS = PROTOCOLS["early"].runs

COLUMNS = [
    Column("method", "method"), Column("n", "seeds"),
    Column("acc_mean", "acc mean %", lambda v: f"{100 * v:.2f}"),
    Column("acc_std", "acc sd", lambda v: f"{100 * v:.2f}"),
    Column("d_acc", "vs fp32 pts", lambda v: f"{100 * v:+.2f}"),
    Column("d_acc_sd", "paired sd pts", lambda v: f"{100 * v:.2f}"),
    Column("last_gain", "last eval gain pts", lambda v: f"{100 * v:+.2f}"),
    Column("window_gain", "gain over >=10% pts", lambda v: f"{100 * v:+.2f}"),
    Column("up_final", "up bits/it LGC stage", "{:,.0f}"),
    Column("up_run", "up bits/it whole run", "{:,.0f}"),
    Column("total_run", "up+down bits/it whole run", "{:,.0f}"),
    Column("up_x_dgc", "up x DGC LGC stage", "{:.2f}"), Column("run_up_x_dgc", "up x DGC whole run", "{:.2f}"),
    Column("run_tot_x_dgc", "up+down x DGC whole run", "{:.2f}"),
    Column("up_x_scaled", "up x scaled LGC stage", "{:.2f}"),
    Column("run_up_x_scaled", "up x scaled whole run", "{:.2f}"),
    Column("run_tot_x_scaled", "up+down x scaled whole run", "{:.2f}"),
    Column("run_up_x_coll", "up x DGC same collective whole run", "{:.2f}"),
    Column("run_up_x_sched", "up x DGC same schedule whole run", "{:.2f}"),
    Column("run_up_x_best", "up x best per-node whole run", "{:.2f}"),
    Column("t_target", "virtual s to target", "{:,.1f}"), Column("j_target", "J to target", "{:,.1f}"),
    Column("commit", "commit"),
]


def options(label: str, warmup: int, ae_iters: int) -> dict:
    if label.endswith("_nomask"):
        return {**options(label[:-len("_nomask")], warmup, ae_iters), "momentum_masking": False}
    if label.endswith("_nowarmup"):   # no sparsity ramp: the final density from the first iteration
        return {**options(label[:-len("_nowarmup")], warmup, ae_iters), "warmup_iterations": 0}
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
        # LGC-PS's protocol, the leader's values times one fitted scalar (the coder's baseline)
        "lgc_scaled": {"method": "lgc_scaled", **lgc},
        "lgc_scaled_refresh": {"method": "lgc_scaled", **lgc, "ae_refresh_every": REFRESH_EVERY},
        "lgc_ps_refresh": {"method": "lgc_ps", **lgc, "ae_refresh_every": REFRESH_EVERY},
        # the reference's structure: one decoder per node, latents pulled together 1:1
        "lgc_ps_paper": {"method": "lgc_ps", **lgc, "decoders": "per_node", "latent_pull": 1.0},
        "lgc_rar_nl": {"method": "lgc_rar", **lgc, "rar_decoder": "nonlinear"},
        # LGC-RAR's schedule, the leader's values times one fitted scalar (the ring's baseline)
        "lgc_rar_scaled": {"method": "lgc_rar_scaled", **lgc},
        # LGC-RAR with a latent of k/4 (twice the default's k/8): the coder's compression halved
        "lgc_rar_l4": {"method": "lgc_rar", **lgc, "latent_ratio": 0.25},
        # and with k/16 (half the default's; a fourth stride-2 layer): where the ring's bits could
        # pass 8x ring DGC
        "lgc_rar_l16": {"method": "lgc_rar", **lgc, "latent_ratio": 0.0625,
                        "ae_channels": "16,16,16,16"},
        # the shared part read from the leader's momentum, before error feedback drains it
        "lgc_scaled_momentum": {"method": "lgc_scaled", **lgc, "ae_refresh_every": REFRESH_EVERY,
                                "common_source": "momentum"},
        # DGC and top-k on the ring's collective: every node all-gathers every message
        "dgc_ring": {"method": "dgc", "ratio": DENSITY, "warmup_iterations": warmup,
                     "collective": "allgather"},
        "topk_ring": {"method": "topk", "ratio": DENSITY, "collective": "allgather"},
    }
    return table[label]


def spec(label: str, seed: int, iterations: int, extra: tuple[str, ...] = (),
         protocol: Protocol = PROTOCOLS["early"], base: tuple[str, ...] = ()) -> TableRun:
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
    return TableRun(f"fashion[{label},s{seed}]", protocol.base, sets, tags={"method": label, "seed": seed})


def run_file(runs: Path, label: str, seed: int) -> Path:
    return runs / f"{label}_s{seed}.json"


def summary(result, iterations: int, final: int, energy: list[float] | None = None) -> dict:
    """What the table keeps of one run: bits averaged from iteration `final` (the final stage)
    and per iteration (the whole run), each evaluation's virtual time and (with `energy`, the
    workers' joules per iteration) joules so far, and the run's provenance."""
    evals = [dict(e) for e in result.evals]
    if energy:
        for e in evals:
            e["energy_j"] = sum(energy[:e["iteration"] + 1])
    return {"status": result.status, "note": result.note, "iterations": result.iterations,
            "evals": evals, "final_accuracy": result.final_accuracy,
            "up_final": mean_spread(result.bits_up[final:])[0],
            "total_final": mean_spread(result.bits[final:])[0],
            "bits_up": list(result.bits_up), "bits": list(result.bits), "final_from": final,
            "wall_s": result.wall_s, "overrides": result.spec.overrides,
            "provenance": provenance(result.spec),
            "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}


def run_missing(labels, seeds, iterations, jobs, runs: Path, extra: tuple[str, ...] = (),
                protocol: Protocol = PROTOCOLS["early"], base: tuple[str, ...] = (),
                stores: Path | None = None, ray: str | None = None) -> None:
    """Every (label, seed) without a finished run file in `runs`, through the sweep engine
    (`jobs` at once, or on Ray with `ray`); each run's file is written as soon as it ends.
    `stores`: a folder whose `runs.db` keeps every run's rows (a run cut short keeps its rows
    in `runs.db.points/`)."""
    runs.mkdir(parents=True, exist_ok=True)
    if stores:
        stores.mkdir(parents=True, exist_ok=True)
    code_state()   # the code as this process loads it (cached: a later commit does not relabel it)
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
        tmp.write_text(json.dumps(summary(result, iterations, final, result.energy_j), indent=1))
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


def _first_at(evals: list[dict], target: float) -> dict | None:
    """The first evaluation at or above the target accuracy (None: never)."""
    return next((e for e in evals if e["test_accuracy"] >= target), None)


def window_gain(evals: list[dict], iterations: int) -> float | None:
    """Accuracy gained from the latest evaluation at least 10% of the budget before the last to
    the last (a plateau: within 0.2 points)."""
    if not evals:
        return None
    last = evals[-1]
    before = [e for e in evals if e["iteration"] <= last["iteration"] - 0.1 * iterations]
    return last["test_accuracy"] - before[-1]["test_accuracy"] if before else None


def rows_of(labels, seeds, iterations, runs: Path, target: float = 0.85) -> list[dict]:
    """One row per label over its finished seeds. Whole-run bits need the per-iteration bits
    the run files keep (older run files have only the LGC stage's mean: '-')."""
    rows, by_seed = [], {}
    for label in labels:
        done_seeds = [s for s in seeds if _finished(run_file(runs, label, s), iterations)]
        done = [json.loads(run_file(runs, label, s).read_text()) for s in done_seeds]
        by_seed[label] = {s: d["final_accuracy"] for s, d in zip(done_seeds, done)}
        row = {"method": label, "n": len(done), "seeds": " ".join(map(str, done_seeds))}
        if done:
            row["acc_mean"], row["acc_std"] = mean_spread([d["final_accuracy"] for d in done])
            row["acc_per_seed"] = " ".join(f"{d['final_accuracy']:.4f}" for d in done)
            row["up_final"] = mean_spread([d["up_final"] for d in done])[0]
            row["total_final"] = mean_spread([d["total_final"] for d in done])[0]
            if all("bits_up" in d for d in done):
                row["up_run"] = mean_spread([mean_spread(d["bits_up"])[0] for d in done])[0]
                row["total_run"] = mean_spread([mean_spread(d["bits"])[0] for d in done])[0]
            row["wall_s"] = sum(d["wall_s"] for d in done)
            # converged? the gain from the second-last to the last evaluation, mean over seeds
            steps = [d["evals"][-1]["test_accuracy"] - d["evals"][-2]["test_accuracy"]
                     for d in done if len(d["evals"]) >= 2]
            row["last_gain"] = mean_spread(steps)[0]
            row["window_gain"] = mean_spread([window_gain(d["evals"], iterations) for d in done])[0]
            hits = [_first_at(d["evals"], target) for d in done]
            row["reached"] = f"{sum(h is not None for h in hits)}/{len(done)}"
            if all(h is not None for h in hits):
                row["t_target"] = mean_spread([h["virtual_time_s"] for h in hits])[0]
                if all("energy_j" in h for h in hits):
                    row["j_target"] = mean_spread([h["energy_j"] for h in hits])[0]
            row["commit"] = " ".join(sorted({marks(d.get("provenance")) for d in done}))
        rows.append(row)
    ref = {r["method"]: r for r in rows if r.get("up_final")}
    for row in rows:
        if not row.get("up_final"):
            continue
        if "fp32" in ref:   # paired: over the seeds both rows have
            pairs = [a - by_seed["fp32"][s] for s, a in by_seed[row["method"]].items()
                     if s in by_seed["fp32"]]
            row["d_acc"], row["d_acc_sd"] = mean_spread(pairs)
        for base, tag in (("fp32", "fp32"), ("dgc", "dgc"), ("lgc_ablation", "abl"),
                          ("lgc_scaled", "scaled")):
            if base not in ref:
                continue
            row[f"up_x_{tag}"] = ref[base]["up_final"] / row["up_final"]
            row[f"tot_x_{tag}"] = ref[base]["total_final"] / row["total_final"]
            if row.get("up_run") and ref[base].get("up_run"):
                row[f"run_up_x_{tag}"] = ref[base]["up_run"] / row["up_run"]
                row[f"run_tot_x_{tag}"] = ref[base]["total_run"] / row["total_run"]
        coll = ref.get("dgc_ring" if row["method"] in RING else "dgc")
        if coll and row.get("up_run") and coll.get("up_run"):
            row["run_up_x_coll"] = coll["up_run"] / row["up_run"]
        sched = ref.get(same_schedule(row["method"]))
        if sched and row.get("up_run") and sched.get("up_run"):
            row["run_up_x_sched"] = sched["up_run"] / row["up_run"]
    best = best_per_node(ref)
    for row in rows:
        if best and row.get("up_run"):
            row["run_up_x_best"] = best["up_run"] / row["up_run"]
            row["best_per_node"] = best["method"]
    return rows


def same_schedule(label: str) -> str:
    """The DGC row a row's whole-run uplink is compared with like for like: the same collective
    (ring rows, RING: DGC all-gathered on the ring) and the same schedule (DGC with its warm-up
    for a row that has one; without it for `_nowarmup` rows and for methods that have no
    warm-up, such as fp32, top-k and ScaleCom)."""
    warm = options(label, 1, 1).get("warmup_iterations", 0) > 0
    return ("dgc_ring" if label in RING else "dgc") + ("" if warm else "_nowarmup")


def best_per_node(ref: dict) -> dict | None:
    """Of the per-node baselines that finished, the one with the fewest whole-run uplink bits."""
    done = [ref[m] for m in PER_NODE if m in ref and ref[m].get("up_run")]
    return min(done, key=lambda r: r["up_run"]) if done else None


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
    ap.add_argument("--scale-stages", action="store_true",
                    help="warm-up and coder training scaled to --iterations as the protocol's are "
                         "to its budget (a short smoke or timing run of the same grid)")
    ap.add_argument("--stores", default=None, help="folder that keeps each run's SQLite store")
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
    if args.scale_stages and protocol.warmup is not None:
        w, a = protocol.stages(protocol.iterations)
        protocol = replace(protocol, warmup=max(1, round(w * iterations / protocol.iterations)),
                           ae=max(1, round(a * iterations / protocol.iterations)))
    labels = pick(args.methods, LABELS, "methods") if args.methods else list(protocol.labels)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--seeds {args.seeds!r}: must be comma-separated integers, e.g. 0,1,2") from None
    runs = Path(args.runs) if args.runs else protocol.runs
    if not args.report:
        run_missing(labels, seeds, iterations, args.jobs, runs, tuple(args.set), protocol,
                    tuple(args.config), Path(args.stores) if args.stores else None, ray=args.ray)
    rows = rows_of(labels, seeds, iterations, runs, protocol.target)
    warmup, ae = protocol.stages(iterations)
    # the model the runs trained: the base file's, unless a --config replaced it
    model = next((c.split("=", 1)[1].strip('"') for c in args.config
                  if c.split("=", 1)[0].strip() == "model.name"), "cnn_fc (139k weights)")
    cell = ("one shared 20 Mbit/s 802.11 (CSMA) cell, 1% packet loss with retransmission, 8 stations"
            if protocol.base == PLATEAU_BASE else "one shared 20 Mbit/s cell")
    notes = [
        f"Fashion-MNIST (60k/10k), {model}, 8 workers, {cell} ({protocol.base}), "
        f"{iterations} iterations of batch 32 per worker, SGD lr 0.1 cosine; DGC/LGC warm-up "
        f"{warmup}, LGC AE training {ae}, final stage from {warmup + ae} (_nowarmup rows: no "
        f"warm-up, the LGC stage from {ae}; their LGC-stage columns also from {warmup + ae}); "
        f"density {DENSITY}.",
        "_nomask: momentum_masking = false (momentum kept where a coordinate is sent); "
        "_nowarmup: warmup_iterations = 0 (no sparsity ramp: the final density from the first "
        "iteration); "
        f"_refresh: the coder (lgc_ps) or the scalar (lgc_scaled) refreshed every {REFRESH_EVERY}th "
        "LGC iteration on the nodes' memories (their bytes counted); lgc_ps_paper: one decoder per "
        "node and the latent pull (the third-party reference's structure); lgc_rar_nl: LGC-RAR "
        "with a non-linear decoder; _ring: all-gathered on the ring's collective.",
        "acc: final test accuracy over the seeds that finished (sd: sample standard deviation); "
        "vs fp32: mean of the per-seed differences in points over the seeds both rows have, paired "
        "sd: their sd.",
        "last eval gain: accuracy gained from the second-last to the last evaluation; gain over "
        ">=10%: from the latest evaluation at least 10% of the budget before the last (a plateau "
        "when within 0.2 points).",
        "up bits/it: what the workers sent (all-reduce: the chunks each node sends); up+down adds "
        "what every node received; every header, index, latent byte. LGC stage: iterations "
        f"{warmup + ae} on; whole run: every iteration (warm-up, coder training and the coder's "
        "shipment included); '-': the run file predates per-iteration bits.",
        "x DGC / x scaled: DGC's (lgc_scaled's) bits per iteration over this row's, DGC with its "
        "warm-up; same collective: over DGC's on the parameter server, or (ring rows) all-gathered "
        "on the ring; same schedule: the same collective, and DGC without its warm-up for rows "
        "without one (_nowarmup, fp32, topk, scalecom; '-': that DGC row has no runs); "
        f"best per-node: over the fewest whole-run uplink bits of {', '.join(PER_NODE)} "
        "(whichever finished).",
        f"to target: first evaluation (every {protocol.eval_every if iterations == protocol.iterations else max(1, iterations // 3)} "
        f"iterations) at or above {100 * protocol.target:.0f}% test accuracy, mean over the seeds "
        "(shown only when every seed reached it; 'reached' in the CSV): the cell's virtual "
        "seconds and the 8 workers' joules (radio and compute) up to it.",
        "commit: the code that made the rows (+dirty: uncommitted changes; older code: a file its "
        "run imported (older run files: any file of the run's code) or its experiment file's "
        "settings differ at the current commit, comments and docstrings aside; unrecorded: a run "
        "file from before commits were recorded).",
    ]
    if args.config:   # the first note describes the base file; say what replaced part of it
        notes.insert(1, "Base file overridden for every run: " + ", ".join(args.config) + ".")
    stem = args.stem or ("table_fashion" if args.protocol == "early" else f"table_fashion_{args.protocol}")
    emit(rows, COLUMNS, title=f"Fashion-MNIST methods, 8 workers, {iterations} iterations",
         notes=notes, out=Path(args.out) if args.out else None, stem=stem)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
