"""Which coordinates a sparsifying method selects, layer by layer: the one place that knows the
model's layers (DGC and the LGC family select through it).

- `dense_below = B` (0 = off): every layer with fewer than B weights (biases, norms, a small first
  or last layer) is sent whole every iteration; top-k runs over the other layers only. Small
  layers are few bits, and dropping most of their coordinates for many iterations is a known
  reason sparsified training loses accuracy (DGC's and LGC's reference code keep them dense).
  They keep their momentum (DGC.take: momentum factor masking is for top-k coordinates only),
  so they train as with plain momentum SGD.
- `topk_scope = "layer"`: each sparse layer sends its own share, k_l = ratio * its size
  (the reference LGC's per-layer top-k), instead of one top-k over all sparse layers ("global").

The selection is the dense coordinates followed by the sparse top-k; `k(density)` is the number
of sparse coordinates selected, which is also the length of LGC's value vector.
"""
from __future__ import annotations

import math

import torch

from nodes.compression.templates import k_of
from lgc_schema import Field

SCOPES = ("global", "layer")

OPTIONS = dict(
    dense_below=Field(0, int, min=0, help="layers with fewer weights than this are sent whole "
                                          "every iteration (biases, norms, small first/last "
                                          "layers); 0 = none"),
    topk_scope=Field("global", str, choices=SCOPES,
                      help="top-k over all sparse layers at once, or each layer its own share"),
)


class LayerSelection:
    """The flat parameter vector cut into layers (shapes in model order)."""

    def __init__(self, shapes, dense_below: int = 0, topk_scope: str = "global"):
        sizes = [math.prod(torch.Size(s)) for s in shapes]
        self.n = sum(sizes)
        self.scope = topk_scope
        dense, sparse, start = [], [], 0
        for size in sizes:
            (dense if size < dense_below else sparse).append((start, start + size))
            start += size
        if not sparse:
            raise ValueError(f"dense_below={dense_below}: every layer would be sent whole (the "
                             f"largest has {max(sizes)} weights); allowed 0..{max(sizes)}")
        self.sparse_layers = sparse
        self.dense = self._coords(dense)
        self.sparse = self._coords(sparse)
        self.is_dense = torch.zeros(self.n, dtype=torch.bool)
        self.is_dense[self.dense] = True

    @staticmethod
    def _coords(ranges) -> torch.Tensor:
        if not ranges:
            return torch.zeros(0, dtype=torch.long)
        return torch.cat([torch.arange(a, b) for a, b in ranges])

    @property
    def n_dense(self) -> int:
        return self.dense.numel()

    def k(self, density: float) -> int:
        """Sparse coordinates selected at `density` (dense ones not counted)."""
        if self.scope == "layer":
            return sum(k_of(density, b - a) for a, b in self.sparse_layers)
        return k_of(density, self.sparse.numel())

    def topk(self, v: torch.Tensor, density: float, pick) -> torch.Tensor:
        """Indices into v of the sparse top-k; `pick(x, k)` returns k indices of x (DGC's
        sampled top-k or the exact one). Dense coordinates are never among them."""
        if self.scope == "layer":
            return torch.cat([a + pick(v[a:b], k_of(density, b - a)) for a, b in self.sparse_layers])
        if not self.n_dense:
            return pick(v, k_of(density, self.n))
        sparse = self.sparse.to(v.device)
        return sparse[pick(v[sparse], self.k(density))]

    def select(self, v: torch.Tensor, density: float, pick) -> torch.Tensor:
        """What a worker sends: every dense coordinate, then the sparse top-k."""
        top = self.topk(v, density, pick)
        return torch.cat([self.dense.to(top.device), top]) if self.n_dense else top
