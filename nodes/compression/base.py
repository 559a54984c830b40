"""The one small interface every compression method implements.

A *Scheme* owns the whole method for one run: the per-worker state (residuals, momenta,
Q matrices, autoencoder copies) and the aggregator side. The testbed's loop only calls
`exchange()` and follows the phases it yields (see phases.py).
"""
from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import torch

if TYPE_CHECKING:   # phases.py imports Message from here
    from nodes.compression.phases import Phase


@dataclass
class Message:
    """Bytes that go on the wire, already split into self-contained packets.

    Each packet is at most the link's payload size and carries the coordinates it holds, so a
    lost packet loses only its own coordinates. Rates are always the lengths of these bytes.
    """
    packets: list[bytes] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(len(p) for p in self.packets)

    @property
    def nbits(self) -> int:
        return 8 * self.nbytes

    @property
    def sizes(self) -> list[int]:
        return [len(p) for p in self.packets]


class GradientError(ValueError):
    """A worker produced a gradient with NaN or Inf."""

    def __init__(self, worker: int, iteration: int, what: str = "NaN or Inf"):
        self.worker, self.iteration = worker, iteration
        super().__init__(f"worker w{worker} produced a gradient with {what} at iteration {iteration}")


def check_finite(grads: list[torch.Tensor], iteration: int) -> None:
    """GradientError for the first gradient holding a NaN or an infinity. A finite sum proves
    every element finite (NaN and infinities carry into any sum), at a sixth of `isfinite`'s
    cost; a sum that is not finite (also finite values past the dtype's range) is checked
    element by element."""
    for w, g in enumerate(grads):
        if not math.isfinite(g.sum()) and not torch.isfinite(g).all():
            raise GradientError(w, iteration)


COLLECTIVES = ("ps", "allreduce", "allgather")
Collective = Literal["ps", "allreduce", "allgather"]


class Scheme:
    """Base class. Subclasses set `name`, `collectives` and implement `exchange`.

    `collectives` lists the ways the method can exchange, its natural one first:
    "ps" (gather at a parameter server, which broadcasts the aggregate), "allreduce" (summable
    messages added along the ring) or "allgather" (every node receives every message and
    aggregates locally). `[compression] collective` picks one (a registry field); the
    instance's `collective` is the one this run uses.
    """

    name: ClassVar[str] = "base"
    # the method's byte in every packet header (pinned in registry.register; 255: none)
    wire_id: ClassVar[int] = 255
    collectives: ClassVar[tuple[Collective, ...]] = ("ps",)
    # True: momentum is applied inside the method (DGC's correction); the optimizer adds none.
    handles_momentum: ClassVar[bool] = False
    # True: its "ps" Downlink is the aggregate as codec coordinates (phases.Downlink.lossy),
    # so under best-effort delivery a worker's lost packets are lost (nodes/replicas.py)
    lossy_downlink: ClassVar[bool] = False

    values_dtype: ClassVar[str] = "f32"     # precision.py: what workers send
    downlink_dtype: ClassVar[str] = "f32"   # and what the server broadcasts

    def __init__(self, *, n_workers: int, shapes: list[torch.Size], payload_bytes: int,
                 seed: int = 0, device: torch.device | str = "cpu", values: str | None = None,
                 downlink: str | None = None, collective: str | None = None, **options: Any):
        # the registry's schema has checked `collective` against the class's `collectives`
        self.collective: Collective = collective or self.collectives[0]
        self.n_workers = n_workers
        self.shapes = list(shapes)
        self.numel = int(sum(torch.Size(s).numel() for s in self.shapes))
        self.payload_bytes = int(payload_bytes)
        self.seed = int(seed)
        self.device = torch.device(device)
        self.options = options
        # options already checked by the registry's schema (precision.py's fields)
        if values is not None:
            self.values_dtype = values
        if downlink is not None:
            self.downlink_dtype = downlink

    def stage(self, iteration: int) -> str:
        return "compressed"

    def exchange(self, iteration: int, grads: list[torch.Tensor]) -> Generator[Phase, Any, torch.Tensor]:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
