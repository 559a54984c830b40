"""LGC-PS's innovation ratio against fp32 and DGC on digits: docs/lgc_innovation_sweep.md's table.

    nice .venv/bin/python -m experiments.results.innovation_sweep [--jobs 2]
    .venv/bin/python -m experiments.results.innovation_sweep --report   # table from finished runs

experiments/compare_digits.toml (8 workers on a shared 20 Mbit/s star cell, the small CNN on
digits, 240 iterations) for fp32, DGC (density 0.01, warm-up 60) and LGC-PS (density 0.01,
warm-up 60, autoencoder training 30) at innovation ratios 0.01, 0.05 and 0.1, seeds 0-2. Every
finished run is appended at once to docs/results/lgc_innovation_runs.jsonl (with its provenance);
rerunning skips those. Per row: final accuracy per seed and its mean, the mean's difference from
fp32, the uplink kbit per iteration over iterations 90-239 (the coding stage, after warm-up and
the coder's training) and over the whole run, and how many times fewer than DGC each is.
"""
from __future__ import annotations

import statistics
import sys

from experiments.results.harness import DOCS_RESULTS, TableRun, run_missing

BASE = "experiments/compare_digits.toml"
RUNS = DOCS_RESULTS / "lgc_innovation_runs.jsonl"
SEEDS = (0, 1, 2)
STAGE_START = 90          # warm-up 60 + autoencoder training 30
SPARSE = ["compression.ratio=0.01", "compression.warmup_iterations=60"]
ROWS = {"fp32": [],
        "DGC": ['compression.method="dgc"', *SPARSE],
        **{f"LGC-PS, innovation {r}": ['compression.method="lgc_ps"', *SPARSE, "compression.ae_iterations=30",
                                       f"compression.innovation_ratio={r}"] for r in (0.01, 0.05, 0.1)}}


def specs() -> list[TableRun]:
    return [TableRun(label=f"{row} s{seed}", config=BASE, overrides=[*sets, f"run.seed={seed}"],
                    tags={"row": row, "seed": seed}) for row, sets in ROWS.items() for seed in SEEDS]


def table(runs) -> str:
    by = {row: sorted((r for r in runs if r.spec.tags["row"] == row), key=lambda r: r.spec.tags["seed"])
          for row in ROWS}
    mean_acc = {row: statistics.fmean(100 * r.final_accuracy for r in rs) for row, rs in by.items() if rs}
    stage = {row: statistics.fmean(statistics.fmean(r.bits_up[STAGE_START:]) for r in rs) / 1e3
             for row, rs in by.items() if rs}
    whole = {row: statistics.fmean(statistics.fmean(r.bits_up) for r in rs) / 1e3 for row, rs in by.items() if rs}
    lines = ["| method | accuracy (seeds 0 / 1 / 2) | mean | vs fp32 | uplink kbit / iteration, stage | "
             "whole run | fewer than DGC, stage / whole run |", "|---|---|---:|---:|---:|---:|---:|"]
    for row, rs in by.items():
        if not rs:
            continue
        vs = "—" if row == "fp32" else f"{mean_acc[row] - mean_acc['fp32']:+.2f}"
        fewer = "—" if row in ("fp32",) else f"{stage['DGC'] / stage[row]:.1f}x / {whole['DGC'] / whole[row]:.1f}x"
        lines.append(f"| {row} | {' / '.join(f'{100 * r.final_accuracy:.2f}' for r in rs)} | {mean_acc[row]:.2f} | "
                     f"{vs} | {stage[row]:,.1f} | {whole[row]:,.1f} | {fewer} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    runs = run_missing(specs(), RUNS, argv, description=__doc__.splitlines()[0],
                       report="only the table from finished runs")
    print(table([r for r in runs if r.status == "completed"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
