"""`none`: uncompressed fp32 gradients, dense: the reference rate (templates.DenseScheme; by
PS, all-gather, or summed as raw f32 on a ring)."""
from __future__ import annotations

from nodes.compression import codec
from nodes.compression.precision import precision
from nodes.compression.registry import register
from nodes.compression.templates import DenseScheme


@register("none", wire_id=0, **precision(downlink="f32"))
class NoCompression(DenseScheme):
    """fp32 values, every coordinate, every iteration."""
    collectives = ("ps", "allreduce", "allgather")
    ring_dtype = "f32"

    def stage(self, iteration):
        return "dense"

    def encode(self, worker, iteration, grad):
        return codec.encode_dense(grad, payload_bytes=self.payload_bytes, dtype="f32",
                                  method=self.wire_id, iteration=iteration)
