"""Multi-process runs: one torch.distributed rank per worker, in lockstep, real bytes between them.

Every rank builds the same Experiment from the same file and seed (same model init, same scheme
object, same seeded network object). Rank r is worker r, and its Experiment is composed of:
- its gradient source, `RankGradients` (testbed/rank_gradients.py): worker r's gradient only,
  on its own device (cuda:LOCAL_RANK or the CPU), the other workers' entries zeros;
- its transport, `DistributedTransport` (testbed/distributed_transport.py): at every phase that
  carries per-worker bytes the ranks exchange their own worker's real bytes, so every replica
  decodes the same bytes and takes the same step; only rank 0 runs the link layer and
  broadcasts each report, so the seeded network draws are the ones a single process makes;
- its collectives and their failure diagnosis, `Comm` (testbed/comm.py);
- the rank-level decisions, here: only rank 0 writes the store, reads steering controls and
  applies them to its network (the only network that runs), decides to stop, and evaluates
  (the result is broadcast); replicas are checked before each step.
"""
from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from testbed import checkpoint
from testbed.comm import Comm
from testbed.distributed_transport import DistributedTransport
from testbed.experiment import Experiment, ExperimentError
from testbed.rank_gradients import FAULT_ENV, RankGradients, parse_fault

# Methods whose per-worker state, in one process, would read state it does not have in another
# process (e.g. another worker's top-k positions instead of the ones it received): such a
# method would train differently from the single-process run, so it is refused here. Empty
# since LGC-PS and LGC-RAR read the leader's positions from the bytes that arrived.
NOT_MULTIPROCESS_SAFE: dict[str, str] = {}


class NullStore:
    """What ranks other than 0 write to: nothing (rank 0 owns the store). It declares every
    `Store` method an Experiment calls, and nothing else: a new call fails loudly here."""

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


class DistributedExperiment(Experiment):
    """The Experiment as one rank of a torchrun job: this rank is worker `comm.rank`.

    Composed, not rewired: its gradient source is `RankGradients` and its transport
    `DistributedTransport`; what it adds are the rank-level decisions (rank 0 evaluates,
    decides to stop and writes the store; replicas are checked before each step)."""

    def __init__(self, cfg, store, comm: Comm, *, progress=None, should_stop=None,
                 check_replicas: bool = True, store_path: str | None = None):
        """`store_path`: where rank 0's store is (every rank keeps its checkpoints beside it;
        None: no checkpoints)."""
        self.comm = comm
        self.store_path = store_path
        self.checkpoints = store_path is not None
        self.check_replicas = check_replicas
        method = cfg.compression.method
        if method in NOT_MULTIPROCESS_SAFE:
            raise ExperimentError(
                f"compression.method = {method!r} cannot run with one process per worker yet: "
                f"{NOT_MULTIPROCESS_SAFE[method]}; use --launcher local")
        fault = parse_fault(os.environ.get(FAULT_ENV))
        super().__init__(cfg, store if comm.rank == 0 else NullStore(), progress=progress,
                         should_stop=should_stop,
                         gradients=lambda exp: RankGradients(comm, exp.pool, fault),
                         transport=lambda exp: exp.emulated_transport(DistributedTransport, comm=comm,
                                                                      owner=exp.owner))
        self._local_should_stop = self.should_stop
        self.should_stop = self._should_stop_all
        r, n = comm.rank, len(self.workers)
        if n != comm.world and self.one_rank_per_worker:
            raise ExperimentError(
                f"the file's network has {n} workers but torchrun started {comm.world} "
                f"processes; start exactly one process per worker (--nproc-per-node x --nnodes "
                f"= {n})")
        # This rank computes worker r only: keep worker r's own sampler (its shard and its
        # seeded batch order, worker_seed(seed, r)), so the gradient is the single-process one.
        self.pool.samplers = [self.pool.samplers[r]]
        self.warnings: list[str] = []
        convs = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in self.model.modules())
        if self.pool.mode == "vmap" and convs and n > 1:
            # measured: a convolution vmapped over N workers rounds differently (~1e-8) from
            # one over a single worker, so top-k choices can flip after a while
            self.warnings.append(
                "run.workers_mode resolves to 'vmap' with a convolutional model: losses match the "
                "in-process run to float tolerance but bits may drift from it; set "
                "run.workers_mode = \"sequential\" in both for bit-exact runs")

    # Rank r computes worker r; a federated run spreads its slots over the ranks instead
    # (testbed/federated_distributed.py).
    one_rank_per_worker = True

    def owner(self, worker: int) -> int:
        """The rank that computes `worker` (its real bytes come from there)."""
        return worker

    def checkpoint_path(self, run_id: int):
        """One file per rank (each holds its own worker's compressor state and batch order;
        the model, optimizer and server-side state are the same on every rank)."""
        return checkpoint.path_for(self.store_path, run_id, rank=self.comm.rank)

    def resume(self, run_id: int, state: dict) -> None:
        its = self.comm.all_gather_ints([state["iteration"]], "checkpoint check")
        if len({i[0] for i in its}) != 1:
            raise ExperimentError(f"the ranks' checkpoints of run {run_id} are of different "
                                  f"iterations ({[i[0] for i in its]}); the run cannot resume")
        super().resume(run_id, state)

    # ------------------------------------------------------------------ rank-0 decisions
    def _should_stop_all(self) -> bool:
        self.comm.iteration = self.pool.iteration  # the first collective of an iteration
        stop = bool(self._local_should_stop()) if self.comm.rank == 0 else False
        return bool(self.comm.broadcast_object(stop, 0, "stop decision"))

    def scheme_metrics(self) -> dict:
        """None here: a rank holds only its own worker's memory (the others' are stand-ins)."""
        return {}

    def evaluate(self) -> tuple[float, float]:
        result = super().evaluate() if self.comm.rank == 0 else None
        return self.comm.broadcast_object(result, 0, "evaluation")

    def apply_gradient(self, it: int, agg: torch.Tensor) -> None:
        self.check_replica(it, agg)
        super().apply_gradient(it, agg)

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

    def start(self) -> int:
        super().start()
        if self.comm.rank == 0:
            self.store.append_event(self.run_id, "distributed", {
                "world_size": self.comm.world, "backend": self.comm.backend,
                "hosts": self._hosts()}, iteration=0, virtual_time_s=0.0)
            for text in self.warnings:
                self.store.append_event(self.run_id, "warning", {"warning": text}, iteration=0,
                                        virtual_time_s=0.0)
                print(f"testbed: warning: {text}", file=sys.stderr)
            self.store.flush()
        else:
            self._hosts()
        self.run_id = self.comm.broadcast_object(self.run_id, 0, "run id")
        return self.run_id

    def _hosts(self) -> list[str]:
        box = [None] * self.comm.world
        self.comm._collective("hosts", lambda: dist.all_gather_object(box, os.uname().nodename))
        return box
