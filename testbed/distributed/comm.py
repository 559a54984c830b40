"""This rank's place in a torchrun job: the few collectives the lockstep run needs, and the
diagnosis of a failed one.

Collectives time out after `timeout_s`; before each collective a rank records where it is in
the rendezvous store, so when a collective fails the ranks that never reached it (dead or hung)
are named in the error, which rank 0 writes into the store (run marked failed). torchrun's
SIGTERM to the other ranks when one fails becomes the same kind of error (`install_sigterm`).
"""
from __future__ import annotations

import json
import os
import re
import signal
import time
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from testbed.errors import Stopped
from testbed.errors import ExperimentError


class WorkerFailure(ExperimentError):
    """Another rank died, hung, or failed: this rank cannot go on."""


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
            self.store = distributed_c10d._get_default_store()
        except Exception:  # no store: failures are still reported, without the culprit
            self.store = None
        self._mark("start")

    # ------------------------------------------------------------------ set-up
    @classmethod
    def init(cls, *, device: torch.device, timeout_s: float) -> Comm:
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
