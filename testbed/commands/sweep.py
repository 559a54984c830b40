"""`testbed sweep FILE --grid key=v1,v2 ...`: the cartesian product of the grids, one run each.

Each run is named `BASE[key=value,...]` (the last part of each grid key) and recorded as a
member of sweep BASE at those values in the store's sweep columns, which the dashboard's sweep
view groups by. The points run through the sweep engine (testbed/sweeps.py): `--jobs N` at once
on this machine, or as Ray tasks with `--ray`; the same command again skips the points that
completed."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

from lgc_schema import OptionError
from testbed.commands import add_store_arg, ray_working_dir
from testbed.configuration.loading import load_config, load_raw
from testbed.sweeps import Point, run_sweep, start_worker_server, sweep_key


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of variants of one experiment file")
    p.add_argument("file")
    add_store_arg(p)
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="e.g. --grid compression.method=none,dgc,lgc_ps "
                        "--grid network.link.bandwidth_mbps=1,5,20 (repeatable)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seeds", default=None, metavar="S1,S2,...", help="shorthand for --grid run.seed=...")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="runs at once, each in a process of its own (default: this machine's "
                        "CPUs divided by run.threads); with --ray, the CPUs of a local Ray")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run each point as a Ray task: alone, on a Ray started here with --jobs "
                        "CPUs; 'auto' or an address: on that cluster (pip install 'lgc-testbed[cluster]')")
    p.add_argument("--ray-working-dir", default=None, metavar="DIR",
                   help="with --ray: upload DIR (holding FILE and your own modules) to every node "
                        "and run each point there (Ray's runtime_env working_dir)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=main)


def parse_grid(items: list[str]) -> list[tuple[str, list[str]]]:
    grid = []
    for item in items:
        if "=" not in item or not item.split("=", 1)[1]:
            raise OptionError("--grid", item, "of the form key.path=v1,v2")
        key, values = item.split("=", 1)
        grid.append((key.strip(), [v.strip() for v in values.split(",") if v.strip()]))
    return grid


def variants(grid: list[tuple[str, list[str]]]):
    keys = [k for k, _ in grid]
    for combo in itertools.product(*[vals for _, vals in grid]):
        yield list(zip(keys, combo))


def points_of(file: str, grid, overrides: list[str]) -> tuple[str, list[Point]]:
    """The sweep's name and its points; every point's settings are checked here, before any
    runs (a bad value is the user's: exit 2)."""
    base = load_raw(file).get("run", {}).get("name") or Path(file).stem
    points = []
    for i, combo in enumerate(variants(grid), 1):
        sets = [*overrides, *(f"{k}={v}" for k, v in combo)]
        cfg = load_config(file, sets)
        label = ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in combo)
        points.append(Point(index=i, name=f"{base}[{label}]", file=str(Path(file).resolve()),
                            overrides=sets, params={k.rsplit(".", 1)[-1]: v for k, v in combo},
                            threads=cfg.run.threads or 1, device=cfg.run.device))
    return base, points


def default_jobs(points: list[Point]) -> int:
    """As many runs as this machine has CPUs for, at run.threads each."""
    threads = max((p.threads for p in points), default=1)
    return max(1, (os.cpu_count() or 1) // threads)


def working_dir(points: list[Point], args) -> dict:
    """Ray's runtime environment for --ray-working-dir; each point's file becomes its path
    inside DIR (a task runs in its node's copy of DIR)."""
    folder = ray_working_dir(args)
    for point in points:
        point.file = str(Path(point.file).relative_to(folder))
    return {"working_dir": str(folder)}


def main(args) -> int:
    grid = parse_grid(args.grid + ([f"run.seed={args.seeds}"] if args.seeds else []))
    if not grid:
        raise OptionError("--grid", None, "given at least once (--grid key.path=v1,v2)")
    if args.jobs is not None and args.jobs < 1:
        raise OptionError("--jobs", args.jobs, "a whole number of runs at once, 1 or more")
    if args.ray is None and (args.jobs or os.cpu_count() or 1) > 1:
        start_worker_server()   # its imports go on while the points are checked here
    base, points = points_of(args.file, grid, args.overrides)
    key = sweep_key(args.file, parse_grid(args.grid), args.overrides, args.seeds)
    spec = {"file": str(Path(args.file).resolve()), "grid": args.grid,
            "overrides": args.overrides, "seeds": args.seeds}
    ray_env = working_dir(points, args) if args.ray_working_dir else None
    outcomes = run_sweep(points, args.store, sweep=base, key=key, spec=spec,
                         jobs=args.jobs or default_jobs(points), ray=args.ray, ray_env=ray_env,
                         quiet=args.quiet)
    completed = sum(o.status in ("completed", "skipped") for o in outcomes)
    print(f"sweep done: {completed} of {len(outcomes)} runs completed -> {args.store}")
    return 0 if completed == len(outcomes) else 1
