"""The data-parallel driver: synchronous data-parallel SGD in virtual time, one round an iteration.

Per iteration: the gradient source gives every worker's real gradient on its shard; the
compression scheme's `exchange()` generator is driven (`nodes.compression.transport.drive`) over
the transport, by default the emulated network (testbed/emulation/transport.py), which says when every
packet arrives and which are lost; the aggregator's result steps the model. The virtual clock
advances by what the compute model and the network say, never by this machine's wall clock.
A torchrun rank (testbed/distributed/) passes in its own gradient source, transport and replica
check.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import torch

from nodes.compression import codec
from nodes.compression.base import check_finite
from nodes.compression.memory import hold_memory, keep_undelivered
from nodes.compression.transport import drive
from nodes.workers import evaluate, set_gradients
from testbed.emulation import world_at
from testbed.emulation.iteration_report import ClockedTransport, IterationReport
from testbed.emulation.timing import timed
from testbed.run.rounds import Round
from testbed.run.setup import Training, World

GradientSource = Callable[[], tuple[list[torch.Tensor], list[float], float]]


class LocalGradients:
    """Every worker's flat gradient and loss computed in this process, and the wall seconds
    per worker (what `compute_time = "measured"` charges)."""

    def __init__(self, world: World, training: Training):
        self.pool, self.n, self.replicas = training.pool, len(world.workers), training.replicas

    def __call__(self):
        w0 = time.perf_counter()
        # a worker whose replica lost part of a lossy downlink computes at its own replica
        grads, losses = self.pool.gradients(offsets=self.replicas.offsets())
        return grads, losses, (time.perf_counter() - w0) / self.n


def lr_at(cfg, it: int, iterations: int) -> float:
    """The learning rate of iteration `it` (`[optim]`: warm-up, then the schedule)."""
    o = cfg.optim
    lr = o.lr
    if o.warmup_iterations and it < o.warmup_iterations:
        return lr * (it + 1) / o.warmup_iterations
    if o.lr_schedule == "cosine":
        return 0.5 * lr * (1 + math.cos(math.pi * it / max(1, iterations)))
    if o.lr_schedule == "step":
        return lr * (0.1 ** (it * 3 // max(1, iterations)))  # x0.1 at 1/3 and 2/3
    return lr


class TrainingDriver:
    """What our own drivers share: the training parts (testbed/run/setup.py `Training`) in a world,
    its evaluation, its checkpointed state and its start-up figures."""

    def __init__(self, world: World, training: Training, transport: ClockedTransport | None = None,
                 check: Callable[[int, torch.Tensor], None] | None = None):
        """`check(it, aggregate)`: called before each step (a torchrun rank's replica check)."""
        self.world, self.cfg, self.training = world, world.cfg, training
        self.model, self.data, self.pool = training.model, training.data, training.pool
        self.scheme, self.optimizer, self.replicas = training.scheme, training.optimizer, training.replicas
        self.payload_bytes, self.step_flops = training.payload_bytes, training.step_flops
        self.transport = transport if transport is not None else world.emulated_transport()
        self.check = check
        self.iterations = self.budget()

    def budget(self) -> int:
        run = self.cfg.run
        if run.iterations is not None:
            return run.iterations
        # One epoch: every training sample seen once across the workers (the pool's own count).
        return max(1, math.ceil(run.epochs * self.pool.iterations_per_epoch))

    def _lr(self, it: int) -> float:
        return lr_at(self.cfg, it, self.iterations)

    def describe(self) -> dict:
        return {"payload_bytes": self.payload_bytes, "step_flops": self.step_flops,
                "device": str(self.world.device),
                "parameters": sum(p.numel() for p in self.model.parameters())}

    def evaluate(self) -> tuple[float, float]:
        """Test loss and accuracy of the current model."""
        return evaluate(self.model, self.data.test_x, self.data.test_y,
                        batch_size=self.cfg.data.eval_batch_size, device=self.world.device)

    def eval_metrics(self) -> dict:
        """The method's own figures stored with each evaluation (LGC's in-use coder figures,
        testbed.records.store's lgc_ columns), from its view of every worker's state."""
        take = getattr(self.scheme, "eval_metrics", None)
        return take() if take else {}

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheme": self.scheme.state_dict(), "pool": self.pool.state_dict(),
                "replicas": self.replicas.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheme.load_state_dict(state["scheme"])
        self.pool.load_state_dict(state["pool"])
        self.replicas.load_state_dict(state.get("replicas", {}))  # none in older checkpoints

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

    def notes(self) -> list[str]:
        note = self.delivery_note()
        return [note] if note else []


class DataParallelDriver(TrainingDriver):
    """Synchronous data-parallel iterations: every present worker's gradient, one exchange,
    one optimizer step."""

    def __init__(self, world: World, training: Training, *, gradients: GradientSource | None = None,
                 transport: ClockedTransport | None = None, check=None):
        super().__init__(world, training, transport, check)
        self.gradients = gradients if gradients is not None else LocalGradients(world, training)

    def rounds(self, first: int) -> Iterator[Round]:
        world = self.world
        for it in range(first, self.iterations):
            t = world.clock
            with timed(world.timer, "compute", it):
                grads, losses, wall_compute = self.gradients()
            check_finite(grads, it)
            present = world_at.present(world, t)
            world_at.device_links(world, t)
            world_at.move(world, t)
            ready = {w: t + (world_at.compute_seconds(world, w, t, self.step_flops, wall_compute)
                         if w in present else 0.0)
                     for w in world.workers}
            away = [r for r, w in enumerate(world.workers) if w not in present]
            for r in away:  # an away worker's message is never sent
                grads[r] = torch.zeros_like(grads[r])
            stage = self.scheme.stage(it)
            agg, carried = self._exchange(it, t, ready, present, away, grads)
            world.clock = max(carried.clock, t + carried.timing.total_s)
            with timed(world.timer, "compute", it):
                self.apply_gradient(it, agg)
                self.follow_replicas(carried)
            yield Round(it, t, carried, losses, ready, present, stage=stage,
                        drift={w: self.replicas.norm(i) for i, w in enumerate(world.workers)})

    def _exchange(self, it: int, t: float, ready: dict, present: list, away: list[int],
                  grads: list[torch.Tensor]) -> tuple[torch.Tensor, IterationReport]:
        """The scheme's exchange over the transport: the aggregate and what was carried. An
        away worker's memory is held; a worker left out at the deadline keeps what it sent."""
        deadline = t + self.cfg.run.deadline_s if self.cfg.run.deadline_s else None
        self.transport.begin(it, t, ready, present=present, deadline=deadline)
        with hold_memory(self.scheme, away):
            agg = drive(self.scheme, it, grads, self.transport)
            carried = self.transport.end()
            keep_undelivered(self.scheme, [r for r, w in enumerate(self.world.workers)
                                           if carried.left_out.get(w) == "deadline"])
        return agg, carried

    def apply_gradient(self, it: int, agg: torch.Tensor) -> None:
        """One optimizer step with the aggregated gradient."""
        if self.check is not None:
            self.check(it, agg)
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
            self.replicas.missed(self.world.workers.index(name), lost.to(self.world.device))
        g = self.optimizer.param_groups[0]
        self.replicas.step(g["lr"], g["momentum"], g["weight_decay"], g["nesterov"])
