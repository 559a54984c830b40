"""Error feedback's one memory: per worker, what it has not sent yet.

Every method with error feedback (top-k, random-k, signSGD, PowerSGD, DGC and the LGC family
through DGC) keeps its memory here, keyed by worker, so the invariant

    had = compensate(worker, grad)      (the gradient plus what was kept)
    update(worker, had, sent)           (keep had - sent)

is the same object everywhere: what a worker had equals what it sent plus what it keeps.
Tensors are created lazily on the gradient's device; `state_dict` holds them on the CPU.

When a worker's message does not count (testbed: left out at a deadline), `keep_all(worker)`
undoes that iteration's updates, so the worker keeps its whole compensated gradient (`had`)
and, with momentum, its momentum where it was masked; the memory records each update since
the worker's last `compensate` for this. A worker away for an iteration (device trace) keeps
its memory as it was: `snapshot` / `restore`. `hold_memory` and `keep_undelivered` apply
both to every memory of a scheme.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

from nodes.compression.base import Scheme


def _copy(ts: list) -> list:
    return [None if t is None else t.detach().cpu().clone() for t in ts]


class ErrorMemory:
    """Residual error feedback: had = grad + residual; residual <- had - sent."""

    def __init__(self, n_workers: int, device: torch.device | str = "cpu"):
        self.n_workers, self.device = n_workers, torch.device(device)
        self.residuals: list[torch.Tensor | None] = [None] * n_workers
        # per worker, this iteration's updates as (index or None, what was there before)
        self._undo: list[list] = [[] for _ in range(n_workers)]
        self._had: list[torch.Tensor | None] = [None] * n_workers   # its last compensate's

    def residual(self, worker: int, like: torch.Tensor | None = None) -> torch.Tensor | None:
        """What `worker` keeps (zeros like `like` before its first update)."""
        r = self.residuals[worker]
        if r is None and like is not None:
            r = self.residuals[worker] = torch.zeros_like(like)
        return r

    def compensate(self, worker: int, grad: torch.Tensor) -> torch.Tensor:
        """A new tensor: the gradient plus what the worker kept."""
        self._undo[worker] = []
        self._had[worker] = had = grad + self.residual(worker, grad)
        return had

    def update(self, worker: int, had: torch.Tensor, sent: torch.Tensor) -> None:
        """Keep what was not sent; `sent` is dense, as the aggregate credits it."""
        self._undo[worker].append(("residuals", None, had))
        self.residuals[worker] = had - sent

    def update_sparse(self, worker: int, had: torch.Tensor, index: torch.Tensor,
                      values: torch.Tensor) -> None:
        """As `update` with `sent` zero but at `index`; `had` is consumed (changed in place)."""
        self._undo[worker].append(("residuals", index, had[index].clone()))
        had[index] -= values
        self.residuals[worker] = had

    # -- when a worker's message did not count
    def keep_all(self, worker: int) -> None:
        """Undo this iteration's updates of `worker`: it keeps what it had (nothing was sent).
        With no update since its `compensate` (the exchange closed before it sent anything),
        what it had becomes its memory."""
        if not self._undo[worker] and self._had[worker] is not None:
            self.residuals[worker] = self._had[worker]
        for name, index, before in reversed(self._undo[worker]):
            if index is None:
                getattr(self, name)[worker] = before
            else:
                getattr(self, name)[worker][index] = before
        self._undo[worker], self._had[worker] = [], None

    _state = ("residuals",)   # the per-worker lists a snapshot holds

    def snapshot(self, worker: int) -> dict:
        return {n: None if (t := getattr(self, n)[worker]) is None else t.clone() for n in self._state}

    def restore(self, worker: int, snap: dict) -> None:
        for n, t in snap.items():
            getattr(self, n)[worker] = t
        self._undo[worker], self._had[worker] = [], None

    def state_dict(self) -> dict:
        return {"residuals": _copy(self.residuals)}

    def load_state_dict(self, state: dict) -> None:
        self._check(state, "residuals")
        self.residuals = [None if r is None else r.clone().to(self.device) for r in state["residuals"]]

    def _check(self, state: dict, key: str) -> None:
        if len(state[key]) != self.n_workers:
            raise ValueError(f"memory state {key!r} has {len(state[key])} entries for "
                             f"{self.n_workers} workers")


class MomentumMemory(ErrorMemory):
    """DGC's momentum correction: u = m u + g, v = v + u; had = v (the residual is v).

    Momentum factor masking (`masking` True, DGC's default): where a value is sent, u is zeroed
    too, so stale momentum does not push a coordinate that has just been delivered. With
    `masking` False u is kept where sent (only v loses what was sent): a coordinate sent every
    iteration then moves as with momentum SGD (v = u), and one sent every tau iterations carries
    its momentum on instead of restarting it. The momentum is `momentum` (0 = plain EF).
    """

    def __init__(self, n_workers: int, device: torch.device | str = "cpu", momentum: float = 0.9,
                 masking: bool = True):
        super().__init__(n_workers, device)
        self.momentum = float(momentum)
        self.masking = bool(masking)
        self.u: list[torch.Tensor | None] = [None] * n_workers

    @property
    def v(self) -> list[torch.Tensor | None]:
        return self.residuals

    def ensure(self, worker: int, like: torch.Tensor) -> None:
        if self.u[worker] is None:
            self.u[worker] = torch.zeros_like(like)
            self.residuals[worker] = torch.zeros_like(like)

    _state = ("residuals", "u")

    def compensate(self, worker: int, grad: torch.Tensor) -> torch.Tensor:
        """v after accumulating the corrected momentum (the memory's own tensor)."""
        self._undo[worker] = []
        self.ensure(worker, grad)
        u = self.u[worker].mul_(self.momentum).add_(grad)
        self._had[worker] = had = self.residuals[worker].add_(u)
        return had

    def update(self, worker: int, had: torch.Tensor, sent: torch.Tensor) -> None:
        if not self.masking:
            return super().update(worker, had, sent)
        masked = torch.nonzero(sent != 0, as_tuple=True)[0]
        self._undo[worker].append(("u", masked, self.u[worker][masked].clone()))
        self.u[worker][masked] = 0.0
        super().update(worker, had, sent)

    def update_sparse(self, worker, had, index, values, mask: bool = True):
        """`mask` False: keep the momentum where sent (coordinates sent every iteration, DGC's
        small layers sent whole: for them this is plain momentum SGD, as in DGC's reference
        code, whose uncompressed tensors go through the optimizer's momentum); with the memory's
        `masking` False, nothing is masked anywhere."""
        if not (mask and self.masking):
            return super().update_sparse(worker, had, index, values)
        self._undo[worker].append(("u", index, self.u[worker][index].clone()))
        super().update_sparse(worker, had, index, values)
        self.u[worker][index] = 0.0

    def state_dict(self) -> dict:
        return {"u": _copy(self.u), "v": _copy(self.residuals)}

    def load_state_dict(self, state: dict) -> None:
        for key in ("u", "v"):
            self._check(state, key)
        self.u = [None if t is None else t.clone().to(self.device) for t in state["u"]]
        self.residuals = [None if t is None else t.clone().to(self.device) for t in state["v"]]


class LowPassMemory(ErrorMemory):
    """ScaleCom's low-pass filtered memory: residual <- (1 - beta) residual + beta (had - sent).

    beta = 1 is plain residual error feedback; a smaller beta keeps a discounted running
    average of what was not sent (the filter cleans the memory's noise, so the workers'
    memories stay alike and one leader's top-k positions suit them all)."""

    def __init__(self, n_workers: int, device: torch.device | str = "cpu", beta: float = 1.0):
        super().__init__(n_workers, device)
        self.beta = float(beta)

    def update(self, worker: int, had: torch.Tensor, sent: torch.Tensor) -> None:
        old = self.residual(worker, had)
        self._undo[worker].append(("residuals", None, had.clone()))  # keep_all: all it had
        self.residuals[worker] = (1 - self.beta) * old + self.beta * (had - sent)

    def update_sparse(self, worker: int, had: torch.Tensor, index: torch.Tensor,
                      values: torch.Tensor) -> None:
        old = self.residual(worker, had)
        self._undo[worker].append(("residuals", None, had.clone()))
        had[index] -= values
        self.residuals[worker] = (1 - self.beta) * old + self.beta * had


def memories(scheme) -> list[ErrorMemory]:
    """Every error memory a scheme holds, its own and those of schemes inside it (LGC's DGC)."""
    found, seen, todo = [], set(), [scheme]
    while todo:
        obj = todo.pop()
        for value in vars(obj).values():
            if isinstance(value, ErrorMemory) and id(value) not in seen:
                seen.add(id(value))
                found.append(value)
            elif isinstance(value, Scheme) and id(value) not in seen:
                seen.add(id(value))
                todo.append(value)
    return found


@contextmanager
def hold_memory(scheme, workers):
    """Workers that take no part in an iteration (away): their memories as they were before it."""
    held = [(m, w, m.snapshot(w)) for m in memories(scheme) for w in workers]
    yield
    for m, w, snap in held:
        m.restore(w, snap)


def keep_undelivered(scheme, workers) -> None:
    """Workers whose messages did not count (left out at a deadline) keep all they had."""
    for m in memories(scheme):
        for w in workers:
            m.keep_all(w)
