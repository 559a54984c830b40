"""Set-up: a run's world from `[network]` + `[run]`, and the training parts on top of it.

`World` is what every driver runs in, a Flower app's included (it brings its own model and
data): the emulated network and its link layer, the device trace, the energy profiles, the
seed, the virtual clock, the store and the run's id in it. `Training` is what our own drivers
add from `[data]`, `[model]`, `[optim]` and `[compression]`: the data set, the model, the
worker pool, the compression scheme and the optimizer. Built in this order (world, then
training) the seeded draws are those of every earlier version of the testbed.
"""
from __future__ import annotations

import sys

import numpy as np
import torch

from nodes.compression.registry import build_scheme
from nodes.data import load_dataset
from nodes.device import resolve_device
from nodes.flops import count_or_reason
from nodes.models import build_model
from nodes.partition import split
from nodes.replicas import Replicas
from nodes.sgd import SGD
from nodes.workers import WorkerPool
from testbed.configuration.method_policy import ps_without_server
from testbed.configuration.schema import ExperimentConfig
from testbed.emulation.edge_network import build_network
from testbed.emulation.transport import EmulatedTransport
from testbed.emulation.timing import Timer
from testbed.errors import ExperimentError
from testbed.processes.threads import apply_threads
from testbed.records.graph_json import graph_to_json
from testbed.run.energy_accounting import energy_profiles


class World:
    """One run's world, built from `[network]` and `[run]` alone (`build_world`)."""

    __slots__ = ("cfg", "store", "timer", "seed", "device", "edge_network", "graph", "network", "workers",
                 "server", "devices", "energy", "node_speed", "node_gflops", "clock", "run_id",
                 "run_info")

    def emulated_transport(self, kind: type[EmulatedTransport] = EmulatedTransport,
                           **extra) -> EmulatedTransport:
        """The transport over this run's emulated network (`kind`: the emulated transport or
        one built on it, with its `extra` arguments)."""
        return kind(self.edge_network, measured=self.cfg.run.compute_time == "measured",
                    timer=self.timer, **extra)

    def payload_bytes(self) -> int:
        """The smallest payload a packet can carry on any path a method may use."""
        pairs = []
        if self.server is not None:
            pairs += [(w, self.server) for w in self.workers] + [(self.server, w) for w in self.workers]
        n = len(self.workers)
        pairs += [(self.workers[i], self.workers[(i + 1) % n]) for i in range(n) if n > 1]
        sizes = []
        for u, v in pairs:
            try:
                sizes.append(self.network.payload_bytes(u, v))
            except Exception:  # no path between this pair: that collective is never used
                continue
        if not sizes:
            raise ExperimentError("no two nodes of the network can reach each other")
        return int(min(sizes))

    def refresh_graph_json(self) -> None:
        """The run's topology JSON (the topology panel) from the graph as it is now."""
        self.store.set_graph(self.run_id, graph_to_json(self.graph))

    def opened(self, run_id: int) -> None:
        """The run's id in the store, once created or resumed."""
        self.run_id = run_id
        self.run_info = {"id": run_id, "status": "running", "graph": graph_to_json(self.graph)}


def build_world(cfg: ExperimentConfig, store, *, traced: list[str] | None = None,
                timer: Timer | None = None) -> World:
    """The world of `cfg` from its `[network]` and `[run]`. `traced`: the names a device trace
    may give (default: the workers; federated runs: the clients)."""
    w = World()
    w.cfg, w.store, w.timer = cfg, store, timer
    apply_threads(cfg.run.threads)
    w.device = resolve_device(cfg.run.device)
    w.seed = seed = cfg.run.seed
    torch.manual_seed(seed)
    np.random.seed(seed)
    w.edge_network = build_network(cfg.network, seed)
    w.graph, w.network = w.edge_network.graph, w.edge_network.network
    w.workers, w.server = w.edge_network.workers, w.edge_network.server
    if len(w.workers) < 1:
        raise ExperimentError("network has no worker nodes")
    w.node_speed = {n: float(w.graph.nodes[n].get("compute_speed", 1.0)) for n in w.workers}
    w.node_gflops = {n: float(w.graph.nodes[n].get("gflops", cfg.run.device_gflops))
                     for n in w.workers}
    w.devices = None if cfg.devices is None else cfg.devices.check_workers(
        "run.device_trace", cfg.run.device_trace,
        [str(n) for n in w.workers] if traced is None else traced)
    w.energy = energy_profiles(cfg.network, w.graph, w.workers, w.devices)
    w.clock = 0.0
    w.run_id, w.run_info = None, None
    return w


class Training:
    """What our own drivers train: data, model, worker pool, scheme and optimizer."""

    __slots__ = ("data", "model", "pool", "scheme", "optimizer", "payload_bytes", "step_flops",
                 "replicas")


def build_training(cfg: ExperimentConfig, world: World) -> Training:
    """The training parts of `cfg` in `world` (its seed, device and network)."""
    t, seed, device, n_workers = Training(), world.seed, world.device, len(world.workers)
    data_options = dict(cfg.data.options)
    if cfg.data.root:
        data_options["root"] = cfg.data.root
    t.data = load_dataset(cfg.data.dataset, seed=seed, **data_options)
    shards = split(t.data.train_y, n_workers, cfg.data.partition, alpha=cfg.data.alpha,
                   shards_per_worker=cfg.data.shards_per_worker, seed=seed)
    torch.manual_seed(seed)
    t.model = build_model(cfg.model.name, t.data.input_shape, t.data.num_classes,
                          cfg.model.options).to(device)
    t.pool = WorkerPool(t.model, t.data.train_x, t.data.train_y, shards,
                        batch_size=cfg.data.batch_size, seed=seed, device=device,
                        mode=cfg.run.workers_mode)
    shapes = [p.shape for p in t.model.parameters()]
    t.payload_bytes = world.payload_bytes()
    t.scheme = build_scheme(cfg.compression.method, cfg.compression.options,
                            n_workers=n_workers, shapes=shapes,
                            payload_bytes=t.payload_bytes, seed=seed, device=device)
    if t.scheme.collective == "ps" and world.server is None:
        raise ExperimentError(ps_without_server(cfg.compression.method, cfg.network.get("topology")))
    # Methods with DGC's momentum correction keep momentum inside the compressor.
    momentum = 0.0 if t.scheme.handles_momentum else cfg.optim.momentum
    t.optimizer = SGD(t.model.parameters(), lr=cfg.optim.lr, momentum=momentum,
                      weight_decay=cfg.optim.weight_decay,
                      nesterov=cfg.optim.nesterov and momentum > 0)
    t.step_flops, why = count_or_reason(t.model, t.data.input_shape, cfg.data.batch_size)
    if why is not None and cfg.run.compute_time == "flops":
        print(f"note: run.compute_time = 'flops': {why}; measured time is charged instead",
              file=sys.stderr)
        cfg.run.compute_time = "measured"
    t.replicas = Replicas()   # the workers' replicas that differ from the model
    return t
