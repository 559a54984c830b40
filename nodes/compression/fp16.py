"""`fp16`: every coordinate as an IEEE half (2 bytes), dense; the mean goes back in fp16 too."""
from __future__ import annotations

from nodes.compression import codec
from nodes.compression.precision import precision
from nodes.compression.registry import register
from nodes.compression.templates import DenseScheme


@register("fp16", wire_id=1, **precision(downlink="f16"))
class FP16(DenseScheme):
    collectives = ("ps", "allreduce", "allgather")
    downlink_dtype = "f16"
    ring_dtype = "f16"  # on a ring every partial sum is rounded to f16, as a real f16 ring does

    def stage(self, iteration):
        return "dense"

    def check_wire(self, worker, iteration, grad):
        # values beyond the half range would become inf on the wire: refuse them by name
        big = float(grad.abs().max()) if grad.numel() else 0.0
        if big > 65504.0:
            raise ValueError(f"fp16: worker w{worker} gradient entry {big:.3g} at iteration {iteration} "
                             f"exceeds the half-precision range (65504); use method 'none'")

    def encode(self, worker, iteration, grad):
        self.check_wire(worker, iteration, grad)
        return codec.encode_dense(grad, payload_bytes=self.payload_bytes, dtype="f16",
                                  method=self.wire_id, iteration=iteration)
