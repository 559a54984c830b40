"""A federated run under torchrun: each round's sampled clients spread over the ranks.

The rule: slot k of an exchange (sync: the k-th sampled client, in ascending client order;
fedbuff: the k-th client in flight) is computed by rank k mod N, N the ranks (1 <= N <= the
slots). Every rank runs the same federated driver in lockstep (the same draws of clients,
the same global weights, the same scheme object, the link layer on rank 0) composed as the
data-parallel rank is (testbed/distributed/rank.py, whose transport, replica check, rank-0
evaluation and store this reuses), with two parts of its own:

- `train_rank_clients` (the driver's `train_clients`): a rank runs its slots' clients' local steps in turn from the global
  weights; the other slots' pseudo-gradients are zeros, whose encoding `DistributedTransport`
  replaces with the real bytes from the slot's rank (`owner`). Losses, bad-gradient flags and
  wall times are exchanged. Every rank advances the batch order (the client's own generator,
  nodes/federated.py `Clients`) of every client that trains, so a client's batches do not
  depend on which rank runs it.
- `RankClientMemories`: a client's error memories live on the rank that last ran it (where its
  compressor step ran); drawn into another rank's slot, they travel there first (their real
  bytes, one broadcast) and leave the old rank.
- Per-slot scheme state other than error memory (PowerSGD's warm start, LGC's decoders) stays
  with the slot, hence with its rank, as it stays with the slot in one process.

The rows are the in-process run's, every column but wall time, bit for bit
(tests/e2e/test_federated_torchrun.py). Differences: a client's NaN/Inf pseudo-gradient stops
the run when it is computed (in one process, FedBuff notices it at the server step that
buffers it); with BatchNorm models each rank's running statistics follow only its own clients
(rank 0 evaluates); failure messages name ranks as "worker wR" (testbed/distributed/comm.py). Not here:
resume from checkpoints.
"""
from __future__ import annotations

import io

import torch

from nodes.compression.base import GradientError
from nodes.federated import ClientMemories


def _pack(snaps: list[dict]) -> bytes:
    buf = io.BytesIO()
    torch.save(snaps, buf)
    return buf.getvalue()


class RankClientMemories(ClientMemories):
    """Each client's error memories on the rank that last ran it; `holder` (the same on every
    rank, as every rank sees the same draws) says which rank that is."""

    def __init__(self, comm, owner, device):
        super().__init__()
        self.comm, self.owner, self.device = comm, owner, device
        self.holder: dict[int, int] = {}   # client -> the rank holding its memories

    def load(self, scheme, slot: int, client: int) -> None:
        """The client's memories into `slot` on the slot's rank, fetched from the rank that
        holds them if it is another (every rank calls this for the same slots in turn)."""
        here, there = self.owner(slot), self.holder.get(client)
        if there is not None and there != here:
            rank = self.comm.rank
            sent = [_pack(self.kept.pop(client))] if rank == there else None
            got = self.comm.broadcast_packets(sent, there, f"memories of client c{client}")
            if rank == here:
                self.kept[client] = torch.load(io.BytesIO(got[0]), map_location=self.device)
            self.holder[client] = here
        super().load(scheme, slot, client)   # empty ones on the other ranks (stand-ins)

    def save(self, scheme, slot: int, client: int) -> None:
        self.holder[client] = self.owner(slot)
        if self.comm.rank == self.owner(slot):
            super().save(scheme, slot, client)


def train_rank_clients(comm, owner, driver, slots: list[int], clients: list[int],
                       it: int) -> list[tuple]:
    """The federated driver's `train_clients` on a rank: this rank's slots trained, the others'
    pseudo-gradients zeros; every slot's loss and wall seconds from its rank; a bad gradient
    stops every rank alike."""
    comm.iteration = it
    rows = [0.0] * (3 * len(slots))   # per slot: loss, bad, wall seconds
    deltas = []
    for i, (s, c) in enumerate(zip(slots, clients)):
        if owner(s) == comm.rank:
            delta, loss, wall = driver._train(c, it)
            rows[3 * i:3 * i + 3] = [loss, float(not bool(torch.isfinite(delta).all())), wall]
        else:  # its rank trains it; its batch order moves on here as there (local_train's draws)
            sampler = driver.clients.sampler(c)
            for _ in range(driver.cfg.federated.local_steps):
                sampler.next()
            delta = torch.zeros_like(driver.weights)
        deltas.append(delta)
    if not slots:
        return []
    every = comm.all_gather_floats(rows, "client losses")
    got = [every[owner(s)][3 * i:3 * i + 3] for i, s in enumerate(slots)]
    for s, (_, bad, _) in zip(slots, got):
        if bad:
            raise GradientError(s, it)
    return [(d, loss, wall) for d, (loss, _, wall) in zip(deltas, got)]
