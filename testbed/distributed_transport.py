"""The transport of a torchrun rank: real bytes between the ranks, the link layer on rank 0.

Every rank holds only its own worker's real message (the other workers' entries are garbage),
so at every phase that carries per-worker bytes the ranks first exchange them (`SHARES`): then
every rank's phase holds every worker's real bytes, the server-side decode (which depends only
on bytes received) is identical on every rank, and a Downlink needs no transfer. The emulated
transport then carries the phase over `RankZeroLink`: rank 0 runs the link layer and
broadcasts each report, so the seeded network draws are the ones a single process makes.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from channels.link_layer import LinkLayer
from channels.report import CollectiveReport
from nodes.compression import phases as ph
from nodes.compression.base import Message
from testbed.comm import Comm, WorkerFailure
from testbed.network import EdgeNetwork
from testbed.transport import EmulatedTransport


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
