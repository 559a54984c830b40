"""The orchestrator: synchronous data-parallel SGD in virtual time.

Per iteration: every worker computes a real gradient on its shard; the compression scheme's
`exchange()` generator yields communication phases (see nodes/compression/phases.py), each of
which is carried over the emulated network (channels/), which says when every packet arrives
and which are lost; the aggregator's result steps the model. The virtual clock advances by what
the compute model and the network say, never by this machine's wall clock.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx
import numpy as np
import torch

from testbed.config import ExperimentConfig
from testbed.store import Store


class ExperimentError(RuntimeError):
    """A run that cannot go on (bad combination of settings, a failed link, a bad gradient)."""


@dataclass
class IterationTiming:
    """Virtual seconds of one iteration split the way the dashboard stacks them."""
    compute_s: float = 0.0
    uplink_s: float = 0.0
    aggregation_s: float = 0.0
    downlink_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.compute_s + self.uplink_s + self.aggregation_s + self.downlink_s


@dataclass
class Progress:
    iteration: int
    iterations: int
    virtual_time_s: float
    bits: int
    train_loss: float
    accuracy: float | None
    stage: str


@dataclass
class _Traffic:
    """Per-iteration accumulation of what the network carried."""
    bits_up: dict[str, int] = field(default_factory=dict)
    bits_down: dict[str, int] = field(default_factory=dict)
    uplink_done: dict[str, float] = field(default_factory=dict)
    links: dict[tuple[str, str], dict] = field(default_factory=dict)

    def add_bits(self, table: dict[str, int], node: str, bits: int) -> None:
        table[node] = table.get(node, 0) + int(bits)

    def add_links(self, report) -> None:
        for (u, v), st in report.links.items():
            row = self.links.setdefault((u, v), {"bytes": 0, "packets": 0, "lost": 0,
                                                 "retransmitted": 0, "busy_s": 0.0})
            row["bytes"] += int(st.bytes)
            row["packets"] += int(st.packets)
            row["lost"] += int(st.lost)
            row["retransmitted"] += int(st.retransmitted)
            row["busy_s"] += float(st.busy_s)


def graph_to_json(graph: nx.Graph) -> dict:
    """The topology as plain JSON for the store/dashboard: roles, positions, link figures."""
    nodes = []
    for n, attrs in graph.nodes(data=True):
        item = {"id": str(n), "role": attrs.get("role", "worker")}
        if attrs.get("pos") is not None:
            item["pos"] = [float(x) for x in attrs["pos"]]
        nodes.append(item)
    edges = []
    for u, v, attrs in graph.edges(data=True):
        spec = attrs.get("link")
        item = {"source": str(u), "target": str(v)}
        for name in ("bandwidth_mbps", "delay_ms", "mtu_bytes", "header_bytes", "delivery"):
            if spec is not None and hasattr(spec, name):
                val = getattr(spec, name)
                item[name] = val if isinstance(val, (int, float, str)) or val is None else str(val)
        edges.append(item)
    return {"nodes": nodes, "edges": edges}


class Experiment:
    """One run of one experiment file, written into a store as it goes."""

    def __init__(self, cfg: ExperimentConfig, store: Store, *,
                 progress: Callable[[Progress], None] | None = None,
                 should_stop: Callable[[], bool] | None = None):
        self.cfg = cfg
        self.store = store
        self.progress = progress
        self.should_stop = should_stop or (lambda: False)
        self.run_id: int | None = None
        self._setup()

    # ------------------------------------------------------------------ setup
    def _setup(self) -> None:
        from channels.network import Network
        from channels.topology import build_topology
        from nodes.compression.registry import build_scheme
        from nodes.data import load_dataset
        from nodes.device import resolve_device
        from nodes.flops import train_step_flops
        from nodes.models import build_model
        from nodes.partition import split
        from nodes.workers import WorkerPool

        cfg = self.cfg
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        self.device = resolve_device(cfg.run.device)
        seed = cfg.run.seed
        torch.manual_seed(seed)
        np.random.seed(seed)

        self.graph = build_topology(cfg.network, seed)
        self.workers = sorted((n for n, a in self.graph.nodes(data=True) if a.get("role") == "worker"),
                              key=lambda n: (len(str(n)), str(n)))
        servers = [n for n, a in self.graph.nodes(data=True) if a.get("role") == "server"]
        self.server = servers[0] if servers else None
        n_workers = len(self.workers)
        if n_workers < 1:
            raise ExperimentError("network has no worker nodes")
        self.network = Network(self.graph, medium=cfg.network.get("medium", "dedicated"),
                               sharing=cfg.network.get("sharing", "tdma"),
                               rng=np.random.default_rng([seed, 0xC4A7]))

        data_options = dict(cfg.data.options)
        if cfg.data.root:
            data_options["root"] = cfg.data.root
        self.data = load_dataset(cfg.data.dataset, seed=seed, **data_options)
        shards = split(self.data.train_y, n_workers, cfg.data.partition, alpha=cfg.data.alpha,
                       shards_per_worker=cfg.data.shards_per_worker, seed=seed)
        torch.manual_seed(seed)
        self.model = build_model(cfg.model.name, self.data.input_shape, self.data.num_classes).to(self.device)
        self.pool = WorkerPool(self.model, self.data.train_x, self.data.train_y, shards,
                               batch_size=cfg.data.batch_size, seed=seed, device=self.device,
                               mode=cfg.run.workers_mode)
        shapes = [p.shape for p in self.model.parameters()]
        self.payload_bytes = self._payload_bytes()
        self.scheme = build_scheme(cfg.compression.method, cfg.compression.options,
                                   n_workers=n_workers, shapes=shapes,
                                   payload_bytes=self.payload_bytes, seed=seed, device=self.device)
        if self.scheme.collective == "ps" and self.server is None:
            from nodes.compression.registry import SCHEMES

            ring = sorted(n for n, c in SCHEMES.items() if c.collective == "allreduce")
            raise ExperimentError(
                f"compression.method {cfg.compression.method!r} sends to a parameter server, but "
                f"network.topology {cfg.network.get('topology')!r} has no server node; use a "
                f"topology with a server (star, mesh, geometric) or a ring method ({', '.join(ring)})")
        # Methods with DGC's momentum correction keep momentum inside the compressor.
        momentum = 0.0 if getattr(self.scheme, "handles_momentum", False) else cfg.optim.momentum
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.optim.lr, momentum=momentum,
                                         weight_decay=cfg.optim.weight_decay,
                                         nesterov=cfg.optim.nesterov and momentum > 0)
        self.iterations = self._iteration_budget()
        self.step_flops = train_step_flops(self.model, self.data.input_shape, cfg.data.batch_size)
        self.node_speed = {w: float(self.graph.nodes[w].get("compute_speed", 1.0)) for w in self.workers}
        self.node_gflops = {w: float(self.graph.nodes[w].get("gflops", cfg.run.device_gflops))
                            for w in self.workers}
        self.clock = 0.0

    def _payload_bytes(self) -> int:
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

    def _iteration_budget(self) -> int:
        run = self.cfg.run
        if run.iterations is not None:
            return run.iterations
        # One epoch: every training sample seen once across the workers (the pool's own count).
        return max(1, math.ceil(run.epochs * self.pool.iterations_per_epoch))

    # ------------------------------------------------------------------ time
    def _compute_seconds(self, worker: str, wall_s: float) -> float:
        if self.cfg.run.compute_time == "measured":
            return wall_s / self.node_speed[worker]
        return self.step_flops / (self.node_gflops[worker] * 1e9 * self.node_speed[worker])

    def _lr(self, it: int) -> float:
        o = self.cfg.optim
        lr = o.lr
        if o.warmup_iterations and it < o.warmup_iterations:
            return lr * (it + 1) / o.warmup_iterations
        if o.lr_schedule == "cosine":
            return 0.5 * lr * (1 + math.cos(math.pi * it / max(1, self.iterations)))
        if o.lr_schedule == "step":
            return lr * (0.1 ** (it * 3 // max(1, self.iterations)))  # x0.1 at 1/3 and 2/3
        return lr

    # ------------------------------------------------------------------ controls
    def _apply_controls(self, it: int) -> None:
        from testbed.controls import ControlError, validate_control

        for req in self.store.pending_controls(self.run_id):
            try:
                target, changes = validate_control(self.run_info, req["target"], req["changes"])
                changed = self._steer(target, changes)
            except (ControlError, ValueError) as e:
                self.store.resolve_control(req["id"], "rejected", it, str(e))
                self.store.append_event(self.run_id, "control_rejected",
                                        {"target": req["target"], "changes": req["changes"],
                                         "error": str(e)}, iteration=it, virtual_time_s=self.clock)
                continue
            self.store.resolve_control(req["id"], "applied", it, f"{len(changed)} link(s) changed")
            self.store.append_event(self.run_id, "control",
                                    {"target": target, "changes": changes, "links": changed},
                                    iteration=it, virtual_time_s=self.clock)
            self._refresh_graph_json()

    def _steer(self, target: str, changes: dict) -> list[str]:
        from testbed.controls import ALL_LINKS, resolve_target

        kwargs = dict(changes)
        if "loss_p" in kwargs:
            p = kwargs.pop("loss_p")
            kwargs["loss"] = {"model": "none"} if p == 0 else {"model": "bernoulli", "p": p}
        links = resolve_target(self.run_info["graph"], target)
        if target == ALL_LINKS:
            self.network.set_link(None, None, **kwargs)
        else:
            for u, v in links:
                self.network.set_link(u, v, one_way=True, **kwargs)
        return [f"{u}->{v}" for u, v in links]

    def _refresh_graph_json(self) -> None:
        with self.store.db:
            self.store.db.execute("UPDATE runs SET graph_json=? WHERE id=?",
                                  (json.dumps(graph_to_json(self.graph)), self.run_id))

    # ------------------------------------------------------------------ hooks
    # Three seams where a multi-process run (testbed/distributed.py) differs from this one:
    # where gradients come from, where message bytes come from, and who runs the link layer.
    def _worker_gradients(self) -> tuple[list[torch.Tensor], list[float], float]:
        """Every worker's flat gradient and loss, and the wall seconds per worker."""
        w0 = time.perf_counter()
        grads, losses = self.pool.gradients()
        return grads, losses, (time.perf_counter() - w0) / len(self.workers)

    def _share(self, phase):
        """The phase with every worker's real bytes in it (here they already are)."""
        return phase

    def _net(self, pattern: str, *args, **kwargs):
        """Run one traffic pattern on the emulated network."""
        return getattr(self.network, pattern)(*args, **kwargs)

    # ------------------------------------------------------------------ one iteration
    def _drive(self, it: int, grads: list[torch.Tensor], ready: dict[str, float],
               traffic: _Traffic, timing: IterationTiming) -> torch.Tensor:
        """Run the scheme's phases over the network; return the averaged gradient."""
        from nodes.compression import phases as ph

        handlers = {ph.Uplink: self._uplink, ph.Downlink: self._downlink,
                    ph.Broadcast: self._broadcast, ph.AllReduce: self._allreduce}
        compute_end = max(ready.values())
        gen = self.scheme.exchange(it, grads)
        result: Any = None
        first = True   # the first traffic of an iteration starts at each worker's own finish
        measured = self.cfg.run.compute_time == "measured"
        while True:
            t_wall = time.perf_counter()
            try:
                phase = gen.send(result)
                done = None
            except StopIteration as stop:
                phase, done = None, stop
            if measured:  # encoding (before the first traffic) and decoding, as timed here
                dt = time.perf_counter() - t_wall
                setattr(timing, "compute_s" if first else "aggregation_s",
                        getattr(timing, "compute_s" if first else "aggregation_s") + dt)
                self.clock += dt
            if done is not None:
                return done.value
            result = None
            if isinstance(phase, ph.ServerCompute):
                timing.aggregation_s += phase.seconds
                self.clock += phase.seconds
                continue
            if isinstance(phase, ph.WorkerCompute):
                timing.compute_s += phase.seconds
                self.clock += phase.seconds
                continue
            handler = handlers.get(type(phase))
            if handler is None:
                raise ExperimentError(f"scheme yielded an unknown phase {phase!r}")
            report, kind, result = handler(self._share(phase), ready, first, compute_end, traffic)
            self._advance(report, timing, kind, compute_end, first, traffic)
            first = False

    def _uplink(self, phase, ready, first, compute_end, traffic):
        names = self.workers
        sends = {names[w]: m.sizes for w, m in phase.messages.items()}
        at = {n: ready[n] for n in sends} if first else self.clock
        report = self._net("gather", sends, self.server, at=at)
        delivered = {}
        for flow in report.flows:
            w = names.index(flow.src)
            message = phase.messages[w]
            delivered[w] = [p for p, ok in zip(message.packets, flow.arrived) if ok]
            traffic.add_bits(traffic.bits_up, flow.src, message.nbits)
            traffic.uplink_done[flow.src] = float(flow.completion_s)
        return report, "uplink", delivered

    def _reliable_broadcast(self, src: str, dsts: list[str], sizes: list[int], at: float) -> list:
        """A broadcast every receiver gets whole: packets a receiver missed (best-effort links)
        are sent again, as the link layer times them, until all have them; model updates must
        arrive everywhere or the replicas would drift apart. On a shared cell one resend of the
        union reaches everyone; on dedicated links each receiver gets only what it missed."""
        reports = [self._net("broadcast", src, dsts, sizes, at=at)]
        missing = {f.dst: set(np.flatnonzero(~f.arrived).tolist()) for f in reports[0].flows}
        shared = self.cfg.network.get("medium") == "shared"
        for _ in range(self.MAX_REBROADCASTS):
            missing = {d: m for d, m in missing.items() if m}
            if not missing:
                return reports
            t = max(float(r.end_s) for r in reports)
            sends = ([(list(missing), sorted(set().union(*missing.values())))] if shared else
                     [([d], sorted(m)) for d, m in missing.items()])
            for targets, idx in sends:
                report = self._net("broadcast", src, targets, [sizes[i] for i in idx], at=t)
                reports.append(report)
                for f in report.flows:
                    missing[f.dst] &= {idx[j] for j in np.flatnonzero(~f.arrived)}
        raise ExperimentError(f"broadcast from {src} still lost packets after "
                              f"{self.MAX_REBROADCASTS} resends; the downlink loss is too high")

    MAX_REBROADCASTS = 50

    def _downlink(self, phase, ready, first, compute_end, traffic):
        reports = self._reliable_broadcast(self.server, list(self.workers), phase.message.sizes,
                                           at=self.clock)
        for n in self.workers:
            traffic.add_bits(traffic.bits_down, n, phase.message.nbits)
        return reports, "downlink", None

    def _broadcast(self, phase, ready, first, compute_end, traffic):
        src = self.workers[phase.src]
        dsts = [n for n in self.workers if n != src]
        reports = self._reliable_broadcast(src, dsts, phase.message.sizes,
                                           at=ready[src] if first else self.clock)
        traffic.add_bits(traffic.bits_up, src, phase.message.nbits)
        for n in dsts:
            traffic.add_bits(traffic.bits_down, n, phase.message.nbits)
        return reports, "uplink", list(phase.message.packets)

    def _allreduce(self, phase, ready, first, compute_end, traffic):
        from nodes.compression.ring import ring_sum

        buffers = [phase.buffers[w] for w in range(len(self.workers))]
        size = len(buffers[0])
        if any(len(b) != size for b in buffers):
            raise ExperimentError("all-reduce buffers differ in length")
        self.clock = max(self.clock, compute_end)  # a ring step needs every node ready
        report = self._net("ring_allreduce", list(self.workers), size, at=self.clock)
        n = len(self.workers)
        # Each node sends 2(N-1) chunks of about size/N bytes around the ring.
        sent = 2 * (n - 1) * math.ceil(size / n) if n > 1 else 0
        for name in self.workers:
            traffic.add_bits(traffic.bits_up, name, 8 * sent)
        return report, "uplink", ring_sum(buffers, phase.dtype)

    def _advance(self, reports, timing: IterationTiming, kind: str, compute_end: float,
                 first: bool, traffic: _Traffic) -> None:
        """Charge a phase's network time to `kind` and move the clock to its end."""
        reports = reports if isinstance(reports, list) else [reports]
        end = max(float(r.end_s) for r in reports)
        start = max(self.clock, compute_end) if first else self.clock
        dt = max(0.0, end - start)
        setattr(timing, f"{kind}_s", getattr(timing, f"{kind}_s") + dt)
        self.clock = max(self.clock, end)
        for r in reports:
            traffic.add_links(r)

    def _evaluate(self) -> tuple[float, float]:
        from nodes.workers import evaluate

        return evaluate(self.model, self.data.test_x, self.data.test_y,
                        batch_size=self.cfg.data.eval_batch_size, device=self.device)

    def _apply_gradient(self, it: int, agg: torch.Tensor) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr(it)
        offset = 0
        for p in self.model.parameters():
            n = p.numel()
            p.grad = agg[offset:offset + n].view_as(p).to(p.device, p.dtype).clone()
            offset += n
        self.optimizer.step()

    # ------------------------------------------------------------------ the run
    def start(self) -> int:
        cfg = self.cfg
        link = cfg.network.get("link", {}) if isinstance(cfg.network, dict) else {}
        self.run_id = self.store.create_run(
            cfg.run.name, cfg.as_dict(), method=cfg.compression.method,
            topology=cfg.network.get("topology"), workers=len(self.workers),
            bandwidth_mbps=link.get("bandwidth_mbps"), graph=graph_to_json(self.graph))
        self.run_info = {"id": self.run_id, "status": "running", "graph": graph_to_json(self.graph)}
        self.store.append_event(self.run_id, "start", {
            "iterations": self.iterations, "payload_bytes": self.payload_bytes,
            "step_flops": self.step_flops, "device": str(self.device),
            "parameters": sum(p.numel() for p in self.model.parameters())},
            iteration=0, virtual_time_s=0.0)
        self.store.flush()
        return self.run_id

    def run(self) -> int:
        if self.run_id is None:
            self.start()
        try:
            self._loop()
        except KeyboardInterrupt:
            self.store.finish_run(self.run_id, "stopped", "interrupted by the user")
            raise
        except Exception as e:
            self.store.append_event(self.run_id, "error", {"error": f"{type(e).__name__}: {e}"},
                                    virtual_time_s=self.clock)
            self.store.finish_run(self.run_id, "failed", f"{type(e).__name__}: {e}")
            raise
        return self.run_id

    def _loop(self) -> None:
        from nodes.compression.base import check_finite

        cfg = self.cfg
        wall0 = time.perf_counter()
        accuracy = None
        last_stage = None
        for it in range(self.iterations):
            if self.should_stop():
                self.store.finish_run(self.run_id, "stopped", "stopped on request")
                return
            self._apply_controls(it)
            t_iter = self.clock
            grads, losses, wall_compute = self._worker_gradients()
            check_finite(grads, it)
            ready = {w: t_iter + self._compute_seconds(w, wall_compute) for w in self.workers}
            timing = IterationTiming(compute_s=max(ready.values()) - t_iter)
            traffic = _Traffic()
            stage = self.scheme.stage(it)
            if stage != last_stage:
                self.store.append_event(self.run_id, "stage", {"stage": stage}, iteration=it,
                                        virtual_time_s=self.clock)
                last_stage = stage
            agg = self._drive(it, grads, ready, traffic, timing)
            self.clock = max(self.clock, t_iter + timing.total_s)
            self._apply_gradient(it, agg)
            train_loss = float(np.mean(losses))
            bits_up = sum(traffic.bits_up.values())
            bits_down = sum(traffic.bits_down.values())
            self.store.append_iteration(
                self.run_id,
                {"iteration": it, "stage": stage, "virtual_time_s": self.clock,
                 "wall_time_s": time.perf_counter() - wall0, "train_loss": train_loss,
                 "bits_up": bits_up, "bits_down": bits_down, **vars(timing)},
                nodes=[{"iteration": it, "node": w, "bits_up": traffic.bits_up.get(w, 0),
                        "bits_down": traffic.bits_down.get(w, 0),
                        "compute_s": ready[w] - t_iter,
                        "uplink_done_s": traffic.uplink_done.get(w)} for w in self.workers],
                links=[{"iteration": it, "src": u, "dst": v, **row}
                       for (u, v), row in traffic.links.items()])
            last = it == self.iterations - 1
            if (it + 1) % cfg.run.eval_every == 0 or last:
                test_loss, accuracy = self._evaluate()
                self.store.append_eval(self.run_id, {"iteration": it, "virtual_time_s": self.clock,
                                                     "test_loss": test_loss, "test_accuracy": accuracy})
            if (it + 1) % cfg.run.flush_every == 0 or last:
                self.store.flush()
            if self.progress:
                self.progress(Progress(it + 1, self.iterations, self.clock, bits_up + bits_down,
                                       train_loss, accuracy, stage))
            if (cfg.run.stop_at_accuracy and cfg.run.target_accuracy and accuracy is not None
                    and accuracy >= cfg.run.target_accuracy):
                self.store.append_event(self.run_id, "target_reached",
                                        {"accuracy": accuracy}, iteration=it, virtual_time_s=self.clock)
                break
        self.store.finish_run(self.run_id, "completed")


def run_experiment(cfg: ExperimentConfig, store: Store, **kwargs) -> int:
    exp = Experiment(cfg, store, **kwargs)
    return exp.run()
