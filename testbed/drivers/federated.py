"""The federated drivers: rounds of sampled clients over the emulated cell, in virtual time.

An experiment file with `[federated]` (testbed/configuration/schema.py FEDERATED_KEYS) runs here; the
arithmetic (sampling, local steps, server optimizers, staleness weight, per-client error
memory) is nodes/federated.py. The network has one worker node per client of an exchange
(`slots`); a sampled client sends from its slot. The model is held once: each client's local
steps run on it in turn from the global weights (`local_train`), and its pseudo-gradient
(weights - local weights) goes through the compressor's exchange over the transport exactly as
a gradient does in data-parallel runs (same scheme, same phases, bits from the real bytes),
its error memory swapped into its slot before and out after (`ClientMemories`). One
iteration of the store is one round (sync) or one server step (fedbuff).

sync     per round, at the clock t0: `clients_per_round` clients drawn (uniformly, or among
         those the device trace, names c0..cN-1, says are available at t0); the global model
         goes to them (one broadcast of the fp32 weights, `download_model`); each computes
         `local_steps` steps (its compute time: FLOPs at its traced speed, or the measured wall
         time); the exchange starts at each one's compute end; `run.deadline_s` after t0 the
         uplink closes as in data-parallel runs. The server optimizer steps with the aggregate.
fedbuff  `concurrency` clients train at once, each from the model version it downloaded
         (its pseudo-gradient is computed at its download from those weights and held until it
         sends). A server step takes the `buffer_size` (K) in-flight clients whose local
         training ends first; the link layer times their uplink (from each one's compute end,
         or the step's start if the cell was busy until then) and the step happens when the
         exchange ends; each update weighs 1/sqrt(1 + staleness) (nodes/federated.py). The K
         slots are then refilled with newly drawn clients, who download the new model.
         Simplification: a buffer is formed from compute ends, and one step's exchange runs at
         a time on the cell (a client that finished computing while it was busy waits).

A client's traced link rates (`uplink_mbps` / `downlink_mbps`) are set on its slot's links when
it downloads and taken per transmission; a slot whose client has none gets the file's rate.

Rows: `iterations` gets participants (updates that counted) and staleness (mean, fedbuff; 0 in
sync); `node_iterations` one row per slot, with the staleness of its update where it counted.
A checkpoint (`run.checkpoint_every`, `testbed resume`) holds the federated state beside
data-parallel's (`state_dict`). Under torchrun a round's clients spread over the ranks
(testbed/distributed/federated.py); such a run does not checkpoint or resume yet.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from nodes.compression import phases as ph
from nodes.compression.base import Message, check_finite
from nodes.compression.memory import keep_undelivered
from nodes.compression.transport import carry_all, drive
from nodes.federated import (
    ClientMemories,
    Clients,
    ServerOptimizer,
    local_train,
    sample_clients,
    staleness_weight,
)
from nodes.partition import split
from nodes.workers import assign, flatten
from testbed.drivers.data_parallel import TrainingDriver
from testbed.emulation import world_at
from testbed.emulation.device_trace import apply_link_rates
from testbed.emulation.iteration_report import IterationReport, IterationTiming, Traffic
from testbed.emulation.timing import timed
from testbed.errors import ExperimentError
from testbed.run.rounds import Round
from testbed.run.setup import Training, World


def client_name(c: int) -> str:
    """A client's name in a device trace."""
    return f"c{c}"


def client_names(cfg) -> list[str]:
    """The names a device trace may give in a federated run: its clients'."""
    return [client_name(c) for c in range(cfg.federated.clients)]


def client_rng(seed: int) -> np.random.Generator:
    """The generator that draws the clients of a run."""
    return np.random.default_rng([int(seed), 26])


def merge(a: tuple[IterationTiming, Traffic], b: tuple[IterationTiming, Traffic]):
    """Two transport windows of one iteration (a download, then the exchange) as one."""
    (ta, fa), (tb, fb) = a, b
    merged = IterationReport(0.0, ta, fa, {}).merge(IterationReport(0.0, tb, fb, {}))
    return merged.timing, merged.traffic


TrainClients = Callable[["FederatedDriver", list[int], list[int], int], list[tuple]]


