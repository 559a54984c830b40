"""`randomk`: k coordinates chosen at random, the same for every worker, with error feedback.

The coordinates come from a generator keyed by (seed, iteration) that every node runs, so no
index goes on the wire: a message is just the k values, dense over positions 0..k-1 of the
shared index list. Random coordinates carry far less of the gradient than the largest ones,
so the default ratio is 0.1 (top-k's 0.01 hardly trains), and error feedback plus heavy
momentum is unstable here (a coordinate's residual piles up for ~1/ratio iterations, then
momentum amplifies the burst): train it with momentum <= 0.5. Because all workers share the positions, the server's mean is dense over
the same k positions too, and goes back the same way; for the same reason the k values line up
across workers and can be summed on a ring instead (collective "allreduce").
"""
from __future__ import annotations

import torch

from nodes.compression import codec
from nodes.compression.aggregate import mean_over_arrived
from nodes.compression.base import Scheme, check_finite
from nodes.compression.memory import ErrorMemory
from nodes.compression.phases import Downlink, Members, Uplink
from nodes.compression.precision import on_wire, precision
from nodes.compression.registry import register
from nodes.compression.templates import counter_generator, k_of, ring_mean
from lgc_schema import Field

SHARED = 2**20  # the "worker" slot of the shared generator (no real worker has this id)


# a file written for top-k carries ratio 0.01 and momentum 0.9, which diverge here (above)
@register("randomk", wire_id=3, known_good={"compression.ratio": 0.1, "optim.momentum": 0.5},
          ratio=Field(0.1, float, min=1e-6, max=1.0,
                      help="fraction of coordinates sent (random-k needs far more than top-k)"),
          **precision(values="f32", downlink="f32"))
class RandomK(Scheme):
    collectives = ("ps", "allreduce")

    def __init__(self, *, ratio, **kw):
        super().__init__(**kw)
        self.ratio = float(ratio)
        self.k = k_of(self.ratio, self.numel)
        self.memory = ErrorMemory(self.n_workers, self.device)

    def stage(self, iteration):
        return "sparse"

    def indices(self, iteration: int) -> torch.Tensor:
        g = counter_generator(self.seed, SHARED, iteration, 17)
        return torch.sort(torch.randperm(self.numel, generator=g)[: self.k]).values

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        dev = grads[0].device if grads else self.device
        idx = self.indices(iteration).to(dev)
        sent = {}
        for w, g in enumerate(grads):
            had = self.memory.compensate(w, g.reshape(-1).float())
            sent[w] = on_wire(had[idx], self.values_dtype)
            self.memory.update_sparse(w, had, idx, sent[w])
        out = torch.zeros(self.numel)
        if self.collective == "allreduce":  # over the round's members (phases.Members)
            members = yield Members(len(grads))
            out[idx.cpu()] = yield from ring_mean({w: sent[w] for w in members}, self.values_dtype, self.k)
            return out.to(dev)
        msgs = {w: codec.encode_dense(v, payload_bytes=self.payload_bytes, dtype=self.values_dtype,
                                      method=self.wire_id, iteration=iteration) for w, v in sent.items()}
        arrived = yield Uplink(msgs)
        # a position lost from some workers is averaged over those whose packet arrived
        mean = mean_over_arrived(
            (codec.decode(arrived.get(w, []), self.k, iteration=iteration) for w in range(len(grads))),
            self.k)
        down = codec.encode_dense(mean, payload_bytes=self.payload_bytes, dtype=self.downlink_dtype,
                                  method=self.wire_id, kind=codec.KIND_AGGREGATE, iteration=iteration)
        yield Downlink(down)
        out[idx.cpu()] = codec.decode(down.packets, self.k).values
        return out.to(dev)

    def state_dict(self):
        return self.memory.state_dict()

    def load_state_dict(self, state):
        self.memory.load_state_dict(state)
