"""`testbed sweep FILE --grid key=v1,v2 ...`: the cartesian product of the grids, one run each."""
from __future__ import annotations

import itertools
import sys

from testbed.commands import add_store_arg
from schema import OptionError
from testbed.errors import RunFailed
from testbed.launcher import RunSpec


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


def main(args) -> int:
    from testbed.commands import run as run_cmd
    from testbed.config import load_raw

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
        try:
            run_cmd.run(RunSpec(store=args.store, file=args.file, name=f"{base}[{label}]",
                                overrides=(*args.overrides, *sets), quiet=args.quiet))
        except RunFailed as e:  # the next variant may well run: say so and go on
            print(f"testbed: error: {e}", file=sys.stderr)
            failures += 1
    print(f"sweep done: {len(combos) - failures} of {len(combos)} runs completed -> {args.store}")
    return 1 if failures else 0
