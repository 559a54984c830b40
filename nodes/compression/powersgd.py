"""`powersgd`: PowerSGD (Vogels et al., NeurIPS 2019), rank r, error feedback, warm start.

Every layer of 2 or more dimensions is seen as a matrix M (shape[0] x the rest) when rank r
saves bytes (r (rows + cols) < rows x cols); others go dense. Per iteration:
  round 1: M_i = G_i + e_i; P_i = M_i Q          -> mean P over the workers
           every node orthogonalises the mean:  P^ = orth(mean P)   (same result everywhere)
  round 2: Q_i = M_i^T P^ (+ the dense layers)    -> mean Q (+ dense mean)
  update:  P^ mean(Q)^T; error feedback e_i = M_i - P^ Q_i^T; the mean Q is the next
           iteration's Q (warm start), so one power-iteration step per training step suffices.
Each mean is, as `collective` says:
  "allreduce" (natural; torch's DDP powerSGD_hook): P_i and Q_i are all-reduced on a ring (raw
             f32/f16 vectors summed hop by hop) formed over the round's members
             (phases.Members), every node divides by their number;
  "ps":      Uplink P_i / Q_i to the server, which broadcasts the mean (Downlink).
"""
from __future__ import annotations

import torch

from nodes.compression import codec
from nodes.compression.base import Scheme, check_finite
from nodes.compression.memory import ErrorMemory
from nodes.compression.phases import Downlink, Members, Uplink
from nodes.compression.precision import on_wire, precision
from nodes.compression.registry import register
from nodes.compression.templates import counter_generator, ring_mean
from lgc_schema import Field


@register("powersgd", wire_id=8,
          rank=Field(2, int, min=1, max=1024, help="rank r of the per-layer approximation"),
          **precision(values="f32"))
