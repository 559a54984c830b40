"""Wall time of the 4-point sweep `testbed sweep experiments/quickstart.toml --grid
compression.method=none,topk --seeds 0,1 --set run.iterations=400 --set run.eval_every=100`,
each way a fresh `testbed sweep` process as a user starts it (start-up included): one point
at a time (`--jobs 1`), two at once in worker processes (`--jobs 2`) and as tasks of a local
Ray of 2 CPUs (`--ray --jobs 2`, Ray's start-up included). Serial and `--jobs 2` are
interleaved, repeated, and their medians compared (target: `--jobs 2` 1.7x faster on 2 idle
cores); Ray runs once. Each way writes its own store; the rows must agree (every column but
wall time), which is checked. Also the driver's cost per run: the wall seconds it took to copy
a plateau-sized run into the sweep's store (`Store.import_run`) and the rows per second that
makes. Run: `python -m benchmarks sweep` (1 repetition; `--full`: 3)."""
from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.records.store import Store

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "experiments" / "quickstart.toml"
SWEEP = ["--grid", "compression.method=none,topk", "--seeds", "0,1", "--set", "run.iterations=400",
         "--set", "run.eval_every=100"]
TARGET = 1.7


def rows_of(path: Path) -> dict:
    with Store(path, readonly=True) as s:
        out = {}
        for run in s.runs():
            its = s.iterations(run["id"])
            for r in its:
                r.pop("wall_time_s")
            out[run["name"]] = (its, s.node_iterations(run["id"]), s.links(run["id"]), s.evals(run["id"]))
        return out


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


def driver_cost(reps: int = 3) -> dict:
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
    return {"rows": rows, "store_mb": size / 1e6, "seconds": times}


def sweep(store: Path, *way: str) -> float:
    """Wall seconds of one `testbed sweep` process over SWEEP into `store` (made afresh)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "sweep", str(FILE), *SWEEP, *way,
                          "--store", str(store), "--quiet"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"testbed sweep {' '.join(way)} exited {out.returncode}: "
                           f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return wall


def main(quick: bool = True) -> dict:
    reps = 1 if quick else 3
    load_before = os.getloadavg()[0]
    print(f"load before: {open('/proc/loadavg').read().split()[:3]}; {os.cpu_count()} CPUs; "
          f"4 points of 400 iterations, each way a fresh `testbed sweep`; {reps} repetition(s)")
    times: dict[str, list[float]] = {"serial": [], "jobs2": [], "ray": []}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        stores = {way: Path(tmp) / f"{way}.db" for way in times}
        for _ in range(reps):     # interleaved: load that comes and goes hits both alike
            times["serial"].append(sweep(stores["serial"], "--jobs", "1"))
            times["jobs2"].append(sweep(stores["jobs2"], "--jobs", "2"))
        if importlib.util.find_spec("ray") is not None:
            times["ray"].append(sweep(stores["ray"], "--ray", "--jobs", "2"))
        ways = [w for w in times if times[w]]
        labels = {"serial": "serial (--jobs 1)", "jobs2": "--jobs 2 (2 worker processes)",
                  "ray": "--ray --jobs 2 (local Ray, 2 CPUs)"}
        for way in ways:
            print(f"{labels[way]:40s} {statistics.median(times[way]):7.1f} s wall (median of "
                  f"{len(times[way])}: {', '.join(f'{t:.1f}' for t in times[way])})", flush=True)
        reference = rows_of(stores["serial"])
        same = all(rows_of(stores[w]) == reference for w in ways[1:])
    serial, jobs2 = statistics.median(times["serial"]), statistics.median(times["jobs2"])
    load_after = os.getloadavg()[0]
    print(f"--jobs 2 speed-up over serial: {serial / jobs2:.2f}x (target >= {TARGET}x on 2 idle "
          f"cores; load {load_before:.2f} before, {load_after:.2f} after)")
    if times["ray"]:
        print(f"Ray / --jobs 2 wall time: {times['ray'][0] / jobs2:.2f}x (target <= 1.25x)")
    print(f"rows equal in the {len(ways)} stores (all but wall time): {same}")
    autogroup = _autogroup()
    if autogroup:   # why a busy machine hides the speed-up
        print("the kernel shares CPU time among sessions first (sched_autogroup_enabled = 1): while "
              "other sessions keep the cores busy, the sweep's processes share one session's part")
    driver = driver_cost()
    print(f"load after: {open('/proc/loadavg').read().split()[:3]}")
    return {"repetitions": reps, "load_before": load_before, "load_after": load_after,
            "wall_s": times, "speedup_jobs2_over_serial": serial / jobs2, "rows_equal": same,
            "sched_autogroup": autogroup, "driver_copy": driver}


def _autogroup() -> bool:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False

if __name__ == "__main__":
    main()
