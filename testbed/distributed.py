"""Multi-process runs: one torch.distributed rank per worker, in lockstep, real bytes between them.

Every rank builds the same Experiment from the same file and seed (same model init, same scheme
object, same seeded network object). Rank r is worker r:
- it computes only worker r's gradient, on its own device (cuda:LOCAL_RANK or the CPU), with
  worker r's own batch generator, so the gradient is the one the single-process run computes;
  the other workers' entries are zeros (the scheme encodes garbage for them, never used);
- at every Uplink / AllGather / Broadcast / AllReduce phase the ranks exchange their own worker's real
  message bytes (`Comm.all_gather_packets`), so every rank's phase then holds every worker's
  real bytes and the server-side decode - which only depends on received bytes - is identical on
  every rank: every replica takes the same optimizer step, and a Downlink needs no transfer;
- only rank 0 runs the link layer and broadcasts each CollectiveReport, so the seeded network
  draws (loss pattern, timing) are the ones a single process makes;
- only rank 0 writes the store, reads steering controls and applies them to its network (the
  only network that runs), decides to stop, and evaluates (the result is broadcast).

Failure: collectives time out after `timeout_s`; before each collective a rank records where it
is in the rendezvous store, so when a collective fails the ranks that never reached it (dead or
hung) are named in the error, which rank 0 writes into the store (run marked failed).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import sys
import time
from datetime import timedelta
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist

from channels.link_layer import LinkLayer
from channels.report import CollectiveReport
from nodes.compression import phases as ph
from nodes.compression.base import GradientError, Message
from testbed.errors import Stopped
from testbed.experiment import Experiment, ExperimentError
from testbed.network import EdgeNetwork
from testbed.transport import EmulatedTransport

# Methods whose per-worker state, in one process, would read state it does not have in another
# process (e.g. another worker's top-k positions instead of the ones it received): such a
# method would train differently from the single-process run, so it is refused here. Empty
# since LGC-PS and LGC-RAR read the leader's positions from the bytes that arrived.
NOT_MULTIPROCESS_SAFE: dict[str, str] = {}

# Test-only fault injection: "RANK:ITERATION:exit" (os._exit) or "RANK:ITERATION:hang" (sleep).
FAULT_ENV = "TESTBED_TEST_FAULT_INJECTION"


class WorkerFailure(ExperimentError):
    """Another rank died, hung, or failed: this rank cannot go on."""


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


def _first_line(err: BaseException, limit: int = 200) -> str:
    text = str(err).strip().splitlines()
    line = text[0] if text else type(err).__name__
    line = re.sub(r"^\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", line)  # Gloo's "[/src/pair.cc:537] "
    return line[:limit]


class Comm:
    """This process's place in the job and the few collectives the lockstep run needs.

    Every collective is wrapped: the rank first records (sequence number, iteration, what) in the
    rendezvous store; if the collective fails or times out, `_failure` names the ranks that are
    behind (never reached it: dead or hung) or that reported an error of their own.
    """

    def __init__(self, *, backend: str, timeout_s: float, device: torch.device):
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.backend = backend
        self.timeout_s = float(timeout_s)
        self.device = device  # where tensors for collectives live (cuda:LOCAL_RANK with NCCL)
        self.seq = 0
        self.iteration: int | None = None
        self.failing = False  # set while a failure is being explained (SIGTERM then waits)
        self.why = lambda: None  # install_sigterm's why(): "orphaned" once the launcher died
        self.store = None
        try:  # the rendezvous store (torchrun's agent keeps it alive when a worker dies)
            from torch.distributed.distributed_c10d import _get_default_store
            self.store = _get_default_store()
        except Exception:  # no store: failures are still reported, without the culprit
            self.store = None
        self._mark("start")

    # ------------------------------------------------------------------ set-up
    @classmethod
    def init(cls, *, device: torch.device, timeout_s: float) -> "Comm":
        """init_process_group from torchrun's environment: NCCL for a GPU, Gloo for the CPU."""
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs: dict[str, Any] = {"timeout": timedelta(seconds=float(timeout_s))}
        if backend == "nccl":
            # a timed-out NCCL collective raises (instead of the watchdog killing the process)
            os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
            kwargs["device_id"] = device
        dist.init_process_group(backend=backend, **kwargs)
        return cls(backend=backend, timeout_s=timeout_s, device=device)

    def close(self) -> None:
        self._mark("done")
        if dist.is_initialized():
            dist.destroy_process_group()

    # ------------------------------------------------------------------ progress and failure
    def _key(self, what: str, rank: int) -> str:
        return f"testbed/{what}/{rank}"

    def _mark(self, what: str) -> None:
        if self.store is None:
            return
        try:
            self.store.set(self._key("at", self.rank), json.dumps(
                {"seq": self.seq if what != "done" else 1 << 62, "iteration": self.iteration,
                 "what": what}))
        except Exception:
            self.store = None

    def report_failure(self, err: BaseException) -> None:
        """Tell the other ranks why this one stops (they name it in their error)."""
        if self.store is None:
            return
        try:
            self.store.set(self._key("failed", self.rank), json.dumps(
                {"primary": not isinstance(err, WorkerFailure), "error": _first_line(err, 400),
                 "iteration": self.iteration}))
        except Exception:
            pass

    def _read(self, what: str, rank: int) -> dict | None:
        key = self._key(what, rank)
        if not self.store.check([key]):
            return None
        return json.loads(self.store.get(key))

    def culprits(self, seq: int, grace_s: float = 2.0) -> list[str]:
        """Why the job broke, as seen from here: ranks that failed on their own, else ranks that
        did not reach collective `seq` (waiting `grace_s` for ranks that are merely busy)."""
        if self.store is None:
            return []
        try:
            self.store.set_timeout(timedelta(seconds=5))
            deadline = time.monotonic() + grace_s
            while True:
                others = [r for r in range(self.world) if r != self.rank]
                failed = {r: f for r in others if (f := self._read("failed", r)) is not None}
                primary = [f"rank {r} (worker w{r}) failed at iteration {f['iteration']}: {f['error']}"
                           for r, f in failed.items() if f["primary"]]
                if primary:
                    return primary
                at = {r: self._read("at", r) for r in others}
                behind = {r: a for r, a in at.items() if a is None or a["seq"] < seq}
                if not behind or time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
            return [f"rank {r} (worker w{r}) did not reach it (last seen at iteration "
                    f"{a['iteration'] if a else '?'}, {a['what'] if a else 'start-up'}): "
                    "it died or hung" for r, a in sorted(behind.items())]
        except Exception:
            return []

    def _failure(self, seq: int, what: str, err: BaseException) -> WorkerFailure:
        self.failing = True
        if self.why() == "orphaned":  # the peers went because the launcher did: name the cause
            return _orphaned(self)
        where = f"iteration {self.iteration}, {what}" if self.iteration is not None else what
        who = self.culprits(seq)
        cause = "; ".join(who) if who else "a peer process left or stopped answering"
        return WorkerFailure(f"rank {self.rank} lost the other workers at {where}: {cause} "
                             f"[{self.backend}: {_first_line(err, 120)}]")

    def _collective(self, what: str, fn):
        self.seq += 1
        self._mark(what)
        try:
            return fn()
        except WorkerFailure:  # raised by the SIGTERM handler while the collective waited
            raise
        except Exception as e:  # RuntimeError / DistBackendError / DistNetworkError
            raise self._failure(self.seq, what, e) from e

    # ------------------------------------------------------------------ collectives
    def all_gather_packets(self, packets: list[bytes] | None, what: str) -> list[list[bytes] | None]:
        """Every rank's packet list (None: that rank had nothing to send), as real bytes.

        Two collectives: (packet count, total bytes) of every rank, then one uint8 tensor per
        rank holding its packet sizes (int64) followed by the concatenated payload, padded to
        the longest."""
        n, total = (-1, 0) if packets is None else (len(packets), sum(len(p) for p in packets))
        head = torch.tensor([n, total], dtype=torch.int64, device=self.device)
        heads = [torch.empty_like(head) for _ in range(self.world)]
        self._collective(f"{what} (sizes)", lambda: dist.all_gather(heads, head))
        shape = [(int(h[0]), int(h[1])) for h in heads]
        width = max(8 * max(c, 0) + t for c, t in shape)
        buf = np.zeros(width, dtype=np.uint8)
        if packets is not None:
            buf[:8 * n] = np.asarray([len(p) for p in packets], dtype="<i8").view(np.uint8)
            buf[8 * n:8 * n + total] = np.frombuffer(b"".join(packets), dtype=np.uint8)
        mine = torch.from_numpy(buf).to(self.device)
        bufs = [torch.empty_like(mine) for _ in range(self.world)]
        self._collective(f"{what} (bytes)", lambda: dist.all_gather(bufs, mine))
        out: list[list[bytes] | None] = []
        for (c, t), b in zip(shape, bufs):
            if c < 0:
                out.append(None)
                continue
            raw = b.cpu().numpy()
            sizes = raw[:8 * c].view("<i8")
            data = raw[8 * c:8 * c + t].tobytes()
            ends = np.cumsum(sizes)
            out.append([data[e - s:e] for s, e in zip(sizes.tolist(), ends.tolist())])
        return out

    def broadcast_packets(self, packets: list[bytes] | None, src: int, what: str) -> list[bytes]:
        """Rank `src`'s packet list on every rank (same layout as all_gather_packets)."""
        sizes = [len(p) for p in packets] if self.rank == src else []
        head = torch.tensor([len(sizes), sum(sizes)], dtype=torch.int64, device=self.device)
        self._collective(f"{what} (sizes)", lambda: dist.broadcast(head, src))
        c, t = int(head[0]), int(head[1])
        buf = np.zeros(8 * c + t, dtype=np.uint8)
        if self.rank == src:
            buf[:8 * c] = np.asarray(sizes, dtype="<i8").view(np.uint8)
            buf[8 * c:] = np.frombuffer(b"".join(packets), dtype=np.uint8)
        tensor = torch.from_numpy(buf).to(self.device)
        self._collective(f"{what} (bytes)", lambda: dist.broadcast(tensor, src))
        raw = tensor.cpu().numpy()
        data = raw[8 * c:].tobytes()
        ends = np.cumsum(raw[:8 * c].view("<i8")).tolist()
        starts = [0] + ends[:-1]
        return [data[a:b] for a, b in zip(starts, ends)]

    def all_gather_floats(self, values: list[float], what: str) -> list[list[float]]:
        """Every rank's row of float64 values."""
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        rows = [torch.empty_like(mine) for _ in range(self.world)]
        self._collective(what, lambda: dist.all_gather(rows, mine))
        return [r.cpu().tolist() for r in rows]

    def all_gather_ints(self, values: list[int], what: str) -> list[list[int]]:
        mine = torch.tensor(values, dtype=torch.int64, device=self.device)
        rows = [torch.empty_like(mine) for _ in range(self.world)]
        self._collective(what, lambda: dist.all_gather(rows, mine))
        return [r.cpu().tolist() for r in rows]

    def broadcast_object(self, obj: Any, src: int, what: str) -> Any:
        box = [obj if self.rank == src else None]
        device = self.device if self.backend == "nccl" else None
        self._collective(what, lambda: dist.broadcast_object_list(box, src, device=device))
        return box[0]


