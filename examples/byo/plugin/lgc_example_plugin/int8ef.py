"""`int8ef`: 8-bit codes per coordinate with error feedback, one scale per bucket.

p = g + e; each bucket of `bucket` coordinates sends s = max|p| / 127 (one f32) and
round(p / s) + 127 as one byte per coordinate; decoded = (code - 127) x s; e = p - decoded.
About a quarter of the fp32 rate.

Registered with the testbed's own decorator; its options are schema Fields, checked like any
method's. Its wire id comes from the range kept for methods of other packages (128..254).
"""
from __future__ import annotations

import torch

from lgc_schema import Field
from nodes.compression.memory import ErrorMemory
from nodes.compression.precision import precision
from nodes.compression.registry import register
from nodes.compression.templates import BucketScheme

WIRE_ID = 200


@register("int8ef", wire_id=WIRE_ID,
          bucket=Field(512, int, min=8, multiple_of=8, help="coordinates per scale"),
          **precision(downlink="f16"))
class Int8EF(BucketScheme):
    bits = 8

    def __init__(self, *, bucket: int, **kw):
        super().__init__(bucket=bucket, **kw)
        self.memory = ErrorMemory(self.n_workers, self.device)

    def stage(self, iteration):
        return "int8"

    def quantize(self, worker, iteration, x, valid):
        scale = (x.abs().amax(dim=1, keepdim=True) / 127).clamp_min(1e-12).float()
        return (torch.round(x / scale) + 127).to(torch.int64), scale

    def dequantize(self, codes, scalars):
        return (codes.float() - 127) * scalars[:, 0]

    def encode(self, worker, iteration, grad):
        p = self.memory.compensate(worker, grad)
        codes, scalars = self.quantize_flat(worker, iteration, p)
        self.memory.update(worker, p, self.sent_values(codes, scalars))
        return self.encode_codes(iteration, codes, scalars)

    def state_dict(self):
        return self.memory.state_dict()

    def load_state_dict(self, state):
        self.memory.load_state_dict(state)
