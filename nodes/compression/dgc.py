"""`dgc`: Deep Gradient Compression (Lin et al., ICLR 2018).

Per worker, every iteration:
  1. local gradient clipping: the gradient's norm is capped at clip_norm / sqrt(N) (the paper
     scales the global clipping threshold by N^-1/2 because N workers' gradients add up);
  2. momentum correction: u = m u + g, v = v + u (momentum is accumulated *before*
     sparsification, so the testbed loop's optimizer must not add momentum again: the class
     says `handles_momentum = True`, and the update to apply is plain SGD on the returned mean);
  3. top-k of |v| with the threshold estimated from a random sample of v (sample_fraction,
     at least 1024 coordinates), then refined on the coordinates above it;
  4. momentum factor masking: u and v are zeroed where sent (v keeps the f16 rounding error).
     `momentum_masking = false` keeps u where sent (v still loses what was sent, so no bit on
     the wire changes at a given v; only later iterations' v differ): the variant "momentum kept
     where sent", not "momentum applied to the aggregate" (MomentumMemory's docstring).
The density follows DGC's exponential warm-up 25%, 6.25%, 1.5625%, 0.390625% over four equal
stages of warmup_iterations, then `ratio` (never below ratio).
Which coordinates compete is layers.py's: with `dense_below` small layers are sent whole every
iteration and top-k runs over the others; `topk_scope = "layer"` gives each layer its own share.
"""
from __future__ import annotations

import math

import torch

from nodes.compression.layers import OPTIONS as LAYER_OPTIONS, LayerSelection
from nodes.compression.memory import MomentumMemory
from nodes.compression.precision import on_wire, precision
from nodes.compression.registry import register
from nodes.compression.templates import SparseScheme, counter_generator
from lgc_schema import Field

MASKING_HELP = ("momentum factor masking: true zeroes a worker's momentum u where a top-k "
                "coordinate is sent (DGC's paper and reference code); false keeps u there (v still "
                "loses what was sent; no bit on the wire changes at a given v)")
WARMUP_DENSITIES = (0.25, 0.0625, 0.015625, 0.00390625)
MIN_SAMPLE = 1024


def sampled_topk(x: torch.Tensor, k: int, sample_fraction: float, gen: torch.Generator) -> torch.Tensor:
    """Indices of (about, at most) the k largest |x|: threshold from a sample, then refine.

    The sample's k-th largest value (scaled to the sample size) gives a threshold; if too few
    coordinates pass it the threshold is lowered and tried again; among those that pass, the
    exact top k is taken, which is cheap because there are few of them.
    """
    n = x.numel()
    a = x.abs()
    if k >= n:
        return torch.arange(n, device=x.device)
    m = min(n, max(MIN_SAMPLE, int(math.ceil(sample_fraction * n))))
    if m >= n:
        return torch.topk(a, k, sorted=False).indices
    pick = torch.randint(0, n, (m,), generator=gen).to(x.device)
    sample = a[pick]
    ks = max(1, int(math.ceil(k * m / n)))
    for _ in range(4):
        thr = torch.topk(sample, min(ks, m), sorted=False).values.min()
        cand = torch.nonzero(a >= thr, as_tuple=True)[0]
        if cand.numel() >= k:
            top = torch.topk(a[cand], k, sorted=False).indices
            return cand[top]
        ks *= 2  # the sample overestimated the threshold: lower it
    return torch.topk(a, k, sorted=False).indices


@register("dgc", wire_id=4,
          ratio=Field(0.001, float, min=1e-6, max=1.0, help="final density (99.9% sparsity)"),
          momentum=Field(0.9, float, min=0.0, max=1.0, max_open=True, help="momentum of the correction"),
          clip_norm=Field(10.0, float, min=0.0, help="global gradient-norm cap; 0 turns clipping off"),
          warmup_iterations=Field(100, int, min=0, help="iterations of the exponential sparsity warm-up"),
          sample_fraction=Field(0.01, float, min=1e-6, max=1.0, help="share of v sampled for the threshold"),
          momentum_masking=Field(True, bool, help=MASKING_HELP),
          **LAYER_OPTIONS, **precision(values="f32", downlink="f32"))
class DGC(SparseScheme):
    handles_momentum = True

    def __init__(self, *, ratio, momentum, clip_norm, warmup_iterations, sample_fraction,
                 dense_below, topk_scope, momentum_masking, **kw):
        super().__init__(**kw)
        self.layers = LayerSelection(self.shapes, int(dense_below), topk_scope)
        self.ratio, self.momentum = float(ratio), float(momentum)
        self.clip_norm, self.warmup_iterations = float(clip_norm), int(warmup_iterations)
        self.sample_fraction = float(sample_fraction)
        self.memory = MomentumMemory(self.n_workers, self.device, self.momentum,
                                     masking=bool(momentum_masking))

    # u (momentum) and v (accumulated, unsent) live in the memory object
    @property
    def u(self):
        return self.memory.u

    @property
    def v(self):
        return self.memory.v

    def density(self, iteration: int) -> float:
        if iteration < self.warmup_iterations:
            stage = min(3, iteration * 4 // self.warmup_iterations)
            return max(self.ratio, WARMUP_DENSITIES[stage])
        return self.ratio

    def picker(self, worker: int, iteration: int, salt: int):
        """The sampled top-k, its draws keyed by (seed, worker, iteration, salt)."""
        gen = counter_generator(self.seed, worker, iteration, salt)
        return lambda x, k: sampled_topk(x, k, self.sample_fraction, gen)

    def stage(self, iteration):
        return "warmup" if iteration < self.warmup_iterations else "sparse"

    def clip(self, grad: torch.Tensor) -> torch.Tensor:
        """Local clipping at clip_norm / sqrt(N) (0: off)."""
        if self.clip_norm > 0:
            cap = self.clip_norm / math.sqrt(self.n_workers)
            norm = float(grad.norm())
            if norm > cap:
                grad = grad * (cap / norm)
        return grad

    def select(self, worker, iteration, grad):
        v = self.memory.compensate(worker, self.clip(grad))
        idx = self.layers.select(v, self.density(iteration), self.picker(worker, iteration, 7))
        sent = on_wire(v[idx], self.values_dtype)
        self.take(worker, v, idx, sent)
        return idx, sent

    def take(self, worker: int, v: torch.Tensor, idx: torch.Tensor, values: torch.Tensor) -> None:
        """Take what was sent out of v (it keeps only the wire's rounding error there). Momentum
        factor masking zeroes u where a top-k coordinate was sent; the small layers sent whole
        every iteration keep theirs (masking them would train them without momentum)."""
        dense = self.layers.is_dense.to(idx.device)[idx] if self.layers.n_dense else None
        if dense is None or not bool(dense.any()):
            self.memory.update_sparse(worker, v, idx, values)
            return
        self.memory.update_sparse(worker, v, idx[~dense], values[~dense])
        self.memory.update_sparse(worker, v, idx[dense], values[dense], mask=False)

    def state_dict(self):
        return self.memory.state_dict()

    def load_state_dict(self, state):
        self.memory.load_state_dict(state)
