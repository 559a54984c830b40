"""`testbed tune` against a dense grid, each a fresh `testbed tune` or `testbed sweep` process as
a user starts it, on experiments/quickstart.toml (top-k 1%, 4 workers, a shared 802.11-like
cell), every run stopped at its target (run.stop_at_accuracy).

1. The least network.link.bandwidth_mbps in [0.5, 50] at which the run reaches 95% test
   accuracy within BUDGET_S virtual seconds: `testbed tune --param
   network.link.bandwidth_mbps=0.5:50:log --objective network.link.bandwidth_mbps
   --constraint virtual_s_to_target<=BUDGET_S --budget-s BUDGET_S` (a run past the budget
   without the target is pruned there) against a log-spaced grid over the same range (`testbed
   sweep`, every run to its target), whose answer is its least point that meets the budget.
   Printed: both answers and their ratio, each one's runs and wall time, what a pruned and a
   completed trial cost (iterations, wall seconds), the load average.
2. Two objectives, virtual seconds to 90% and uplink bits, over compression.method and its
   ratio: a study of N trials against a grid of N runs (methods x log-spaced ratios); printed:
   each front and its hypervolume, both objectives divided by a reference point 10% past the
   worst value either found (a run that missed 90% counts as twice its virtual time, as the
   study counts it), so 1 is the whole box.

Both use --jobs 2. Run: `python -m benchmarks tune` (quick: an 18-point grid and 6 trials, 8
runs a side for the front; `--full`: 48 points, 16 trials, 18 runs a side): the study has a third
of the grid's runs."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.records.objectives import pareto_front, run_metrics
from testbed.records.store import Store

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "experiments" / "quickstart.toml"
LOW, HIGH = 0.5, 50.0
TARGET, BUDGET_S = 0.95, 5.0
FRONT_TARGET = 0.90
BASE = ["--set", "run.stop_at_accuracy=true", "--set", "run.eval_every=10", "--quiet",
        "--jobs", "2"]


def testbed(*args: str) -> float:
    """Wall seconds of one `testbed` process (this checkout's)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "testbed.cli", *args], env=env,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise RuntimeError(f"testbed {args[0]} exited {out.returncode}: "
                           f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return wall


def log_grid(low: float, high: float, n: int) -> list[float]:
    return [float(f"{low * (high / low) ** (i / (n - 1)):.4g}") for i in range(n)]


def runs_with_metrics(store: Path, target: float) -> list[dict]:
    with Store(store, readonly=True) as s:
        out = []
        for r in s.runs():
            r["metrics"] = run_metrics(s, r["id"], target)
            out.append(r)
        return out


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def least_bandwidth(tmp: Path, points: int, trials: int) -> dict:
    sets = ["--set", "run.iterations=150", "--set", f"run.target_accuracy={TARGET}"]
    grid = log_grid(LOW, HIGH, points)
    grid_store, tune_store = tmp / "grid.db", tmp / "tune.db"
    grid_wall = testbed("sweep", str(FILE), "--store", str(grid_store), *BASE, *sets,
                        "--grid", "network.link.bandwidth_mbps=" + ",".join(map(str, grid)))
    tune_wall = testbed("tune", str(FILE), "--store", str(tune_store), "--name", "least-bw",
                        *BASE, *sets, "--param", f"network.link.bandwidth_mbps={LOW}:{HIGH}:log",
                        "--objective", "network.link.bandwidth_mbps",
                        "--constraint", f"virtual_s_to_target<={BUDGET_S}",
                        "--budget-s", str(BUDGET_S), "--trials", str(trials))
    grid_runs = runs_with_metrics(grid_store, TARGET)
    meets = [r["bandwidth_mbps"] for r in grid_runs if r["metrics"]["reached"]
             and r["metrics"]["virtual_s_to_target"] <= BUDGET_S]
    tune_runs = runs_with_metrics(tune_store, TARGET)
    feasible = [r["bandwidth_mbps"] for r in tune_runs if r["status"] == "completed"
                and r["metrics"]["reached"] and r["metrics"]["virtual_s_to_target"] <= BUDGET_S]
    grid_answer = min(meets) if meets else None
    tune_answer = min(feasible) if feasible else None

    def cost(status: str) -> tuple[int, float, float]:
        these = [r for r in tune_runs if r["status"] == status]
        its = sum((r["last_iteration"] or 0) + 1 for r in these)
        wall = sum(r["metrics"]["wall_s"] or 0.0 for r in these)
        return len(these), its, wall

    pruned, completed = cost("pruned"), cost("completed")
    grid_its = sum((r["last_iteration"] or 0) + 1 for r in grid_runs)
    grid_run_wall = sum(r["metrics"]["wall_s"] or 0.0 for r in grid_runs)
    ratio = tune_answer / grid_answer if tune_answer and grid_answer else None
    print(f"least bandwidth reaching {TARGET:.0%} within {BUDGET_S:g} virtual s, in "
          f"[{LOW:g}, {HIGH:g}] Mb/s:")
    print(f"  {'':24s} {'answer (Mb/s)':>14s} {'runs':>5s} {'iterations':>11s} {'wall s':>8s}")
    print(f"  {f'grid ({points} log points)':24s} {_f(grid_answer):>14s} {len(grid_runs):5d} "
          f"{grid_its:11d} {grid_wall:8.1f}")
    print(f"  {f'testbed tune ({trials} trials)':24s} {_f(tune_answer):>14s} {len(tune_runs):5d} "
          f"{pruned[1] + completed[1]:11d} {tune_wall:8.1f}")
    print(f"  tune / grid answer: {_f(ratio)} (the grid's step: x{(HIGH / LOW) ** (1 / (points - 1)):.3f});"
          f" runs: tune {len(tune_runs) / len(grid_runs):.2f}x the grid's; wall: tune "
          f"{tune_wall / grid_wall:.2f}x the grid's")
    for name, (n, its, wall) in (("pruned", pruned), ("completed", completed)):
        print(f"  {name:9s} trials: {n:3d}, {its / n if n else 0:6.1f} iterations and "
              f"{wall / n if n else 0:5.2f} run wall s each ({its} iterations, {wall:.1f} s in all)")
    print(f"  a grid run: {grid_its / len(grid_runs):.1f} iterations, "
          f"{grid_run_wall / len(grid_runs):.2f} run wall s each")
    return {"grid_answer": grid_answer, "tune_answer": tune_answer, "ratio": ratio,
            "grid_runs": len(grid_runs), "tune_runs": len(tune_runs), "grid_wall_s": grid_wall,
            "tune_wall_s": tune_wall, "pruned": pruned, "completed": completed,
            "grid_iterations": grid_its}


def hypervolume(points: list[tuple[float, float]], ref: tuple[float, float]) -> float:
    """The area dominated by `points` (both minimised) inside the box up to `ref`."""
    front = sorted(p for i, p in enumerate(points)
                   if i in pareto_front(points, ["min", "min"]) and p[0] < ref[0] and p[1] < ref[1])
    area, last_y = 0.0, ref[1]
    for x, y in front:
        if y < last_y:
            area += (ref[0] - x) * (last_y - y)
            last_y = y
    return area


def two_objectives(tmp: Path, methods: list[str], ratios: int) -> dict:
    n = len(methods) * ratios
    grid_ratios = log_grid(0.001, 0.1, ratios)
    sets = ["--set", "run.iterations=120", "--set", f"run.target_accuracy={FRONT_TARGET}"]
    grid_store, tune_store = tmp / "front-grid.db", tmp / "front-tune.db"
    grid_wall = testbed("sweep", str(FILE), "--store", str(grid_store), *BASE, *sets,
                        "--grid", "compression.method=" + ",".join(methods),
                        "--grid", "compression.ratio=" + ",".join(map(str, grid_ratios)))
    tune_wall = testbed("tune", str(FILE), "--store", str(tune_store), "--name", "front",
                        *BASE, *sets, "--param", "compression.method=" + ",".join(methods),
                        "--param", "compression.ratio=0.001:0.1:log",
                        "--objective", "virtual_s_to_target", "--objective", "bits_up",
                        "--trials", str(n))

    def objectives(store: Path) -> list[tuple[float, float, str]]:
        out = []
        for r in runs_with_metrics(store, FRONT_TARGET):
            m = r["metrics"]
            if r["status"] == "completed" and m["virtual_s_to_target"] is not None:
                cfg = (r["sweep_params"] or {})
                out.append((m["virtual_s_to_target"], float(m["bits_up"]),
                            f"{cfg.get('method')}@{float(cfg.get('ratio')):.3g}"))
        return out

    grid, tune = objectives(grid_store), objectives(tune_store)
    every = [(a, b) for a, b, _ in grid + tune]
    ref = (1.1 * max(a for a, _ in every), 1.1 * max(b for _, b in every))
    unit = [(a / ref[0], b / ref[1]) for a, b in every]
    hv_grid = hypervolume(unit[:len(grid)], (1.0, 1.0))
    hv_tune = hypervolume(unit[len(grid):], (1.0, 1.0))
    print(f"two objectives (virtual s to {FRONT_TARGET:.0%}, uplink bits) over "
          f"compression.method ({', '.join(methods)}) and compression.ratio in [0.001, 0.1]:")
    for name, pts, hv, wall in (("grid", grid, hv_grid, grid_wall), ("tune", tune, hv_tune, tune_wall)):
        front = sorted(pts[i] for i in pareto_front([(a, b) for a, b, _ in pts], ["min", "min"]))
        shown = ", ".join(f"{label} ({a:.2f} s, {b / 1e6:.2f} Mbit)" for a, b, label in front)
        print(f"  {name}: {len(pts)} runs, {wall:.1f} s wall, hypervolume {hv:.4f}; front: {shown}")
    print(f"  hypervolume tune / grid: {hv_tune / hv_grid:.3f} (reference point: "
          f"{ref[0]:.2f} s, {ref[1] / 1e6:.2f} Mbit)")
    return {"runs_each": n, "hv_grid": hv_grid, "hv_tune": hv_tune, "grid_wall_s": grid_wall,
            "tune_wall_s": tune_wall}


def _f(v) -> str:
    return "none" if v is None else f"{v:.4g}"


def main(quick: bool = True) -> dict:
    # the study gets a third of the grid's runs: the budget it must find the answer within
    points, trials = (18, 6) if quick else (48, 16)
    methods, ratios = (["topk", "dgc"], 4) if quick else (["topk", "randomk", "dgc"], 6)
    before = load()
    print(f"load before: {before}; {os.cpu_count()} CPUs; {FILE.relative_to(ROOT)}, --jobs 2 "
          f"each way", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        least = least_bandwidth(Path(tmp), points, trials)
        front = two_objectives(Path(tmp), methods, ratios)
    after = load()
    print(f"load after: {after}")
    return {"least_bandwidth": least, "front": front, "load_before": before, "load_after": after,
            "quick": quick, "budget_s": BUDGET_S, "target": TARGET}


if __name__ == "__main__":
    main(quick="--full" not in sys.argv)
