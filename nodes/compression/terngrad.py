"""`terngrad`: TernGrad (Wen et al., NeurIPS 2017): each coordinate in {-1, 0, +1} x a scale.

Per bucket the scale is max|g|; a coordinate is sent as sign(g) with probability |g| / scale
(else 0), so E[decoded] = g. Two bits per coordinate (codes 0, 1, 2 = -1, 0, +1). Before that
the gradient is clipped at clip_sigma standard deviations (TernGrad's gradient clipping, which
shrinks the scale and hence the variance); clip_sigma = 0 turns it off.
"""
from __future__ import annotations

import torch

from nodes.compression.precision import precision
from nodes.compression.registry import register
from nodes.compression.templates import BucketScheme, counter_generator
from lgc_schema import Field


@register("terngrad", wire_id=6,
          bucket=Field(512, int, min=8, multiple_of=8, help="coordinates per scale"),
          clip_sigma=Field(2.5, float, min=0.0, help="clip at this many std devs; 0 = off"),
          **precision(downlink="f16"))
class TernGrad(BucketScheme):
    bits = 2

    def __init__(self, *, clip_sigma: float, **kw):
        super().__init__(**kw)
        self.clip_sigma = float(clip_sigma)

    def quantize_flat(self, worker, iteration, grad):
        if self.clip_sigma > 0 and grad.numel() > 1:
            c = self.clip_sigma * float(grad.std())
            grad = grad.clamp(-c, c)
        return super().quantize_flat(worker, iteration, grad)

    def quantize(self, worker, iteration, x, valid):
        scale = x.abs().amax(dim=1, keepdim=True).float()
        u = torch.rand(x.shape, generator=counter_generator(self.seed, worker, iteration, 13)).to(x.device)
        keep = u < x.abs() / scale.clamp(min=1e-30)
        codes = (torch.sign(x) * keep + 1).to(torch.int64)
        return codes, scale

    def dequantize(self, codes, scalars):
        return (codes.float() - 1.0) * scalars[:, 0]
