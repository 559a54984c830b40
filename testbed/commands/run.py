"""`testbed run FILE`: one experiment, with a progress bar, into the store."""
from __future__ import annotations

import sys
import time

from testbed.commands import add_store_arg, fail
from testbed.progress import progress_printer, summary_line


def register(sub) -> None:
    p = sub.add_parser("run", help="run one experiment file")
    p.add_argument("file", help="experiment TOML file")
    add_store_arg(p)
    p.add_argument("--name", help="run name (default: [run] name or the file's stem)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key, e.g. --set network.link.bandwidth_mbps=5 (repeatable)")
    p.add_argument("--launcher", choices=["local", "torchrun"], default="local",
                   help="local: all workers in this process; torchrun: one process per worker")
    p.add_argument("--nproc", type=int, default=None,
                   help="with --launcher torchrun: processes per host (default: the file's workers)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def load(args):
    """Config with CLI overrides, or an exit code 2 with the one-line error."""
    from testbed.config import ConfigError, load_config

    overrides = list(args.overrides)
    if getattr(args, "name", None):
        overrides.append(f"run.name={args.name!r}".replace("'", '"'))
    try:
        return load_config(args.file, overrides), 0
    except ConfigError as e:
        return None, fail(str(e), 2)


def main(args) -> int:
    cfg, code = load(args)
    if cfg is None:
        return code
    if args.launcher == "torchrun":
        from testbed.launch import launch_torchrun

        return launch_torchrun(args, cfg)
    from testbed.experiment import Experiment, ExperimentError
    from testbed.store import Store

    store = Store(args.store)
    try:
        exp = Experiment(cfg, store)
    except (ExperimentError, ValueError, FileNotFoundError, KeyError) as e:
        store.close()
        return fail(str(e).strip("'\""), 2)
    update, close = progress_printer(exp.iterations, args.quiet)
    exp.progress = update
    wall = time.perf_counter()
    try:
        run_id = exp.run()
    except KeyboardInterrupt:
        close()
        store.close()
        print(f"run {exp.run_id} stopped; rows so far are in {args.store}", file=sys.stderr)
        return 130
    except Exception as e:  # the store already marked the run failed
        close()
        store.close()
        return fail(f"run {exp.run_id} failed: {e}")
    close()
    line = summary_line(store, run_id, cfg.run.name)
    store.close()
    print(f"{line}, wall time {time.perf_counter() - wall:.1f} s -> {args.store}")
    return 0
