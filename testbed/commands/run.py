"""`testbed run FILE`: one experiment, with a progress bar, into the store."""
from __future__ import annotations

import contextlib
import sqlite3
import sys
import time
from pathlib import Path

from channels.errors import DeliveryError
from lgc_schema import OptionError
from testbed.commands import add_store_arg
from testbed.config import load_config
from testbed.errors import RunFailed, SetupError
from testbed.distributed.launcher import RunSpec, launch_torchrun
from testbed.progress import progress_printer, summary_line
from testbed.store import Store


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
                   help="with --launcher torchrun: processes per host (default: the file's workers; "
                        "[federated]: 1 to clients per exchange, default min(that, CPUs))")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def spec_of(args) -> RunSpec:
    """The run `testbed run`'s arguments ask for."""
    return RunSpec(store=args.store, file=args.file, overrides=tuple(args.overrides),
                   name=args.name, launcher=args.launcher, nproc=args.nproc, quiet=args.quiet)


def load(spec: RunSpec):
    """The experiment file with the CLI's overrides (a ConfigError is the user's: exit 2)."""
    overrides = list(spec.overrides)
    if spec.name:
        overrides.append(f"run.name={spec.name!r}".replace("'", '"'))
    return load_config(spec.file, overrides)


def build_experiment(cfg, store):
    """The Experiment of `cfg`; what its set-up refuses is the user's (SetupError, exit 2)."""
    from testbed.experiment import Experiment, ExperimentError

    try:
        return Experiment(cfg, store)
    except (ExperimentError, ValueError, FileNotFoundError) as e:
        raise SetupError(f"{cfg.source}: {e}") from e


def run_failures() -> tuple[type, ...]:
    """Errors with which a started run fails for a reason it names (exit 1, one line); any
    other exception in a run is a bug and stays a traceback. An OptionError here is a setting
    the link layer finds it cannot carry only once the run sends (e.g. network.engine = "fast"
    for a multi-hop call over a fading link): the run was made, so it failed (exit 1)."""
    from nodes.compression.base import GradientError
    from testbed.experiment import ExperimentError
    from testbed.transport import TransportError

    return (ExperimentError, DeliveryError, GradientError, TransportError, OptionError)


@contextlib.contextmanager
def opened_store(path: str):
    """The store at `path`; if it did not exist and the block fails before a run began, the
    files made for it are removed again (a refused run leaves no trace)."""
    new = not Path(path).exists()
    store = Store(path)
    try:
        yield store
    except BaseException:
        try:
            began = bool(store.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
            store.close()
        except sqlite3.Error:  # the store itself broke: leave it as it is for the user to see
            began = True
        if new and not began:
            for suffix in ("", "-wal", "-shm"):
                Path(path + suffix).unlink(missing_ok=True)
        raise
    store.close()


def main(args) -> int:
    return run(spec_of(args))


def run(spec: RunSpec) -> int:
    """The run `spec` asks for, in this process or under torchrun; its exit code."""
    cfg = load(spec)
    if spec.launcher == "torchrun":
        return launch_torchrun(spec, cfg)
    with opened_store(spec.store) as store:
        exp = build_experiment(cfg, store)
        return run_experiment(exp, store, spec)


def run_experiment(exp, store, spec: RunSpec) -> int:
    """Run `exp` with a progress bar; its one summary line, or the one line of its failure."""
    update, close = progress_printer(exp.iterations, spec.quiet)
    exp.progress = update
    wall = time.perf_counter()
    try:
        run_id = exp.run()
    except KeyboardInterrupt:  # SIGINT or SIGTERM: the run is marked stopped, rows flushed
        close()
        print(f"run {exp.run_id} stopped; rows so far are in {spec.store}", file=sys.stderr)
        raise
    except run_failures() as e:  # the run is already marked failed in the store
        close()
        raise RunFailed(f"run {exp.run_id} failed: {e}") from e
    except BaseException:
        close()
        raise
    close()
    line = summary_line(store, run_id, exp.cfg.run.name)
    print(f"{line}, wall time {time.perf_counter() - wall:.1f} s -> {spec.store}")
    return 0
