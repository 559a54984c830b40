"""`LinkLayer`: what a transport asks of the link layer, and all it asks.

`channels.network.Network` implements it in the process that runs the traffic; a torchrun job
wraps that in `testbed.distributed.transport.RankZeroLink` (rank 0 runs each call, every rank gets its
report). The emulated transport (testbed/emulation/transport.py) calls nothing else of the link layer.
Times are absolute virtual seconds; `at` is one start time, or one per sender.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from channels.report import CollectiveReport


@runtime_checkable
class LinkLayer(Protocol):
    """The emulated network as a transport sees it: collectives of packets, timed.

    Each traffic call sends packets (their sizes in bytes) between the named nodes, starting
    at `at`, and returns a `CollectiveReport`: when each flow ended, what each node and link
    sent, received and lost. Node names are the topology's ("server", "w0", ...).
    """

    def gather(self, sends: dict, dst, at) -> CollectiveReport:
        """Every sender's packets to one node (the uplink to a parameter server).

        Args:
            sends: node -> the sizes of the packets it sends.
            dst: the receiving node.
            at: the start time, or node -> its own start (a node sends when its compute ends).

        Returns:
            The collective's report: one flow per sender.
        """

    def scatter(self, src, sends: dict, at) -> CollectiveReport:
        """One node's own packets to each destination, unicast (a message per node).

        Args:
            src: the sending node.
            sends: destination -> the sizes of the packets it is sent.
            at: the start time.

        Returns:
            The collective's report: one flow per destination.
        """

    def broadcast(self, src, dsts: list, sizes: list[int], at: float) -> CollectiveReport:
        """One node's packets to every node of `dsts` (sent once on a shared cell).

        Args:
            src: the sending node.
            dsts: the receiving nodes.
            sizes: the sizes of the packets, the same for every receiver.
            at: the start time.

        Returns:
            The collective's report: one flow per receiver.
        """

    def allgather(self, sends: dict, at) -> CollectiveReport:
        """Every sender's packets to every other sender.

        Args:
            sends: node -> the sizes of the packets it sends.
            at: the start time, or node -> its own start.

        Returns:
            The collective's report: one flow per sender and receiver.
        """

    def ring_allreduce(self, ring: list, payload_bytes: int, at: float) -> CollectiveReport:
        """The timing of a ring all-reduce (reduce-scatter, then all-gather) over `ring`.

        Args:
            ring: the nodes in ring order.
            payload_bytes: the bytes each node contributes (split into one chunk per node).
            at: the start time.

        Returns:
            The collective's report: its end is when every node holds the sum.
        """

    def set_away(self, nodes: Iterable) -> None:
        """Mark nodes that forward nothing for now: routes go around them where they can.

        Args:
            nodes: the nodes away now (replacing the previous set; empty: none).
        """

    def payload_bytes(self, src, dst) -> int:
        """The largest payload one packet carries on the route from `src` to `dst`.

        Args:
            src: the sending node.
            dst: the receiving node.

        Returns:
            Bytes of payload per packet: the smallest of the route's links'.
        """
