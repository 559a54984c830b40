"""`qsgd`: QSGD (Alistarh et al., NeurIPS 2017) with buckets (templates.BucketScheme).

Each bucket of `bucket` coordinates carries its L2 norm; each coordinate a level in [-s, s],
sent as one code of ceil(log2(2s+1)) bits (sign and magnitude together). Stochastic rounding,
l = floor(s |x| / ||x|| + U), is unbiased: E[decoded] = x, and |decoded - x| <= ||x|| / s.
U comes from a generator keyed by (seed, worker, iteration), so resuming needs no RNG state.
"""
from __future__ import annotations

import math

import torch

from nodes.compression.precision import precision
from nodes.compression.registry import register
from nodes.compression.templates import BucketScheme, counter_generator
from lgc_schema import Field


def qsgd_bits(levels: int) -> int:
    return math.ceil(math.log2(2 * levels + 1))


@register("qsgd", wire_id=5,
          levels=Field(16, int, min=1, max=2**23 - 1, help="s: quantization levels per sign"),
          bucket=Field(512, int, min=8, multiple_of=8, help="coordinates per norm"),
          **precision(downlink="f16"))
class QSGD(BucketScheme):
    def __init__(self, *, levels: int, **kw):
        super().__init__(**kw)
        self.levels = int(levels)
        self.bits = qsgd_bits(self.levels)

    def quantize(self, worker, iteration, x, valid):
        s = self.levels
        norm = x.norm(dim=1, keepdim=True).float()
        u = torch.rand(x.shape, generator=counter_generator(self.seed, worker, iteration, 11)).to(x.device)
        r = torch.where(norm > 0, x.abs() / norm.clamp(min=1e-30) * s, torch.zeros_like(x))
        level = torch.floor(r + u).clamp(max=s)
        codes = (torch.sign(x) * level + s).to(torch.int64)
        return codes, norm

    def dequantize(self, codes, scalars):
        return (codes.float() - self.levels) * scalars[:, 0] / self.levels
