"""`LinkSpec`: the parameters of one directed link, as the topology stores them on its edges."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True)
class LinkSpec:
    bandwidth_mbps: float = 20.0
    delay_ms: float = 1.0
    mtu_bytes: int = 1500          # the whole packet on the wire, headers included
    header_bytes: int = 40
    queue_packets: int = 100       # drop-tail queue at a forwarding node
    delivery: str = "reliable"     # "reliable" | "best_effort"
    loss: dict = field(default_factory=lambda: {"model": "none"}, hash=False, compare=True)
    trace: str | None = None       # Mahimahi trace file: replaces bandwidth_mbps
    ack_bytes: int = 0             # >0: every acknowledgement costs this much airtime
    rto_margin_ms: float = 1.0     # retransmission timeout = round trip + this margin
    retry_limit: int = 7           # retransmissions of one packet before reliable delivery gives up
    distance_m: float | None = None  # geometric topologies: the length of the edge

    @property
    def payload_bytes(self) -> int:
        return self.mtu_bytes - self.header_bytes

    @property
    def delay_s(self) -> float:
        return self.delay_ms / 1000.0

    @property
    def rate_bps(self) -> float:
        return self.bandwidth_mbps * 1e6

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LinkSpec:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def with_changes(self, **changes: Any) -> LinkSpec:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
