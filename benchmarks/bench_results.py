"""The result tables of docs/results.md at reduced budgets (what `make bench` runs).

`python -m benchmarks results` runs tables 1-3 with `--quick` (one seed, 40 iterations, fewer
methods/bandwidths/loss rates; nothing written). `--full` runs the full tables 1-3 and writes
docs/results/ (each 10-15 minutes on 2 free cores). Table 4 is bench_testbed_cost; table 5
(GPU) is `python -m experiments.results.gpu_resnet20`.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.results import table1_methods, table2_bandwidth, table3_loss  # noqa: E402


def run(quick: bool = True) -> dict[str, list[dict]]:
    argv = ["--quick"] if quick else ["--jobs", "2"]
    return {"table1": table1_methods.main(argv), "table2": table2_bandwidth.main(argv),
            "table3": table3_loss.main(argv)}


def main(quick: bool = True) -> dict[str, list[dict]]:
    return run(quick)


if __name__ == "__main__":
    main(quick="--full" not in sys.argv[1:])
