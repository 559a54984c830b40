"""What the testbed's loop needs of a transport beyond carrying phases, and what it gets back.

Per iteration: `begin(iteration, start, ready, present=, deadline=)` before the scheme's
exchange, `end() -> IterationReport` after it: the virtual clock at the exchange's end, the time
split (`IterationTiming`), what the network carried (`Traffic`) and who was left out. The
emulated transports (testbed/emulation/transport.py, testbed/distributed/transport.py)
implement it; a test's hand-made transport may too.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable


@dataclass
class IterationTiming:
    """Virtual seconds of one iteration split the way the dashboard stacks them."""
    compute_s: float = 0.0
    uplink_s: float = 0.0
    aggregation_s: float = 0.0
    downlink_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.compute_s + self.uplink_s + self.aggregation_s + self.downlink_s


@dataclass
class Traffic:
    """Per-iteration accumulation of what the network carried (node names as keys)."""
    bits_up: dict[str, int] = field(default_factory=dict)
    bits_down: dict[str, int] = field(default_factory=dict)
    uplink_done: dict[str, float] = field(default_factory=dict)
    links: dict[tuple[str, str], dict] = field(default_factory=dict)
    radio: dict[str, list[float]] = field(default_factory=dict)   # node -> [tx_s, rx_s]

    def add_radio(self, seconds: dict[str, tuple[float, float]]) -> None:
        """Each node's transmit and receive seconds of one link-layer call."""
        for node, (tx, rx) in seconds.items():
            acc = self.radio.setdefault(node, [0.0, 0.0])
            acc[0] += tx
            acc[1] += rx

    def add_bits(self, table: dict[str, int], node: str, bits: int) -> None:
        table[node] = table.get(node, 0) + int(bits)

    def merge(self, other: Traffic) -> Traffic:
        """This window's traffic followed by `other`'s (one row of the store from several
        transport windows, e.g. a federated round's download and exchange): a new Traffic."""
        out = Traffic()
        for name in ("bits_up", "bits_down"):
            for src in (getattr(self, name), getattr(other, name)):
                for node, bits in src.items():
                    out.add_bits(getattr(out, name), node, bits)
        out.uplink_done = {**self.uplink_done, **other.uplink_done}
        for src in (self.links, other.links):
            for key, row in src.items():
                acc = out.links.setdefault(key, {})
                for k, v in row.items():
                    if k != "snr_db":
                        acc[k] = acc.get(k, 0) + v
                acc["snr_db"] = acc["snr_db_sum"] / acc["snr_samples"] if acc.get("snr_samples") else None
        for src in (self.radio, other.radio):
            out.add_radio({node: tuple(v) for node, v in src.items()})
        return out

    def add_links(self, report) -> None:
        """Sum every per-link figure of a link-layer report (bytes, packets, lost,
        retransmitted, busy_s, collisions, retries, SNR sums): the store's links rows."""
        names: dict[type, list[str]] = {}   # each stats type's field names, looked up once
        for (u, v), st in report.links.items():
            row = self.links.setdefault((u, v), {})
            kind = type(st)
            if kind not in names:
                names[kind] = [f.name for f in fields(st)]
            for name in names[kind]:
                value = getattr(st, name)
                row[name] = row.get(name, 0) + (float(value) if isinstance(value, float) else int(value))
            # the stored column: mean SNR of the iteration's transmissions (fading links only)
            row["snr_db"] = row["snr_db_sum"] / row["snr_samples"] if row["snr_samples"] else None


@dataclass
class IterationReport:
    """What a transport carried in one iteration (`Transport.end()`)."""
    clock: float                # virtual seconds when the exchange ended
    timing: IterationTiming
    traffic: Traffic
    left_out: dict[str, str]    # worker -> "unavailable" | "deadline"
    # worker -> the packets of a lossy Downlink (phases.Downlink.lossy) it did not receive
    missed: dict[str, list[bytes]] = field(default_factory=dict)

    def merge(self, other: IterationReport) -> IterationReport:
        """This window followed by `other` as one report: times and traffic summed, the later
        window's clock, who was left out and what was missed from both (`other` wins a tie)."""
        timing = IterationTiming(**{k: getattr(self.timing, k) + getattr(other.timing, k)
                                    for k in vars(self.timing)})
        missed = {w: list(p) for w, p in self.missed.items()}
        for w, packets in other.missed.items():
            missed.setdefault(w, []).extend(packets)
        return IterationReport(max(self.clock, other.clock), timing,
                               self.traffic.merge(other.traffic),
                               {**self.left_out, **other.left_out}, missed)


@runtime_checkable
class ClockedTransport(Protocol):
    """A transport (nodes.compression.transport.Transport) with a virtual clock per iteration."""

    def carry(self, phase) -> Any: ...

    def stepped(self, seconds: float) -> None: ...

    def begin(self, iteration: int, start: float, ready: dict[str, float], *,
              present: Iterable | None = None, deadline: float | None = None) -> None:
        """Iteration `iteration` starts at virtual time `start`; `ready`: each worker's compute
        end; `present`: the workers taking part (default all); `deadline`: when the round
        closes (absolute virtual seconds; None waits for everyone)."""

    def end(self) -> IterationReport:
        """What the iteration begun last carried."""
