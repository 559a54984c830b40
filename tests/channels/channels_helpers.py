import numpy as np

from channels.network import Network
from channels.topology import build_topology


def make_net(topology="star", workers=4, medium="dedicated", sharing="tdma", engine="auto", seed=0, **link):
    net_cfg = {"topology": topology, "workers": workers, "medium": medium, "sharing": sharing,
               "link": {"bandwidth_mbps": 10.0, "delay_ms": 5.0, **link}}
    g = build_topology(net_cfg, seed)
    return Network(g, medium=medium, sharing=sharing, engine=engine, rng=np.random.default_rng(seed))




def identical(a, b):
    """Two CollectiveReports agree float for float: every arrival, completion and link figure."""
    assert a.end_s == b.end_s and a.start_s == b.start_s and a.pattern == b.pattern
    for fa, fb in zip(a.flows, b.flows, strict=True):
        assert (fa.src, fa.dst) == (fb.src, fb.dst)
        assert np.array_equal(fa.arrived, fb.arrived)
        assert np.array_equal(fa.arrival_s, fb.arrival_s, equal_nan=True)
        assert fa.completion_s == fb.completion_s
        assert (fa.packets_sent, fa.packets_lost, fa.retransmissions, fa.bytes_on_wire) == \
               (fb.packets_sent, fb.packets_lost, fb.retransmissions, fb.bytes_on_wire)
    assert a.links == b.links       # every LinkStats field, busy_s included, exactly
    assert a.nodes == b.nodes


class FixedStream:
    """A backoff stream with chosen values (the `peek` / `take` of `channels.randomness.Stream`)."""

    def __init__(self, values):
        self.values, self.pos = list(values), 0

    def peek(self, n):
        return np.array((self.values + [0.999] * n)[self.pos:self.pos + n])

    def take(self, n):
        self.pos += n


def u(b, cw):
    """A uniform that draws counter b from [0, cw]."""
    return (b + 0.5) / (cw + 1)
