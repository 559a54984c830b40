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
Warm-up and AE training run the same shared-position exchange with the values themselves on the
ring (f32). AE training needs no extra traffic: after the all-reduce every node holds the mean
values at I, and node w0 trains the AE on mean/s (charged as compute of FLOPs / ae_gflops). At the
end of AE training w0 broadcasts the whole AE (every node decodes), counted once.
With `dense_below`, the small layers' values ride the ring whole after the top-k part (after
the latent in the LGC stage, in latent_dtype), credited as they travel.
With `coder = "none"` the LGC stage sends every node's values at I in f16 on the ring instead of
latents (ScaleCom's exchange): the ablation of LGC-RAR.
"""
from __future__ import annotations

import torch

from nodes.compression.base import check_finite
from nodes.compression.lgc_common import COMMON_OPTIONS, LGCBase, rms, weights_message
from nodes.compression.phases import AllReduce, Broadcast, Members, ServerCompute, WorkerCompute
from nodes.compression.precision import on_wire
from nodes.compression.registry import register
from nodes.compression.templates import leader_among, ring_mean
from schema import Field


@register("lgc_rar", wire_id=10, **COMMON_OPTIONS,
          coder=Field("ae", str, choices=("ae", "none"),
                       help="'none': f16 values on the ring instead of latents (the ablation)"))
class LGCRAR(LGCBase):
    collectives = ("allreduce",)
    linear_encoder = True
    linear = True
    trainer_node = 0  # the node that trains the AE and broadcasts it

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device
        n, N = self.numel, self.n_workers
        vs = [self.workers.accumulate(w, g) for w, g in enumerate(grads)]
        lgc = self.stage(iteration) == "lgc" and (self.worker_ae is not None or self.coder == "none")
        k = self.k_at(iteration)  # DGC's sparsity warm-up, then the final density
        members = yield Members(N)
        L = leader_among(members, self.leader_of(iteration), N)
        if L is None:  # nobody takes part: the round closes empty (memories keep all they had)
            yield from ring_mean({}, "f32", k)
            return torch.zeros(n, device=out_device)
        lead_idx = self.workers.topk(L, iteration, self.dgc.density(iteration))
        ordered = self.ordered(lead_idx, vs[L][lead_idx])
        got = yield Broadcast(L, self.positions_message(ordered, iteration, rms(vs[L][ordered])))
        # Every node works with the positions and scale it received, not the leader's own copy
        # (broadcasts arrive whole: the orchestrator resends what a node missed).
        idx, s = self.read_positions(got)
        idx = idx.to(vs[L].device)
        # the layers sent whole (dense_below) ride the ring after the top-k part, known to all
        dense = self.workers.dense.to(idx.device)
        if lgc and self.coder == "ae":
            ae = self.worker_ae
            with torch.no_grad():
                codes = ae.encode(torch.stack([v[idx].cpu() / s for v in vs]))
                ring = torch.cat([codes, torch.stack([v[dense].cpu() for v in vs])], dim=1)
                wire = [self._wire(ring[w]) for w in range(N)]
                sent = on_wire(ring, self.latent_dtype)            # what travels, as it travels
                nz = codes.shape[1]
                credits = torch.cat([s * ae.decode(sent[:, :nz], k), sent[:, nz:]], dim=1)
            yield WorkerCompute(self._seconds(ae.encode_flops(k) + 2 * ae.decode_flops(k),
                                              self.worker_gflops),
                                "lgc_rar: every node encodes its values, decodes its share and the sum")
            summed = yield AllReduce({w: wire[w] for w in members}, self.latent_dtype)
            summed = summed.reshape(-1)
            with torch.no_grad():
                mean_vals = torch.cat([s * ae.decode(summed[None, :nz] / len(members), k)[0],
                                       summed[nz:] / len(members)])
        else:
            dtype = "f16" if lgc else "f32"   # coder none: ScaleCom's f16 values on the ring
            both = torch.cat([idx, dense])
            credits = torch.stack([on_wire(v[both].cpu(), dtype) for v in vs])
            mean_vals = yield from ring_mean({w: credits[w] for w in members}, dtype, both.numel())
            # the trainer holds the mean only when it is on the ring; if it is not there when
            # the AE is due, it ships at the first LGC iteration it is
            trains = self.coder == "ae" and self.trainer_node in members
            if trains and self.stage(iteration) == "ae_train":
                self.trainer.add(mean_vals[:k] / s, mean_vals[:k] / s)
                flops = self.trainer.train(self.ae_steps)
                yield ServerCompute(self._seconds(flops, self.ae_gflops),
                                    f"lgc_rar: node w{self.trainer_node} trains the autoencoder")
            overdue = self.stage(iteration) == "lgc" and self.worker_ae is None
            if trains and (self.sched.ships_after(iteration) or overdue):
                msg = weights_message(self.ae.full_bytes(), payload_bytes=self.payload_bytes,
                                      method=self.name, iteration=iteration)
                got = yield Broadcast(self.trainer_node, msg)
                self._deploy(self.received_bytes(got), encoder_only=False)
        idx = torch.cat([idx, dense])
        for w in range(N):
            self.workers.credit(w, idx, credits[w])
        avg = torch.zeros(n)
        avg[idx.cpu()] = mean_vals
        return avg.to(out_device)