class PowerSGD(Scheme):
    """P, Q, the dense layers and both means travel at `values` precision."""
    collectives = ("allreduce", "ps")

    def __init__(self, *, rank: int, **kw):
        super().__init__(**kw)
        self.rank = int(rank)
        # layout: per layer (offset, numel, rows, cols, r) with r = 0 for dense layers
        self.layers = []
        off = 0
        for shape in self.shapes:
            shape = torch.Size(shape)
            numel = shape.numel()
            rows = shape[0] if len(shape) >= 2 else numel
            cols = numel // rows if len(shape) >= 2 and rows else 1
            r = min(self.rank, rows, cols) if len(shape) >= 2 else 0
            if r and r * (rows + cols) >= rows * cols:
                r = 0
            self.layers.append((off, numel, rows, cols, r))
            off += numel
        self.low = [l for l in self.layers if l[4]]
        self.dense = [l for l in self.layers if not l[4]]
        self.p_len = sum(rows * r for _, _, rows, _, r in self.low)
        self.q_len = sum(cols * r for _, _, _, cols, r in self.low)
        self.d_len = sum(numel for _, numel, _, _, _ in self.dense)
        gen = counter_generator(self.seed, 0, 0, 19)
        self.q = [torch.randn(cols, r, generator=gen) for _, _, _, cols, r in self.low]
        self.memory = ErrorMemory(self.n_workers, self.device)

    def stage(self, iteration):
        return "lowrank"

    def _send(self, vec, kind, iteration):
        return codec.encode_dense(vec, payload_bytes=self.payload_bytes, dtype=self.values_dtype,
                                  method=self.wire_id, kind=kind, iteration=iteration)

    def _wire(self, vec):
        return on_wire(vec, self.values_dtype)

    def _mean(self, arrived, n, iteration, workers):
        total, count = torch.zeros(n), torch.zeros(n)
        for w in workers:
            d = codec.decode(arrived.get(w, []), n, iteration=iteration)
            total += d.values
            count += d.mask
        return total / count.clamp(min=1)

    def _average(self, vecs: list[torch.Tensor], kind: int, mean_kind: int, iteration: int, members):
        """Generator: (the workers' mean of one round's vectors as every node holds it, whether
        any worker's vector is in it). By all-reduce the mean is over the `members`."""
        n = vecs[0].numel()
        if self.collective == "allreduce":
            mean = yield from ring_mean({w: vecs[w] for w in members}, self.values_dtype, n)
            return mean, bool(members)
        arrived = yield Uplink({w: self._send(v.cpu(), kind, iteration) for w, v in enumerate(vecs)})
        mean = self._wire(self._mean(arrived, n, iteration, range(len(vecs))))
        down = self._send(mean, mean_kind, iteration)
        yield Downlink(down)
        return codec.decode(down.packets, n).values, any(arrived.values())

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        dev = grads[0].device if grads else self.device
        qs = [q.to(dev) for q in self.q]
        members = (yield Members(len(grads))) if self.collective == "allreduce" else None
        mats = []
        for w, g in enumerate(grads):
            mats.append(self.memory.compensate(w, g.reshape(-1).float()))
        # round 1: P_i = M_i Q
        vecs = []
        for w, m in enumerate(mats):
            ps = [m[o:o + n].view(rows, cols) @ q for (o, n, rows, cols, r), q in zip(self.low, qs)]
            vecs.append(torch.cat([p.reshape(-1) for p in ps]) if ps else torch.zeros(0, device=dev))
        p_mean, _ = yield from self._average(vecs, codec.KIND_P, codec.KIND_P_MEAN, iteration, members)
        p_mean = p_mean.to(dev)
        p_hat, off = [], 0
        for (_, _, rows, _, r) in self.low:
            p_hat.append(torch.linalg.qr(p_mean[off:off + rows * r].view(rows, r)).Q)
            off += rows * r
        # round 2: Q_i = M_i^T P^, with the dense layers riding along
        vecs, q_own = [], []
        for w, m in enumerate(mats):
            qi = [m[o:o + n].view(rows, cols).T @ ph for (o, n, rows, cols, r), ph in zip(self.low, p_hat)]
            q_own.append(qi)
            parts = [q.reshape(-1) for q in qi] + [m[o:o + n] for o, n, _, _, _ in self.dense]
            vecs.append(torch.cat(parts) if parts else torch.zeros(0, device=dev))
        q_mean, heard = yield from self._average(vecs, codec.KIND_Q, codec.KIND_Q_MEAN, iteration, members)
        q_mean = q_mean.to(dev)
        # the update, the error feedback and the warm start
        out = torch.zeros(self.numel, device=dev)
        new_q, qoff = [], 0
        for (o, n, rows, cols, r), ph in zip(self.low, p_hat):
            qm = q_mean[qoff:qoff + cols * r].view(cols, r)
            out[o:o + n] = (ph @ qm.T).reshape(-1)
            new_q.append(qm.cpu().clone())
            qoff += cols * r
        doff = self.q_len
        for o, n, _, _, _ in self.dense:
            out[o:o + n] = q_mean[doff:doff + n]
            doff += n
        for w, m in enumerate(mats):
            sent = torch.zeros_like(m)  # what the aggregate credits worker w with
            for (o, n, rows, cols, r), ph, qi in zip(self.low, p_hat, q_own[w]):
                sent[o:o + n] = (ph @ self._wire(qi).T).reshape(-1)
            for o, n, _, _, _ in self.dense:
                sent[o:o + n] = self._wire(m[o:o + n])
            self.memory.update(w, m, sent)
        if heard:  # a round nobody took part in keeps the warm start (a zero Q would stick)
            self.q = new_q
        return out

    def state_dict(self):
        return {"q": [q.clone() for q in self.q], **self.memory.state_dict()}

    def load_state_dict(self, state):
        if len(state["q"]) != len(self.low):
            raise ValueError(f"powersgd state has {len(state['q'])} matrices; this run has {len(self.low)}")
        self.memory.load_state_dict(state)
        self.q = [q.clone() for q in state["q"]]
