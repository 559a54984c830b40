"""Error feedback's one memory: per worker, what it has not sent yet.

Every method with error feedback (top-k, random-k, signSGD, PowerSGD, DGC and the LGC family
through DGC) keeps its memory here, keyed by worker, so the invariant

    had = compensate(worker, grad)      (the gradient plus what was kept)
    update(worker, had, sent)           (keep had - sent)

is the same object everywhere: what a worker had equals what it sent plus what it keeps.
Tensors are created lazily on the gradient's device; `state_dict` holds them on the CPU.
"""
from __future__ import annotations

import torch


def _copy(ts: list) -> list:
    return [None if t is None else t.detach().cpu().clone() for t in ts]


class ErrorMemory:
    """Residual error feedback: had = grad + residual; residual <- had - sent."""

    def __init__(self, n_workers: int, device: torch.device | str = "cpu"):
        self.n_workers, self.device = n_workers, torch.device(device)
        self.residuals: list[torch.Tensor | None] = [None] * n_workers

    def residual(self, worker: int, like: torch.Tensor | None = None) -> torch.Tensor | None:
        """What `worker` keeps (zeros like `like` before its first update)."""
        r = self.residuals[worker]
        if r is None and like is not None:
            r = self.residuals[worker] = torch.zeros_like(like)
        return r

    def compensate(self, worker: int, grad: torch.Tensor) -> torch.Tensor:
        """A new tensor: the gradient plus what the worker kept."""
        return grad + self.residual(worker, grad)

    def update(self, worker: int, had: torch.Tensor, sent: torch.Tensor) -> None:
        """Keep what was not sent; `sent` is dense, as the aggregate credits it."""
        self.residuals[worker] = had - sent

    def update_sparse(self, worker: int, had: torch.Tensor, index: torch.Tensor,
                      values: torch.Tensor) -> None:
        """As `update` with `sent` zero but at `index`; `had` is consumed (changed in place)."""
        had[index] -= values
        self.residuals[worker] = had

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

    Momentum factor masking: where a value is sent, u is zeroed too, so stale momentum does not
    push a coordinate that has just been delivered. The momentum is `momentum` (0 = plain EF).
    """

    def __init__(self, n_workers: int, device: torch.device | str = "cpu", momentum: float = 0.9):
        super().__init__(n_workers, device)
        self.momentum = float(momentum)
        self.u: list[torch.Tensor | None] = [None] * n_workers

    @property
    def v(self) -> list[torch.Tensor | None]:
        return self.residuals

    def ensure(self, worker: int, like: torch.Tensor) -> None:
        if self.u[worker] is None:
            self.u[worker] = torch.zeros_like(like)
            self.residuals[worker] = torch.zeros_like(like)

    def compensate(self, worker: int, grad: torch.Tensor) -> torch.Tensor:
        """v after accumulating the corrected momentum (the memory's own tensor)."""
        self.ensure(worker, grad)
        u = self.u[worker].mul_(self.momentum).add_(grad)
        return self.residuals[worker].add_(u)

    def update(self, worker: int, had: torch.Tensor, sent: torch.Tensor) -> None:
        self.u[worker][sent != 0] = 0.0
        self.residuals[worker] = had - sent

    def update_sparse(self, worker, had, index, values):
        super().update_sparse(worker, had, index, values)
        self.u[worker][index] = 0.0

    def state_dict(self) -> dict:
        return {"u": _copy(self.u), "v": _copy(self.residuals)}

    def load_state_dict(self, state: dict) -> None:
        for key in ("u", "v"):
            self._check(state, key)
        self.u = [None if t is None else t.clone().to(self.device) for t in state["u"]]
        self.residuals = [None if t is None else t.clone().to(self.device) for t in state["v"]]
