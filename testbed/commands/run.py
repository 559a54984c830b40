"""`testbed run FILE`: one experiment, with a progress bar, into the store."""
from __future__ import annotations

import sys
import time

from testbed.commands import add_store_arg, fail


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


def progress_printer(total: int, quiet: bool):
    """A tqdm bar showing iteration, accuracy, virtual time and bits per iteration."""
    if quiet:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="it", dynamic_ncols=True, file=sys.stderr)

    def update(p) -> None:
        bar.n = p.iteration
        acc = "-" if p.accuracy is None else f"{100 * p.accuracy:.1f}%"
        bar.set_postfix_str(f"acc {acc} | vt {p.virtual_time_s:.2f}s | "
                            f"{p.bits / 1e3:.1f} kbit/it | {p.stage}", refresh=False)
        bar.update(0)

    return update, bar.close


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


def summary_line(store, run_id: int, name: str) -> str:
    """`run N (name) completed: ...` with the final accuracy, virtual time and bytes."""
    evals = store.evals(run_id)
    its = store.iterations(run_id)
    acc = f"{100 * evals[-1]['test_accuracy']:.2f}%" if evals else "n/a"
    vt = its[-1]["virtual_time_s"] if its else 0.0
    bits = sum(r["bits_up"] + r["bits_down"] for r in its)
    return (f"run {run_id} ({name}) completed: {len(its)} iterations, test accuracy {acc}, "
            f"virtual time {vt:.2f} s, {bits / 8e6:.3f} MB on the wire")
