"""The transport of a torchrun rank: real bytes between the ranks, the link layer on rank 0.

Every rank holds only its own workers' real messages (rank r: worker r; in a federated run a
rank holds several slots, `owner`; the other entries are garbage), so at every phase that carries per-worker bytes the ranks first exchange them (`SHARES`): then
every rank's phase holds every worker's real bytes, the server-side decode (which depends only
on bytes received) is identical on every rank, and a Downlink needs no transfer. The emulated
transport then carries the phase over `RankZeroLink`: rank 0 runs the link layer and
broadcasts each report, so the seeded network draws are the ones a single process makes.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from channels.link_layer import LinkLayer
from channels.report import CollectiveReport
from nodes.compression import phases as ph
from nodes.compression.base import Message
from testbed.distributed.comm import Comm, WorkerFailure
from testbed.emulation.edge_network import EdgeNetwork
from testbed.emulation.transport import EmulatedTransport


def identity(worker: int) -> int:
    """Data-parallel runs: rank r holds worker r."""
    return worker


def _gather_owned(comm: Comm, items: dict, owner, what: str) -> dict:
    """Every worker's packet list (`items[w]`), from the rank `owner(w)` that holds its real
    one. A rank sends its workers' lists as one: a first packet of their lengths (int64), in
    ascending worker order, then their packets."""
    held = lambda r: [w for w in sorted(items) if owner(w) == r]  # noqa: E731
    mine = held(comm.rank)
    packed = [np.asarray([len(items[w]) for w in mine], dtype="<i8").tobytes(),
              *(p for w in mine for p in items[w])] if mine else None
    out = {}
    for r, packets in enumerate(comm.all_gather_packets(packed, what)):
        if packets is None:
            continue
        at = 1
        for w, count in zip(held(r), np.frombuffer(packets[0], dtype="<i8").tolist()):
            out[w] = packets[at:at + count]
            at += count
    return out


def _share_messages(comm: Comm, phase, owner):
    """Uplink / AllGather: every worker's message, from the rank that computed it."""
    got = _gather_owned(comm, {w: m.packets for w, m in phase.messages.items()}, owner,
                        type(phase).__name__.lower())
    return dataclasses.replace(phase, messages={w: Message(got[w]) for w in phase.messages})


def _share_buffers(comm: Comm, phase: ph.AllReduce, owner):
    got = _gather_owned(comm, {w: [b] for w, b in phase.buffers.items()}, owner,
                        "all-reduce buffers")
    return dataclasses.replace(phase, buffers={w: got[w][0] for w in phase.buffers})


def _share_broadcast(comm: Comm, phase: ph.Broadcast, owner):
    src = owner(phase.src)
    packets = comm.broadcast_packets(phase.message.packets if comm.rank == src else None,
                                     src, f"broadcast from w{phase.src}")
    return dataclasses.replace(phase, message=Message(packets))


# The phases that carry per-worker bytes, and how the ranks exchange them. The others (a
# Downlink, Members, compute) are computed identically on every rank from the bytes received.
SHARES = {ph.Uplink: _share_messages, ph.AllGather: _share_messages,
          ph.AllReduce: _share_buffers, ph.Broadcast: _share_broadcast}


def share(comm: Comm, phase, owner=identity):
    """The phase with every worker's real bytes in it: each rank holds only its own workers'
    (`owner(w)`: the rank that computes worker w; the other entries are garbage), so the ranks
    exchange them (`SHARES`)."""
    step = SHARES.get(type(phase))
    return phase if step is None else step(comm, phase, owner)


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

    def scatter(self, src, sends, at):
        return self._on_rank_zero("scatter", lambda: self.network.scatter(src, sends, at=at))

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

    def __init__(self, edge_network: EdgeNetwork, *, comm: Comm, owner=identity, measured: bool = False,
                 timer=None):
        """`owner(w)`: the rank that computes worker w (a federated round's clients spread
        over fewer ranks than slots, testbed/distributed/federated.py)."""
        self.comm, self.owner = comm, owner
        super().__init__(edge_network, measured=measured, link=RankZeroLink(comm, edge_network.network),
                         timer=timer)

    def carriers(self):
        return {kind: handler if kind not in SHARES else self._shared(SHARES[kind], handler)
                for kind, handler in super().carriers().items()}

    def _shared(self, step, handler):
        return lambda phase: handler(step(self.comm, phase, self.owner))
