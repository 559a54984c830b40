"""One Flower run, end to end: the app, the world, the codec, the driver, the rows."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import torch

from testbed.experiment import apply_threads
from testbed.flower.app import load_app
from testbed.flower.compress import GridCodec
from testbed.flower.driver import FlowerDriver
from testbed.flower.rows import record, start_run
from testbed.flower.world import build_world, flower_config


@dataclass
class FlowerSpec:
    app_dir: str
    store: str
    network: str | None = None          # an experiment file ([network], [run], [compression])
    name: str | None = None
    overrides: list[str] = field(default_factory=list)     # --set key.path=value
    run_config: list[str] = field(default_factory=list)    # --run-config key=value
    federation: str | None = None
    quiet: bool = False
    verbose: bool = False               # Flower's own log lines
    run_id: int | None = None           # set once the run's row exists


def prepare(spec: FlowerSpec, store):
    """(app, world, driver, run id): everything checked before the run's row is made."""
    app = load_app(spec.app_dir, spec.run_config, spec.federation)
    name = spec.name or app.app_dir.resolve().name
    cfg = flower_config(spec.network, spec.overrides, app.num_nodes, name=name)
    if spec.name:
        cfg.run.name = spec.name
    apply_threads(cfg.run.threads)
    world = build_world(cfg, app.num_nodes)
    codec = None
    method = cfg.compression.method
    if method != "none":
        net = world.net
        payload = min(net.network.payload_bytes(w, net.server) for w in net.workers)
        codec = GridCodec(method, cfg.compression.options, app.num_nodes, payload, cfg.run.seed)
    run_id = spec.run_id = start_run(store, world, app, cfg.run.name, method)
    driver = FlowerDriver(app, world, codec=codec, run_id=run_id, quiet_flower=not spec.verbose)
    return app, world, driver, run_id


def run_flower(spec: FlowerSpec, store) -> tuple[int, FlowerDriver]:
    """The run `spec` asks for, into `store`; (run id, driver)."""
    torch.manual_seed(0)
    app, world, driver, run_id = prepare(spec, store)

    def progress(rnd) -> None:
        if spec.quiet:
            return
        acc = rnd.evaluations[0]["test_accuracy"] if rnd.evaluations else None
        print(f"round {rnd.index:>3} {getattr(rnd, 'kind', ''):<8} virtual {rnd.report.clock:8.3f} s"
              f"  replies {rnd.participants}/{rnd.participants + len(rnd.left_out)}"
              + (f"  left out {rnd.left_out}" if rnd.left_out else "")
              + (f"  accuracy {acc:.4f}" if acc is not None else ""), file=sys.stderr)

    wall = time.perf_counter()
    n = record(store, run_id, driver, progress)
    if driver.codec is not None and not driver.codec.used:
        print(f"note: compression.method = {world.cfg.compression.method!r}, but no reply came "
              "compressed: the ClientApp has no testbed.flower.compress mod", file=sys.stderr)
    driver.wall_s = time.perf_counter() - wall
    driver.rounds_run = n
    return run_id, driver
