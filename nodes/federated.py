"""Federated learning's arithmetic, apart from any clock or network (testbed/drivers/federated.py drives it).

The shape is Flower's strategy (configure a round, aggregate it) and FedOpt's view of the
server (Reddi et al. 2021): a client runs local SGD from the global weights w and returns its
*pseudo-gradient* d = w - w_local (the model delta with the sign of a gradient). The sampled
clients' pseudo-gradients go through the compressor's exchange exactly as gradients do in
data-parallel training, and the server optimizer steps w with their mean:

    fedavg    w <- w - lr d                 (lr = 1: the plain mean of the local models)
    fedavgm   m <- beta m + d;  w <- w - lr m
    fedadam   m <- b1 m + (1 - b1) d;  v <- b2 v + (1 - b2) d^2;  w <- w - lr m / (sqrt(v) + tau)
              (FedOpt's Algorithm 2: no bias correction; tau the adaptivity, 1e-3)

Every sampled client runs the same number of local steps on same-sized batches, so the plain
mean of the exchange is FedAvg's mean weighted by examples processed.

FedBuff (Nguyen et al. 2022): a client's update is weighted by s(tau) = 1 / sqrt(1 + tau), tau
its staleness (server versions since the one it downloaded), `staleness = "none"`: s = 1.
The buffer's K updates are averaged as (1/K) sum s(tau_i) d_i and the server optimizer steps
with that. The weight multiplies the client's pseudo-gradient before its exchange (the client
is told the server version when it uploads), so the compressor's plain mean over the K is
FedBuff's weighted sum / K.

Error memory per client: a scheme is built for `slots` workers (the clients of one round);
`ClientMemories` swaps a client's memories into its slot before the exchange and out after, so
a client keeps its error memory across the rounds it takes part in, and only clients that have
taken part hold one. Other per-worker state of a scheme (PowerSGD's warm-start Q, LGC's
per-node decoders) stays with the slot.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nodes.compression.memory import memories
from nodes.sgd import SGD
from nodes.workers import ShardSampler, assign, flatten, worker_seed

SERVER_OPTIMIZERS = ("fedavg", "fedavgm", "fedadam")
STALENESS = ("sqrt", "none")


# ------------------------------------------------------------------------------ sampling
def sample_clients(rng: np.random.Generator, candidates, k: int) -> list[int]:
    """k distinct clients drawn uniformly from `candidates` (all of them if fewer), ascending."""
    candidates = list(candidates)
    if len(candidates) <= k:
        return sorted(candidates)
    return sorted(int(c) for c in rng.choice(candidates, size=k, replace=False))


def staleness_weight(staleness: int, kind: str = "sqrt") -> float:
    """FedBuff's weight of an update `staleness` server versions old."""
    if kind == "none":
        return 1.0
    if kind == "sqrt":
        return 1.0 / math.sqrt(1.0 + staleness)
    raise ValueError(f"staleness = {kind!r}: must be one of {', '.join(STALENESS)}")


# ------------------------------------------------------------------------------ the server
class ServerOptimizer:
    """Steps the flat global weights with the round's mean pseudo-gradient (see the module doc)."""

    def __init__(self, kind: str = "fedavg", lr: float = 1.0, momentum: float = 0.9,
                 beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3):
        if kind not in SERVER_OPTIMIZERS:
            raise ValueError(f"server_optimizer = {kind!r}: must be one of {', '.join(SERVER_OPTIMIZERS)}")
        self.kind, self.lr, self.momentum = kind, float(lr), float(momentum)
        self.beta1, self.beta2, self.tau = float(beta1), float(beta2), float(tau)
        self.m: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def step(self, weights: torch.Tensor, pseudo_grad: torch.Tensor) -> torch.Tensor:
        """`weights` changed in place (and returned)."""
        d = pseudo_grad.to(weights)
        if self.kind == "fedavg":
            return weights.sub_(self.lr * d)
        if self.m is None:
            self.m = torch.zeros_like(weights)
        if self.kind == "fedavgm":
            self.m.mul_(self.momentum).add_(d)
            return weights.sub_(self.lr * self.m)
        if self.v is None:
            self.v = torch.zeros_like(weights)
        self.m.mul_(self.beta1).add_((1 - self.beta1) * d)
        self.v.mul_(self.beta2).add_((1 - self.beta2) * d * d)
        return weights.sub_(self.lr * self.m / (self.v.sqrt() + self.tau))

    def state_dict(self) -> dict:
        return {"m": self.m, "v": self.v}

    def load_state_dict(self, state: dict) -> None:
        self.m, self.v = state["m"], state["v"]


# ------------------------------------------------------------------------------ the clients
class Clients:
    """The population: each client's shard (data indices) and, once it has taken part, its
    batch order; the model is held once, by the caller."""

    def __init__(self, shards: list[torch.Tensor], batch_size: int, seed: int):
        self.shards, self.batch_size, self.seed = shards, int(batch_size), int(seed)
        self.samplers: dict[int, ShardSampler] = {}

    def __len__(self) -> int:
        return len(self.shards)

    def sampler(self, client: int) -> ShardSampler:
        s = self.samplers.get(client)
        if s is None:
            s = self.samplers[client] = ShardSampler(self.shards[client], self.batch_size,
                                                     worker_seed(self.seed, client))
        return s

    def state_dict(self) -> dict:
        """The batch order of every client that has taken part (the others start fresh)."""
        return {c: s.state_dict() for c, s in self.samplers.items()}

    def load_state_dict(self, state: dict) -> None:
        self.samplers = {}
        for c, s in state.items():
            self.sampler(c).load_state_dict(s)


def local_train(model: nn.Module, weights: torch.Tensor, sampler: ShardSampler,
                train_x: torch.Tensor, train_y: torch.Tensor, steps: int, lr: float,
                momentum: float = 0.0, weight_decay: float = 0.0) -> tuple[torch.Tensor, float]:
    """`steps` SGD steps from `weights` on the client's batches; (pseudo-gradient = weights -
    local weights, mean training loss). A fresh optimizer per call: clients keep no momentum
    between rounds (FedAvg's client)."""
    assign(model, weights)
    opt = SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    losses = []
    for _ in range(steps):
        idx = sampler.next().to(train_x.device)
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return weights - flatten(model.parameters()), float(np.mean(losses))


# ------------------------------------------------------------------------------ error memory
class ClientMemories:
    """Each client's error memories (every memory of the scheme), kept between its rounds."""

    def __init__(self):
        self.kept: dict[int, list[dict]] = {}

    def load(self, scheme, slot: int, client: int) -> None:
        """The client's memories into `slot` (empty ones for a first-timer)."""
        snaps = self.kept.get(client)
        for i, m in enumerate(memories(scheme)):
            m.restore(slot, snaps[i] if snaps else dict.fromkeys(m._state))

    def save(self, scheme, slot: int, client: int) -> None:
        self.kept[client] = [m.snapshot(slot) for m in memories(scheme)]

    def state_dict(self) -> dict:
        return {c: [dict(s) for s in snaps] for c, snaps in self.kept.items()}

    def load_state_dict(self, state: dict) -> None:
        self.kept = {c: [dict(s) for s in snaps] for c, snaps in state.items()}

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for snaps in self.kept.values() for s in snaps
                   for t in s.values() if t is not None)
