"""The emulated edge a Flower app runs on: the run's `testbed.run.setup.World` from an experiment
file's `[network]`, `[run]` and (optionally) `[compression]` alone. The app brings its own
model, data and strategy, so `[data]`, `[model]`, `[optim]` and `[federated]` are refused.

Without a file the cell is the schema's default star (20 Mbit/s, one shared medium) with the
802.11 DCF (`sharing = "csma"`) and one worker per Flower node (`options.num-supernodes`).
With one, `network.workers` is the node count unless the file gives it (then they must agree).
`run.iterations` is the run's budget of rounds (send_and_receive calls; default 10,000).
Node i of the app is worker `workers[i]` (w0, w1, ...), which a device trace names.
"""
from __future__ import annotations

from pathlib import Path

from testbed.configuration.loading import load_raw, printed_notes
from testbed.configuration.overrides import apply_overrides
from testbed.configuration.schema import RUN_KEYS, ExperimentConfig
from testbed.configuration.sections import validate
from testbed.errors import ConfigError
from testbed.paths import resolve_paths
from testbed.run.setup import World, build_world

NOT_FLOWER = ("data", "model", "optim", "federated")
DEFAULT_BUDGET = 10_000


def flower_config(path: str | None, overrides: list[str], num_nodes: int,
                  name: str = "flower") -> ExperimentConfig:
    """The validated experiment config of a Flower run (see the module doc)."""
    source = path or "<default cell>"
    raw = load_raw(path) if path else {}
    try:
        raw = apply_overrides(raw, overrides)
        for section in NOT_FLOWER:
            if section in raw:
                raise ConfigError(f"[{section}]", message=f"[{section}]: not used by a Flower "
                                  "run (the app brings its own model, data and strategy; give "
                                  "[network], [run] and [compression])")
        net = raw.setdefault("network", {})
        if not path:
            net.setdefault("sharing", "csma")
        if "file" not in net:
            given = net.setdefault("workers", num_nodes)
            if given != num_nodes:
                raise ConfigError("network.workers", given, f"{num_nodes}, the app's "
                                  "options.num-supernodes (one worker per Flower node)")
        run = raw.setdefault("run", {})
        if "epochs" not in run:
            run.setdefault("iterations", DEFAULT_BUDGET)
        if path:
            raw = resolve_paths(raw, Path(path).parent, RUN_KEYS)
    except ConfigError as e:
        if e.source is None:
            raise ConfigError(e.key, e.value, e.allowed, source=source, message=str(e)) from None
        raise
    with printed_notes() as notes:
        return validate(raw, source=source, default_name=name, notes=notes)


def flower_world(cfg: ExperimentConfig, store, num_nodes: int) -> World:
    """The world of `cfg` for an app of `num_nodes` nodes (a worker each, and a server)."""
    world = build_world(cfg, store)
    if len(world.workers) != num_nodes:
        raise ConfigError("network", cfg.network.get("file"),
                          f"a topology with {num_nodes} workers (the app's "
                          f"options.num-supernodes), not {len(world.workers)}", source=cfg.source)
    if world.server is None:
        raise ConfigError("network.topology", cfg.network.get("topology"),
                          "a topology with a server (a Flower ServerApp talks to every node)",
                          source=cfg.source)
    return world


def available(world: World, node: str, t: float) -> bool:
    return world.devices is None or world.devices.available(str(node), t)


