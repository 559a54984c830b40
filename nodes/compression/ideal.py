"""Drive a Scheme's exchange() with ideal delivery (for tests, benchmarks and LGC).

Every packet arrives unless a `deliver(worker, packets) -> packets` callback says otherwise;
ring all-reduces are summed on the real bytes with ring_sum. `members` (default: every worker)
are the workers that take part: the others' messages are not carried, and a ring must be
formed over exactly the members (tests of how a method aggregates without some workers). The testbed's loop drives the same
generator with the same loop (`transport.drive`) over the emulated network instead
(testbed/emulation/transport.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from nodes.compression.base import Message, Scheme
from nodes.compression.phases import (
    AllGather,
    AllReduce,
    Broadcast,
    Downlink,
    Members,
    Scatter,
    ServerCompute,
    Uplink,
    WorkerCompute,
)
from nodes.compression.ring import allreduce_bytes_per_node, ring_sum
from nodes.compression.transport import Transport, drive

Deliver = Callable[[int, list[bytes]], list[bytes]]


@dataclass
class ExchangeStats:
    bits_up: dict[int, int] = field(default_factory=dict)        # per worker, all uplinks
    bits_down: int = 0                                           # all downlink broadcasts
    bits_allreduce: dict[int, int] = field(default_factory=dict)  # per node, sent on the ring
    bits_broadcast: int = 0                                      # worker broadcasts
    packets_up: int = 0
    packets_lost: int = 0
    compute_s: float = 0.0                                       # virtual seconds announced
    phases: list[str] = field(default_factory=list)                # the traffic, in order
    uplinks: list[dict[int, Message]] = field(default_factory=list)
    downlinks: list[Message] = field(default_factory=list)
    # wall seconds spent inside the scheme before each yield (index 0: the workers' encode)
    wall_s: list[float] = field(default_factory=list)

    @property
    def bits_up_total(self) -> int:
        return sum(self.bits_up.values())

    @property
    def bits_total(self) -> int:
        return (self.bits_up_total + self.bits_down + sum(self.bits_allreduce.values())
                + self.bits_broadcast)


class IdealTransport(Transport):
    """Every packet arrives (unless `deliver` drops some); all-reduces summed by ring_sum."""

    def __init__(self, deliver: Deliver | None = None, members: list[int] | None = None):
        self.deliver = deliver
        self.members = None if members is None else sorted(members)
        self.stats = ExchangeStats()

    def carriers(self):
        return {Members: self.roll, Uplink: self.uplink, Downlink: self.downlink,
                Scatter: self.scatter, AllReduce: self.allreduce,
                AllGather: self.allgather, Broadcast: self.broadcast,
                ServerCompute: self.compute, WorkerCompute: self.compute}

    def carry(self, phase):
        if not isinstance(phase, Members):  # the traffic phases (Members carries none)
            self.stats.phases.append(type(phase).__name__)
        return super().carry(phase)

    def stepped(self, seconds: float) -> None:
        self.stats.wall_s.append(seconds)

    def roll(self, phase: Members) -> list[int]:
        return list(range(phase.n_workers)) if self.members is None else list(self.members)

    def _taking_part(self, messages: dict) -> dict:
        return {w: m for w, m in messages.items() if self.members is None or w in self.members}

    def uplink(self, phase: Uplink) -> dict[int, list[bytes]]:
        stats = self.stats
        stats.uplinks.append(phase.messages)
        result = {}
        for w, msg in self._taking_part(phase.messages).items():
            stats.bits_up[w] = stats.bits_up.get(w, 0) + msg.nbits
            stats.packets_up += len(msg.packets)
            got = list(msg.packets) if self.deliver is None else list(self.deliver(w, list(msg.packets)))
            stats.packets_lost += len(msg.packets) - len(got)
            result[w] = got
        return result

    def downlink(self, phase: Downlink) -> None:
        self.stats.downlinks.append(phase.message)
        self.stats.bits_down += phase.message.nbits

    def scatter(self, phase: Scatter) -> dict[int, tuple[list[bytes], float]]:
        sent = self._taking_part(phase.messages)
        self.stats.bits_down += sum(m.nbits for m in sent.values())
        return {w: (list(m.packets), 0.0) for w, m in sent.items()}

    def allreduce(self, phase: AllReduce) -> torch.Tensor | None:
        order = sorted(phase.buffers)
        if self.members is not None and order != self.members:
            raise ValueError(f"all-reduce over workers {order}, but the members are {self.members}")
        if not order:
            return None
        for w in order:
            self.stats.bits_allreduce[w] = self.stats.bits_allreduce.get(w, 0) + 8 * allreduce_bytes_per_node(
                len(phase.buffers[w]), len(order), 4 if phase.dtype == "f32" else 2)
        return ring_sum([phase.buffers[w] for w in order], phase.dtype)

    def allgather(self, phase: AllGather) -> dict[int, list[bytes]]:
        # each member's message reaches the other nodes whole
        messages = self._taking_part(phase.messages)
        n = len(messages)
        for w, msg in messages.items():
            self.stats.bits_up[w] = self.stats.bits_up.get(w, 0) + msg.nbits
            self.stats.bits_broadcast += msg.nbits * max(0, n - 1)
        return {w: list(msg.packets) for w, msg in messages.items()}

    def broadcast(self, phase: Broadcast) -> list[bytes]:
        if self.members is not None and phase.src not in self.members:
            raise ValueError(f"broadcast from w{phase.src}, who does not take part ({self.members})")
        self.stats.bits_broadcast += phase.message.nbits
        return list(phase.message.packets)

    def compute(self, phase: ServerCompute | WorkerCompute) -> None:
        self.stats.compute_s += float(phase.seconds)


def run_exchange(scheme: Scheme, iteration: int, grads: list[torch.Tensor],
                 deliver: Deliver | None = None, members: list[int] | None = None
                 ) -> tuple[torch.Tensor, ExchangeStats]:
    """`drive` over an IdealTransport: the averaged gradient and what was carried."""
    transport = IdealTransport(deliver, members)
    agg = drive(scheme, iteration, grads, transport)
    return agg, transport.stats