def aggregate_checksum(agg: torch.Tensor) -> list[int]:
    """Two int64 sums of the aggregate's bit patterns (plain and position-weighted), computed on
    its device: any bit that differs between replicas changes them."""
    bits = agg.detach().float().contiguous().view(torch.int32).to(torch.int64)
    weights = torch.arange(bits.numel(), device=bits.device) % 251 + 1
    return [int(bits.sum()), int((bits * weights).sum())]


def _share_messages(comm: Comm, phase):
    """Uplink / AllGather: every worker's message, from the rank that computed it."""
    r = comm.rank
    mine = phase.messages[r].packets if r in phase.messages else None
    got = comm.all_gather_packets(mine, type(phase).__name__.lower())
    return dataclasses.replace(phase, messages={w: Message(got[w]) for w in phase.messages})


def _share_buffers(comm: Comm, phase: ph.AllReduce):
    r = comm.rank
    mine = [phase.buffers[r]] if r in phase.buffers else None
    got = comm.all_gather_packets(mine, "all-reduce buffers")
    return dataclasses.replace(phase, buffers={w: got[w][0] for w in phase.buffers})


def _share_broadcast(comm: Comm, phase: ph.Broadcast):
    packets = comm.broadcast_packets(phase.message.packets if comm.rank == phase.src else None,
                                     phase.src, f"broadcast from w{phase.src}")
    return dataclasses.replace(phase, message=Message(packets))


