"""`signsgd`: scaled sign with error feedback (EF-SignSGD, Karimireddy et al., ICML 2019).

p = g + e; each bucket sends one bit per coordinate (p >= 0) and one scale, mean|p| over the
bucket; decoded = scale x (+1 / -1); e = p - decoded. One bit per element plus, per packet,
the header and one f32 per bucket.
"""
from __future__ import annotations

import torch

from nodes.compression.qsgd import BucketScheme
from nodes.compression.registry import Option, register
from nodes.compression.topk import ResidualMixin


@register("signsgd",
          bucket=Option(1024, int, min=8, help="coordinates per scale (a multiple of 8)"),
          downlink=Option("f16", str, choices=("f32", "f16"), help="precision of the broadcast mean"))
class SignSGD(ResidualMixin, BucketScheme):
    bits = 1

    def __init__(self, *, bucket: int = 1024, **kw):
        super().__init__(bucket=bucket, **kw)
        self._init_residuals()

    def stage(self, iteration):
        return "sign"

    def quantize(self, worker, iteration, x, valid):
        scale = (x.abs().sum(dim=1, keepdim=True) / valid[:, None]).float()
        return (x >= 0).to(torch.int64), scale

    def dequantize(self, codes, scalars):
        return (2.0 * codes.float() - 1.0) * scalars[:, 0]

    def encode(self, worker, iteration, grad):
        p = grad + self.residual(worker, grad)
        codes, scalars = self.quantize_flat(worker, iteration, p)
        self.residuals[worker] = p - self.sent_values(codes, scalars)
        return self.encode_codes(iteration, codes, scalars)
