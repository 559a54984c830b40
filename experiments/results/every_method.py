"""Every registered method on the shipped quickstart file, nothing else changed.

    nice .venv/bin/python -m experiments.results.every_method [--jobs 2]
    .venv/bin/python -m experiments.results.every_method --report     # from finished runs

Each built-in method runs experiments/quickstart.toml (4 workers, the small CNN on digits, a
shared 20 Mbit/s cell with 1% loss, 500 iterations) with only `compression.method` set, as a
user would first try it. Every finished run is appended at once to
docs/results/every_method_runs.jsonl (its provenance with it); rerunning skips the methods
already there. Prints each method's final accuracy and mean uplink bits per iteration.
"""
from __future__ import annotations

import statistics
import sys

from experiments.results.harness import DOCS_RESULTS, TableRun, run_missing
from nodes.compression.registry import load_all, origin
from nodes.compression.registry import names as method_names

BASE = "experiments/quickstart.toml"
RUNS = DOCS_RESULTS / "every_method_runs.jsonl"


def built_in() -> list[str]:
    load_all()
    return [m for m in method_names() if origin(m).startswith("built-in")]


def main(argv=None) -> int:
    runs = run_missing([TableRun(label=m, config=BASE, overrides=[f'compression.method="{m}"'])
                        for m in built_in()], RUNS, argv, description=__doc__.splitlines()[0],
                       report="only the summary of finished runs")
    for r in sorted(runs, key=lambda r: r.spec.label):
        acc = r.final_accuracy
        up = statistics.fmean(r.bits_up) if r.bits_up else float("nan")
        print(f"{r.spec.label:<14} {r.status:<10} accuracy {100 * acc if acc is not None else float('nan'):6.2f}%  "
              f"uplink {up / 1e3:9.1f} kbit/iteration")
    return 0


if __name__ == "__main__":
    sys.exit(main())