# The phases that carry per-worker bytes, and how the ranks exchange them. The others (a
# Downlink, Members, compute) are computed identically on every rank from the bytes received.
SHARES = {ph.Uplink: _share_messages, ph.AllGather: _share_messages,
          ph.AllReduce: _share_buffers, ph.Broadcast: _share_broadcast}


def share(comm: Comm, phase):
    """The phase with every worker's real bytes in it: each rank holds only its own worker's
    (the other entries are garbage), so the ranks exchange them (`SHARES`)."""
    step = SHARES.get(type(phase))
    return phase if step is None else step(comm, phase)


class RankZeroLink(LinkLayer):
    """The link layer of a torchrun job: rank 0 runs each collective on its network and every
    rank gets the report (or the error), so the seeded network draws are the ones a single
    process makes. Routes and payload sizes draw nothing: every rank computes them itself."""

    def __init__(self, comm: Comm, network: LinkLayer):
        self.comm, self.network = comm, network

    def _on_rank_zero(self, what: str, call: Callable[[], CollectiveReport]) -> CollectiveReport:
        outcome, error = None, None
        if self.comm.rank == 0:
            try:
                outcome = ("ok", call())
            except Exception as e:
                outcome, error = ("error", f"{type(e).__name__}: {e}"), e
        outcome = self.comm.broadcast_object(outcome, 0, f"network {what}")
        if error is not None:
            raise error
        if outcome[0] == "error":
            raise WorkerFailure(f"the link layer on rank 0 failed: {outcome[1]}")
        return outcome[1]

    def gather(self, sends, dst, at):
        return self._on_rank_zero("gather", lambda: self.network.gather(sends, dst, at=at))

    def broadcast(self, src, dsts, sizes, at):
        return self._on_rank_zero("broadcast", lambda: self.network.broadcast(src, dsts, sizes, at=at))

    def allgather(self, sends, at):
        return self._on_rank_zero("allgather", lambda: self.network.allgather(sends, at=at))

    def ring_allreduce(self, ring, payload_bytes, at):
        return self._on_rank_zero("ring_allreduce",
                                  lambda: self.network.ring_allreduce(ring, payload_bytes, at=at))

    def set_away(self, nodes) -> None:
        self.network.set_away(nodes)

    def payload_bytes(self, src, dst) -> int:
        return self.network.payload_bytes(src, dst)


