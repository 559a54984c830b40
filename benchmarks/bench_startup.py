"""Start-up: a 10-iteration quickstart run in a fresh process (`testbed run
experiments/quickstart.toml --set run.iterations=10`) against a bare `python -c "import torch"`,
the two interleaved, each repeated, medians compared; the run's own iterations' wall time (its
summary line) beside them. Target: the run within 2 s, or within 1.5x of the bare import plus
its iterations, whichever is larger. Then, from one more run under `python -X importtime`, the
imports that run paid, by top-level package (what it should not load: scikit-learn).

Run: `python -m benchmarks startup` (5 repetitions; `--full`: 10)."""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "experiments" / "quickstart.toml"
TARGET_S, TARGET_RATIO = 2.0, 1.5
WALL = re.compile(r"wall time ([0-9.]+) s")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def bare_import() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True, env=_env())
    return time.perf_counter() - t0


def run_command(store: Path, *flags: str) -> list[str]:
    return [sys.executable, *flags, "-m", "testbed.cli", "run", str(FILE), "--set", "run.iterations=10",
            "--store", str(store), "--quiet"]


def fresh_run(store: Path) -> tuple[float, float]:
    """(wall seconds of the whole process, wall seconds of its iterations as it reports them)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    t0 = time.perf_counter()
    out = subprocess.run(run_command(store), check=True, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    found = WALL.search(out.stdout)
    return wall, float(found.group(1)) if found else float("nan")


def top_level_imports(store: Path) -> dict[str, float]:
    """Seconds of each import one run made from its own code (`-X importtime`'s top-level
    lines: the cumulative time, what the import pulled in included: torch goes to the first
    module of ours that imports it)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    out = subprocess.run(run_command(store, "-X", "importtime"), check=True, env=_env(),
                         capture_output=True, text=True)
    top: dict[str, float] = {}
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if not name.startswith("  "):      # not nested in another import
            top[name.strip()] = top.get(name.strip(), 0.0) + int(cumulative) / 1e6
    return top


def main(quick: bool = True) -> dict:
    reps = 5 if quick else 10
    load_before = os.getloadavg()[0]
    bare, runs, iters = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        store = Path(tmp) / "run.db"
        fresh_run(store)               # page cache and compiled bytecode warm for both
        for _ in range(reps):          # interleaved: load that comes and goes hits both alike
            bare.append(bare_import())
            wall, it = fresh_run(store)
            runs.append(wall)
            iters.append(it)
        imports = top_level_imports(store)
    load_after = os.getloadavg()[0]
    b, r, i = statistics.median(bare), statistics.median(runs), statistics.median(iters)
    target = max(TARGET_S, TARGET_RATIO * (b + i))
    print(f"load {load_before:.2f} before, {load_after:.2f} after; {os.cpu_count()} CPUs; "
          f"{reps} repetitions, interleaved; medians")
    print(f"bare `python -c 'import torch'`     {b:6.2f} s  (min {min(bare):.2f}, max {max(bare):.2f})")
    print(f"10-iteration quickstart run          {r:6.2f} s  (min {min(runs):.2f}, max {max(runs):.2f}); "
          f"its iterations {i:.2f} s")
    print(f"run / bare import: {r / b:.2f}x; run - bare import - iterations: {r - b - i:.2f} s")
    print(f"target: within max({TARGET_S:.0f} s, {TARGET_RATIO}x (import + iterations) = "
          f"{TARGET_RATIO * (b + i):.2f} s) = {target:.2f} s: {'met' if r <= target else 'NOT met'}")
    top = sorted(imports.items(), key=lambda kv: -kv[1])[:8]
    print("one run's imports, top level, each with what it pulled in (torch under the first "
          "module that imports it) (s): " + ", ".join(f"{k} {v:.2f}" for k, v in top)
          + f"; scikit-learn loaded: {any(k.startswith('sklearn') for k in imports)}")
    return {"repetitions": reps, "load_before": load_before, "load_after": load_after,
            "bare_import_torch_s": bare, "run_10_iterations_s": runs, "iterations_s": iters,
            "median_ratio_run_to_bare_import": r / b, "target_s": target, "met": r <= target,
            "imports_s": imports}


if __name__ == "__main__":
    main()
