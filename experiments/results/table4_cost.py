"""Table 4: wall time per iteration of the testbed itself, split by piece, for 4, 16, 64 workers.

    .venv/bin/python -m experiments.results.table4_cost [--quick]

The measurement is benchmarks/bench_testbed_cost.py (also run by `make bench`); this script adds
the CSV and Markdown under docs/results/.
"""
from __future__ import annotations

import argparse
import sys

from benchmarks import bench_testbed_cost as bench
from experiments.results.tables import emit, out_dir


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table4_cost",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced budgets")
    ap.add_argument("--iterations", type=int, default=None,
                    help="one budget for every worker count (default: the table's own)")
    ap.add_argument("--workers", default=None, help="comma-separated worker counts (default 4,16,64)")
    ap.add_argument("--out", default=None, help="folder for CSV/Markdown (default docs/results; "
                                                "--quick writes nothing unless given)")
    args = ap.parse_args(argv)
    workers = tuple(int(w) for w in args.workers.split(",")) if args.workers else bench.WORKERS
    iterations = {n: args.iterations for n in workers} if args.iterations else None
    rows = bench.run(args.quick, iterations, workers, show=False)
    four = next((r for r in rows if r["workers"] == 4 and r.get("emulation_share") is not None), None)
    notes = ["experiments/quickstart.toml (top-k 1%, shared 20 Mbit/s cell, 1% Bernoulli loss, "
             "reliable delivery) with network.workers set; wall ms per iteration on this machine.",
             "compute = workers' forward/backward + optimizer step; compression = the scheme's "
             "exchange() steps; emulation = the link layer (the emulated transport's link calls); store = SQLite writes "
             "and control polls; eval = test-set evaluation; other = the rest of the loop."]
    if four:
        notes.append(f"emulation share of the 4-worker quickstart: {four['emulation_share']:.1%} "
                     f"(target < {bench.EMULATION_TARGET:.0%})")
    emit(rows, bench.COLUMNS, title="Table 4: cost of the testbed per iteration (wall ms)",
         notes=notes, out=out_dir(args), stem="table4_testbed_cost")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
