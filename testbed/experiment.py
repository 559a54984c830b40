"""The orchestrator: synchronous data-parallel SGD in virtual time.

Per iteration: the gradient source gives every worker's real gradient on its shard; the
compression scheme's `exchange()` generator is driven (`nodes.compression.transport.drive`) over
the transport, by default the emulated network (testbed/transport.py), which says when every
packet arrives and which are lost; the aggregator's result steps the model. The virtual clock
advances by what the compute model and the network say, never by this machine's wall clock.
A torchrun rank (testbed/distributed.py) passes in its own gradient source and transport.
"""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from channels.energy import check_profile, load_profiles
from nodes.compression import codec
from nodes.compression.base import check_finite
from nodes.compression.memory import hold_memory, keep_undelivered
from nodes.compression.registry import build_scheme
from nodes.compression.transport import IterationReport, Transport, drive
from nodes.data import load_dataset
from nodes.device import resolve_device
from nodes.flops import count_or_reason
from nodes.models import build_model
from nodes.partition import split
from nodes.replicas import Replicas
from nodes.workers import WorkerPool, evaluate, set_gradients
from testbed import checkpoint
from testbed.config import ExperimentConfig, ps_without_server
from testbed.controls import ALL_LINKS, ControlError, resolve_target, validate_control
from testbed.device_trace import apply_link_rates
from testbed.graph_json import graph_to_json
from testbed.network import build_network
from testbed.store import Store
from testbed.transport import EmulatedTransport, Timer

DEFAULT_THREADS = 1  # run.threads = 0: why one, see the Field in testbed/config.py


def apply_threads(threads: int) -> int:
    """Set this process's torch threads for a run (`run.threads`, 0 = DEFAULT_THREADS) and
    return the count. The one place the thread policy lives: in-process runs, torchrun ranks,
    resumed runs and the harness's `--jobs` processes all build their Experiment through it."""
    n = threads or DEFAULT_THREADS
    torch.set_num_threads(n)
    try:  # the inter-op pool too; torch allows setting it once, before any inter-op work
        torch.set_num_interop_threads(n)
    except RuntimeError:
        pass
    return n


class ExperimentError(RuntimeError):
    """A run that cannot go on (bad combination of settings, a failed link, a bad gradient)."""


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
class Work:
    """One iteration's computed part: every worker's gradient and loss, who takes part, and
    when each worker's compute ends (virtual seconds)."""
    start: float                  # virtual time the iteration starts
    grads: list[torch.Tensor]
    losses: list[float]
    present: list                 # the workers taking part
    away: list[int]               # the indices of the others
    ready: dict                   # worker -> its compute end

    @property
    def train_loss(self) -> float:
        return float(np.mean(self.losses))


GradientSource = Callable[[], tuple[list[torch.Tensor], list[float], float]]


class LocalGradients:
    """Every worker's flat gradient and loss computed in this process, and the wall seconds
    per worker (what `compute_time = "measured"` charges)."""

    def __init__(self, exp: Experiment):
        self.pool, self.n, self.replicas = exp.pool, len(exp.workers), exp.replicas

    def __call__(self):
        w0 = time.perf_counter()
        # a worker whose replica lost part of a lossy downlink computes at its own replica
        grads, losses = self.pool.gradients(offsets=self.replicas.offsets())
        return grads, losses, (time.perf_counter() - w0) / self.n


