"""`topk`: the k largest-magnitude coordinates with error feedback, plus the shared sparse
exchange (SparseScheme) that random-k and DGC reuse.

Error feedback: the worker adds its residual (what it has not sent yet) to the gradient,
sends the top k of that sum, and keeps the rest: grad + old residual = sent + new residual.
With f16 values the rounding error of the sent values also stays in the residual.
"""
from __future__ import annotations

import torch

from nodes.compression import codec
from nodes.compression.base import Message, Scheme, check_finite
from nodes.compression.phases import Downlink, Uplink
from nodes.compression.registry import Option, register


def round_to(values: torch.Tensor, dtype: str) -> torch.Tensor:
    """The values exactly as the wire carries them."""
    return values.to(torch.float16).float() if dtype == "f16" else values.float()


def k_of(ratio: float, n: int) -> int:
    return max(1, min(n, int(round(ratio * n))))


class SparseScheme(Scheme):
    """PS exchange of sparse (index, value) messages; the server broadcasts the union-sparse mean.

    The mean divides by the number of workers: a coordinate a worker did not send is a zero
    from that worker, and a lost packet's coordinates count as zeros too (best effort).
    """
    collective = "ps"

    def __init__(self, *, values: str = "f32", downlink: str = "f32", **kw):
        super().__init__(**kw)
        for key, v in (("values", values), ("downlink", downlink)):
            if v not in ("f32", "f16"):
                raise ValueError(f"{key}={v!r} not allowed; allowed 'f32', 'f16'")
        self.values_dtype, self.downlink_dtype = values, downlink

    def select(self, worker: int, iteration: int, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(indices, values as sent) of one worker; updates that worker's state."""
        raise NotImplementedError

    def encode(self, worker: int, iteration: int, grad: torch.Tensor) -> Message:
        idx, vals = self.select(worker, iteration, grad)
        return codec.encode_sparse(idx, vals, self.numel, payload_bytes=self.payload_bytes,
                                   dtype=self.values_dtype, method=self.name, iteration=iteration)

    def decode(self, worker: int, iteration: int, packets: list[bytes]) -> torch.Tensor:
        return codec.decode(packets, self.numel, iteration=iteration).values

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device if grads else self.device
        msgs = {w: self.encode(w, iteration, g.reshape(-1).float()) for w, g in enumerate(grads)}
        arrived = yield Uplink(msgs)
        total = torch.zeros(self.numel)
        for w in range(len(grads)):
            total += self.decode(w, iteration, arrived.get(w, []))
        mean = total / max(1, len(grads))
        down = self.encode_aggregate(iteration, mean)
        yield Downlink(down)
        return codec.decode(down.packets, self.numel).values.to(out_device)

    def encode_aggregate(self, iteration: int, mean: torch.Tensor) -> Message:
        nz = torch.nonzero(mean, as_tuple=True)[0]
        return codec.encode_sparse(nz, mean[nz], self.numel, payload_bytes=self.payload_bytes,
                                   dtype=self.downlink_dtype, method=self.name,
                                   kind=codec.KIND_AGGREGATE, iteration=iteration)


class ResidualMixin:
    """Per-worker error-feedback residuals, created lazily on the gradient's device."""
    residuals: list[torch.Tensor | None]

    def _init_residuals(self):
        self.residuals = [None] * self.n_workers

    def residual(self, worker: int, like: torch.Tensor) -> torch.Tensor:
        r = self.residuals[worker]
        if r is None:
            r = self.residuals[worker] = torch.zeros_like(like)
        return r

    def state_dict(self) -> dict:
        return {"residuals": [None if r is None else r.detach().cpu().clone() for r in self.residuals]}

    def load_state_dict(self, state: dict) -> None:
        res = state["residuals"]
        if len(res) != self.n_workers:
            raise ValueError(f"state has {len(res)} residuals for {self.n_workers} workers")
        self.residuals = [None if r is None else r.clone().to(self.device) for r in res]


@register("topk",
          ratio=Option(0.01, float, min=1e-6, max=1.0, help="fraction of coordinates sent"),
          values=Option("f32", str, choices=("f32", "f16"), help="precision of the sent values"),
          downlink=Option("f32", str, choices=("f32", "f16"), help="precision of the broadcast mean"))
class TopK(ResidualMixin, SparseScheme):
    def __init__(self, *, ratio: float = 0.01, **kw):
        super().__init__(**kw)
        if not 0 < ratio <= 1:
            raise ValueError(f"ratio={ratio!r} not allowed; allowed (0, 1]")
        self.ratio = float(ratio)
        self.k = k_of(self.ratio, self.numel)
        self._init_residuals()

    def stage(self, iteration):
        return "sparse"

    def select(self, worker, iteration, grad):
        r = self.residual(worker, grad)
        corrected = grad + r
        idx = torch.topk(corrected.abs(), self.k, sorted=False).indices
        sent = round_to(corrected[idx], self.values_dtype)
        corrected[idx] -= sent  # what is left is the new residual
        self.residuals[worker] = corrected
        return idx, sent
