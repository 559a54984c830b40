"""The emulated edge a Flower app runs on, from an experiment file's `[network]`, `[run]` and
(optionally) `[compression]` alone: the app brings its own model, data and strategy, so
`[data]`, `[model]`, `[optim]` and `[federated]` are refused.

Without a file the cell is the schema's default star (20 Mbit/s, one shared medium) with the
802.11 DCF (`sharing = "csma"`) and one worker per Flower node (`options.num-supernodes`).
With one, `network.workers` is the node count unless the file gives it (then they must agree).
`run.iterations` is the run's budget of rounds (send_and_receive calls; default 10,000).
Node i of the app is worker `workers[i]` (w0, w1, ...), which a device trace names.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from channels.energy import Profile, check_profile, load_profiles
from testbed.config import RUN_KEYS, ExperimentConfig, apply_overrides, load_raw, validate
from testbed.errors import ConfigError
from testbed.network import EdgeNetwork, build_network
from testbed.paths import resolve_paths
from testbed.transport import EmulatedTransport

NOT_FLOWER = ("data", "model", "optim", "federated")
DEFAULT_BUDGET = 10_000


@dataclass
class World:
    cfg: ExperimentConfig
    net: EdgeNetwork
    transport: EmulatedTransport
    devices: object               # testbed.device_trace.DeviceTrace or None
    energy: dict[str, Profile]
    gflops: dict[str, float]
    speed: dict[str, float]

    @property
    def workers(self) -> list[str]:
        return list(self.net.workers)

    @property
    def measured(self) -> bool:
        return self.cfg.run.compute_time == "measured"

    def available(self, w: str, t: float) -> bool:
        return self.devices is None or self.devices.available(str(w), t)

    def speed_at(self, w: str, t: float) -> float:
        traced = self.devices.speed(str(w), t) if self.devices is not None else None
        return self.speed[w] if traced is None else traced

    def compute_seconds(self, w: str, t: float, flops: float, wall_s: float) -> float:
        """Virtual seconds of a ClientApp call starting at t: its FLOPs at the node's speed
        (`run.compute_time = "flops"`), or its measured wall time at that speed."""
        speed = self.speed_at(w, t)
        if self.measured:
            return wall_s / speed
        return flops / (self.gflops[w] * 1e9 * speed)

    def node_energy(self, w: str, window_s: float, compute_s: float, away: bool, radio: dict) -> dict:
        prof = self.energy[w]
        tx, rx = radio.get(w, (0.0, 0.0))
        radio_j = prof.radio_joules(tx, rx, window_s, away=away)
        compute_j = prof.compute_joules(compute_s)
        return {"radio_j": radio_j, "compute_j": compute_j, "energy_j": radio_j + compute_j}


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
    return validate(raw, source=source, default_name=name)


def energy_profiles(cfg: ExperimentConfig, net: EdgeNetwork, devices) -> dict[str, Profile]:
    """Each worker's profile: its `[network.nodes.X] energy_profile`, else its device trace's,
    else `[network] energy_profile` (as in data-parallel runs)."""
    profiles = load_profiles(cfg.network.get("energy_profiles"))
    out = {}
    for w in net.workers:
        name, key = net.graph.nodes[w].get("energy_profile"), f"network.nodes.{w}.energy_profile"
        if name is None and devices is not None and devices.profile(str(w)):
            name, key = devices.profile(str(w)), f"run.device_trace nodes.{w}.profile"
        if name is None:
            name, key = cfg.network.get("energy_profile", "rpi4"), "network.energy_profile"
        out[w] = profiles[check_profile(key, name, profiles)]
    return out


def build_world(cfg: ExperimentConfig, num_nodes: int) -> World:
    """The network, transport, device trace and energy profiles of `cfg`."""
    net = build_network(cfg.network, cfg.run.seed)
    if len(net.workers) != num_nodes:
        raise ConfigError("network", cfg.network.get("file"),
                          f"a topology with {num_nodes} workers (the app's "
                          f"options.num-supernodes), not {len(net.workers)}", source=cfg.source)
    if net.server is None:
        raise ConfigError("network.topology", cfg.network.get("topology"),
                          "a topology with a server (a Flower ServerApp talks to every node)",
                          source=cfg.source)
    devices = None if cfg.devices is None else cfg.devices.check_workers(
        "run.device_trace", cfg.run.device_trace, [str(w) for w in net.workers])
    gflops = {w: float(net.graph.nodes[w].get("gflops", cfg.run.device_gflops)) for w in net.workers}
    speed = {w: float(net.graph.nodes[w].get("compute_speed", 1.0)) for w in net.workers}
    transport = EmulatedTransport(net, measured=cfg.run.compute_time == "measured")
    return World(cfg, net, transport, devices, energy_profiles(cfg, net, devices), gflops, speed)
