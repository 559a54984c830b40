"""The Scatter phase (each worker its own message from the server) on the ideal transport."""
from __future__ import annotations

from nodes.compression.base import Message
from nodes.compression.ideal import IdealTransport
from nodes.compression.phases import Scatter


def test_each_worker_gets_its_own_message_whole():
    t = IdealTransport(members=[0, 2])
    msgs = {0: Message([b"ab", b"c"]), 1: Message([b"defg"]), 2: Message([b""])}
    got = t.carry(Scatter(msgs))
    assert got == {0: ([b"ab", b"c"], 0.0), 2: ([b""], 0.0)}     # members only
    assert t.stats.bits_down == 8 * (3 + 0)                     # what the server sent
