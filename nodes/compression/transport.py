"""The one transport contract, and the one loop that drives a scheme.

A Scheme's `exchange()` yields phases (phases.py); a *transport* carries each one
(`carry(phase) -> result`) and returns its result. Three transports implement it:
- `nodes.compression.ideal.IdealTransport`: every packet delivered (or a `deliver` callback);
- `testbed.transport.EmulatedTransport`: over the emulated network (`channels.Network`), with
  the virtual clock and the bit accounting of the testbed's loop;
- `testbed.distributed.transport.DistributedTransport`: the emulated one in a torchrun job
  (real bytes shared between ranks, rank 0 runs the link layer).

Per iteration (what the testbed's loop uses, and all it uses): `begin(iteration, start, ready,
present=, deadline=)` before the scheme's exchange, `end() -> IterationReport` after it: the
virtual clock at the exchange's end, the time split (`IterationTiming`), what the network
carried (`Traffic`) and who was left out. The ideal transport has no clock and does not
implement them.

`drive()` is the only generator-stepping loop: it sends each phase's result back, and tells the
transport how many wall seconds the scheme itself spent before each phase (encoding, decoding),
which the emulated transport charges to the clock when `compute_time = "measured"`.

Adding a phase: its dataclass in phases.py, then one entry in each transport's `carriers()`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from nodes.compression.base import Scheme


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
        for (u, v), st in report.links.items():
            row = self.links.setdefault((u, v), {})
            for f in fields(st):
                value = getattr(st, f.name)
                row[f.name] = row.get(f.name, 0) + (float(value) if isinstance(value, float) else int(value))
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


class Transport:
    """Carries phases. Subclasses return `{PhaseType: handler}` from `carriers()`; a transport
    the testbed's loop runs also implements `begin` and `end`."""

    def carriers(self) -> dict[type, Callable[[Any], Any]]:
        raise NotImplementedError

    def carry(self, phase) -> Any:
        handler = self._table().get(type(phase))
        if handler is None:
            raise TypeError(f"scheme yielded {phase!r}; {type(self).__name__} carries "
                            f"{', '.join(t.__name__ for t in self._table())}")
        return handler(phase)

    def stepped(self, seconds: float) -> None:
        """Wall seconds the scheme computed before the next phase (or before returning)."""

    def begin(self, iteration: int, start: float, ready: dict[str, float], *,
              present: Iterable | None = None, deadline: float | None = None) -> None:
        """Iteration `iteration` starts at virtual time `start`; `ready`: each worker's compute
        end; `present`: the workers taking part (default all); `deadline`: when the round
        closes (absolute virtual seconds; None waits for everyone)."""
        raise NotImplementedError(f"{type(self).__name__} has no virtual clock")

    def end(self) -> IterationReport:
        """What the iteration begun last carried."""
        raise NotImplementedError(f"{type(self).__name__} has no virtual clock")

    def _table(self) -> dict[type, Callable[[Any], Any]]:
        table = self.__dict__.get("_carriers")
        if table is None:
            table = self.__dict__["_carriers"] = self.carriers()
        return table


def carry_all(phases: Iterable, transport: Transport) -> list:
    """Carry phases a driver sends itself (a model download to the round's clients): no
    scheme computes between them, so no time goes to `Transport.stepped`."""
    return [transport.carry(phase) for phase in phases]


def drive(scheme: Scheme, iteration: int, grads: list[torch.Tensor], transport: Transport) -> torch.Tensor:
    """Run `scheme.exchange(iteration, grads)` over `transport`; the averaged gradient."""
    gen = scheme.exchange(iteration, grads)
    result: Any = None
    while True:
        t = time.perf_counter()
        try:
            phase = gen.send(result)
        except StopIteration as stop:
            transport.stepped(time.perf_counter() - t)
            agg = stop.value
            break
        transport.stepped(time.perf_counter() - t)
        result = transport.carry(phase)
    if not isinstance(agg, torch.Tensor):
        raise TypeError(f"scheme {scheme.name!r} returned {type(agg).__name__}, expected a Tensor")
    return agg
