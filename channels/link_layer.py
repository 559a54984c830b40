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
    def gather(self, sends: dict, dst, at) -> CollectiveReport:
        """Every sender's packets (`sends`: node -> packet sizes) to `dst`."""

    def scatter(self, src, sends: dict, at) -> CollectiveReport:
        """`src`'s own packets to each destination (`sends`: node -> packet sizes), unicast."""

    def broadcast(self, src, dsts: list, sizes: list[int], at: float) -> CollectiveReport:
        """One source's packets to every node of `dsts` (sent once on a shared cell)."""

    def allgather(self, sends: dict, at) -> CollectiveReport:
        """Every sender's packets to every other sender."""

    def ring_allreduce(self, ring: list, payload_bytes: int, at: float) -> CollectiveReport:
        """The timing of a ring all-reduce of `payload_bytes` over `ring`, in its order."""

    def set_away(self, nodes: Iterable) -> None:
        """Nodes that forward nothing for now: routes go around them where they can."""

    def payload_bytes(self, src, dst) -> int:
        """The largest payload one packet carries on the route from `src` to `dst`."""
