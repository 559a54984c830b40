"""A torchrun rank's parts: what the Experiment of one rank is composed of.

Every rank builds the same Experiment (testbed/experiment.py) from the same file and seed
(same model init, same scheme object, same seeded network object), with `Rank` passed in:
- its gradient source, `RankGradients` (testbed/distributed/rank_gradients.py): data-parallel
  rank r is worker r and computes worker r's gradient only, on its own device (cuda:LOCAL_RANK or
  the CPU), the other workers' entries zeros;
- its transport, `DistributedTransport` (testbed/distributed/transport.py): at every phase that
  carries per-worker bytes the ranks exchange their own workers' real bytes, so every replica
  decodes the same bytes and takes the same step; only rank 0 runs the link layer and
  broadcasts each report, so the seeded network draws are the ones a single process makes;
- its collectives and their failure diagnosis, `Comm` (testbed/distributed/comm.py);
- the rank-level decisions, here: only rank 0 writes the store (the others a `NullStore`),
  reads steering controls and applies them to its network (the only network that runs),
  decides to stop, and evaluates (the result is broadcast); replicas are checked before each
  step; each rank keeps its own checkpoint file;
- in a federated run, its share of each round's clients (testbed/distributed/federated.py).
"""
from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from testbed.distributed.comm import Comm
from testbed.distributed.federated import RankClientMemories, train_rank_clients
from testbed.distributed.rank_gradients import FAULT_ENV, RankGradients, parse_fault
from testbed.distributed.transport import DistributedTransport
from testbed.errors import ExperimentError
from testbed.experiment import Experiment
from testbed.run import checkpoint


class NullStore:
    """What ranks other than 0 write to: nothing (rank 0 owns the store). It declares every
    `Store` method a run calls, and nothing else: a new call fails loudly here."""

    db = None
    path = None

    def create_run(self, *a, **k) -> int:
        return 0

    def pending_controls(self, run_id) -> list:
        return []

    def _nothing(self, *a, **k) -> None:
        return None

    append_iteration = append_eval = append_event = flush = finish_run = close = _nothing
    resolve_control = set_graph = rewind_run = _nothing


def aggregate_checksum(agg: torch.Tensor) -> list[int]:
    """Two int64 sums of the aggregate's bit patterns (plain and position-weighted), computed on
    its device: any bit that differs between replicas changes them."""
    bits = agg.detach().float().contiguous().view(torch.int32).to(torch.int64)
    weights = torch.arange(bits.numel(), device=bits.device) % 251 + 1
    return [int(bits.sum()), int((bits * weights).sum())]


