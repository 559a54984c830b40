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
        """The message's length in bytes, every packet's header included."""
        return sum(len(p) for p in self.packets)

    @property
    def nbits(self) -> int:
        """The message's length in bits (what the rates count)."""
        return 8 * self.nbytes

    @property
    def sizes(self) -> list[int]:
        """Each packet's length in bytes, what the link layer sends."""
        return [len(p) for p in self.packets]


class GradientError(ValueError):
    """A worker produced a gradient with NaN or Inf."""

    def __init__(self, worker: int, iteration: int, what: str = "NaN or Inf"):
        """Say which worker's gradient was not finite, and when.

        Args:
            worker: the worker's index (w0 is 0).
            iteration: the iteration it happened in.
            what: what the gradient held.
        """
        self.worker, self.iteration = worker, iteration
        super().__init__(f"worker w{worker} produced a gradient with {what} at iteration {iteration}")


def check_finite(grads: list[torch.Tensor], iteration: int) -> None:
    """Refuse the workers' gradients if one holds a NaN or an infinity.

    A finite sum proves every element finite (NaN and infinities carry into any sum), at a
    sixth of `isfinite`'s cost; a sum that is not finite (also finite values past the dtype's
    range) is checked element by element.

    Args:
        grads: each worker's gradient, in worker order.
        iteration: the iteration (for the message).

    Raises:
        GradientError: for the first worker whose gradient is not finite.
    """
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
        """Set up the method for one run (the registry has checked every option).

        Args:
            n_workers: the workers exchanging gradients.
            shapes: the model's parameter shapes, in order (a gradient is their concatenation).
            payload_bytes: the largest payload of one packet (the codec cuts messages to it).
            seed: the run's seed, for the method's own randomness.
            device: where its tensors live.
            values: `[compression] values`: the precision workers send values in ("f32", ...);
                None: the class's `values_dtype`.
            downlink: `[compression] downlink`: the precision of the server's broadcast; None:
                the class's `downlink_dtype`.
            collective: `[compression] collective`; None: the first of `collectives`.
            **options: the method's own options (`[compression]` keys its registration names).
        """
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
        """The method's stage at an iteration (e.g. DGC's warm-up, LGC's coder training).

        Args:
            iteration: the iteration, from 0.

        Returns:
            Its name; a change is marked in the run's events and stored per iteration.
        """
        return "compressed"

    def exchange(self, iteration: int, grads: list[torch.Tensor]) -> Generator[Phase, Any, torch.Tensor]:
        """One iteration's exchange: the workers' gradients in, the update every worker applies out.

        A generator: it yields the phases the messages travel in (phases.py: uplinks,
        broadcasts, ring sums, compute time), each answered with what arrived, and returns the
        aggregate.

        Args:
            iteration: the iteration, from 0.
            grads: each worker's gradient, in worker order.

        Returns:
            The averaged gradient as the method reconstructs it, one flat tensor (what each
            replica's optimizer steps with).
        """
        raise NotImplementedError

    def state_dict(self) -> dict:
        """The method's state for a checkpoint (residuals, momenta, coders).

        Returns:
            What `load_state_dict` restores; {} where the method keeps none.
        """
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore the state a checkpoint holds, before the iterations after it.

        Args:
            state: what `state_dict` returned.
        """
