"""The one transport contract, and the one loop that drives a scheme.

A Scheme's `exchange()` yields phases (phases.py); a *transport* carries each one
(`carry(phase) -> result`) and returns its result. Three transports implement it:
- `nodes.compression.ideal.IdealTransport`: every packet delivered (or a `deliver` callback);
- `testbed.emulation.transport.EmulatedTransport`: over the emulated network (`channels.Network`), with
  the virtual clock and the bit accounting of the testbed's loop;
- `testbed.distributed.transport.DistributedTransport`: the emulated one in a torchrun job
  (real bytes shared between ranks, rank 0 runs the link layer).

A transport with a virtual clock (the emulated ones) also opens and closes each iteration
(`begin`/`end`, testbed/emulation/iteration_report.py); the ideal transport has no clock.

`drive()` is the only generator-stepping loop: it sends each phase's result back, and tells the
transport how many wall seconds the scheme itself spent before each phase (encoding, decoding),
which the emulated transport charges to the clock when `compute_time = "measured"`.

Adding a phase: its dataclass in phases.py, then one entry in each transport's `carriers()`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from nodes.compression.base import Scheme


class Transport:
    """Carries phases. Subclasses return `{PhaseType: handler}` from `carriers()`. (The
    testbed's loop also needs a virtual clock per iteration: testbed/emulation/iteration_report.py
    declares that contract.)"""

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
