"""`testbed sweep FILE --grid key=v1,v2 ...`: the cartesian product of the grids, one run each.

Each run is named `BASE[key=value,...]` (the last part of each grid key) and recorded as a
member of sweep BASE at those values in the store's sweep columns (`Store.set_sweep`), which
the dashboard's sweep view groups by."""
from __future__ import annotations

import itertools
import sys
import time

from lgc_schema import OptionError
from testbed.commands import add_store_arg
from testbed.commands import run as run_cmd
from testbed.config import load_raw
from testbed.errors import RunFailed
from testbed.distributed.launcher import RunSpec
from testbed.store import RunNotFound, Store


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of variants of one experiment file")
    p.add_argument("file")
    add_store_arg(p)
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="e.g. --grid compression.method=none,dgc,lgc_ps "
                        "--grid network.link.bandwidth_mbps=1,5,20 (repeatable)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seeds", default=None, metavar="S1,S2,...", help="shorthand for --grid run.seed=...")
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


def record_member(store_path: str, name: str, since: float, base: str, params: dict[str, str]) -> None:
    """Mark the run made under `name` since `since` (its newest, if it was made) as a member
    of sweep `base` at `params`: done after the run, so it holds for either launcher."""
    with Store(store_path) as store:
        try:
            run = store.run(name)
        except RunNotFound:
            return
        if (run["started_at"] or 0) >= since:
            store.set_sweep(run["id"], base, params)


def main(args) -> int:
    grid = parse_grid(args.grid + ([f"run.seed={args.seeds}"] if args.seeds else []))
    if not grid:
        raise OptionError("--grid", None, "given at least once (--grid key.path=v1,v2)")
    base = load_raw(args.file).get("run", {}).get("name") or args.file.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    failures = 0
    combos = list(variants(grid))
    for i, combo in enumerate(combos, 1):
        label = ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in combo)
        print(f"[{i}/{len(combos)}] {base}[{label}]", flush=True)
        sets = [f"{k}={v}" for k, v in combo]
        since = time.time()
        try:
            run_cmd.run(RunSpec(store=args.store, file=args.file, name=f"{base}[{label}]",
                                overrides=(*args.overrides, *sets), quiet=args.quiet))
        except RunFailed as e:  # the next variant may well run: say so and go on
            print(f"testbed: error: {e}", file=sys.stderr)
            failures += 1
        record_member(args.store, f"{base}[{label}]", since, base,
                      {k.rsplit(".", 1)[-1]: v for k, v in combo})
    print(f"sweep done: {len(combos) - failures} of {len(combos)} runs completed -> {args.store}")
    return 1 if failures else 0
