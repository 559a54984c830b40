"""`scalecom`: ScaleCom (Chen et al., NeurIPS 2020), cyclic local top-k with a low-pass filtered
error memory.

Per iteration t, every worker i forms its memory-compensated gradient  h_i = m_i + g_i.
- CLT-k: the leader L = t mod N (cyclic; `leader` pins one node; if L does not take part this
  iteration, the next member after it, phases.Members) takes the top k of |h_L| and sends those
  positions to every node (a Broadcast). Every worker sends its own h_i at *those*
  positions, so all messages line up and add: the values are all-reduced on a ring of the
  members (natural collective), or gathered at a server that broadcasts their mean ("ps").
- The update is the mean over the members (ps: whose values arrived) of h_i at the shared
  positions (zero elsewhere).
- Low-pass filtered memory (memory.LowPassMemory): m_i <- (1 - beta) m_i + beta (h_i - c_i),
  where c_i is what worker i sent (h_i at the positions, as the wire carries it). beta = 1 is
  plain error feedback.
The positions travel as a sparse index message (the leader's), the values as a dense vector over
the k positions (no index per worker).
"""
from __future__ import annotations

import torch

from nodes.compression import codec
from nodes.compression.aggregate import mean_over_arrived
from nodes.compression.base import Scheme, check_finite
from nodes.compression.lgc_common import topk_indices
from nodes.compression.lgc_messages import indices_message, read_indices
from nodes.compression.memory import LowPassMemory
from nodes.compression.phases import Broadcast, Downlink, Members, Uplink
from nodes.compression.precision import on_wire, precision
from nodes.compression.registry import register
from nodes.compression.templates import check_leader, k_of, leader_among, ring_mean
from lgc_schema import Field


@register("scalecom", wire_id=64,  # the id it was handed before ids were pinned: old recordings decode
          ratio=Field(0.01, float, min=1e-6, max=1.0, help="fraction of coordinates sent (k / n)"),
          beta=Field(0.1, float, min=0.0, max=1.0, min_open=True,
                     help="low-pass filter of the error memory, m <- (1-beta) m + beta (m + g - sent); "
                          "1 = plain error feedback"),
          leader=Field(-1, int, min=-1, help="node whose top-k positions every worker uses; -1 = cyclic"),
          **precision(values="f32"))
class ScaleCom(Scheme):
    collectives = ("allreduce", "ps")

    def __init__(self, *, ratio: float, beta: float, leader: int, **kw):
        super().__init__(**kw)
        self.ratio, self.leader = float(ratio), check_leader(leader, self.n_workers)
        self.k = k_of(self.ratio, self.numel)
        self.memory = LowPassMemory(self.n_workers, self.device, beta=beta)

    def stage(self, iteration):
        return "sparse"

    def leader_of(self, iteration: int) -> int:
        return iteration % self.n_workers if self.leader < 0 else self.leader

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        dev = grads[0].device
        N = len(grads)
        h = [self.memory.compensate(w, g.reshape(-1).float()) for w, g in enumerate(grads)]
        members = yield Members(N)
        L = leader_among(members, self.leader_of(iteration), self.n_workers)
        if L is None:  # nobody takes part: the round closes empty (memories keep all they had)
            if self.collective == "allreduce":
                yield from ring_mean({}, self.values_dtype, self.k)
            else:
                yield Uplink({})
            return torch.zeros(self.numel, device=dev)
        got = yield Broadcast(L, indices_message(topk_indices(h[L], self.k).cpu(), self.numel,
                                                 payload_bytes=self.payload_bytes, method=self.wire_id,
                                                 iteration=iteration, scale=1.0))
        idx = read_indices(got, self.numel)[0].to(dev)  # every node uses the positions it received
        sent = [on_wire(x[idx], self.values_dtype) for x in h]
        if self.collective == "allreduce":
            mean = yield from ring_mean({w: sent[w] for w in members}, self.values_dtype, self.k)
        else:
            arrived = yield Uplink({w: codec.encode_dense(s.cpu(), payload_bytes=self.payload_bytes,
                                                          dtype=self.values_dtype, method=self.wire_id,
                                                          iteration=iteration)
                                    for w, s in enumerate(sent)})
            mean = mean_over_arrived(
                (codec.decode(arrived.get(w, []), self.k, iteration=iteration) for w in range(N)), self.k)
            down = codec.encode_dense(mean, payload_bytes=self.payload_bytes, dtype=self.values_dtype,
                                      method=self.wire_id, kind=codec.KIND_AGGREGATE, iteration=iteration)
            yield Downlink(down)
            mean = codec.decode(down.packets, self.k).values
        for w in range(N):
            self.memory.update_sparse(w, h[w], idx, sent[w])
        out = torch.zeros(self.numel, device=dev)
        out[idx] = mean.to(dev)
        return out

    def state_dict(self):
        return self.memory.state_dict()

    def load_state_dict(self, state):
        self.memory.load_state_dict(state)
