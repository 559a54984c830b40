"""`qsgd`: QSGD (Alistarh et al., NeurIPS 2017) with buckets, plus the bucketed dense machinery
that TernGrad and signSGD share (BucketScheme).

Each bucket of `bucket` coordinates carries its L2 norm; each coordinate a level in [-s, s],
sent as one code of ceil(log2(2s+1)) bits (sign and magnitude together). Stochastic rounding,
l = floor(s |x| / ||x|| + U), is unbiased: E[decoded] = x, and |decoded - x| <= ||x|| / s.
U comes from a generator keyed by (seed, worker, iteration), so resuming needs no RNG state.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from nodes.compression import codec
from nodes.compression.codec import Decoded
from nodes.compression.none import DenseScheme, counter_generator
from nodes.compression.registry import Option, register


class BucketScheme(DenseScheme):
    """Dense b-bit codes per coordinate, `nscalars` float scalars per bucket."""
    downlink_dtype = "f16"
    bits: int = 1
    nscalars: int = 1

    def __init__(self, *, bucket: int = 512, **kw):
        super().__init__(**kw)
        if int(bucket) < 8 or int(bucket) % 8:
            raise ValueError(f"bucket={bucket!r} not allowed; allowed a multiple of 8, >= 8")
        self.bucket = int(bucket)

    def quantize(self, worker: int, iteration: int, x: torch.Tensor, valid: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (buckets, bucket) zero-padded; valid: coordinates per bucket.
        Returns (integer codes like x, scalars (buckets, nscalars))."""
        raise NotImplementedError

    def dequantize(self, codes: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        """codes (m,), per-coordinate scalars (m, nscalars) -> values (m,)."""
        raise NotImplementedError

    def stage(self, iteration):
        return "quantized"

    def _buckets(self, grad: torch.Tensor):
        n, b = grad.numel(), self.bucket
        nb = -(-n // b)
        x = torch.zeros(nb * b, dtype=grad.dtype, device=grad.device)
        x[:n] = grad
        valid = torch.full((nb,), b, dtype=grad.dtype, device=grad.device)
        if nb:
            valid[-1] = n - (nb - 1) * b
        return x.view(nb, b), valid

    def quantize_flat(self, worker, iteration, grad) -> tuple[torch.Tensor, torch.Tensor]:
        x, valid = self._buckets(grad)
        codes, scalars = self.quantize(worker, iteration, x, valid)
        return codes.reshape(-1)[: grad.numel()], scalars

    def sent_values(self, codes: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        """What the wire carries, decoded locally (scalars rounded to f32 as on the wire)."""
        per = scalars.float().repeat_interleave(self.bucket, dim=0)[: codes.numel()]
        return self.dequantize(codes, per)

    def encode_codes(self, iteration, codes, scalars):
        return codec.encode_dense(codes.cpu().numpy(), payload_bytes=self.payload_bytes,
                                  dtype="bits", bits=self.bits, method=self.name,
                                  iteration=iteration, group=self.bucket,
                                  group_scalars=scalars.float().cpu().numpy())

    def encode(self, worker, iteration, grad):
        codes, scalars = self.quantize_flat(worker, iteration, grad)
        return self.encode_codes(iteration, codes, scalars)

    def decode(self, worker, iteration, packets) -> Decoded:
        d = codec.decode(packets, self.numel, iteration=iteration)
        nb = -(-self.numel // self.bucket)
        rows = torch.zeros(nb, self.nscalars)
        for start, _, sc in d.segments:  # packets hold whole buckets, their scalars in order
            r = torch.tensor(sc, dtype=torch.float32).view(-1, self.nscalars)
            first = start // self.bucket
            rows[first:first + len(r)] = r
        per = rows.repeat_interleave(self.bucket, dim=0)[: self.numel]
        d.values = torch.where(d.mask, self.dequantize(d.values, per), torch.zeros(()))
        return d


def qsgd_bits(levels: int) -> int:
    return math.ceil(math.log2(2 * levels + 1))


@register("qsgd",
          levels=Option(16, int, min=1, max=2**23 - 1, help="s: quantization levels per sign"),
          bucket=Option(512, int, min=8, help="coordinates per norm (a multiple of 8)"),
          downlink=Option("f16", str, choices=("f32", "f16"), help="precision of the broadcast mean"))
class QSGD(BucketScheme):
    def __init__(self, *, levels: int = 16, **kw):
        super().__init__(**kw)
        if int(levels) < 1:
            raise ValueError(f"levels={levels!r} not allowed; allowed >= 1")
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
