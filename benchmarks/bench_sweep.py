"""Wall time of one 8-point sweep (2 methods x 4 seeds of the quickstart, CNN on digits, CPU)
run three ways in one process: one point at a time in this process (`--jobs 1`), two at once in
processes of their own (`--jobs 2`), and as tasks of a local Ray of 2 CPUs (`--ray --jobs 2`,
Ray's start-up included). Each way writes its own store; the rows must agree (every column but
wall time), which is checked. Also the driver's cost per run: the wall seconds it took to copy
each finished run into the sweep's store (`Outcome.merge_s`) and the rows per second that makes.
Run: `python -m benchmarks sweep` (or `--full`: 4 times the iterations)."""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from testbed.commands.sweep import parse_grid, points_of
from testbed.store import Store
from testbed.sweeps import run_sweep

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "experiments" / "quickstart.toml"
GRID = ["compression.method=none,topk", "run.seed=0,1,2,3"]


def rows_of(path: Path) -> dict:
    with Store(path, readonly=True) as s:
        out = {}
        for run in s.runs():
            its = s.iterations(run["id"])
            for r in its:
                r.pop("wall_time_s")
            out[run["name"]] = (its, s.node_iterations(run["id"]), s.links(run["id"]), s.evals(run["id"]))
        return out


def count_rows(path: Path) -> int:
    with Store(path, readonly=True) as s:
        return sum(s.db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                   for t in ("iterations", "node_iterations", "links", "evals", "events"))


def plateau_sized(path: Path, iterations: int = 4800, workers: int = 8, every: int = 40) -> int:
    """A point's store with a run of the plateau table's shape, written through the Store: per
    iteration one row, a row per worker, an uplink and a downlink row per worker; an
    evaluation every `every` iterations and an event each time. Returns its row count."""
    with Store(path) as s:
        rid = s.create_run("plateau-sized", {"run": {"iterations": iterations}}, workers=workers)
        for i in range(iterations):
            s.append_iteration(rid, {"iteration": i, "virtual_time_s": 0.1 * i, "wall_time_s": 0.2,
                                     "train_loss": 1.0 / (i + 1), "bits_up": 8_000_000, "bits_down": 64_000_000,
                                     "compute_s": 0.01, "uplink_s": 0.05, "stage": "lgc"},
                               nodes=[{"iteration": i, "node": f"w{n}", "bits_up": 1_000_000,
                                       "bits_down": 8_000_000, "compute_s": 0.01} for n in range(workers)],
                               links=[{"iteration": i, "src": a, "dst": b, "bytes": 125_000, "packets": 90,
                                       "busy_s": 0.05} for n in range(workers)
                                      for a, b in ((f"w{n}", "server"), ("server", f"w{n}"))])
            if i % every == every - 1:
                s.append_eval(rid, {"iteration": i, "virtual_time_s": 0.1 * i, "test_accuracy": 0.5})
                s.append_event(rid, "eval", {"i": i}, iteration=i)
            if i % 100 == 99:
                s.flush()
        s.finish_run(rid, "completed")
    return iterations * (1 + 3 * workers) + 2 * (iterations // every)


def driver_cost(reps: int = 3) -> None:
    """The driver's merge of one plateau-sized run: seconds and rows per second."""
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
        point = Path(tmp) / "point.db"
        rows = plateau_sized(point)
        size = point.stat().st_size
        times = []
        with Store(Path(tmp) / "sweep.db") as s:
            for i in range(reps):
                t0 = time.perf_counter()
                s.import_run(point, sweep="bench", params={"i": str(i)}, sweep_key="bench")
                times.append(time.perf_counter() - t0)
    best = min(times)
    print(f"driver: copying in one plateau-sized run (4,800 iterations, 8 workers: {rows:,} rows, "
          f"{size / 1e6:.1f} MB store): best {best:.2f} s, median {statistics.median(times):.2f} s "
          f"of {reps} -> {rows / best:,.0f} rows/s", flush=True)


def main(quick: bool = True) -> None:
    iterations = 100 if quick else 400
    overrides = [f"run.iterations={iterations}", f"run.eval_every={iterations // 2}", "run.device=cpu"]
    ways = [("serial (--jobs 1, in this process)", 1, None),
            ("--jobs 2 (2 worker processes)", 2, None),
            ("--ray --jobs 2 (local Ray, 2 CPUs)", 2, "local")]
    print(f"load before: {open('/proc/loadavg').read().split()[:3]}; {os.cpu_count()} CPUs; "
          f"8 points of {iterations} iterations")
    base, points = points_of(str(FILE), parse_grid(GRID), overrides)
    times, stores, merges = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        for i, (label, jobs, ray) in enumerate(ways):
            store = Path(tmp) / f"way{i}.db"
            t0 = time.perf_counter()
            outcomes = run_sweep(points, str(store), sweep=base, key=f"bench{i}", jobs=jobs, ray=ray,
                                 quiet=True, log=lambda _l: None)
            times[label] = time.perf_counter() - t0
            assert all(o.status == "completed" for o in outcomes), [o.line for o in outcomes]
            stores[label], merges[label] = store, [o.merge_s for o in outcomes]
            print(f"{label:40s} {times[label]:7.1f} s wall", flush=True)
        reference = rows_of(stores[ways[0][0]])
        same = all(rows_of(stores[w[0]]) == reference for w in ways[1:])
        rows = count_rows(stores[ways[0][0]]) / len(points)
    serial, jobs2, ray2 = (times[w[0]] for w in ways)
    print(f"--jobs 2 speed-up over serial: {serial / jobs2:.2f}x (target >= 1.8x on 2 free cores)")
    print(f"Ray / --jobs 2 wall time: {ray2 / jobs2:.2f}x (target <= 1.25x)")
    print(f"rows equal in the three stores (all but wall time): {same}")
    every = [m for ms in merges.values() for m in ms]
    mean = statistics.fmean(every)
    print(f"driver: copying one run in ({rows:.0f} rows): mean {1000 * mean:.1f} ms, max "
          f"{1000 * max(every):.1f} ms over {len(every)} runs -> {rows / mean:,.0f} rows/s")
    driver_cost()
    print(f"load after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