class Experiment:
    """One run of one experiment file, written into a store as it goes."""

    # A checkpoint every run.checkpoint_every iterations for `testbed resume` (testbed/checkpoint.py).
    checkpoints = True

    def __init__(self, cfg: ExperimentConfig, store: Store, *,
                 progress: Callable[[Progress], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 gradients: Callable[[Experiment], GradientSource] | None = None,
                 transport: Callable[[Experiment], Transport] | None = None,
                 timer: Timer | None = None):
        """`gradients` / `transport`: factories called with the set-up experiment (default:
        every worker in this process / the emulated network); `timer(what, wall_s, iteration)`
        receives the wall seconds of compute, compression, emulation and eval (the harness)."""
        self.cfg = cfg
        self.store = store
        self.progress = progress
        self.should_stop = should_stop or (lambda: False)
        self.timer = timer
        self._gradients_factory, self._transport_factory = gradients, transport
        self.run_id: int | None = None
        self.next_iteration = 0      # where the loop starts: after a resumed checkpoint's
        self.accuracy: float | None = None   # the last evaluation's
        self.stage: str | None = None        # the scheme's stage of the last iteration
        self._wall_offset = 0.0      # wall seconds of the run before a resume
        self._setup()

    @contextmanager
    def _timed(self, what: str, it: int):
        if self.timer is None:
            yield
            return
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timer(what, time.perf_counter() - t, it)

    # ------------------------------------------------------------------ setup
    def _setup(self) -> None:
        cfg = self.cfg
        apply_threads(cfg.run.threads)
        self.device = resolve_device(cfg.run.device)
        seed = cfg.run.seed
        torch.manual_seed(seed)
        np.random.seed(seed)

        self.net = build_network(cfg.network, seed)
        self.graph, self.network = self.net.graph, self.net.network
        self.workers, self.server = self.net.workers, self.net.server
        n_workers = len(self.workers)
        if n_workers < 1:
            raise ExperimentError("network has no worker nodes")

        data_options = dict(cfg.data.options)
        if cfg.data.root:
            data_options["root"] = cfg.data.root
        self.data = load_dataset(cfg.data.dataset, seed=seed, **data_options)
        shards = split(self.data.train_y, n_workers, cfg.data.partition, alpha=cfg.data.alpha,
                       shards_per_worker=cfg.data.shards_per_worker, seed=seed)
        torch.manual_seed(seed)
        self.model = build_model(cfg.model.name, self.data.input_shape, self.data.num_classes,
                                 cfg.model.options).to(self.device)
        self.pool = WorkerPool(self.model, self.data.train_x, self.data.train_y, shards,
                               batch_size=cfg.data.batch_size, seed=seed, device=self.device,
                               mode=cfg.run.workers_mode)
        shapes = [p.shape for p in self.model.parameters()]
        self.payload_bytes = self._payload_bytes()
        self.scheme = build_scheme(cfg.compression.method, cfg.compression.options,
                                   n_workers=n_workers, shapes=shapes,
                                   payload_bytes=self.payload_bytes, seed=seed, device=self.device)
        if self.scheme.collective == "ps" and self.server is None:
            raise ExperimentError(ps_without_server(cfg.compression.method, cfg.network.get("topology")))
        # Methods with DGC's momentum correction keep momentum inside the compressor.
        momentum = 0.0 if self.scheme.handles_momentum else cfg.optim.momentum
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=cfg.optim.lr, momentum=momentum,
                                         weight_decay=cfg.optim.weight_decay,
                                         nesterov=cfg.optim.nesterov and momentum > 0)
        self.iterations = self._iteration_budget()
        self.step_flops, why = count_or_reason(self.model, self.data.input_shape, cfg.data.batch_size)
        if why is not None and cfg.run.compute_time == "flops":
            print(f"note: run.compute_time = 'flops': {why}; measured time is charged instead",
                  file=sys.stderr)
            cfg.run.compute_time = "measured"
        self.node_speed = {w: float(self.graph.nodes[w].get("compute_speed", 1.0)) for w in self.workers}
        self.node_gflops = {w: float(self.graph.nodes[w].get("gflops", cfg.run.device_gflops))
                            for w in self.workers}
        self.devices = None if cfg.devices is None else cfg.devices.check_workers(
            "run.device_trace", cfg.run.device_trace, self.traced_nodes())
        self.energy = self._energy_profiles()
        self.clock = 0.0
        self.replicas = Replicas()   # the workers' replicas that differ from the model
        self.gradients = (self._gradients_factory or LocalGradients)(self)
        self.transport = (self._transport_factory(self) if self._transport_factory
                          else self.emulated_transport())

    def traced_nodes(self) -> list[str]:
        """The names a device trace may give (federated runs: the clients)."""
        return [str(w) for w in self.workers]

    def _energy_profiles(self) -> dict:
        """Each worker's device profile (channels/energy.py): its `[network.nodes.X]
        energy_profile`, else the one its device trace names, else `[network] energy_profile`."""
        net = self.cfg.network
        profiles = load_profiles(net.get("energy_profiles"))
        out = {}
        for w in self.workers:
            name = self.graph.nodes[w].get("energy_profile")
            key = f"network.nodes.{w}.energy_profile"
            if name is None and self.devices is not None and self.devices.profile(str(w)):
                name, key = self.devices.profile(str(w)), f"run.device_trace nodes.{w}.profile"
            if name is None:
                name, key = net.get("energy_profile", "rpi4"), "network.energy_profile"
            out[w] = profiles[check_profile(key, name, profiles)]
        return out

    def node_energy(self, w, window_s: float, compute_s: float, away: bool, radio: dict) -> dict:
        """A worker's joules over one iteration's window: radio (its state times on the virtual
        clock x its profile's powers; asleep if away) and compute (power x compute time)."""
        prof = self.energy[w]
        tx, rx = radio.get(w, (0.0, 0.0))
        radio_j = prof.radio_joules(tx, rx, window_s, away=away)
        compute_j = prof.compute_joules(compute_s)
        return {"radio_j": radio_j, "compute_j": compute_j, "energy_j": radio_j + compute_j}

    def emulated_transport(self, kind: type[EmulatedTransport] = EmulatedTransport,
                           **extra) -> EmulatedTransport:
        """The transport over this run's emulated network (`kind`: the emulated transport or
        one built on it, with its `extra` arguments)."""
        return kind(self.net, measured=self.cfg.run.compute_time == "measured",
                    timer=self.timer, **extra)

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
    def _speed(self, worker: str, t: float) -> float:
        """The node's compute speed at virtual time t: the device trace's, else its own."""
        traced = self.devices.speed(str(worker), t) if self.devices else None
        return self.node_speed[worker] if traced is None else traced

    def _compute_seconds(self, worker: str, wall_s: float, t: float = 0.0) -> float:
        speed = self._speed(worker, t)
        if self.cfg.run.compute_time == "measured":
            return wall_s / speed
        return self.step_flops / (self.node_gflops[worker] * 1e9 * speed)

    def _present(self, t: float) -> list:
        """Workers available at virtual time t (all of them without a device trace)."""
        return [w for w in self.workers if self.devices is None or self.devices.available(str(w), t)]

    def _device_links(self, t: float) -> None:
        """A device trace's uplink/downlink rates at virtual time t set the worker's links."""
        if self.devices is not None and apply_link_rates(self.devices, self.network, self.workers, t):
            if self.run_id is not None:
                self._refresh_graph_json()   # the topology panel shows the rates in force

    def _move(self, t: float) -> None:
        """Moving nodes (channels/mobility.py) where they are at virtual time t, in the run's
        topology JSON (the topology panel). The link layer reads positions per transmission."""
        mobility = self.graph.graph.get("mobility")
        if mobility is None or self.run_id is None:
            return
        for n in mobility.tracks:
            self.graph.nodes[n]["pos"] = tuple(float(x) for x in mobility.position(n, t)[0])
        self._refresh_graph_json()

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
        for req in self.store.pending_controls(self.run_id):
            try:
                target, changes = validate_control(self.run_info, req["target"], req["changes"])
                changed = self._steer(target, changes)
            except (ControlError, ValueError) as e:
                self.store.append_event(self.run_id, "control_rejected",
                                        {"target": req["target"], "changes": req["changes"],
                                         "error": str(e)}, iteration=it, virtual_time_s=self.clock)
                # the event is committed before the request reads as resolved, so a reader
                # that sees "rejected"/"applied" also finds its event
                self.store.flush()
                self.store.resolve_control(req["id"], "rejected", it, str(e))
                continue
            self.store.append_event(self.run_id, "control",
                                    {"target": target, "changes": changes, "links": changed},
                                    iteration=it, virtual_time_s=self.clock)
            self._refresh_graph_json()
            self.store.flush()
            self.store.resolve_control(req["id"], "applied", it, f"{len(changed)} link(s) changed")

    def _steer(self, target: str, changes: dict) -> list[str]:
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
        self.store.set_graph(self.run_id, graph_to_json(self.graph))

    def scheme_metrics(self) -> dict:
        """The method's own figures stored with each evaluation (LGC's in-use coder figures,
        testbed.store's lgc_ columns), from its view of every worker's state."""
        take = getattr(self.scheme, "eval_metrics", None)
        return take() if take else {}

    def evaluate(self) -> tuple[float, float]:
        """Test loss and accuracy of the current model."""
        return evaluate(self.model, self.data.test_x, self.data.test_y,
                        batch_size=self.cfg.data.eval_batch_size, device=self.device)

    def apply_gradient(self, it: int, agg: torch.Tensor) -> None:
        """One optimizer step with the aggregated gradient."""
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr(it)
        set_gradients(self.model, agg)
        self.optimizer.step()

    def follow_replicas(self, carried: IterationReport) -> None:
        """The drift hook: what each worker lost of a lossy downlink (`carried.missed`, the
        aggregate's packets) is missing from its replica's step (nodes/replicas.py); the
        model the run holds and evaluates is the server's. Call after `apply_gradient`."""
        for name, packets in carried.missed.items():
            lost = codec.decode(packets, self.scheme.numel).values
            self.replicas.missed(self.workers.index(name), lost.to(self.device))
        g = self.optimizer.param_groups[0]
        self.replicas.step(g["lr"], g["momentum"], g["weight_decay"], g["nesterov"])

    def delivery_note(self) -> str | None:
        """Best-effort delivery whose model update is still made whole (one line, at start)."""
        link = self.cfg.network.get("link", {}) if isinstance(self.cfg.network, dict) else {}
        if link.get("delivery") != "best_effort":
            return None
        method, collective = self.cfg.compression.method, self.scheme.collective
        if collective != "ps":
            return (f"network.link.delivery = 'best_effort' with compression.collective = "
                    f"{collective!r}: what every node must share (all-gathered messages, a "
                    "leader's broadcast, a ring's result) is resent until whole; only a "
                    "parameter server's downlink loses packets (docs/reliability.md)")
        if not self.scheme.lossy_downlink:
            return (f"network.link.delivery = 'best_effort' with compression.method = "
                    f"{method!r}: its downlink is not the aggregate's coordinates, so it is "
                    "resent until every worker has it (docs/reliability.md)")
        return None

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
        note = self.delivery_note()
        if note:
            self.store.append_event(self.run_id, "note", {"note": note}, iteration=0,
                                    virtual_time_s=0.0)
            print(f"note: {note}", file=sys.stderr)
        self.store.flush()
        return self.run_id

    def run(self) -> int:
        if self.run_id is None:
            self.start()
        try:
            self._loop()
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (testbed.errors.Stopped)
            how = f"stopped by {e.args[0]}" if e.args else "interrupted by the user (SIGINT)"
            self.store.finish_run(self.run_id, "stopped", how)
            raise
        except Exception as e:
            self.store.append_event(self.run_id, "error", {"error": f"{type(e).__name__}: {e}"},
                                    virtual_time_s=self.clock)
            self.store.finish_run(self.run_id, "failed", f"{type(e).__name__}: {e}")
            raise
        return self.run_id

    def _loop(self) -> None:
        wall0 = time.perf_counter() - self._wall_offset
        for it in range(self.next_iteration, self.iterations):
            if self.should_stop():
                self.store.finish_run(self.run_id, "stopped", "stopped on request")
                return
            self._apply_controls(it)
            t_iter = self.clock
            work = self._compute(it, t_iter)
            agg, carried = self._exchange(it, work)
            self.clock = max(carried.clock, t_iter + carried.timing.total_s)
            with self._timed("compute", it):
                self.apply_gradient(it, agg)
                self.follow_replicas(carried)
            bits = self._record(it, work, carried, time.perf_counter() - wall0)
            self._evaluate_and_save(it, wall0)
            if self.progress:
                self.progress(Progress(it + 1, self.iterations, self.clock, bits,
                                       work.train_loss, self.accuracy, self.stage))
            if self._target_reached(it):
                break
        self.store.finish_run(self.run_id, "completed")

    def _compute(self, it: int, t: float) -> Work:
        """Every worker's gradient, and the world at virtual time `t`: who is present (an away
        worker computes nothing), the device trace's link rates, where moving nodes are, and
        when each worker's compute ends."""
        with self._timed("compute", it):
            grads, losses, wall_compute = self.gradients()
        check_finite(grads, it)
        present = self._present(t)
        self._device_links(t)
        self._move(t)
        ready = {w: t + (self._compute_seconds(w, wall_compute, t) if w in present else 0.0)
                 for w in self.workers}
        away = [r for r, w in enumerate(self.workers) if w not in present]
        for r in away:  # an away worker's message is never sent
            grads[r] = torch.zeros_like(grads[r])
        return Work(t, grads, losses, present, away, ready)

    def _exchange(self, it: int, work: Work) -> tuple[torch.Tensor, IterationReport]:
        """The scheme's exchange over the transport: the aggregate and what was carried. An
        away worker's memory is held; a worker left out at the deadline keeps what it sent."""
        deadline = work.start + self.cfg.run.deadline_s if self.cfg.run.deadline_s else None
        self.transport.begin(it, work.start, work.ready, present=work.present, deadline=deadline)
        stage = self.scheme.stage(it)
        if stage != self.stage:
            self.store.append_event(self.run_id, "stage", {"stage": stage}, iteration=it,
                                    virtual_time_s=self.clock)
            self.stage = stage
        with hold_memory(self.scheme, work.away):
            agg = drive(self.scheme, it, work.grads, self.transport)
            carried = self.transport.end()
            keep_undelivered(self.scheme, [r for r, w in enumerate(self.workers)
                                           if carried.left_out.get(w) == "deadline"])
        return agg, carried

    def _record(self, it: int, work: Work, carried: IterationReport, wall_s: float) -> int:
        """The iteration's rows (run, nodes, links) into the store; the bits it carried."""
        t, ready, traffic, left_out = work.start, work.ready, carried.traffic, carried.left_out
        bits_up = sum(traffic.bits_up.values())
        bits_down = sum(traffic.bits_down.values())
        energy = {w: self.node_energy(w, self.clock - t, ready[w] - t, w not in work.present,
                                      traffic.radio) for w in self.workers}
        self.store.append_iteration(
            self.run_id,
            {"iteration": it, "stage": self.stage, "virtual_time_s": self.clock,
             "wall_time_s": wall_s, "train_loss": work.train_loss,
             "bits_up": bits_up, "bits_down": bits_down, "left_out": len(left_out),
             "energy_j": sum(e["energy_j"] for e in energy.values()), **vars(carried.timing)},
            nodes=[{"iteration": it, "node": w, "bits_up": traffic.bits_up.get(w, 0),
                    "bits_down": traffic.bits_down.get(w, 0), "compute_s": ready[w] - t,
                    "uplink_done_s": traffic.uplink_done.get(w),
                    "left_out": left_out.get(w), "drift_norm": self.replicas.norm(i),
                    **energy[w]} for i, w in enumerate(self.workers)],
            links=[{"iteration": it, "src": u, "dst": v, **row}
                   for (u, v), row in traffic.links.items()])
        return bits_up + bits_down

    def _evaluate_and_save(self, it: int, wall0: float) -> None:
        """Evaluate, flush and checkpoint when their `run.*_every` says so (and after the last
        iteration, but no checkpoint then)."""
        run, last = self.cfg.run, it == self.iterations - 1
        if (it + 1) % run.eval_every == 0 or last:
            with self._timed("eval", it):
                test_loss, self.accuracy = self.evaluate()
            self.store.append_eval(self.run_id, {"iteration": it, "virtual_time_s": self.clock,
                                                 "test_loss": test_loss,
                                                 "test_accuracy": self.accuracy,
                                                 **self.scheme_metrics()})
        if (it + 1) % run.flush_every == 0 or last:
            self.store.flush()
        every = run.checkpoint_every
        if self.checkpoints and every and (it + 1) % every == 0 and not last:
            self.store.flush()  # the checkpoint never runs ahead of the committed rows
            self.save_checkpoint(it, time.perf_counter() - wall0)

    def _target_reached(self, it: int) -> bool:
        run = self.cfg.run
        if not (run.stop_at_accuracy and run.target_accuracy and self.accuracy is not None
                and self.accuracy >= run.target_accuracy):
            return False
        self.store.append_event(self.run_id, "target_reached", {"accuracy": self.accuracy},
                                iteration=it, virtual_time_s=self.clock)
        return True

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, iteration: int) -> dict:
        """Everything the iterations after `iteration` depend on (testbed/checkpoint.py)."""
        return {"iteration": iteration, "clock": self.clock, "accuracy": self.accuracy,
                "stage": self.stage, "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scheme": self.scheme.state_dict(),
                "pool": self.pool.state_dict(), "network": self.network.state_dict(),
                "replicas": self.replicas.state_dict(),
                "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheme.load_state_dict(state["scheme"])
        self.pool.load_state_dict(state["pool"])
        self.network.load_state_dict(state["network"])
        self.replicas.load_state_dict(state.get("replicas", {}))  # none before issue 23
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        self.clock, self.accuracy, self.stage = state["clock"], state["accuracy"], state["stage"]
        self.next_iteration = state["iteration"] + 1

    def checkpoint_path(self, run_id: int):
        return checkpoint.path_for(self.store.path, run_id)

    def save_checkpoint(self, iteration: int, wall_s: float) -> None:
        checkpoint.save(self.checkpoint_path(self.run_id),
                        {**self.state_dict(iteration), "wall_time_s": wall_s})

    def resume(self, run_id: int, state: dict) -> None:
        """Continue run `run_id` of the store after the checkpoint `state`: its rows of later
        iterations go, and the loop starts where the checkpoint left off."""
        self.load_state_dict(state)
        self._wall_offset = state.get("wall_time_s", 0.0)
        self.store.rewind_run(run_id, state["iteration"])
        self.run_id = run_id
        self.run_info = {"id": run_id, "status": "running", "graph": graph_to_json(self.graph)}
        self._refresh_graph_json()  # links steered before the checkpoint are in its network
        self.store.append_event(run_id, "resume", {"after_iteration": state["iteration"]},
                                iteration=state["iteration"], virtual_time_s=self.clock)
        self.store.flush()

