"""Wall time of the quickstart on a busy machine: ms per iteration of `experiments/quickstart.toml`
with 2 workers, idle and with every core kept busy by another process (`python -c "while True:
pass"`, one per core, started and killed here), side by side for the default thread policy
(`run.threads = 0`), one thread and two threads, with the busy/idle ratio (median and worst
over the repetitions) and the 1-minute load average at the end of each measurement.

Every measurement is a fresh process (what a user's `testbed run` gets: no OMP_NUM_THREADS, no
thread count set before), timing `Experiment.run()` only (not Python's and torch's start), with
the process's CPU seconds beside the wall ones: threads that spin while another process holds a
core show as CPU time without progress. Target: the default's busy time within 2x of
its idle time (a fair share of the cores allows 1.5x).

A measurement stops at its iterations or after a wall-time cap, whichever comes first (a
collapsed setting would otherwise take many minutes); ms per iteration is over the iterations it
ran. Run: `python -m benchmarks load` (quick: 50 iterations or 15 s, 1 repetition) or `python -m
benchmarks load --full` (300 iterations or 30 s, 3 repetitions, then a table per shipped model: one forward +
backward at 1 thread and at every core, idle and busy). Results: docs/results.md, "What the
testbed itself costs".
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from nodes.models import build_model
from testbed.configuration.loading import load_config
from testbed.experiment import Experiment
from testbed.records.store import Store

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "experiments" / "quickstart.toml"
TARGET = 2.0


def settings() -> list[tuple[str, int]]:
    """(label, run.threads): the default, 1, 2, and torch's own count (the pre-2026-12-04 default)
    where this machine has more than 2 cores."""
    rows = [("default", 0), ("1 thread", 1), ("2 threads", 2)]
    cores = os.cpu_count() or 1
    if cores > 2:
        rows.append((f"{cores} threads", cores))
    return rows


def child(threads: int, iterations: int, cap_s: float) -> None:
    """In the measured process: one quickstart run, stopped at `iterations` or after `cap_s` wall
    seconds, whichever comes first, printing its wall and CPU seconds and iterations as JSON."""
    sets = ["network.workers=2", f"run.iterations={iterations}", "run.device=cpu"]
    if threads:
        sets.append(f"run.threads={threads}")
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "load.db") as store:
        done = [0]

        def stop() -> bool:   # asked before each iteration: a collapsed setting is cut short
            if time.perf_counter() - wall > cap_s:
                return True
            done[0] += 1
            return False

        exp = Experiment(load_config(FILE, sets), store, should_stop=stop)
        wall, cpu = time.perf_counter(), time.process_time()
        exp.run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "iterations": done[0],
                      "torch_threads": torch.get_num_threads()}))


def measure(threads: int, iterations: int, busy: bool, cap_s: float) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}  # what a user's shell has
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    hogs = []
    try:
        if busy:
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(os.cpu_count() or 1)]
        out = subprocess.run([sys.executable, "-m", "benchmarks.bench_load", "--child", str(threads),
                              str(iterations), str(cap_s)], cwd=ROOT, env=env, capture_output=True, text=True,
                             check=True).stdout
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    row = json.loads(out.strip().splitlines()[-1])
    row["ms"] = row["wall_s"] / row["iterations"] * 1000
    row["load"] = os.getloadavg()[0]
    return row


MODELS = (("mlp", (1, 8, 8)), ("cnn", (1, 8, 8)), ("resnet20", (3, 32, 32)), ("resnet18", (3, 32, 32)))


def models(reps: int = 3) -> list[dict]:
    """Does a larger model pay for more threads? One forward + backward of a batch of 32 per
    shipped model, 1 thread against every core, idle and busy (best of `reps`, after a warm-up),
    in this process. The thread policy's choice by model size rests on this table."""
    cores = os.cpu_count() or 1
    rows = []
    print(f"\nper model: ms per forward+backward, batch 32, best of {reps}; 1 thread vs {cores}")
    print(f"{'model':>9} {'params':>9} | {'1 idle':>8} {f'{cores} idle':>8} | {'1 busy':>8} "
          f"{f'{cores} busy':>8} | load")
    for name, shape in MODELS:
        torch.manual_seed(0)
        model = build_model(name, shape, 10)
        x, y = torch.randn(32, *shape), torch.randint(0, 10, (32,))
        row = {"model": name, "params": sum(p.numel() for p in model.parameters())}
        for state in ("idle", "busy"):
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(cores if state == "busy" else 0)]
            try:
                for threads in (1, cores):
                    torch.set_num_threads(threads)
                    times = []
                    for _ in range(reps + 1):
                        t = time.perf_counter()
                        torch.nn.functional.cross_entropy(model(x), y).backward()
                        times.append(time.perf_counter() - t)
                    row[f"{threads}_{state}_ms"] = min(times[1:]) * 1000
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
        row["load"] = os.getloadavg()[0]
        rows.append(row)
        print(f"{name:>9} {row['params']:>9} | {row['1_idle_ms']:8.1f} {row[f'{cores}_idle_ms']:8.1f} | "
              f"{row['1_busy_ms']:8.1f} {row[f'{cores}_busy_ms']:8.1f} | {row['load']:.2f}", flush=True)
    torch.set_num_threads(1)
    return rows


