"""`python -m benchmarks [--full] [NAME ...]`: run each bench_*.py module's main() and print tables.

Quick versions by default (what `make bench` runs); `--full` runs the long ones.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import time
from pathlib import Path


def discover() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help="bench modules to run (default: all), e.g. channels")
    parser.add_argument("--full", action="store_true", help="the long versions")
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
    for name in names:
        mod = importlib.import_module(f"benchmarks.{name}")
        print(f"\n=== {name} ({'full' if args.full else 'quick'}) ===", flush=True)
        t0 = time.perf_counter()
        params = inspect.signature(mod.main).parameters
        try:
            if "quick" in params:
                mod.main(quick=not args.full)
            elif "argv" in params:
                mod.main([] if args.full else ["--quick"])
            else:
                mod.main()
        except Exception as e:  # one broken bench must not hide the others' tables
            failed.append(name)
            print(f"{name} failed: {type(e).__name__}: {e}", file=sys.stderr)
        print(f"--- {name}: {time.perf_counter() - t0:.1f} s wall", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
