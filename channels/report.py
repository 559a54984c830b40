"""What a call on the network returns: per-packet arrivals, per-node and per-link figures.

All times are absolute virtual seconds."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class FlowReport:
    src: str
    dst: str
    arrived: np.ndarray          # bool per packet, in the order of `sizes`
    arrival_s: np.ndarray        # float per packet, nan if lost
    completion_s: float          # when the last packet arrived (or would have: best-effort)
    packets_sent: int            # transmissions on the first hop, retransmissions included
    packets_lost: int            # transmissions lost (any hop, channel or queue)
    retransmissions: int
    bytes_on_wire: int           # payload + headers of every transmission on the first hop
    payload: np.ndarray | None = None   # payload bytes of each packet (the call's `sizes`)


@dataclass
class NodeStats:
    completion_s: float
    packets_sent: int = 0
    packets_lost: int = 0
    retransmissions: int = 0
    bytes_on_wire: int = 0


@dataclass
class LinkStats:
    bytes: int = 0
    packets: int = 0             # transmissions (CSMA: every attempt, collided ones included)
    lost: int = 0                # transmissions the loss model (or a relay's queue) dropped
    retransmitted: int = 0       # transmissions of packets resent by ARQ
    busy_s: float = 0.0          # airtime of this link's transmissions (dedicated links: and their ACKs;
                                 # a CSMA cell's MAC ACKs are airtime of the link back)
    header_s: float = 0.0        # CSMA: the PHY preambles and headers within busy_s (a receiver is
                                 # CCA-busy, not receiving, during them: channels/energy.py)
    heard_s: float = 0.0         # CSMA: what the cell's other stations receive of this link's unicast
                                 # frames (each one not collided, less its PHY preamble and header)
    heard_collided_s: float = 0.0  # CSMA: what the stations that did not send a collision receive of it
                                   # where they lock onto this link's frame (csma.collided_receptions)
    collided_deaf_s: float = 0.0   # CSMA: of that, what this link's sender did not receive (it was
                                   # sending into the same collision)
    # (A CSMA link's stats also carry `cell`, the name of the cell's access point: an attribute,
    # not a figure, so that summing the fields of reports leaves it out.)
    collisions: int = 0          # CSMA: attempts that collided with another station's
    retries: int = 0             # CSMA: MAC retransmissions (attempts after a frame's first)
    # Fading links: the SNR (dB) of the coherence block each transmission started in, summed,
    # and how many transmissions that is (0 on links without fading).
    snr_db_sum: float = 0.0
    snr_samples: int = 0

    @property
    def snr_db(self) -> float | None:
        """Mean SNR over the transmissions on a fading link; None on other links."""
        return self.snr_db_sum / self.snr_samples if self.snr_samples else None


@dataclass
class CollectiveReport:
    pattern: str
    start_s: float
    end_s: float
    flows: list[FlowReport] = field(default_factory=list)
    nodes: dict[str, NodeStats] = field(default_factory=dict)
    links: dict[tuple[str, str], LinkStats] = field(default_factory=dict)

    @property
    def lost_fraction(self) -> float:
        sent = sum(s.packets for s in self.links.values())
        return sum(s.lost for s in self.links.values()) / sent if sent else 0.0


def build_report(pattern: str, start_s: float, flows: list[FlowReport],
                 links: dict[tuple[str, str], LinkStats]) -> CollectiveReport:
    """Node figures from the flows: a node completes when every flow it sends or receives has."""
    nodes: dict[str, NodeStats] = {}
    for f in flows:
        for name in (f.src, f.dst):
            ns = nodes.setdefault(name, NodeStats(completion_s=start_s))
            ns.completion_s = max(ns.completion_s, f.completion_s)
        s = nodes[f.src]
        s.packets_sent += f.packets_sent
        s.packets_lost += f.packets_lost
        s.retransmissions += f.retransmissions
        s.bytes_on_wire += f.bytes_on_wire
    end = max([start_s, *(f.completion_s for f in flows)])
    return CollectiveReport(pattern, start_s, end, flows, nodes, links)