def main(quick: bool = True) -> list[dict]:
    iterations, reps, cap_s = (50, 1, 15.0) if quick else (300, 3, 30.0)
    cores = os.cpu_count() or 1
    print(f"quickstart, 2 workers, {iterations} iterations (or {cap_s:.0f} s), {reps} repetition(s); busy = {cores} "
          f"spinning processes; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    runs: dict[str, dict[str, list[dict]]] = {label: {"idle": [], "busy": []} for label, _ in settings()}
    for rep in range(reps):
        for label, threads in settings():         # interleaved: drift of the machine hits all alike
            for state in ("idle", "busy"):
                r = measure(threads, iterations, busy=state == "busy", cap_s=cap_s)
                runs[label][state].append(r)
                print(f"  rep {rep + 1} {label:>10} {state}: {r['ms']:7.1f} ms/it ({r['iterations']} it), cpu/wall "
                      f"{r['cpu_s'] / r['wall_s']:.2f}, torch threads {r['torch_threads']}, "
                      f"load {r['load']:.2f}", flush=True)
    rows = []
    print(f"\n{'threads':>10} | {'idle ms/it':>10} | {'busy ms/it':>10} | {'busy/idle':>9} | "
          f"{'worst busy':>10} | {'worst ratio':>11} | load idle / busy")
    for label, _ in settings():
        idle = [r["ms"] for r in runs[label]["idle"]]
        busy = [r["ms"] for r in runs[label]["busy"]]
        row = {"setting": label, "idle_ms": statistics.median(idle), "busy_ms": statistics.median(busy),
               "worst_busy_ms": max(busy),
               "load_idle": statistics.median(r["load"] for r in runs[label]["idle"]),
               "load_busy": statistics.median(r["load"] for r in runs[label]["busy"])}
        row["ratio"] = row["busy_ms"] / row["idle_ms"]
        row["worst_ratio"] = row["worst_busy_ms"] / row["idle_ms"]
        rows.append(row)
        print(f"{label:>10} | {row['idle_ms']:10.1f} | {row['busy_ms']:10.1f} | {row['ratio']:9.2f} | "
              f"{row['worst_busy_ms']:10.1f} | {row['worst_ratio']:11.2f} | "
              f"{row['load_idle']:.2f} / {row['load_busy']:.2f}")
    d = rows[0]
    print(f"target: default busy/idle <= {TARGET:.1f}: median {d['ratio']:.2f}, worst "
          f"{d['worst_ratio']:.2f} -> {'met' if d['worst_ratio'] <= TARGET else 'NOT met'}")
    if not quick:
        rows += models()
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        main(quick="--full" not in sys.argv)
