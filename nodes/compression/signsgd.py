"""`signsgd`: scaled sign with error feedback (EF-SignSGD, Karimireddy et al., ICML 2019).

p = g + e; each bucket sends one bit per coordinate (p >= 0) and one scale, mean|p| over the
bucket; decoded = scale x (+1 / -1); e = p - decoded. One bit per element plus, per packet,
the header and one f32 per bucket.
"""
from __future__ import annotations

import torch

from nodes.compression.memory import ErrorMemory
from nodes.compression.precision import precision
from nodes.compression.registry import register
from nodes.compression.templates import BucketScheme
from lgc_schema import Field


@register("signsgd", wire_id=7,
          bucket=Field(1024, int, min=8, multiple_of=8, help="coordinates per scale"),
          **precision(downlink="f16"))
class SignSGD(BucketScheme):
    bits = 1

    def __init__(self, *, bucket: int, **kw):
        super().__init__(bucket=bucket, **kw)
        self.memory = ErrorMemory(self.n_workers, self.device)

    def stage(self, iteration):
        return "sign"

    def quantize(self, worker, iteration, x, valid):
        scale = (x.abs().sum(dim=1, keepdim=True) / valid[:, None]).float()
        return (x >= 0).to(torch.int64), scale

    def dequantize(self, codes, scalars):
        return (2.0 * codes.float() - 1.0) * scalars[:, 0]

    def encode(self, worker, iteration, grad):
        p = self.memory.compensate(worker, grad)
        codes, scalars = self.quantize_flat(worker, iteration, p)
        self.memory.update(worker, p, self.sent_values(codes, scalars))
        return self.encode_codes(iteration, codes, scalars)

    def state_dict(self):
        return self.memory.state_dict()

    def load_state_dict(self, state):
        self.memory.load_state_dict(state)
