"""`none`: uncompressed fp32 gradients, dense, plus the shared machinery of dense methods.

DenseScheme is the parameter-server exchange every dense method (none, fp16, qsgd, terngrad,
signsgd) follows: each worker encodes its whole gradient, the server decodes what arrived,
averages each coordinate over the workers whose packet for it arrived, and broadcasts the mean
densely in `downlink` precision. The returned gradient is what the workers decode from that
broadcast, so server and workers apply exactly the same update.
"""
from __future__ import annotations

import torch

from nodes.compression import codec
from nodes.compression.base import Message, Scheme, check_finite
from nodes.compression.codec import Decoded
from nodes.compression.phases import Downlink, Uplink
from nodes.compression.registry import Option, register


def counter_generator(seed: int, worker: int, iteration: int, salt: int = 0) -> torch.Generator:
    """A generator keyed by (seed, worker, iteration): random draws need no saved RNG state,
    so a run resumed from a checkpoint draws exactly what the uninterrupted run drew."""
    g = torch.Generator()
    g.manual_seed((((seed * 1_000_003 + worker) * 1_000_033 + iteration) * 31 + salt) % (2**63 - 1))
    return g


class DenseScheme(Scheme):
    collective = "ps"
    downlink_dtype = "f32"

    def __init__(self, *, downlink: str | None = None, **kw):
        super().__init__(**kw)
        if downlink is not None:
            if downlink not in ("f32", "f16"):
                raise ValueError(f"downlink={downlink!r} not allowed; allowed 'f32', 'f16'")
            self.downlink_dtype = downlink

    # -- what a subclass changes
    def encode(self, worker: int, iteration: int, grad: torch.Tensor) -> Message:
        raise NotImplementedError

    def decode(self, worker: int, iteration: int, packets: list[bytes]) -> Decoded:
        """Decoded gradient values (in gradient units) and the mask of what arrived."""
        return codec.decode(packets, self.numel, iteration=iteration)

    # -- the exchange
    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device if grads else self.device
        msgs = {w: self.encode(w, iteration, g.reshape(-1).float()) for w, g in enumerate(grads)}
        arrived = yield Uplink(msgs)
        mean = codec.mean_over_arrived(
            (self.decode(w, iteration, arrived.get(w, [])) for w in range(len(grads))), self.numel)
        down = codec.encode_dense(mean, payload_bytes=self.payload_bytes, dtype=self.downlink_dtype,
                                  method=self.name, kind=codec.KIND_AGGREGATE, iteration=iteration)
        yield Downlink(down)
        return codec.decode(down.packets, self.numel).values.to(out_device)


@register("none", downlink=Option("f32", str, choices=("f32", "f16"),
                                  help="precision of the server's broadcast of the mean"))
class NoCompression(DenseScheme):
    """fp32 values, every coordinate, every iteration: the reference rate."""

    def stage(self, iteration):
        return "dense"

    def encode(self, worker, iteration, grad):
        return codec.encode_dense(grad, payload_bytes=self.payload_bytes, dtype="f32",
                                  method=self.name, iteration=iteration)