class Rank:
    """One rank's parts of a torchrun run of `cfg`, the Experiment's placement
    (testbed/experiment.py's `Placement`) (data-parallel: rank r is worker r;
    federated: rank r runs the slots k of each exchange with k mod ranks = r)."""

    def __init__(self, cfg, comm: Comm, *, check_replicas: bool = True, store_path: str | None = None):
        """`store_path`: where rank 0's store is (every rank keeps its checkpoints beside it;
        None: no checkpoints)."""
        self.cfg, self.comm, self.store_path = cfg, comm, store_path
        self.federated = cfg.federated is not None
        # client memories spread over the ranks: federated runs do not checkpoint here yet
        self.checkpoints = store_path is not None and not self.federated
        self.check_replicas = check_replicas
        self.warnings: list[str] = []
        self.pool = None
        self.fault = parse_fault(os.environ.get(FAULT_ENV))

    def owner(self, worker: int) -> int:
        """The rank that computes `worker` (slot), whose real bytes come from there."""
        return worker % self.comm.world if self.federated else worker

    # ------------------------------------------------------------------ the parts
    def store_for(self, store):
        return store if self.comm.rank == 0 else NullStore()

    def transport(self, world) -> DistributedTransport:
        return world.emulated_transport(DistributedTransport, comm=self.comm, owner=self.owner)

    def gradients(self, world, training) -> RankGradients:
        return RankGradients(self.comm, training.pool, self.fault, training.replicas)

    def client_memories(self, world) -> RankClientMemories:
        return RankClientMemories(self.comm, self.owner, world.device)

    def train_clients(self, driver, slots: list[int], clients: list[int], it: int) -> list[tuple]:
        return train_rank_clients(self.comm, self.owner, driver, slots, clients, it)

    def prepare(self, exp) -> None:
        """Checks and settings once the rank's Experiment is built."""
        self.pool = exp.training.pool
        n = len(exp.world.workers)
        comm = self.comm
        if self.federated:
            if not 1 <= comm.world <= n:
                raise ExperimentError(
                    f"torchrun started {comm.world} processes for {n} clients per exchange; "
                    f"start between 1 and {n} (a rank runs slots k with k mod processes = its rank)")
            return   # clients train one at a time here: no vmap warning
        if n != comm.world:
            raise ExperimentError(
                f"the file's network has {n} workers but torchrun started {comm.world} "
                f"processes; start exactly one process per worker (--nproc-per-node x --nnodes "
                f"= {n})")
        # This rank computes worker r only: keep worker r's own sampler (its shard and its
        # seeded batch order, worker_seed(seed, r)), so the gradient is the single-process one.
        self.pool.samplers = [self.pool.samplers[comm.rank]]
        model = exp.training.model
        convs = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in model.modules())
        if self.pool.mode == "vmap" and convs and n > 1:
            # measured: a convolution vmapped over N workers rounds differently (~1e-8) from
            # one over a single worker, so top-k choices can flip after a while
            self.warnings.append(
                "run.workers_mode resolves to 'vmap' with a convolutional model: losses match the "
                "in-process run to float tolerance but bits may drift from it; set "
                "run.workers_mode = \"sequential\" in both for bit-exact runs")

    # ------------------------------------------------------------------ rank-0 decisions
    def stop_decision(self, local):
        """Rank 0's stop decision (`local` asked there), broadcast to every rank."""
        local = local or (lambda: False)

        def should_stop() -> bool:
            self.comm.iteration = self.pool.iteration  # the first collective of an iteration
            stop = bool(local()) if self.comm.rank == 0 else False
            return bool(self.comm.broadcast_object(stop, 0, "stop decision"))
        return should_stop

    def evaluation(self, driver):
        """Rank 0 evaluates; every rank gets its result."""
        def evaluate():
            result = driver.evaluate() if self.comm.rank == 0 else None
            return self.comm.broadcast_object(result, 0, "evaluation")
        return evaluate

    @staticmethod
    def eval_metrics() -> dict:
        """None here: a rank holds only its own worker's memory (the others' are stand-ins)."""
        return {}

    def check_replica(self, it: int, agg: torch.Tensor) -> None:
        """Stop if this aggregate differs from rank 0's (a method that decoded local state)."""
        if self.check_replicas:
            sums = self.comm.all_gather_ints(aggregate_checksum(agg), "replica check")
            odd = [r for r, s in enumerate(sums) if s != sums[0]]
            if odd:
                raise ExperimentError(
                    f"replicas diverged at iteration {it}: the aggregated gradient of rank(s) "
                    f"{', '.join(map(str, odd))} differs from rank 0's; method "
                    f"{self.cfg.compression.method!r} must decode only from the bytes it received")

    # ------------------------------------------------------------------ start, checkpoints
    def checkpoint_path(self, run_id: int):
        """One file per rank (each holds its own worker's compressor state and batch order;
        the model, optimizer and server-side state are the same on every rank)."""
        return checkpoint.path_for(self.store_path, run_id, rank=self.comm.rank)

    def started(self, exp) -> int:
        """After the run's start on rank 0's store: its distributed event and warnings; every
        rank gets the run's id."""
        world = exp.world
        if self.comm.rank == 0:
            world.store.append_event(world.run_id, "distributed", {
                "world_size": self.comm.world, "backend": self.comm.backend,
                "hosts": self._hosts()}, iteration=0, virtual_time_s=0.0)
            for text in self.warnings:
                world.store.append_event(world.run_id, "warning", {"warning": text}, iteration=0,
                                         virtual_time_s=0.0)
                print(f"testbed: warning: {text}", file=sys.stderr)
            world.store.flush()
        else:
            self._hosts()
        world.run_id = self.comm.broadcast_object(world.run_id, 0, "run id")
        return world.run_id

    def resuming(self, run_id: int, state: dict) -> None:
        if self.federated:
            raise ExperimentError("federated runs do not resume under torchrun yet; "
                                  "use --launcher local")
        its = self.comm.all_gather_ints([state["loop"]["iteration"]], "checkpoint check")
        if len({i[0] for i in its}) != 1:
            raise ExperimentError(f"the ranks' checkpoints of run {run_id} are of different "
                                  f"iterations ({[i[0] for i in its]}); the run cannot resume")

    def _hosts(self) -> list[str]:
        box = [None] * self.comm.world
        self.comm._collective("hosts", lambda: dist.all_gather_object(box, os.uname().nodename))
        return box


def rank_experiment(cfg, store, comm: Comm, **kwargs):
    """The Experiment a torchrun rank runs for `cfg` (`kwargs`: `Rank`'s)."""
    return Experiment(cfg, store, placement=Rank(cfg, comm, **kwargs))
