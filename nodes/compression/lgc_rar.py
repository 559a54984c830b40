"""LGC-RAR: learned gradient compression over ring all-reduce.

A ring can only add vectors that line up, so every node uses the same top-k positions: those of
one node (the leader; cyclic by default, as ScaleCom does), sent to the others by a Broadcast in
the AE's order (by the leader's signed values by default; the permutation rides on the position
list) together with the RMS s of the leader's values there. Per LGC iteration:
- every node encodes x_j = v_j[I] / s with the same encoder; the latents (k * latent_ratio
  values, f16 or f32) are summed by an AllReduce on their real bytes;
- every node decodes the same sum: mean = s * D(sum / M) at I, and applies it (M: the
  members on the ring, phases.Members; the leader is the preferred one or the next member);
- exact error feedback: the autoencoder is wholly linear, so D(sum_j z_j) = sum_j D(z_j) and
  node j's share of the mean is g_j = s * D(z_j) with z_j its latent as it went on the wire; node
  j takes exactly g_j out of v at I (and masks u there). What the code did not carry stays.
  (With f16 latents the ring rounds each partial sum to f16, so the mean differs from the mean
  of the credits by that rounding; with latent_dtype = "f32" they agree to float precision.)

The AE is linear and bias-free, so the sum of the nodes' codes *is* the code of the summed
values, and the decoder's job is one well-posed map (code of a mean vector -> mean vector).

Before the LGC stage the schedule is LGC-PS's (lgc_common.Schedule): warm-up and AE training
run DGC itself (`dgc_messages`: DGC's sparsity warm-up, selection and (index, value) messages),
all-gathered, since a ring has no server and DGC's sparse vectors do not add on the way; shared
positions start with the LGC stage. AE training needs no extra traffic: every node holds every
node's message, and node w0 trains the AE on the nodes' mean at each node's sent positions
(normalised by that node's RMS there, in the AE's order of its values: the layout the LGC stage
encodes), charged as compute of FLOPs / ae_gflops. At the end of AE training w0 broadcasts the
whole AE (every node decodes), counted once; if w0 takes no part then, the family keeps
exchanging DGC-style until the first iteration it does, and ships then.
With `dense_below`, the small layers' values ride the ring whole after the latent in the LGC
stage (in latent_dtype), credited as they travel.
With `coder = "none"` the LGC stage sends every node's values at I in f16 on the ring instead of
latents (ScaleCom's exchange): the ablation of LGC-RAR.

`rar_decoder = "nonlinear"`: the encoder stays linear (the ring must sum codes), the decoder gets
biases and LeakyReLU as LGC-PS's (the paper's coder is non-linear). D(sum z_j) is then not the
sum of the nodes' shares, so no node can tell its own: every node that took part is credited with
the decoded mean at I (as LGC-PS credits every node with the common part), which still takes out
of the memories, summed, exactly N times what is applied there; the small layers sent whole stay
credited per node as they travelled.
"""
from __future__ import annotations

import torch

from nodes.compression import codec
from nodes.compression.base import check_finite
from nodes.compression.lgc_common import COMMON_OPTIONS, LGC_RULES, LGCBase
from nodes.compression.lgc_messages import order_of, rms, weights_message
from nodes.compression.phases import AllGather, AllReduce, Broadcast, Members, ServerCompute, WorkerCompute
from nodes.compression.precision import on_wire
from nodes.compression.registry import register
from nodes.compression.templates import leader_among, ring_mean
from lgc_schema import Field


@register("lgc_rar", wire_id=10, rules=LGC_RULES, **COMMON_OPTIONS,
          coder=Field("ae", str, choices=("ae", "none"),
                       help="'none': f16 values on the ring instead of latents (the ablation)"),
          rar_decoder=Field("linear", str, choices=("linear", "nonlinear"),
                            help="'nonlinear': biases and LeakyReLU in the decoder (the encoder "
                                 "stays linear for the ring's sum); every node is then credited "
                                 "with the decoded mean at the shared positions"))
