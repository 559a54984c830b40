"""LGC-PS: learned gradient compression over a parameter server.

Per iteration of the LGC stage (after warm-up and AE training, see lgc_common.Schedule):
- every worker accumulates its gradient (DGC momentum correction + error feedback) into v;
- the leader L (cyclic by default) takes the top-k positions I of its v, normalises the values
  v_L[I] by their RMS s, encodes them with the shipped encoder and sends
  [positions I, scale s, latent z (k * latent_ratio values), its innovation];
- every other worker sends only its innovation: its ceil(innovation_ratio * k) largest entries
  (positions and values) - what is its own, exactly;
- the server decodes the common code, c = s * D(z): the decoder was trained to map a leader's
  code to the *mean over nodes* of their values at the leader's positions, i.e. to what the
  nodes share. Node j's values are c at I, overwritten by node j's innovation where it sent one;
  the average over nodes is applied and broadcast back (the downlink also tells the workers I);
- error feedback: each worker counts its values at I as carried by the common code and its
  innovation as sent, and zeroes them in u and v (momentum factor masking); the rest stays.

Warm-up and AE training exchange DGC-style (index, value) messages; in AE training the server
also keeps, for every node L as a would-be leader, the pair (v_L[I_L]/s_L, mean_j v_j[I_L]/s_L)
from the messages that arrived (no extra bytes: they are that stage's gradient messages) and
runs `ae_steps` Adam steps on them, charged as ServerCompute of FLOPs / ae_gflops. At the end of
AE training the encoder's weights go down once (a Downlink, counted in the rate).
"""
from __future__ import annotations

import math

import torch

from nodes.compression import codec
from nodes.compression.base import check_finite
from nodes.compression.lgc_common import (COMMON_OPTIONS, KIND_INDICES, KIND_INNOVATION,
                                          KIND_LATENT, LGCBase, aggregate_message, by_kind,
                                          indices_message, join, read_indices, rms,
                                          sparse_message, topk_indices, weights_message)
from nodes.compression.phases import Downlink, ServerCompute, Uplink, WorkerCompute
from nodes.compression.registry import register
from schema import Field


@register("lgc_ps", wire_id=9, **COMMON_OPTIONS,
          innovation_ratio=Field(0.05, float, min=0.0, max=1.0,
                                 help="innovation entries each node sends, as a fraction of k"))
class LGCPS(LGCBase):
    collectives = ("ps",)
    linear_encoder = False

    def __init__(self, *, innovation_ratio: float = 0.05, **kw):
        super().__init__(**kw)
        self.innovation_ratio = float(innovation_ratio)

    def k_innovation(self, k: int) -> int:
        return 0 if self.innovation_ratio == 0 else min(k, int(math.ceil(self.innovation_ratio * k)))

    # ------------------------------------------------------------------ exchange
    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device
        if self.stage(iteration) == "lgc" and self.worker_ae is not None:
            vs = [self.workers.accumulate(w, g) for w, g in enumerate(grads)]
            avg = yield from self._lgc(iteration, vs)
        else:
            avg = yield from self._sparse(iteration, grads)
        down = aggregate_message(avg, payload_bytes=self.payload_bytes, method=self.name,
                                 iteration=iteration)
        yield Downlink(down)
        return codec.decode(down.packets, self.numel).values.to(out_device)

    def _sparse(self, it, grads):
        """Warm-up and AE training: DGC's own selection and (index, value) messages."""
        n, N = self.numel, self.n_workers
        k = self.k_at(it)
        msgs = {}
        for w, g in enumerate(grads):
            idx, sent = self.workers.select(w, it, g)
            msgs[w] = sparse_message(idx.cpu(), sent.cpu(), n, payload_bytes=self.payload_bytes,
                                     method=self.name, iteration=it)
        arrived = yield Uplink(msgs)
        decoded = [codec.decode(arrived.get(w, []), n) for w in range(N)]
        avg = sum(d.values for d in decoded) / N
        if self.stage(it) == "ae_train":
            self._collect(decoded, k)
            flops = self.trainer.train(self.ae_steps)
            yield ServerCompute(self._seconds(flops, self.ae_gflops), "lgc_ps: autoencoder training")
            if self.sched.ships_after(it):
                msg = weights_message(self.ae.encoder_bytes(), payload_bytes=self.payload_bytes,
                                      method=self.name, iteration=it)
                yield Downlink(msg)  # the encoder goes to the workers once
                self._deploy(self.received_bytes(msg.packets), encoder_only=True)
        return avg.to(self.device)

    def _collect(self, decoded, k):
        """Training pairs: a node's normalised top-k values -> the nodes' mean at those positions."""
        mean = sum(d.values for d in decoded) / len(decoded)
        for d in decoded:
            idx = torch.nonzero(d.mask).reshape(-1)
            if idx.numel() != k:  # part of this node's message was lost (or a value was 0)
                continue
            s = rms(d.values[idx])
            self.trainer.add(d.values[idx] / s, mean[idx] / s)

    def _lgc(self, it, vs):
        n, N, k = self.numel, self.n_workers, self.k_final()
        ki = self.k_innovation(k)
        L = self.leader_of(it)
        msgs, innov = {}, {}
        lead_idx = None
        for w, v in enumerate(vs):
            inn = topk_indices(v, ki) if ki else torch.zeros(0, dtype=torch.long, device=v.device)
            innov[w] = inn
            parts = [sparse_message(inn, v[inn].cpu(), n, payload_bytes=self.payload_bytes,
                                    method=self.name, iteration=it, kind=KIND_INNOVATION)]
            if w == L:
                lead_idx = self.workers.topk(w, it, k)
                s = rms(v[lead_idx])
                with torch.no_grad():
                    z = self.worker_ae.encode((v[lead_idx].cpu() / s)[None])[0]
                latent = codec.encode_dense(z, payload_bytes=self.payload_bytes, dtype=self.latent_dtype,
                                            method=self.name, kind=KIND_LATENT, iteration=it)
                parts = [indices_message(lead_idx.cpu(), n, payload_bytes=self.payload_bytes,
                                         method=self.name, iteration=it, scale=s), latent] + parts
            msgs[w] = join(*parts)
        yield WorkerCompute(self._seconds(self.worker_ae.encode_flops(k), self.worker_gflops),
                            "lgc_ps: leader encodes its top-k values")
        arrived = yield Uplink(msgs)

        common = torch.zeros(n)
        got = read_indices(by_kind(arrived.get(L, [])).get(KIND_INDICES, []), n)
        used_common = got is not None and got[0].numel() == k
        if used_common:
            idx, s = got
            zd = codec.decode(by_kind(arrived[L]).get(KIND_LATENT, []), self.deployed.latent_numel(k))
            with torch.no_grad():
                common[idx] = s * self.deployed.decode(zd.values[None], k)[0]
            yield ServerCompute(self._seconds(self.deployed.decode_flops(k), self.ae_gflops),
                                "lgc_ps: server decodes the common code")
        total = torch.zeros(n)
        for j in range(N):
            u = common.clone()
            d = codec.decode(by_kind(arrived.get(j, [])).get(KIND_INNOVATION, []), n)
            u[d.mask] = d.values[d.mask]
            total += u
        for w in range(N):
            # The leader's positions as every worker learns them: from the bytes that arrived.
            sent = torch.cat([idx.to(innov[w].device), innov[w]]) if used_common else innov[w]
            self.workers.mask(w, sent)
        return (total / N).to(self.device)
