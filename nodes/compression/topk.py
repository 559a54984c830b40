"""`topk`: the k largest-magnitude coordinates with error feedback (templates.SparseScheme).

Error feedback: the worker adds its residual (what it has not sent yet) to the gradient,
sends the top k of that sum, and keeps the rest: grad + old residual = sent + new residual.
With f16 values the rounding error of the sent values also stays in the residual.
"""
from __future__ import annotations

import torch

from nodes.compression.memory import ErrorMemory
from nodes.compression.precision import on_wire, precision
from nodes.compression.registry import register
from nodes.compression.templates import SparseScheme, k_of
from lgc_schema import Field


@register("topk", wire_id=2,
          ratio=Field(0.01, float, min=1e-6, max=1.0, help="fraction of coordinates sent"),
          **precision(values="f32", downlink="f32"))
class TopK(SparseScheme):
    def __init__(self, *, ratio: float, **kw):
        super().__init__(**kw)
        self.ratio = float(ratio)
        self.k = k_of(self.ratio, self.numel)
        self.memory = ErrorMemory(self.n_workers, self.device)

    def stage(self, iteration):
        return "sparse"

    def select(self, worker, iteration, grad):
        had = self.memory.compensate(worker, grad)
        idx = torch.topk(had.abs(), self.k, sorted=False).indices
        sent = on_wire(had[idx], self.values_dtype)
        self.memory.update_sparse(worker, had, idx, sent)
        return idx, sent

    def state_dict(self):
        return self.memory.state_dict()

    def load_state_dict(self, state):
        self.memory.load_state_dict(state)
