"""Measure how far the golden runs' float reductions move between torch's CPU kernel paths,
the figures compare.TOLERANCE and compare.BANDS are chosen from.

    .venv/bin/python tests/testbed/golden/spread.py OUT [--capabilities default,avx2,avx512] [NAME ...]

Each capability runs every fixture (or the NAMEs) again in its own process under
ATEN_CPU_CAPABILITY=<capability> (a capability the CPU lacks falls back to what it has: the
process prints the one it got), writing OUT/<capability>/<name>.json. Then, per REDUCED column,
the largest relative difference between any two paths and the fixture before the rows part
(where a selection went another way: see compare.py), where they part, how far the run's totals
move after it, and what compare.mismatches still reports (there must be nothing). Writes
OUT/spread.json. `--compare-only` recomputes the figures from OUT without running again.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import compare  # noqa: E402  (this folder's)

FIXTURES = sorted(p.name[:-len(".json.xz")] for p in compare.ROWS.glob("*.json.xz")
                  if not p.name.endswith(".stopped.db.xz"))


def run_one(name: str, folder: Path) -> dict:
    if name in compare.RESUMED:
        from testbed.cli import main
        from testbed.records.store import Store
        db = compare.stopped_store(name, folder)
        assert main(["resume", "1", "--store", str(db), "--quiet"]) == 0
        with Store(db) as store:
            return compare.exported(store, 1)
    return compare.rerun(name, folder)


def child(out: Path, names: list[str]) -> None:
    """In a process whose ATEN_CPU_CAPABILITY is set: each run, written to `out`."""
    import torch
    torch.set_num_threads(1)
    print("capability", torch.backends.cpu.get_cpu_capability(), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            (out / f"{name}.json").write_text(json.dumps(run_one(name, Path(tmp))))
        print("ran", name, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("names", nargs="*", default=None)
    ap.add_argument("--capabilities", default="default,avx2,avx512")
    ap.add_argument("--compare-only", action="store_true", help="figures from OUT as it is")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    out, names = Path(args.out), args.names or FIXTURES
    if args.child:
        child(out / args.child, names)
        return
    caps = [c.strip() for c in args.capabilities.split(",") if c.strip()]
    for cap in [] if args.compare_only else caps:
        env = {**os.environ, "ATEN_CPU_CAPABILITY": cap, "OMP_NUM_THREADS": "1"}
        subprocess.run([sys.executable, __file__, str(out), *names, "--child", cap], env=env, check=True)
    spread, totals, parts, failures = {}, {}, [], []
    for name in names:
        docs = {"fixture": compare.fixture(name),
                **{c: json.loads((out / c / f"{name}.json").read_text()) for c in caps}}
        for (a, da), (b, db) in combinations(docs.items(), 2):
            pair = f"{name}: {a} vs {b}"
            part = compare.parting(da, db)
            before = 10 ** 9 if part is None else part
            for table in compare.TABLES:
                for x, y in zip(da.get(table) or [], db.get(table) or []):
                    if x["iteration"] < before:
                        for key, d in compare.relative_spread(x, y).items():
                            if d > spread.get(key, (0.0,))[0]:
                                spread[key] = (d, pair)
            if part is not None:
                parts.append(f"{pair}: part at iteration {part} of {len(da['iterations'])}")
                ta, tb = compare._totals(da), compare._totals(db)
                for key in compare.BANDS:
                    d = abs(ta[key] - tb[key]) if key == "test_accuracy" else \
                        abs(ta[key] - tb[key]) / max(abs(ta[key]), 1e-300)
                    if d > totals.get(key, (0.0,))[0]:
                        totals[key] = (d, pair)
            failures += [f"{pair}: {d}" for d in compare.mismatches(da, db)]
    report = {"capabilities": caps, "fixtures": names, "reduced_before_parting": spread,
              "totals_after_parting": totals, "partings": parts, "mismatches": failures}
    (out / "spread.json").write_text(json.dumps(report, indent=1))
    print("largest relative difference before the rows part (TOLERANCE):")
    for key, (d, where) in sorted(spread.items()):
        print(f"  {key:18s} {d:.2e}  ({where})")
    print("where the rows part:", *parts, sep="\n  ")
    print("largest difference of the totals after the parting (BANDS):")
    for key, (d, where) in sorted(totals.items()):
        print(f"  {key:18s} {d:.2e}  ({where})")
    print(f"{len(failures)} mismatches by compare.mismatches", *failures[:20], sep="\n")

if __name__ == "__main__":
    main()
