"""Communication phases a Scheme yields to the testbed's loop.

A Scheme's `exchange()` is a generator: it yields one of these, the testbed's loop carries the
traffic over the emulated network (channels/), advances the virtual clock and sends back the
phase's result. This keeps every method's protocol (one round, two rounds, ring) in the method's
own module while the link layer stays the single place that decides timing and loss.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nodes.compression.base import Message


@dataclass
class Uplink:
    """Every worker sends its message to the aggregator (a PS gather).

    Result sent back: dict[worker -> list[bytes]], the packets that arrived, in send order.
    """
    messages: dict[int, Message]


@dataclass
class Downlink:
    """The aggregator broadcasts one message to all workers. Result: None.

    Made whole (what a worker misses is resent until it has every packet), unless `lossy`:
    the message is the aggregate as codec packets that each name their own coordinates, so
    under best-effort delivery nothing is resent and a worker that loses a packet lacks its
    coordinates (the transport reports them as `IterationReport.missed`, the testbed's loop
    keeps that worker's replica apart: nodes/replicas.py). Under reliable delivery nothing
    is lost and both are the same."""
    message: Message
    lossy: bool = False


@dataclass
class Scatter:
    """The aggregator sends each worker a message of its own (unicast, e.g. a Flower strategy's
    per-node instructions). Not made whole: under best-effort delivery a worker gets only the
    packets that arrived. Result: dict[worker -> (packets that arrived, in send order, and the
    virtual time its last one arrived)], for the present workers it was sent to."""
    messages: dict[int, Message]


@dataclass
class Members:
    """Who takes part in this iteration's exchange, as every node agrees on it before sending
    (a rendezvous): the workers present and whose compute ended before the deadline. A scheme
    asks when it must know in advance: a ring is formed over exactly these (`AllReduce`), and
    a leader must be one of them. Result: their indices, ascending. In a gather or all-gather
    a member can still be left out if its message arrives after the deadline (its entry is
    then missing from the result, as if all its packets were lost)."""
    n_workers: int


@dataclass
class AllReduce:
    """Ring all-reduce of equal-length byte buffers holding dense f32/f16 vectors.

    `buffers` holds exactly the members' (`Members`): the ring is formed over them. The
    testbed's loop sums them chunk by chunk along the ring on the real bytes
    (`nodes.compression.ring.ring_sum`) and times the ring with the link layer.
    Result: the summed vector as a float32 Tensor (identical at every node), or None when no
    worker takes part (`buffers` empty: the round closes without a ring).
    """
    buffers: dict[int, bytes]
    dtype: Literal["f32", "f16"] = "f32"


@dataclass
class Broadcast:
    """One worker, a member (`Members`), sends the same message to every other present node
    (e.g. LGC-RAR's shared indices from the leader over the ring/cell). Result: list[bytes],
    the packets as every node received them (whole: what a receiver misses is resent), so
    receivers decode what really travelled rather than the sender's own copy."""
    src: int
    message: Message


@dataclass
class AllGather:
    """Every worker sends its own message to every other node, for messages that cannot be
    summed on the way (top-k, QSGD, ...): the topology's ring/mesh/cell carries them and each
    node aggregates locally. Result: dict[worker -> list[bytes]], each worker's packets as
    every node received them (made whole like Broadcast, so every replica decodes the same
    bytes and takes the same step)."""
    messages: dict[int, Message]


@dataclass
class ServerCompute:
    """Virtual seconds the aggregator spends computing (e.g. training the autoencoder)."""
    seconds: float
    what: str = ""


@dataclass
class WorkerCompute:
    """Virtual seconds every worker spends computing in parallel (e.g. encoding)."""
    seconds: float
    what: str = ""


Phase = Uplink | Downlink | Scatter | Members | AllReduce | Broadcast | AllGather | ServerCompute | WorkerCompute
