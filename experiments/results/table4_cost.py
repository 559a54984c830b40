"""Table 4: wall time per iteration of the testbed itself, split by piece, for 4, 16, 64 workers.

    .venv/bin/python -m experiments.results.table4_cost [--quick]

The measurement lives here; benchmarks/bench_testbed_cost.py (`make bench`) runs it and prints
it, this script also writes the CSV and Markdown under docs/results/.

`python -m benchmarks testbed_cost [--full]`, or with CSV into docs/results/:
`.venv/bin/python -m experiments.results.table4_cost [--quick]`.

Runs experiments/quickstart.toml (top-k 1%, shared 20 Mbit/s cell, 1% Bernoulli loss,
reliable delivery) with 4, 16 and 64 workers through `experiments.results.harness`, whose runs
report their wall seconds by piece through the loop's timer hook (testbed/run/wall_split.py):
  compute      the gradient source (every worker's forward + backward) and the optimizer step
  compression  every step of the scheme's exchange() generator (encode, decode, aggregate)
               and the ring sum on the real bytes
  emulation    the link layer (channels) carrying each phase (EmulatedTransport's link calls)
  store        Store writes, flushes and the per-iteration control poll
  eval         test-set evaluation (every eval_every iterations)
  other        the rest of the iteration (the loop's own bookkeeping)
The 4-worker row is the quickstart experiment itself at its own budget in the full version;
its emulation share is the figure with a target: under 10% of the wall time.
Wall-clock figures are this machine's; a loaded machine inflates them all.
"""
from __future__ import annotations

import argparse
import sys

from experiments.results.harness import TableRun, run_many
from testbed.run.wall_split import PIECES
from experiments.results.tables import Column, emit, format_text, out_dir


QUICKSTART = "experiments/quickstart.toml"
WORKERS = (4, 16, 64)
FULL_ITERATIONS = {4: None, 16: 60, 64: 20}      # None: the quickstart's own budget
QUICK_ITERATIONS = {4: 30, 16: 10, 64: 4}
EMULATION_TARGET = 0.10


def specs(iterations: dict[int, int | None]) -> list[TableRun]:
    out = []
    for n, its in iterations.items():
        sets = [f"network.workers={n}"] + ([f"run.iterations={its}"] if its else [])
        out.append(TableRun(f"cost[{n} workers]", QUICKSTART, sets, tags={"workers": n}))
    return out


def rows_of(results) -> list[dict]:
    rows = []
    for r in results:
        row = {"workers": r.spec.tags["workers"], "iterations": r.iterations, "status": r.status}
        if r.status != "completed" or not r.iterations:
            row["note"] = r.note.splitlines()[0] if r.note else ""
            rows.append(row)
            continue
        per_it = {k: 1000 * v / r.iterations for k, v in r.timers.items()}
        total = 1000 * r.wall_s / r.iterations
        row["total_ms"] = total
        for k in PIECES:
            row[f"{k}_ms"] = per_it[k]
        row["other_ms"] = max(0.0, total - sum(per_it.values()))
        row["emulation_share"] = per_it["emulation"] / total if total else None
        row["final_accuracy"] = r.final_accuracy
        row["note"] = ""
        rows.append(row)
    return rows


def run(quick: bool = True, iterations: dict[int, int | None] | None = None,
        workers: tuple[int, ...] = WORKERS, show: bool = True) -> list[dict]:
    table = iterations or (QUICK_ITERATIONS if quick else FULL_ITERATIONS)
    table = {n: table.get(n) for n in workers}
    rows = rows_of(run_many(specs(table), log=lambda *_: None))
    if show:
        _print(rows, quick)
    return rows


def _print(rows: list[dict], quick: bool) -> None:
    print(format_text(rows, COLUMNS))
    four = next((r for r in rows if r["workers"] == 4 and r.get("emulation_share") is not None), None)
    if four:
        verdict = "meets" if four["emulation_share"] < EMULATION_TARGET else "MISSES"
        print(f"quickstart ({'reduced budget, ' if quick else ''}4 workers): link emulation "
              f"{four['emulation_share']:.1%} of the wall time per iteration: {verdict} the "
              f"< {EMULATION_TARGET:.0%} target")


def _columns():
    return [Column("workers", "workers", "{:d}"), Column("iterations", "it", "{:d}"),
            Column("total_ms", "total ms/it", "{:.1f}"), Column("compute_ms", "compute", "{:.1f}"),
            Column("compression_ms", "compression", "{:.1f}"),
            Column("emulation_ms", "emulation", "{:.1f}"), Column("store_ms", "store", "{:.2f}"),
            Column("eval_ms", "eval", "{:.2f}"), Column("other_ms", "other", "{:.1f}"),
            Column("emulation_share", "emulation share", "{:.1%}")]


COLUMNS = _columns()


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
    workers = tuple(int(w) for w in args.workers.split(",")) if args.workers else WORKERS
    iterations = {n: args.iterations for n in workers} if args.iterations else None
    rows = run(args.quick, iterations, workers, show=False)
    four = next((r for r in rows if r["workers"] == 4 and r.get("emulation_share") is not None), None)
    notes = ["experiments/quickstart.toml (top-k 1%, shared 20 Mbit/s cell, 1% Bernoulli loss, "
             "reliable delivery) with network.workers set; wall ms per iteration on this machine.",
             "compute = workers' forward/backward + optimizer step; compression = the scheme's "
             "exchange() steps; emulation = the link layer (the emulated transport's link calls); store = SQLite writes "
             "and control polls; eval = test-set evaluation; other = the rest of the loop."]
    if four:
        notes.append(f"emulation share of the 4-worker quickstart: {four['emulation_share']:.1%} "
                     f"(target < {EMULATION_TARGET:.0%})")
    emit(rows, COLUMNS, title="Table 4: cost of the testbed per iteration (wall ms)",
         notes=notes, out=out_dir(args), stem="table4_testbed_cost")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
