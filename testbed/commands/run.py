"""`testbed run FILE`: one experiment, with a progress bar, into the store (testbed.api does
the work: `testbed run` and a script's `api.run` are the same calls)."""
from __future__ import annotations

from testbed import api
from testbed.commands import add_store_arg
from testbed.runspec import RunSpec


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


def main(args) -> int:
    return run(spec_of(args))


def run(spec: RunSpec) -> int:
    """The run `spec` asks for, in this process or under torchrun; its exit code (the Python
    API's `run_spec`: the command is a thin layer over testbed.api)."""
    return api.run_spec(spec)