class FederatedDriver(TrainingDriver):
    """Federated rounds (`federated.mode`: sync rounds or FedBuff server steps) of a run with
    `[federated]`. `train_clients` / `memory`: a torchrun rank's (testbed/distributed/)."""

    def __init__(self, world: World, training: Training, *, transport=None, check=None,
                 train_clients: TrainClients | None = None, memory: ClientMemories | None = None):
        cfg, fed = world.cfg, world.cfg.federated
        if len(world.workers) != fed.slots:
            raise ExperimentError(f"the network has {len(world.workers)} workers; federated runs "
                                  f"need {fed.slots}, one per client of an exchange")
        super().__init__(world, training, transport, check)
        self.workers = world.workers
        shards = split(self.data.train_y, fed.clients, cfg.data.partition, alpha=cfg.data.alpha,
                       shards_per_worker=cfg.data.shards_per_worker, seed=cfg.run.seed)
        self.clients = Clients(shards, cfg.data.batch_size, cfg.run.seed)
        self.memory = memory if memory is not None else ClientMemories()
        self.train_clients = train_clients or FederatedDriver.train_each
        self.server_opt = ServerOptimizer(fed.server_optimizer, fed.server_lr,
                                          fed.server_momentum, fed.beta1, fed.beta2, fed.tau)
        self.weights = flatten(self.model.parameters()).clone()   # the global model
        self.rng = client_rng(cfg.run.seed)
        self.version = 0   # server steps so far
        self.stage: str | None = None   # the scheme's stage of the last exchange
        self.flight: dict[int, dict] | None = None   # fedbuff: slot -> the client training there
        self.pending = None   # fedbuff: a download window not yet in a row (after an idle step)
        # each link's rate in the file, which a slot returns to when its client has none traced
        self._slot_rates = {(u, v): spec.bandwidth_mbps for u, v, spec in world.network.links()}

    def budget(self) -> int:
        run, fed = self.cfg.run, self.cfg.federated
        if run.iterations is not None:
            return run.iterations
        per_round = fed.clients_per_round if fed.mode == "sync" else fed.buffer_size
        samples = per_round * fed.local_steps * self.cfg.data.batch_size
        return max(1, int(np.ceil(run.epochs * len(self.data.train_y) / samples)))

    def rounds(self, first: int) -> Iterator[Round]:
        return self._sync_rounds(first) if self.cfg.federated.mode == "sync" else self._fedbuff_steps(first)

    # ------------------------------------------------------------------ clients
    def _candidates(self, t: float, busy=()) -> list[int]:
        fed, devices = self.cfg.federated, self.world.devices
        out = [c for c in range(fed.clients) if c not in busy]
        if fed.sampler == "available" and devices is not None:
            out = [c for c in out if devices.available(client_name(c), t)]
        return out

    def _client_seconds(self, client: int, slot: int, wall_s: float, t: float) -> float:
        """Virtual seconds of a client's local steps: its traced speed (else its slot's)."""
        return world_at.compute_seconds(self.world, self.workers[slot], t,
                                      self.cfg.federated.local_steps * self.step_flops, wall_s,
                                      traced_as=client_name(client))

    def _train(self, client: int, it: int) -> tuple[torch.Tensor, float, float]:
        """The client's pseudo-gradient from the global weights, its loss, its wall seconds."""
        o = self.cfg.optim
        t = time.perf_counter()
        with timed(self.world.timer, "compute", it):
            delta, loss = local_train(self.model, self.weights, self.clients.sampler(client),
                                      self.data.train_x, self.data.train_y,
                                      self.cfg.federated.local_steps, self._lr(it),
                                      momentum=o.momentum, weight_decay=o.weight_decay)
        return delta, loss, time.perf_counter() - t

    def train_each(self, slots: list[int], clients: list[int], it: int) -> list[tuple]:
        """`_train` of each client (in `slots`), in turn, in this process."""
        return [self._train(c, it) for c in clients]

    # ------------------------------------------------------------------ transport windows
    def _model_message(self) -> Message:
        raw = self.weights.detach().cpu().numpy().astype(np.float32).tobytes()
        p = self.payload_bytes
        return Message([raw[i:i + p] for i in range(0, len(raw), p)])

    def _client_links(self, slots: list[int], clients: list[int], t: float) -> None:
        """A device trace's per-client uplink / downlink rates (FedScale's communication
        capacity) on the links of the slot each sampled client sends from, taken per
        transmission; a slot whose client has none gets the file's rate back."""
        if self.world.devices is None:
            return
        apply_link_rates(self.world.devices, self.world.network, [self.workers[s] for s in slots], t,
                         names={self.workers[s]: client_name(c) for s, c in zip(slots, clients)},
                         base=self._slot_rates)

    def _download(self, it: int, t: float, slots: list[int], clients: list[int]):
        """The global model to `slots` (their `clients`) from time t: (end, (timing, traffic))."""
        self._client_links(slots, clients, t)
        names = [self.workers[s] for s in slots]
        self.transport.begin(it, t, {w: t for w in self.workers}, present=names)
        if self.cfg.federated.download_model and names:
            carry_all([ph.Downlink(self._model_message())], self.transport)
        r = self.transport.end()
        return r.clock, (r.timing, r.traffic)

    def _exchange(self, it: int, t: float, ready: dict, slots: list[int], clients: list[int],
                  grads: list[torch.Tensor], deadline: float | None):
        """The clients' pseudo-gradients (in `slots`) through the scheme over the transport."""
        names = [self.workers[s] for s in slots]
        self.transport.begin(it, t, ready, present=names, deadline=deadline)
        self.stage = self.scheme.stage(it)
        for s, c in zip(slots, clients):
            self.memory.load(self.scheme, s, c)
        agg = drive(self.scheme, it, grads, self.transport)
        r = self.transport.end()
        left_out = dict(r.left_out)
        keep_undelivered(self.scheme, [s for s in slots if left_out.get(self.workers[s]) == "deadline"])
        for s, c in zip(slots, clients):
            self.memory.save(self.scheme, s, c)
        counted = [s for s in slots if self.workers[s] not in left_out]
        # slots without a client this time are idle, not left out
        left_out = {w: why for w, why in left_out.items() if self.workers.index(w) in slots}
        return agg, left_out, counted, (r.timing, r.traffic), r.clock

    def _step(self, it: int, agg: torch.Tensor) -> None:
        if self.check is not None:
            self.check(it, agg)
        self.server_opt.step(self.weights, agg.to(self.weights))
        assign(self.model, self.weights)
        self.version += 1

    def _round(self, it: int, t0: float, window, losses, left_out, ready, counted, stale,
               taking_part, stage_at: float) -> Round:
        timing, traffic = window
        return Round(it, t0, IterationReport(self.world.clock, timing, traffic, left_out), losses,
                     ready, taking_part, participants=len(counted),
                     staleness={self.workers[s]: stale[s] for s in counted}, stage=self.stage,
                     stage_at=stage_at)

    # ------------------------------------------------------------------ the rounds
    def _sync_rounds(self, first: int) -> Iterator[Round]:
        fed, n, world = self.cfg.federated, len(self.workers), self.world
        for it in range(first, self.iterations):
            t0 = world.clock
            chosen = sample_clients(self.rng, self._candidates(t0), fed.clients_per_round)
            if not chosen:
                yield self._idle(it, t0)
                continue
            slots = list(range(len(chosen)))
            t1, window = self._download(it, t0, slots, chosen)
            grads = [torch.zeros_like(self.weights) for _ in range(n)]
            ready = {w: t1 for w in self.workers}
            losses = []
            for s, c, (grads[s], loss, wall) in zip(slots, chosen,
                                                    self.train_clients(self, slots, chosen, it)):
                losses.append(loss)
                ready[self.workers[s]] = t1 + self._client_seconds(c, s, wall, t1)
            assign(self.model, self.weights)
            check_finite(grads, it)
            deadline = t0 + self.cfg.run.deadline_s if self.cfg.run.deadline_s else None
            agg, left_out, counted, ex, end = self._exchange(it, t1, ready, slots, chosen, grads,
                                                             deadline)
            if counted:
                self._step(it, agg)
            world.clock = max(end, t1 + ex[0].total_s)
            yield self._round(it, t0, merge(window, ex), losses, left_out, ready, counted,
                              {s: 0 for s in counted}, [self.workers[s] for s in slots], t1)

    def _refill(self, it: int, t: float, free: list[int]):
        """Newly drawn clients into the `free` slots: they download the model at t and train."""
        flight = self.flight
        busy = {f["client"] for f in flight.values()}
        chosen = sample_clients(self.rng, self._candidates(t, busy), len(free))
        slots = free[:len(chosen)]
        t1, window = self._download(it, t, slots, chosen)
        self.world.clock = max(self.world.clock, t1)
        for s, c, (delta, loss, wall) in zip(slots, chosen,
                                             self.train_clients(self, slots, chosen, it)):
            flight[s] = {"client": c, "version": self.version, "delta": delta, "loss": loss,
                         "ready": t1 + self._client_seconds(c, s, wall, t1)}
        assign(self.model, self.weights)
        return window

    def _fedbuff_steps(self, first: int) -> Iterator[Round]:
        fed, n, world = self.cfg.federated, len(self.workers), self.world
        if self.flight is None:   # a fresh run (a resumed one has its clients in flight)
            self.flight = {}
            self.pending = self._refill(first, world.clock, list(range(n)))
        flight = self.flight
        for it in range(first, self.iterations):
            t0 = world.clock
            if not flight:
                rnd = self._idle(it, t0)
                self.pending = self._refill(it, world.clock, list(range(n)))
                yield rnd
                continue
            buffer = sorted(flight, key=lambda s: (flight[s]["ready"], s))[:fed.buffer_size]
            grads = [torch.zeros_like(self.weights) for _ in range(n)]
            ready = {w: t0 for w in self.workers}
            stale = {}
            for s in buffer:
                f = flight[s]
                stale[s] = self.version - f["version"]
                grads[s] = staleness_weight(stale[s], fed.staleness) * f["delta"]
                ready[self.workers[s]] = max(f["ready"], t0)
            check_finite(grads, it)
            clients = [flight[s]["client"] for s in buffer]
            agg, left_out, counted, ex, end = self._exchange(it, t0, ready, buffer, clients, grads, None)
            losses = [flight[s]["loss"] for s in buffer]
            if counted:
                self._step(it, agg)
            world.clock = max(end, t0 + ex[0].total_s)
            for s in buffer:
                del flight[s]
            window = merge(self.pending, ex) if self.pending is not None else ex
            self.pending = None
            if it + 1 < self.iterations:  # the next clients download the new model (this row's)
                window = merge(window, self._refill(it, world.clock, buffer))
            yield self._round(it, t0, window, losses, left_out, ready, counted, stale,
                              list(self.workers), t0)

    def _idle(self, it: int, t0: float) -> Round:
        """No client was available at t0: a second of virtual time passes."""
        self.world.clock = t0 + 1.0
        return Round(it, t0, IterationReport(t0 + 1.0, IterationTiming(), Traffic(), {}), [],
                     {w: t0 for w in self.workers}, [], participants=0, stage=self.stage)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Data-parallel's (model, scheme, worker pool) and the federated state: the global
        weights, the server optimizer, the client draw's generator, every client's error
        memories and batch order, and under fedbuff the clients in flight (their model version,
        held pseudo-gradient and compute end)."""
        return {**super().state_dict(), "federated": {
            "weights": self.weights.clone(), "server_opt": self.server_opt.state_dict(),
            "rng": self.rng.bit_generator.state, "version": self.version,
            "memory": self.memory.state_dict(), "clients": self.clients.state_dict(),
            "flight": self.flight, "pending": self.pending, "stage": self.stage}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        f = state["federated"]
        self.weights = f["weights"].to(self.weights)
        assign(self.model, self.weights)
        self.server_opt.load_state_dict(f["server_opt"])
        self.rng.bit_generator.state = f["rng"]
        self.version = f["version"]
        self.memory.load_state_dict(f["memory"])
        self.clients.load_state_dict(f["clients"])
        self.flight, self.pending = f["flight"], f["pending"]
        self.stage = f["stage"]
