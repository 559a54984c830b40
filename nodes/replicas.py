"""Each worker's model replica, held as the one shared model plus that worker's drift.

Under best-effort delivery a parameter server's downlink is not resent (testbed/emulation/transport.py):
a worker that loses a packet of the aggregate decodes the aggregate without that packet's
coordinates, i.e. it steps with a zero gradient there. Every worker runs the same optimizer
(torch's SGD: momentum, dampening 0, weight decay, Nesterov) on what it decoded, so its replica
theta_w and momentum buffer b_w follow the server's theta, b except through what it missed.
SGD is linear in (gradient, theta, buffer), so the differences d_w = theta_w - theta and
e_w = b_w - b follow, with g_w - g = -(the aggregate's values in the lost packets):

    u_w = (g_w - g) + weight_decay * d_w       (what the worker's step input differs by)
    e_w <- momentum * e_w + u_w                (no momentum: no buffer, e_w stays 0)
    d_w <- d_w - lr * (u_w + momentum * e_w if nesterov else e_w if momentum else u_w)

The model (the server's replica) is held once and is what a run evaluates; a worker's
gradient is computed at theta + d_w (nodes.workers.WorkerPool.gradients(offsets=)). A replica
is never re-synchronised: a lost coordinate stays missing until later steps make up for it.
Workers that never lost anything have no entry, so the loss-free path is the unchanged one.
"""
from __future__ import annotations

import torch


class Replicas:
    def __init__(self):
        self.drift: dict[int, torch.Tensor] = {}     # worker -> theta_w - theta (flat)
        self.momentum: dict[int, torch.Tensor] = {}  # worker -> b_w - b (flat)
        self._missed: dict[int, torch.Tensor] = {}   # this step's g_w - g

    def missed(self, worker: int, values: torch.Tensor) -> None:
        """Worker `worker` did not receive `values` (the aggregate where its lost packets
        carried coordinates, zeros elsewhere) of the coming optimizer step."""
        held = self._missed.get(worker)
        self._missed[worker] = -values if held is None else held - values

    def step(self, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
             nesterov: bool = False) -> None:
        """The optimizer step every replica took: carry each drifting worker's differences."""
        for w in sorted(set(self.drift) | set(self._missed)):
            d = self.drift.get(w)
            u = self._missed.pop(w, None)
            if u is None:
                u = torch.zeros_like(d)
            if d is not None and weight_decay:
                u = u + weight_decay * d
            if momentum:
                e = self.momentum.get(w)
                e = u if e is None else momentum * e + u
                self.momentum[w] = e
                u = u + momentum * e if nesterov else e
            self.drift[w] = -lr * u if d is None else d - lr * u

    def offsets(self) -> dict[int, torch.Tensor]:
        """worker -> its drift, for the workers whose replica differs from the model."""
        return dict(self.drift)

    def norm(self, worker: int) -> float:
        """L2 norm of worker's replica minus the model (0.0 when it never drifted)."""
        d = self.drift.get(worker)
        return 0.0 if d is None else float(torch.linalg.vector_norm(d))

    def state_dict(self) -> dict:
        return {"drift": {w: d.clone() for w, d in self.drift.items()},
                "momentum": {w: e.clone() for w, e in self.momentum.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.drift = {int(w): d.clone() for w, d in state.get("drift", {}).items()}
        self.momentum = {int(w): e.clone() for w, e in state.get("momentum", {}).items()}
        self._missed = {}
