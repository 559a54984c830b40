"""Drive a Scheme's exchange() with ideal delivery (for tests, benchmarks and LGC).

Every packet arrives unless a `deliver(worker, packets) -> packets` callback says otherwise;
ring all-reduces are summed on the real bytes with ring_sum. The real orchestrator
(testbed/experiment.py) drives the same generator over the emulated network instead.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from nodes.compression.base import Message, Scheme
from nodes.compression.phases import (AllGather, AllReduce, Broadcast, Downlink, ServerCompute, Uplink,
                                      WorkerCompute)
from nodes.compression.ring import allreduce_bytes_per_node, ring_sum

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
    phases: list[str] = field(default_factory=list)
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


def run_exchange(scheme: Scheme, iteration: int, grads: list[torch.Tensor],
                 deliver: Deliver | None = None) -> tuple[torch.Tensor, ExchangeStats]:
    stats = ExchangeStats()
    gen = scheme.exchange(iteration, grads)
    result = None
    t0 = time.perf_counter()
    try:
        phase = next(gen)
        while True:
            stats.wall_s.append(time.perf_counter() - t0)
            stats.phases.append(type(phase).__name__)
            if isinstance(phase, Uplink):
                stats.uplinks.append(phase.messages)
                result = {}
                for w, msg in phase.messages.items():
                    stats.bits_up[w] = stats.bits_up.get(w, 0) + msg.nbits
                    stats.packets_up += len(msg.packets)
                    got = list(msg.packets) if deliver is None else list(deliver(w, list(msg.packets)))
                    stats.packets_lost += len(msg.packets) - len(got)
                    result[w] = got
            elif isinstance(phase, Downlink):
                stats.downlinks.append(phase.message)
                stats.bits_down += phase.message.nbits
                result = None
            elif isinstance(phase, AllReduce):
                order = sorted(phase.buffers)
                bufs = [phase.buffers[w] for w in order]
                for w in order:
                    stats.bits_allreduce[w] = stats.bits_allreduce.get(w, 0) + 8 * allreduce_bytes_per_node(
                        len(phase.buffers[w]), len(order), 4 if phase.dtype == "f32" else 2)
                result = ring_sum(bufs, phase.dtype)
            elif isinstance(phase, AllGather):
                # each worker's message reaches the N-1 other nodes whole
                n = len(phase.messages)
                for w, msg in phase.messages.items():
                    stats.bits_up[w] = stats.bits_up.get(w, 0) + msg.nbits
                    stats.bits_broadcast += msg.nbits * max(0, n - 1)
                result = {w: list(msg.packets) for w, msg in phase.messages.items()}
            elif isinstance(phase, Broadcast):
                stats.bits_broadcast += phase.message.nbits
                result = list(phase.message.packets)
            elif isinstance(phase, (ServerCompute, WorkerCompute)):
                stats.compute_s += float(phase.seconds)
                result = None
            else:
                raise TypeError(f"scheme {scheme.name!r} yielded {phase!r}; expected a Phase")
            t0 = time.perf_counter()
            phase = gen.send(result)
    except StopIteration as stop:
        stats.wall_s.append(time.perf_counter() - t0)
        agg = stop.value
    if not isinstance(agg, torch.Tensor):
        raise TypeError(f"scheme {scheme.name!r} returned {type(agg).__name__}, expected a Tensor")
    return agg, stats
