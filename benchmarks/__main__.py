"""`python -m benchmarks [--full] [--out FILE] [NAME ...]`: run each bench_*.py module's main()
and print tables.

Quick versions by default (what `make bench` runs); `--full` runs the long ones. `--out FILE`
also writes JSON: the commit, the date, the load average before and after, the machine, and per
bench its wall time and the figures its main() returns (a dict or a list of rows, where it returns one; its
repetitions among them).
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import json
import os
import platform
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def discover() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help="bench modules to run (default: all), e.g. channels")
    parser.add_argument("--full", action="store_true", help="the long versions")
    parser.add_argument("--out", metavar="FILE", help="also write the figures as JSON to FILE")
    args = parser.parse_args(argv)
    names = discover()
    if args.names:
        wanted = {n if n.startswith("bench_") else f"bench_{n}" for n in args.names}
        unknown = wanted - set(names)
        if unknown:
            print(f"unknown benchmark(s): {', '.join(sorted(unknown))}; known: {', '.join(names)}",
                  file=sys.stderr)
            return 2
        names = [n for n in names if n in wanted]
    failed = []
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    record = {"commit": _commit(), "date": now, "load_average_before": os.getloadavg(),
              "machine": _machine(), "mode": "full" if args.full else "quick", "benchmarks": {}}
    for name in names:
        mod = importlib.import_module(f"benchmarks.{name}")
        print(f"\n=== {name} ({'full' if args.full else 'quick'}) ===", flush=True)
        t0 = time.perf_counter()
        params = inspect.signature(mod.main).parameters
        figures = None
        try:
            if "quick" in params:
                figures = mod.main(quick=not args.full)
            elif "argv" in params:
                figures = mod.main([] if args.full else ["--quick"])
            else:
                figures = mod.main()
        except Exception as e:  # one broken bench must not hide the others' tables
            failed.append(name)
            print(f"{name} failed: {type(e).__name__}: {e}", file=sys.stderr)
        wall = time.perf_counter() - t0
        print(f"--- {name}: {wall:.1f} s wall", flush=True)
        record["benchmarks"][name] = {"wall_s": round(wall, 3), "failed": name in failed,
                                      "figures": figures if isinstance(figures, (dict, list)) else None}
    if args.out:
        record["load_average_after"] = os.getloadavg()
        Path(args.out).write_text(json.dumps(record, indent=2, default=str) + "\n")
        print(f"figures written to {args.out}")
    return 1 if failed else 0


def _commit() -> str:
    """HEAD's hash, "+dirty" when the working tree differs from it; "unknown" outside git."""
    def git(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


def _machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor())
    return {"host": platform.node(), "platform": platform.platform(), "cpu": cpu,
            "cpus": os.cpu_count(), "python": platform.python_version()}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""

if __name__ == "__main__":
    sys.exit(main())
