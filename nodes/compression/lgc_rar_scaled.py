"""`lgc_rar_scaled`: LGC-RAR's schedule with the learned coder replaced by one fitted scalar.

The ring's baseline the learned coder must beat, as `lgc_scaled` is LGC-PS's. Warm-up and the
coder-training window are LGC-RAR's (DGC itself, all-gathered on the ring); nothing is trained
and nothing is shipped. In the LGC stage the leader (cyclic, or the next member when it is away)
broadcasts its top-k positions and its values there in f16 (one sparse message, as
`lgc_scaled`'s leader sends its common part); no node sends anything else. Every node takes
beta times the leader's values as the mean at those positions, and every node that took part is
credited with that mean (error feedback keeps v_j - beta v_L there, as `lgc_scaled` credits).
Layers sent whole (`dense_below`) are averaged by a ring all-reduce in f32 (as DGC's messages carry
values) and credited to each node.

beta is a least-squares fit of the nodes' mean at a node's sent positions on that node's sent
values, both over its RMS there (every pair weighs alike):
    beta = sum_p <x_p, m_p> / sum_p <x_p, x_p>
over the newest `ae_buffer` pairs from the coder-training window's all-gathered DGC messages
(every node holds every message, so every node fits the same beta: no bytes). Before the first
fit beta is 1; it stays frozen in the LGC stage.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from nodes.compression import codec
from nodes.compression.base import check_finite
from nodes.compression.lgc_common import COMMON_OPTIONS, PROTOCOL_OPTIONS
from nodes.compression.lgc_messages import KIND_COMMON, rms, sparse_message
from nodes.compression.lgc_rar import LGCRAR
from nodes.compression.phases import AllGather, Broadcast, Members
from nodes.compression.registry import register
from nodes.compression.templates import leader_among, ring_mean

OPTIONS = {k: COMMON_OPTIONS[k] for k in (*PROTOCOL_OPTIONS, "ae_buffer")}


@register("lgc_rar_scaled", wire_id=13, **OPTIONS)
class LGCRARScaled(LGCRAR):
    def __init__(self, **kw):
        # the coder's options it has not: their defaults (no AE is trained or shipped)
        unused = {k: f.default for k, f in COMMON_OPTIONS.items() if k not in kw}
        super().__init__(coder="scaled", **unused, **kw)
        self.pairs: list[tuple[float, float]] = []   # (<x, m>, <x, x>) per pair, newest last
        self.buffer = int(kw["ae_buffer"])

    def beta(self) -> float:
        """The fitted scalar as an f32 on every node (1 before any pair)."""
        xm = sum(p[0] for p in self.pairs)
        xx = sum(p[1] for p in self.pairs)
        return float(np.float32(xm / xx)) if xx > 0 and math.isfinite(xm / xx) else 1.0

    def _fit(self, decoded, mean) -> None:
        k = self.k_final()
        for d in decoded:
            sent = d.mask.clone()
            sent[self.dgc_state.dense] = False
            idx = torch.nonzero(sent).reshape(-1)
            if idx.numel() != k:   # lost, left out, or not at the final density yet
                continue
            s = rms(d.values[idx])
            x, m = (d.values[idx] / s).double(), (mean[idx] / s).double()
            self.pairs.append((float(x @ m), float(x @ x)))
            del self.pairs[:-self.buffer]

    def _dgc_stage(self, it, grads):
        """Warm-up and the fitting window: DGC's messages all-gathered (a lost or left-out
        message counts as zeros, as in DGC's all-gather); pairs taken in the window."""
        N = self.n_workers
        got = yield AllGather(self.dgc_messages(it, grads))
        decoded = [codec.decode(got.get(w, []), self.numel) for w in range(N)]
        avg = sum(d.values for d in decoded) / N
        if self.stage(it) == "ae_train":
            self._fit(decoded, avg)
        return avg

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device
        if self.stage(iteration) != "lgc":
            avg = yield from self._dgc_stage(iteration, grads)
            return avg.to(out_device)
        n, N = self.numel, self.n_workers
        vs = [self.dgc_state.accumulate(w, g) for w, g in enumerate(grads)]
        members = yield Members(N)
        L = leader_among(members, self.leader_of(iteration), N)
        if L is None:  # nobody takes part: the round closes empty (memories keep all they had)
            yield from ring_mean({}, "f32", self.k_final())
            return torch.zeros(n, device=out_device)
        lead_idx = self.dgc_state.topk(L, iteration, self.dgc.density(iteration))
        got = yield Broadcast(L, sparse_message(
            lead_idx.cpu(), vs[L][lead_idx].cpu(), n, payload_bytes=self.payload_bytes,
            method=self.wire_id, iteration=iteration, kind=KIND_COMMON, dtype="f16"))
        # every node works with the values as the broadcast carried them (f16)
        lead = codec.decode(got, n)
        idx = torch.nonzero(lead.mask).reshape(-1)
        common = self.beta() * lead.values[idx]
        self.in_use.observe([vs[w] for w in members], vs[L], idx.to(vs[L].device), common)
        dense = self.dgc_state.dense.cpu()
        sent = {w: vs[w][dense.to(vs[w].device)].cpu() for w in members}
        dense_mean = yield from ring_mean(sent, "f32", dense.numel()) if dense.numel() else _none()
        avg = torch.zeros(n)
        avg[idx] = common
        if dense.numel():
            avg[dense] = dense_mean
        for w in members:
            self.dgc_state.credit(w, idx.to(vs[w].device), common)
            if dense.numel():
                self.dgc_state.credit(w, dense.to(vs[w].device), sent[w])
        return avg.to(out_device)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "pairs": list(self.pairs)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pairs = [tuple(p) for p in state.get("pairs", [])]


def _none():
    """A generator that yields nothing: no dense layers to all-reduce."""
    return torch.zeros(0)
    yield
