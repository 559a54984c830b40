"""`testbed flower run APP_DIR`: a Flower app, unchanged, with every message on the emulated
links (testbed/flower/)."""
from __future__ import annotations

import time

from channels.errors import DeliveryError
from testbed.api import opened_store
from testbed.commands import add_store_arg
from testbed.errors import RunFailed, TransportError
from testbed.records.progress import summary_line


def register(sub) -> None:
    p = sub.add_parser("flower", help="run a Flower app over the emulated edge")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="run")
    r = verbs.add_parser("run", help="run a Flower app (a folder with a pyproject.toml, as "
                         "`flwr run` takes it) over the emulated edge")
    r.add_argument("app", help="the app's folder (its pyproject.toml names serverapp and clientapp)")
    r.add_argument("--network", metavar="FILE.toml", help="an experiment file whose [network], "
                   "[run] and [compression] set the edge (default: a 20 Mbit/s 802.11 cell, one "
                   "worker per node)")
    add_store_arg(r)
    r.add_argument("--name", help="run name (default: the app folder's name)")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the experiment file, e.g. --set "
                        "network.link.bandwidth_mbps=5 (repeatable)")
    r.add_argument("--run-config", dest="run_config", action="append", default=[],
                   metavar="KEY=VALUE", help="override a key of the app's [tool.flwr.app.config], "
                   "e.g. --run-config num-server-rounds=3 (repeatable)")
    r.add_argument("--federation", help="the federation of the app's pyproject.toml whose "
                   "options.num-supernodes is the node count (default: its default)")
    r.add_argument("--federation-config", dest="federation_config", action="append", default=[],
                   metavar="\"KEY=VALUE ...\"", help="the federation's simulation options as "
                   "`flwr run --federation-config` takes them, e.g. \"num-supernodes=100 "
                   "client-resources-num-cpus=1\" (with --set run.threads=N: N / num-cpus "
                   "ClientApps at once in forked processes); any init-args-* (e.g. "
                   "init-args-address=HOST:PORT) or client-resources-num-gpus > 0 runs them on "
                   "Ray actors, as Flower's simulation does")
    r.add_argument("--quiet", action="store_true", help="no line per round")
    r.add_argument("--verbose", action="store_true", help="Flower's own log lines too")
    r.set_defaults(func=main)


def main(args) -> int:
    # deferred: flwr and torch, only when a Flower run starts (the parser registers it without)
    from testbed.flower.launch import FlowerSpec, run_flower

    spec = FlowerSpec(app_dir=args.app, store=args.store, network=args.network, name=args.name,
                      overrides=list(args.overrides), run_config=list(args.run_config),
                      federation=args.federation, federation_config=list(args.federation_config),
                      quiet=args.quiet, verbose=args.verbose)
    wall = time.perf_counter()
    with opened_store(spec.store) as store:
        try:
            run_id, _ = run_flower(spec, store)
        except KeyboardInterrupt:
            raise
        except Exception as e:
            if spec.run_id is None:   # refused before the run began: the error says why
                raise
            if isinstance(e, RunFailed):
                raise RunFailed(f"run {spec.run_id} failed: {e}") from e
            if isinstance(e, (DeliveryError, TransportError)):
                raise RunFailed(f"run {spec.run_id} failed: {e}") from e
            # the app's own code raised (a ServerApp or strategy bug): the user's to read
            raise RunFailed(f"run {spec.run_id} failed: the ServerApp raised "
                            f"{type(e).__name__}: {e}") from e
        name = store.run(run_id)["name"]
        print(f"{summary_line(store, run_id, name)}, wall time {time.perf_counter() - wall:.1f} s "
              f"-> {spec.store}")
    return 0