class DistributedTransport(EmulatedTransport):
    """The emulated transport inside a torchrun job: every phase first gets every worker's real
    bytes (its `SHARES` step), then the emulated handler carries it over `RankZeroLink`. Clock,
    timing, traffic and the iteration's report are the emulated transport's own."""

    def __init__(self, net: EdgeNetwork, *, comm: Comm, measured: bool = False, timer=None):
        self.comm = comm
        super().__init__(net, measured=measured, link=RankZeroLink(comm, net.network), timer=timer)

    def carriers(self):
        return {kind: handler if kind not in SHARES else self._shared(SHARES[kind], handler)
                for kind, handler in super().carriers().items()}

    def _shared(self, step, handler):
        return lambda phase: handler(step(self.comm, phase))


class RankGradients:
    """This rank's worker's gradient; the losses, bad-gradient flags and wall times of all.

    Worker r's entry is its real gradient; the other workers' entries are zeros (the scheme
    encodes garbage for them, replaced by `share` with the real bytes)."""

    def __init__(self, comm: Comm, pool, fault=None):
        self.comm, self.pool, self.fault = comm, pool, fault

    def __call__(self):
        it = self.pool.iteration
        self.comm.iteration = it
        if self.fault and self.fault[0] == self.comm.rank and self.fault[1] == it:
            _inject(self.fault[2])
        w0 = time.perf_counter()
        grads, losses = self.pool.gradients()
        wall = time.perf_counter() - w0
        g = grads[0]
        bad = float(not bool(torch.isfinite(g).all()))
        rows = self.comm.all_gather_floats([losses[0], bad, wall], "loss exchange")
        for w, row in enumerate(rows):  # every rank stops on the same worker's bad gradient
            if row[1]:
                raise GradientError(w, it)
        full = [g if w == self.comm.rank else torch.zeros_like(g) for w in range(len(rows))]
        # The orchestrator charges one wall time per worker: the mean, as in one process.
        return full, [row[0] for row in rows], float(np.mean([row[2] for row in rows]))


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
        fault = _parse_fault(os.environ.get(FAULT_ENV))
        super().__init__(cfg, store if comm.rank == 0 else NullStore(), progress=progress,
                         should_stop=should_stop,
                         gradients=lambda exp: RankGradients(comm, exp.pool, fault),
                         transport=lambda exp: exp.emulated_transport(DistributedTransport, comm=comm))
        self._local_should_stop = self.should_stop
        self.should_stop = self._should_stop_all
        r, n = comm.rank, len(self.workers)
        if n != comm.world:
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

    def checkpoint_path(self, run_id: int):
        """One file per rank (each holds its own worker's compressor state and batch order;
        the model, optimizer and server-side state are the same on every rank)."""
        from testbed import checkpoint

        path = checkpoint.path_for(self.store_path, run_id)
        return path.with_name(f"{path.stem}.rank-{self.comm.rank}{path.suffix}")

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
        if self.check_replicas:
            sums = self.comm.all_gather_ints(aggregate_checksum(agg), "replica check")
            odd = [r for r, s in enumerate(sums) if s != sums[0]]
            if odd:
                raise ExperimentError(
                    f"replicas diverged at iteration {it}: the aggregated gradient of rank(s) "
                    f"{', '.join(map(str, odd))} differs from rank 0's; method "
                    f"{self.cfg.compression.method!r} must decode only from the bytes it received")
        super().apply_gradient(it, agg)

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


