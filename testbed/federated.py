"""The federated driver: rounds of sampled clients over the emulated cell, in virtual time.

An experiment file with `[federated]` (testbed/config.py FEDERATED_KEYS) runs here; the
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
(testbed/federated_distributed.py); such a run does not checkpoint or resume yet.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from nodes.compression import phases as ph
from nodes.compression.base import Message, check_finite
from nodes.compression.memory import keep_undelivered
from nodes.compression.transport import IterationReport, IterationTiming, Traffic, drive
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
from testbed.device_trace import apply_link_rates
from testbed.experiment import Experiment, ExperimentError, Progress


def client_name(c: int) -> str:
    """A client's name in a device trace."""
    return f"c{c}"


def client_rng(seed: int) -> np.random.Generator:
    """The generator that draws the clients of a run."""
    return np.random.default_rng([int(seed), 26])


def merge(a: tuple[IterationTiming, Traffic], b: tuple[IterationTiming, Traffic]):
    """Two transport windows of one iteration (a download, then the exchange) as one."""
    (ta, fa), (tb, fb) = a, b
    merged = IterationReport(0.0, ta, fa, {}).merge(IterationReport(0.0, tb, fb, {}))
    return merged.timing, merged.traffic


class FederatedExperiment(Experiment):
    """One federated run of an experiment file with `[federated]`, written into a store."""

    def traced_nodes(self) -> list[str]:
        return [client_name(c) for c in range(self.cfg.federated.clients)]

    def _setup(self) -> None:
        super()._setup()
        cfg, fed = self.cfg, self.cfg.federated
        if len(self.workers) != fed.slots:
            raise ExperimentError(f"the network has {len(self.workers)} workers; federated runs "
                                  f"need {fed.slots}, one per client of an exchange")
        shards = split(self.data.train_y, fed.clients, cfg.data.partition, alpha=cfg.data.alpha,
                       shards_per_worker=cfg.data.shards_per_worker, seed=cfg.run.seed)
        self.clients = Clients(shards, cfg.data.batch_size, cfg.run.seed)
        self.memory = ClientMemories()
        self.server_opt = ServerOptimizer(fed.server_optimizer, fed.server_lr,
                                          fed.server_momentum, fed.beta1, fed.beta2, fed.tau)
        self.weights = flatten(self.model.parameters()).clone()   # the global model
        self.rng = client_rng(cfg.run.seed)
        self.version = 0   # server steps so far
        self.flight: dict[int, dict] | None = None   # fedbuff: slot -> the client training there
        self.pending = None   # fedbuff: a download window not yet in a row (after an idle step)
        # each link's rate in the file, which a slot returns to when its client has none traced
        self._slot_rates = {(u, v): spec.bandwidth_mbps for u, v, spec in self.network.links()}

    def _iteration_budget(self) -> int:
        run, fed = self.cfg.run, self.cfg.federated
        if run.iterations is not None:
            return run.iterations
        per_round = fed.clients_per_round if fed.mode == "sync" else fed.buffer_size
        samples = per_round * fed.local_steps * self.cfg.data.batch_size
        return max(1, int(np.ceil(run.epochs * len(self.data.train_y) / samples)))

    # ------------------------------------------------------------------ clients
    def _candidates(self, t: float, busy=()) -> list[int]:
        fed = self.cfg.federated
        out = [c for c in range(fed.clients) if c not in busy]
        if fed.sampler == "available" and self.devices is not None:
            out = [c for c in out if self.devices.available(client_name(c), t)]
        return out

    def _client_seconds(self, client: int, slot: int, wall_s: float, t: float) -> float:
        """Virtual seconds of a client's local steps: its traced speed (else its slot's)."""
        traced = self.devices.speed(client_name(client), t) if self.devices else None
        w = self.workers[slot]
        speed = self.node_speed[w] if traced is None else traced
        if self.cfg.run.compute_time == "measured":
            return wall_s / speed
        return self.cfg.federated.local_steps * self.step_flops / (self.node_gflops[w] * 1e9 * speed)

    def _train(self, client: int, it: int) -> tuple[torch.Tensor, float, float]:
        """The client's pseudo-gradient from the global weights, its loss, its wall seconds."""
        o = self.cfg.optim
        t = time.perf_counter()
        with self._timed("compute", it):
            delta, loss = local_train(self.model, self.weights, self.clients.sampler(client),
                                      self.data.train_x, self.data.train_y,
                                      self.cfg.federated.local_steps, self._lr(it),
                                      momentum=o.momentum, weight_decay=o.weight_decay)
        return delta, loss, time.perf_counter() - t

    def _train_clients(self, slots: list[int], clients: list[int], it: int) -> list[tuple]:
        """`_train` of each client (in `slots`), in turn; a torchrun rank trains only its share
        (testbed/federated_distributed.py)."""
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
        if self.devices is None:
            return
        apply_link_rates(self.devices, self.network, [self.workers[s] for s in slots], t,
                         names={self.workers[s]: client_name(c) for s, c in zip(slots, clients)},
                         base=self._slot_rates)

    def _download(self, it: int, t: float, slots: list[int], clients: list[int]):
        """The global model to `slots` (their `clients`) from time t: (end, (timing, traffic))."""
        self._client_links(slots, clients, t)
        names = [self.workers[s] for s in slots]
        self.transport.begin(it, t, {w: t for w in self.workers}, present=names)
        if self.cfg.federated.download_model and names:
            self.transport.carry(ph.Downlink(self._model_message()))
        clock, timing, traffic, _ = self._carried()
        return clock, (timing, traffic)

    def _carried(self):
        """What the transport window begun last carried (the transport's declared
        per-iteration result): (clock, timing, traffic, left_out)."""
        r = self.transport.end()
        return r.clock, r.timing, r.traffic, dict(r.left_out)

    def _exchange(self, it: int, t: float, ready: dict, slots: list[int], clients: list[int],
                  grads: list[torch.Tensor], deadline: float | None):
        """The clients' pseudo-gradients (in `slots`) through the scheme over the transport."""
        names = [self.workers[s] for s in slots]
        self.transport.begin(it, t, ready, present=names, deadline=deadline)
        stage = self.scheme.stage(it)
        if stage != self.stage:
            self.store.append_event(self.run_id, "stage", {"stage": stage}, iteration=it,
                                    virtual_time_s=t)
            self.stage = stage
        for s, c in zip(slots, clients):
            self.memory.load(self.scheme, s, c)
        agg = drive(self.scheme, it, grads, self.transport)
        clock, timing, traffic, left_out = self._carried()
        keep_undelivered(self.scheme, [s for s in slots if left_out.get(self.workers[s]) == "deadline"])
        for s, c in zip(slots, clients):
            self.memory.save(self.scheme, s, c)
        counted = [s for s in slots if self.workers[s] not in left_out]
        # slots without a client this time are idle, not left out
        left_out = {w: why for w, why in left_out.items() if self.workers.index(w) in slots}
        return agg, left_out, counted, (timing, traffic), clock

    def _step(self, agg: torch.Tensor) -> None:
        self.server_opt.step(self.weights, agg.to(self.weights))
        assign(self.model, self.weights)
        self.version += 1

    # ------------------------------------------------------------------ the run
    def _loop(self) -> None:
        wall0 = time.perf_counter() - self._wall_offset
        rounds = self._sync_rounds if self.cfg.federated.mode == "sync" else self._fedbuff_steps
        self._stopped = False
        for it, row in rounds(wall0):
            if self._record(it, row, wall0):
                break
        if self._stopped:
            self.store.finish_run(self.run_id, "stopped", "stopped on request")
            return
        self.store.finish_run(self.run_id, "completed")

    def _iterations(self):
        """(it, t0) of each iteration still to run, after the prelude every mode shares: the
        stop check (a request ends them and sets `_stopped`) and the pending controls."""
        for it in range(self.next_iteration, self.iterations):
            if self.should_stop():
                self._stopped = True
                return
            self._apply_controls(it)
            yield it, self.clock

    def _sync_rounds(self, wall0):
        fed, n = self.cfg.federated, len(self.workers)
        for it, t0 in self._iterations():
            chosen = sample_clients(self.rng, self._candidates(t0), fed.clients_per_round)
            if not chosen:
                yield it, self._idle(t0)
                continue
            slots = list(range(len(chosen)))
            t1, window = self._download(it, t0, slots, chosen)
            grads = [torch.zeros_like(self.weights) for _ in range(n)]
            ready = {w: t1 for w in self.workers}
            losses = []
            for s, c, (grads[s], loss, wall) in zip(slots, chosen,
                                                    self._train_clients(slots, chosen, it)):
                losses.append(loss)
                ready[self.workers[s]] = t1 + self._client_seconds(c, s, wall, t1)
            assign(self.model, self.weights)
            check_finite(grads, it)
            deadline = t0 + self.cfg.run.deadline_s if self.cfg.run.deadline_s else None
            agg, left_out, counted, ex, end = self._exchange(it, t1, ready, slots, chosen, grads,
                                                             deadline)
            if counted:
                self._step(agg)
            self.clock = max(end, t1 + ex[0].total_s)
            yield it, {"t0": t0, "window": merge(window, ex), "losses": losses,
                       "left_out": left_out, "ready": ready, "participants": len(counted),
                       "taking_part": [self.workers[s] for s in slots],
                       "stale": {self.workers[s]: 0 for s in counted}}

    def _fedbuff_steps(self, wall0):
        fed, n = self.cfg.federated, len(self.workers)

        def refill(it: int, t: float, free: list[int]):
            flight = self.flight
            busy = {f["client"] for f in flight.values()}
            chosen = sample_clients(self.rng, self._candidates(t, busy), len(free))
            slots = free[:len(chosen)]
            t1, window = self._download(it, t, slots, chosen)
            self.clock = max(self.clock, t1)
            for s, c, (delta, loss, wall) in zip(slots, chosen,
                                                 self._train_clients(slots, chosen, it)):
                flight[s] = {"client": c, "version": self.version, "delta": delta, "loss": loss,
                             "ready": t1 + self._client_seconds(c, s, wall, t1)}
            assign(self.model, self.weights)
            return window

        if self.flight is None:   # a fresh run (a resumed one has its clients in flight)
            self.flight = {}
            self.pending = refill(self.next_iteration, self.clock, list(range(n)))
        flight = self.flight
        for it, t0 in self._iterations():
            if not flight:
                row = self._idle(t0)
                self.pending = refill(it, self.clock, list(range(n)))
                yield it, row
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
                self._step(agg)
            self.clock = max(end, t0 + ex[0].total_s)
            for s in buffer:
                del flight[s]
            window = merge(self.pending, ex) if self.pending is not None else ex
            self.pending = None
            if it + 1 < self.iterations:  # the next clients download the new model (this row's)
                window = merge(window, refill(it, self.clock, buffer))
            yield it, {"t0": t0, "window": window, "losses": losses, "left_out": left_out,
                       "ready": ready, "participants": len(counted),
                       "stale": {self.workers[s]: stale[s] for s in counted}}

    def _idle(self, t0: float) -> dict:
        """No client was available at t0: a second of virtual time passes; the iteration's row."""
        self.clock = t0 + 1.0
        return {"t0": t0, "window": (IterationTiming(), Traffic()), "losses": [], "left_out": {},
                "ready": {w: t0 for w in self.workers}, "participants": 0, "stale": {},
                "taking_part": []}

    def _record(self, it: int, r: dict, wall0: float) -> bool:
        """The iteration's rows, evaluation and progress; True when the target is reached."""
        timing, traffic = r["window"]
        t0, left_out, ready, stale = r["t0"], r["left_out"], r["ready"], r["stale"]
        ready_slots = r.get("taking_part", self.workers)
        train_loss = float(np.mean(r["losses"])) if r["losses"] else float("nan")
        bits_up, bits_down = sum(traffic.bits_up.values()), sum(traffic.bits_down.values())
        energy = {w: self.node_energy(w, self.clock - t0, max(0.0, ready[w] - t0),
                                      w not in ready_slots, traffic.radio)
                  for w in self.workers}
        self.store.append_iteration(
            self.run_id,
            {"iteration": it, "stage": self.stage, "virtual_time_s": self.clock,
             "wall_time_s": time.perf_counter() - wall0, "train_loss": train_loss,
             "bits_up": bits_up, "bits_down": bits_down, "left_out": len(left_out),
             "energy_j": sum(e["energy_j"] for e in energy.values()),
             "participants": r["participants"],
             "staleness": float(np.mean(list(stale.values()))) if stale else None, **vars(timing)},
            nodes=[{"iteration": it, "node": w, "bits_up": traffic.bits_up.get(w, 0),
                    "bits_down": traffic.bits_down.get(w, 0),
                    "compute_s": max(0.0, ready[w] - t0), "uplink_done_s": traffic.uplink_done.get(w),
                    "left_out": left_out.get(w), "staleness": stale.get(w), **energy[w]}
                   for w in self.workers],
            links=[{"iteration": it, "src": u, "dst": v, **row} for (u, v), row in traffic.links.items()])
        self._evaluate_and_save(it, wall0)   # evaluation, flush and checkpoint as data-parallel
        if self.progress:
            self.progress(Progress(it + 1, self.iterations, self.clock, bits_up + bits_down,
                                   train_loss, self.accuracy, self.stage or ""))
        return self._target_reached(it)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, iteration: int) -> dict:
        """Data-parallel's (model, scheme, link layer, clock, global generators) and the
        federated state: the global weights, the server optimizer, the client draw's generator,
        every client's error memories and batch order, and under fedbuff the clients in flight
        (their model version, held pseudo-gradient and compute end)."""
        return {**super().state_dict(iteration), "federated": {
            "weights": self.weights.clone(), "server_opt": self.server_opt.state_dict(),
            "rng": self.rng.bit_generator.state, "version": self.version,
            "memory": self.memory.state_dict(), "clients": self.clients.state_dict(),
            "flight": self.flight, "pending": self.pending}}

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


def experiment_class(cfg):
    """The Experiment that runs `cfg`: federated with `[federated]`, else data-parallel."""
    return FederatedExperiment if cfg.federated is not None else Experiment