class LGCRAR(LGCBase):
    collectives = ("allreduce",)
    linear_encoder = True
    linear = True
    trainer_node = 0  # the node that trains the AE and broadcasts it

    def __init__(self, *, rar_decoder: str = "linear", **kw):
        # one shared decoder, no latent pull: the ring sums the codes
        self.linear = rar_decoder == "linear"
        super().__init__(decoders="shared", latent_pull=0.0, **kw)

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device
        n, N = self.numel, self.n_workers
        if not (self.stage(iteration) == "lgc" and (self.worker_ae is not None or self.coder == "none")):
            avg = yield from self._dgc_stage(iteration, grads)
            return avg.to(out_device)
        vs = [self.dgc_state.accumulate(w, g) for w, g in enumerate(grads)]
        k = self.k_final()
        members = yield Members(N)
        L = leader_among(members, self.leader_of(iteration), N)
        if L is None:  # nobody takes part: the round closes empty (memories keep all they had)
            yield from ring_mean({}, "f32", k)
            return torch.zeros(n, device=out_device)
        lead_idx = self.dgc_state.topk(L, iteration, self.dgc.density(iteration))
        ordered = self.ordered(lead_idx, vs[L][lead_idx])
        got = yield Broadcast(L, self.positions_message(ordered, iteration, rms(vs[L][ordered])))
        # Every node works with the positions and scale it received, not the leader's own copy
        # (broadcasts arrive whole: the testbed's loop resends what a node missed).
        idx, s = self.read_positions(got)
        idx = idx.to(vs[L].device)
        # the layers sent whole (dense_below) ride the ring after the top-k part, known to all
        dense = self.dgc_state.dense.to(idx.device)
        if self.coder == "ae":
            ae = self.worker_ae
            with torch.no_grad():
                codes = ae.encode(torch.stack([v[idx].cpu() / s for v in vs]))
                ring = torch.cat([codes, torch.stack([v[dense].cpu() for v in vs])], dim=1)
                wire = [self._wire(ring[w]) for w in range(N)]
                sent = on_wire(ring, self.latent_dtype)            # what travels, as it travels
                nz = codes.shape[1]
                credits = torch.cat([s * ae.decode(sent[:, :nz], k), sent[:, nz:]], dim=1)
            decodes = 2 if self.linear else 1   # its own share (linear only) and the sum
            yield WorkerCompute(self._seconds(ae.encode_flops(k) + decodes * ae.decode_flops(k),
                                              self.worker_gflops),
                                "lgc_rar: every node encodes its values, decodes its share and the sum")
            summed = yield AllReduce({w: wire[w] for w in members}, self.latent_dtype)
            summed = summed.reshape(-1)
            with torch.no_grad():
                mean_vals = torch.cat([s * ae.decode(summed[None, :nz] / len(members), k)[0],
                                       summed[nz:] / len(members)])
        else:  # coder none: ScaleCom's f16 values on the ring
            both = torch.cat([idx, dense])
            credits = torch.stack([on_wire(v[both].cpu(), "f16") for v in vs])
            mean_vals = yield from ring_mean({w: credits[w] for w in members}, "f16", both.numel())
        self.in_use.observe([vs[w] for w in members], vs[L], idx, mean_vals[:idx.numel()])
        shared_mean = self.coder == "ae" and not self.linear   # no node can tell its share
        if shared_mean:
            credits[:, :idx.numel()] = mean_vals[:idx.numel()]
        idx = torch.cat([idx, dense])
        for w in range(N):
            if not shared_mean or w in members:
                self.dgc_state.credit(w, idx, credits[w])
        avg = torch.zeros(n)
        avg[idx.cpu()] = mean_vals
        return avg.to(out_device)

    def _dgc_stage(self, it, grads):
        """Warm-up and AE training (and the LGC stage until the AE has shipped): DGC's messages,
        all-gathered; every node takes the same mean over the N workers (a lost or left-out
        message counts as zeros, as in DGC's all-gather)."""
        n, N = self.numel, self.n_workers
        got = yield AllGather(self.dgc_messages(it, grads))
        decoded = [codec.decode(got.get(w, []), n) for w in range(N)]
        avg = sum(d.values for d in decoded) / N
        stage = self.stage(it)
        if self.coder != "ae" or stage == "warmup":
            return avg
        members = yield Members(N)   # the trainer must take part to train and to broadcast
        if self.trainer_node not in members:
            return avg
        if stage == "ae_train":
            self._collect(decoded, avg)
            flops = self.trainer.train(self.ae_steps)
            yield ServerCompute(self._seconds(flops, self.ae_gflops),
                                f"lgc_rar: node w{self.trainer_node} trains the autoencoder")
        # shipped after the last AE-training iteration, or late (the trainer was away then)
        if self.sched.ships_after(it) or stage == "lgc":
            msg = weights_message(self.ae.full_bytes(), payload_bytes=self.payload_bytes,
                                  method=self.wire_id, iteration=it)
            got = yield Broadcast(self.trainer_node, msg)
            self._deploy(self.received_bytes(got), encoder_only=False)
        return avg

    def _collect(self, decoded, mean):
        """Training vectors: the nodes' mean at each node's sent top-k positions, laid out in the
        AE's order of that node's values and normalised by its RMS there (as a leader's
        positions and scale lay out the LGC stage's input); the linear AE reconstructs them."""
        k = self.k_final()
        for d in decoded:
            sent = d.mask.clone()
            sent[self.dgc_state.dense] = False   # the AE codes the sparse top-k only
            idx = torch.nonzero(sent).reshape(-1)
            if idx.numel() != k:  # lost, left out, or not at the final density yet
                continue
            idx = idx[order_of(d.values[idx], self.order)]
            x = mean[idx] / rms(d.values[idx])
            self.trainer.add(x, x)