def _parse_fault(spec: str | None):
    """`RANK:ITERATION:exit|hang` -> (rank, iteration, action); None when unset."""
    if not spec:
        return None
    try:
        rank, it, action = spec.split(":")
        if action not in ("exit", "hang"):
            raise ValueError
        return int(rank), int(it), action
    except ValueError:
        raise ExperimentError(f"{FAULT_ENV} = {spec!r}: expected RANK:ITERATION:exit or "
                              "RANK:ITERATION:hang") from None


def _inject(action: str) -> None:
    """Test only: die at once (no clean-up, like a crash) or stop answering."""
    if action == "exit":
        os._exit(17)
    while True:
        time.sleep(3600)


def _orphaned(comm: Comm) -> WorkerFailure:
    return WorkerFailure(f"rank {comm.rank} stopped at iteration {comm.iteration}: its "
                         "launcher (testbed run --launcher torchrun) died")


def install_sigterm(comm: Comm, why=lambda: None) -> None:
    """torchrun ends the other ranks with SIGTERM when one fails: turn it into an error that
    names the rank that failed, so rank 0 marks the run failed with the reason. `why()` says
    when the SIGTERM means something else: "stop" (the user stopped the launcher: a
    KeyboardInterrupt, the run is marked stopped) or "orphaned" (the launcher died)."""
    comm.why = why

    def handler(signum, frame):
        if comm.failing:  # already on the way out with the reason: let it finish
            return
        comm.failing = True
        cause = why()
        if cause == "stop":
            raise Stopped(signum)
        if cause == "orphaned":
            raise _orphaned(comm)
        who = comm.culprits(comm.seq + 1, grace_s=0.5)
        raise WorkerFailure(f"rank {comm.rank} was stopped by torchrun (SIGTERM) at iteration "
                            f"{comm.iteration}: " + ("; ".join(who) if who else "another rank failed"))
    signal.signal(signal.SIGTERM, handler)


__all__ = ["Comm", "DistributedExperiment", "DistributedTransport", "RankGradients", "RankZeroLink",
           "share", "NullStore", "WorkerFailure", "aggregate_checksum", "install_sigterm",
           "FAULT_ENV", "NOT_MULTIPROCESS_SAFE"]
