"""LGC-PS: learned gradient compression over a parameter server.

Per iteration of the LGC stage (after warm-up and AE training, see lgc_common.Schedule):
- every worker accumulates its gradient (DGC momentum correction + error feedback) into v;
- the leader L (cyclic by default) takes the top-k positions I of its v, lays its values out in
  the AE's order (by signed value by default: neighbours are similar), normalises them by their
  RMS s, encodes them with the shipped encoder and sends [positions I in that order, s, latent z
  (k * latent_ratio values), its innovation]; the permutation rides on the position list;
- every worker (the leader too) sends its innovation: its ceil(innovation_ratio * k) largest
  entries of v (positions, values in f16 by default) - what is its own, exactly - and, with
  `dense_below`, every coordinate of the small layers sent whole (layers.py; the leader's top-k
  and the AE's value vector cover the other layers only);
- the server decodes the common code, c = s * D(z) at I: the decoder was trained to map a
  leader's code to the *mean over nodes* of their values at the leader's positions, i.e. to what
  the nodes share. Node j is credited with g_j = c at I, overwritten by node j's innovation where
  it arrived; the aggregate is mean_j g_j = c + r, with r non-zero only where innovations arrived;
- downlink (compressed): the server relays the leader's position and latent packets and sends r
  (sparse), plus, per node, which of its innovation packets arrived. Every node decodes c itself
  (the whole AE was shipped), so it applies c + r and knows its own credit g_j exactly;
- exact error feedback: every node takes g_j, and only g_j, out of v (and masks u where credited).
  Nothing a node did not send, or that did not arrive, leaves its memory.

Warm-up and AE training exchange DGC-style (index, value) messages; in AE training the server
also keeps, for every node L as a would-be leader, the pair (v_L[I_L]/s_L, mean_j v_j[I_L]/s_L)
in the AE's order, from the messages that arrived (no extra bytes: they are that stage's
gradient messages) and runs `ae_steps` Adam steps on them, charged as ServerCompute of
FLOPs / ae_gflops. At the end of AE training the AE's weights go down once (a Downlink, counted).

Coder refresh (`ae_refresh_every = R` > 0; 0, the default, keeps the coder frozen after AE
training): the coder is fine-tuned in the LGC stage on what the aggregate credits. At every R-th
LGC iteration t (counted from the first) each node, having read the leader's positions I_t from
the downlink, keeps its memory there before crediting, v_j[I_t] in the AE's order; at t + 1 it
appends those k values (innovation_dtype, no indices: the server knows I_t) to its uplink
message. These are values the protocol does not otherwise send, and they are counted: k values
per node per refresh. When every node's arrived whole, the server adds the pair (v_L[I_t] / s,
mean_j v_j[I_t] / s) to the trainer (the first refresh drops AE training's pairs, which had an
easier target: the mean of *sent* values), runs `ae_refresh_steps` Adam steps (ServerCompute)
and, after that iteration's downlink, ships the whole AE again (a Downlink, counted). Shared
decoder only. Every LGC iteration the scheme also records, from its oracle view of every memory,
beta and the coder's in-use error (lgc_common.InUse), which the testbed's loop stores with each
evaluation.

With `coder = "none"` (the registered `lgc_ablation`) the leader sends its values at I in f16
instead of a latent: the same protocol without the learned coder (ScaleCom's shared positions).
"""
from __future__ import annotations

import math

import torch

from nodes.compression import codec
from nodes.compression.base import Message, check_finite
from nodes.compression.lgc_common import (COMMON_OPTIONS, LGC_RULES, PROTOCOL_OPTIONS, LGCBase,
                                          topk_indices)
from nodes.compression.lgc_messages import (KIND_AGGREGATE, KIND_COMMON, KIND_INDICES, KIND_INNOVATION,
                                            KIND_LATENT, KIND_MEAN_AT_POSITIONS, KIND_REFRESH,
                                            aggregate_message, all_arrived, by_kind, join, order_of, rms,
                                            sparse_message, weights_message)
from nodes.compression.phases import Downlink, ServerCompute, Uplink, WorkerCompute
from nodes.compression.registry import register
from lgc_schema import Field, Rule

PS_OPTIONS = dict(
    innovation_ratio=Field(0.05, float, min=0.0, max=1.0,
                            help="innovation entries each node sends, as a fraction of k"),
    innovation_dtype=Field("f16", str, choices=("f32", "f16"), help="precision of innovation values"),
)

# The reference's structure, options of the coder (lgc_ps only: the ablation has no coder).
CODER_OPTIONS = dict(
    decoders=Field("shared", str, choices=("shared", "per_node"),
                    help="one decoder for the nodes' mean, or one per node that also takes that "
                         "node's innovation at the leader's positions (the reference's structure)"),
    latent_pull=Field(0.0, float, min=0.0, max=100.0,
                       help="weight of the loss term that pulls the nodes' latents of one "
                            "iteration together (the reference weighs it 1:1); 0 = off"),
    ae_refresh_every=Field(0, int, min=0,
                            help="fine-tune the coder in the LGC stage on what the aggregate "
                                 "credits: every R-th LGC iteration the nodes keep their memory "
                                 "at the leader's positions and send it with the next uplink "
                                 "(k values each in innovation_dtype, counted), the server trains "
                                 "ae_refresh_steps steps and ships the AE (counted); 0 = frozen"),
    ae_refresh_steps=Field(5, int, min=1, max=10000,
                            help="Adam steps of each coder refresh (ae_refresh_every)"),
)


# the refresh trains the shared decoder only
REFRESH_RULE = Rule("ae_refresh_every", lambda t: None if not t["ae_refresh_every"] or
                    t["decoders"] != "per_node" else "0 with decoders = 'per_node' (the refresh "
                    "trains the shared decoder only)", needs=("decoders",))


@register("lgc_ps", wire_id=9, rules=(*LGC_RULES, REFRESH_RULE), **COMMON_OPTIONS, **PS_OPTIONS,
          **CODER_OPTIONS)
class LGCPS(LGCBase):
    collectives = ("ps",)
    linear_encoder = False

    def __init__(self, *, innovation_ratio: float, innovation_dtype: str, ae_refresh_every: int,
                 ae_refresh_steps: int, coder: str = "ae", **kw):
        super().__init__(coder=coder, **kw)
        self.innovation_ratio = float(innovation_ratio)
        self.innovation_dtype = innovation_dtype
        self.refresh_every, self.refresh_steps = int(ae_refresh_every), int(ae_refresh_steps)
        # per node, its memory at the last refresh iteration's leader positions (AE order), with
        # that iteration, its leader and scale; sent with the next uplink
        self.pending: dict | None = None
        self.refreshes = 0

    def k_innovation(self, k: int) -> int:
        return 0 if self.innovation_ratio == 0 else min(k, int(math.ceil(self.innovation_ratio * k)))

    def innovation_positions(self, v: torch.Tensor, ki: int) -> torch.Tensor:
        """A node's own part: its ki largest entries of v over the sparse layers, and every
        coordinate of the layers sent whole (dense_below), which are nobody else's."""
        sparse = self.dgc.layers.sparse.to(v.device) if self.dgc_state.dense.numel() else None
        if not ki:
            inn = torch.zeros(0, dtype=torch.long, device=v.device)
        elif sparse is None:
            inn = topk_indices(v, ki)
        else:
            inn = sparse[topk_indices(v[sparse], ki)]
        if sparse is None:
            return inn
        return torch.sort(torch.cat([inn, self.dgc_state.dense.to(v.device)])).values

    def uses_coder(self) -> bool:
        return self.coder == "ae"

    # ------------------------------------------------------------------ exchange
    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device
        if self.stage(iteration) == "lgc" and (self.worker_ae is not None or not self.uses_coder()):
            vs = [self.dgc_state.accumulate(w, g) for w, g in enumerate(grads)]
            avg = yield from self._lgc(iteration, vs)
            return avg.to(out_device)
        avg = yield from self._sparse(iteration, grads)
        down = aggregate_message(avg, payload_bytes=self.payload_bytes, method=self.wire_id,
                                 iteration=iteration)
        yield Downlink(down)
        return codec.decode(down.packets, self.numel).values.to(out_device)

    def _sparse(self, it, grads):
        """Warm-up and AE training: DGC's own selection and (index, value) messages."""
        n, N = self.numel, self.n_workers
        k = self.k_at(it)
        arrived = yield Uplink(self.dgc_messages(it, grads))
        decoded = [codec.decode(arrived.get(w, []), n) for w in range(N)]
        avg = sum(d.values for d in decoded) / N
        if self.stage(it) == "ae_train":
            yield from self._fit(it, decoded, k)
        return avg.to(self.device)

    def _fit(self, it, decoded, k):
        """The AE-training stage's server work on the arrived messages (none for the ablation)."""
        if not self.uses_coder():
            return
        self._collect(decoded, k, it)
        flops = self.trainer.train(self.ae_steps)
        yield ServerCompute(self._seconds(flops, self.ae_gflops), "lgc_ps: autoencoder training")
        if self.sched.ships_after(it):
            # the whole AE: the leader encodes, every node decodes the relayed common code
            msg = weights_message(self.ae.full_bytes(), payload_bytes=self.payload_bytes,
                                  method=self.wire_id, iteration=it)
            yield Downlink(msg)
            self._deploy(self.received_bytes(msg.packets), encoder_only=False)

    def _collect(self, decoded, k, it):
        """Training pairs: a node's normalised top-k values -> the nodes' mean at those positions,
        both in the AE's order of that node's values (one group per iteration: latent_pull).
        Per-node decoders: -> every node's values there, each with the part of them that node's
        innovation would carry (its ceil(innovation_ratio * k) largest sent values)."""
        mean = sum(d.values for d in decoded) / len(decoded)
        if self.per_node:
            ki = self.k_innovation(k)
            own = []
            for d in decoded:
                sparse = d.values.clone()
                sparse[self.dgc_state.dense] = 0.0
                top = torch.zeros(self.numel, dtype=torch.bool)
                if ki:
                    top[topk_indices(sparse, ki)] = True
                own.append(top & d.mask)
        for d in decoded:
            sent = d.mask.clone()
            sent[self.dgc_state.dense] = False   # the AE codes the sparse top-k only
            idx = torch.nonzero(sent).reshape(-1)
            if idx.numel() != k:  # part of this node's message was lost
                continue
            idx = idx[order_of(d.values[idx], self.order)]
            s = rms(d.values[idx])
            if self.per_node:
                every = torch.stack([e.values[idx] / s for e in decoded])
                side = torch.stack([torch.where(o[idx], e.values[idx] / s, torch.zeros(()))
                                    for o, e in zip(own, decoded)])
                self.trainer.add(d.values[idx] / s, every, side=side, group=it)
            else:
                self.trainer.add(d.values[idx] / s, mean[idx] / s, group=it)

    # ------------------------------------------------------------------ the LGC stage
    def _leader_parts(self, it, v) -> list[Message]:
        """The common part: positions (in the AE's order) + latent, or (coder none) f16 values."""
        n = self.numel
        idx = self.dgc_state.topk(self.leader_of(it), it, self.density)
        if not self.uses_coder():
            return [sparse_message(idx.cpu(), v[idx].cpu(), n, payload_bytes=self.payload_bytes,
                                   method=self.wire_id, iteration=it, kind=KIND_COMMON, dtype="f16")]
        ordered = self.ordered(idx, v[idx])
        s = rms(v[ordered])
        with torch.no_grad():
            z = self.worker_ae.encode((v[ordered].cpu() / s)[None])[0]
        latent = codec.encode_dense(z, payload_bytes=self.payload_bytes, dtype=self.latent_dtype,
                                    method=self.wire_id, kind=KIND_LATENT, iteration=it)
        return [self.positions_message(ordered, it, s), latent]

    def _common_packets(self, parts: dict[int, list[bytes]]) -> list[bytes]:
        """The leader's common-part packets if they can be used (every position arrived)."""
        if not self.uses_coder():
            pk = parts.get(KIND_COMMON, [])
            return pk if pk and self._all(pk) else []
        pos = parts.get(KIND_INDICES, [])
        if not pos or self.read_positions(pos) is None:
            return []
        return pos + parts.get(KIND_LATENT, [])

    @staticmethod
    def _all(packets) -> bool:
        return len({codec.read_header(p).index for p in packets}) == codec.read_header(packets[0]).count

    def _common(self, packets: list[bytes], ae) -> tuple[torch.Tensor, torch.Tensor]:
        """(positions, values) of the common part c from its packets; empty when there is none."""
        n, k = self.numel, self.k_final()
        if not packets:
            return torch.zeros(0, dtype=torch.long), torch.zeros(0)
        parts = by_kind(packets)
        if not self.uses_coder():
            d = codec.decode(parts[KIND_COMMON], n)
            idx = torch.nonzero(d.mask).reshape(-1)
            return idx, d.values[idx]
        ordered, s = self.read_positions(parts[KIND_INDICES])
        zd = codec.decode(parts.get(KIND_LATENT, []), ae.latent_numel(k))  # lost latent values: 0
        with torch.no_grad():
            return ordered, s * ae.decode(zd.values[None], k)[0]

    def _lgc(self, it, vs):
        n, N, k = self.numel, self.n_workers, self.k_final()
        ki = self.k_innovation(k)
        L = self.leader_of(it)
        msgs, own = {}, {}
        for w, v in enumerate(vs):
            inn = self.innovation_positions(v, ki)
            own[w] = sparse_message(inn.cpu(), v[inn].cpu(), n, payload_bytes=self.payload_bytes,
                                    method=self.wire_id, iteration=it, kind=KIND_INNOVATION,
                                    dtype=self.innovation_dtype)
            if len(own[w].packets) > 24:  # the downlink says which arrived in a 24-bit f32 mask
                raise ValueError(f"innovation_ratio={self.innovation_ratio}: {len(own[w].packets)} "
                                 "innovation packets per node; at most 24 allowed")
            msgs[w] = join(*(self._leader_parts(it, v) if w == L else []), own[w],
                           *self._refresh_part(it, w))
        if self.uses_coder():
            # charged up front, one phase: the leader's encode and every node's decode of the
            # relayed common code (after the downlink) take the same time on every iteration
            flops = self.worker_ae.encode_flops(k) + self.worker_ae.decode_flops(k)
            yield WorkerCompute(self._seconds(flops, self.worker_gflops),
                                "lgc_ps: the leader encodes; every node decodes the common code")
        arrived = yield Uplink(msgs)
        if self.per_node:
            return (yield from self._per_node(it, arrived, own, L, vs))
        refreshed = yield from self._refresh(it, arrived)

        # --- server: the common part once, every node's innovation over it
        common_pk = self._common_packets(by_kind(arrived.get(L, [])))
        cidx, cval = self._common(common_pk, self.deployed)
        if common_pk and self.uses_coder():
            yield ServerCompute(self._seconds(self.deployed.decode_flops(k), self.ae_gflops),
                                "lgc_ps: server decodes the common code")
        self.in_use.observe(vs, vs[L], cidx, cval)
        common = torch.zeros(n)
        common[cidx] = cval
        resid = torch.zeros(n)
        flags = []
        for j in range(N):
            d, flag = self._arrived_innovation(arrived, j)
            resid[d.mask] += d.values[d.mask] - common[d.mask]
            flags.append(flag)
        resid /= N
        ridx = torch.nonzero(resid).reshape(-1)
        down = join(Message(list(common_pk)),
                    sparse_message(ridx, resid[ridx], n, payload_bytes=self.payload_bytes,
                                   method=self.wire_id, iteration=it, kind=KIND_AGGREGATE,
                                   scalars=(*self._down_scalars(), *flags)))
        yield Downlink(down)

        # --- every node, from the downlink's bytes: the aggregate and its own credit
        parts = by_kind(down.packets)
        r = codec.decode(parts[KIND_AGGREGATE], n)
        flags = [int(f) for f in self._read_down_scalars(r.scalars)]
        cpk = [p for kind in (KIND_INDICES, KIND_LATENT, KIND_COMMON) for p in parts.get(kind, [])]
        cidx, cval = self._common(cpk, self.worker_ae)
        common = torch.zeros(n)
        common[cidx] = cval
        self._keep_for_refresh(it, vs, L, cidx, parts.get(KIND_INDICES, []))
        for w in range(N):
            credit = torch.zeros(n)
            credited = torch.zeros(n, dtype=torch.bool)
            credit[cidx], credited[cidx] = cval, True
            d = self._delivered_innovation(own[w], flags[w])
            credit[d.mask], credited[d.mask] = d.values[d.mask], True
            self._credit(w, credit, credited)
        if refreshed:  # the fine-tuned AE goes down after this iteration's aggregate
            msg = weights_message(self.ae.full_bytes(), payload_bytes=self.payload_bytes,
                                  method=self.wire_id, iteration=it)
            yield Downlink(msg)
            self._deploy(self.received_bytes(msg.packets), encoder_only=False)
        return common + r.values

    # ------------------------------------------------------------------ coder refresh
    def refresh_due(self, it: int) -> bool:
        """Every R-th LGC iteration, counted from the first, keeps the memories for a refresh."""
        return (self.refresh_every > 0 and self.refits() and self.stage(it) == "lgc"
                and (it - self.sched.lgc_start) % self.refresh_every == 0)

    def _keep_for_refresh(self, it, vs, L, ordered, position_packets) -> None:
        """Node side, after the downlink, before crediting: its memory at the leader's positions
        as it read them (the AE's order), and the scale that came with them."""
        self.pending = None
        if not self.refresh_due(it) or not ordered.numel():
            return
        _, s = self.read_positions(position_packets)
        self.pending = {"iteration": it, "leader": L, "scale": s,
                        "values": [v[ordered.to(v.device)].cpu().clone() for v in vs]}

    def _refresh_part(self, it, w) -> list[Message]:
        """Node w's memory kept at the previous iteration, if that was a refresh iteration."""
        p = self.pending
        if p is None or p["iteration"] != it - 1:
            return []
        return [codec.encode_dense(p["values"][w], payload_bytes=self.payload_bytes,
                                   dtype=self.innovation_dtype, method=self.wire_id,
                                   kind=KIND_REFRESH, iteration=it)]

    def _refresh(self, it, arrived):
        """Server: with every node's kept memory arrived whole, one training pair (the leader's
        values -> the nodes' mean, both over the leader's scale) and ae_refresh_steps steps.
        Returns True when the AE changed (it then ships after the downlink)."""
        p, self.pending = self.pending, None
        if p is None or p["iteration"] != it - 1:
            return False
        got = [by_kind(arrived.get(w, [])).get(KIND_REFRESH, []) for w in range(self.n_workers)]
        if not all(all_arrived(pk) for pk in got):
            return False
        vals = torch.stack([codec.decode(pk).values for pk in got])
        s = p["scale"]
        flops = self._refit(vals[p["leader"]] / s, vals.mean(0) / s)
        self.refreshes += 1
        yield ServerCompute(self._seconds(flops, self.ae_gflops), f"{self.name}: coder refresh")
        return self.uses_coder()   # a changed AE ships; a refitted scalar rides every aggregate

    def refits(self) -> bool:
        """Whether the LGC stage's coder is refreshed on what it serves (ae_refresh_every)."""
        return self.uses_coder()

    def _refit(self, leader: torch.Tensor, mean: torch.Tensor) -> float:
        """One refresh pair (the leader's values -> the nodes' mean memory, over the leader's
        scale): the AE's fine-tuning; returns the FLOPs spent."""
        if self.refreshes == 0:
            self.trainer.clear()   # AE training's pairs had another target
        self.trainer.add(leader, mean)
        return self.trainer.train(self.refresh_steps)

    def _down_scalars(self) -> tuple[float, ...]:
        """Scalars the LGC stage's aggregate carries before the innovation flags (lgc_scaled: beta)."""
        return ()

    def _read_down_scalars(self, scalars) -> list[float]:
        """Node side: the innovation flags of the aggregate's scalars (what _down_scalars adds, read)."""
        return list(scalars)

    def state_dict(self) -> dict:
        p = self.pending
        return {**super().state_dict(), "refreshes": self.refreshes,
                "pending": None if p is None else {**p, "values": [v.clone() for v in p["values"]]}}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.refreshes = state.get("refreshes", 0)
        p = state.get("pending")
        self.pending = None if p is None else {**p, "values": [v.clone() for v in p["values"]]}

    def _arrived_innovation(self, arrived, j: int):
        """Server side: node j's innovation as it arrived (lost values: none) and the mask of
        which of its packets arrived (a float bit field, sent back in the downlink's scalars)."""
        pk = by_kind(arrived.get(j, [])).get(KIND_INNOVATION, [])
        return codec.decode(pk, self.numel), float(sum(1 << codec.read_header(p).index for p in pk))

    def _delivered_innovation(self, own: Message, flag: int):
        """Node side: its own innovation as the server decoded it (the packets the flag marks)."""
        mine = [p for p in own.packets if flag >> codec.read_header(p).index & 1]
        return codec.decode(mine, self.numel)

    def _credit(self, w: int, credit: torch.Tensor, credited: torch.Tensor) -> None:
        where = torch.nonzero(credited).reshape(-1)
        self.dgc_state.credit(w, where, credit[where])


    # ------------------------------------------------------------------ per-node decoders
    def _code(self, packets: list[bytes]):
        """(positions in the AE's order, scale, latent) from the leader's packets, or None."""
        if not packets:
            return None
        parts = by_kind(packets)
        ordered, s = self.read_positions(parts[KIND_INDICES])
        k = ordered.numel()
        z = codec.decode(parts.get(KIND_LATENT, []), self.deployed.latent_numel(k)).values  # lost: 0
        return ordered, s, z

    def _node_credit(self, ae, code, j: int, d) -> tuple[torch.Tensor, torch.Tensor]:
        """Node j's credit: its decoder's values at the leader's positions, given the latent and
        node j's innovation there (d: what of it arrived), then its innovation where it arrived.
        The server and node j run this on the same bytes and weights: the same floats."""
        credit = torch.zeros(self.numel)
        credited = torch.zeros(self.numel, dtype=torch.bool)
        if code is not None:
            ordered, s, z = code
            side = torch.where(d.mask[ordered], d.values[ordered] / s, torch.zeros(()))
            with torch.no_grad():
                credit[ordered] = s * ae.decode(z[None], ordered.numel(), node=j, side=side[None])[0]
            credited[ordered] = True
        credit[d.mask], credited[d.mask] = d.values[d.mask], True
        return credit, credited

    def _per_node(self, it, arrived, own, L, vs):
        """The reference's structure: the server decodes node j's values with node j's decoder
        (the leader's latent + node j's innovation) and averages; the downlink relays the leader's
        packets (every node decodes its own credit with its own decoder) and the mean (f32)."""
        n, N, k = self.numel, self.n_workers, self.k_final()
        common_pk = self._common_packets(by_kind(arrived.get(L, [])))
        code = self._code(common_pk)
        if code is not None:
            yield ServerCompute(self._seconds(N * self.deployed.decode_flops(k), self.ae_gflops),
                                "lgc_ps: server decodes every node's values with its decoder")
        total, flags = torch.zeros(n), []
        for j in range(N):
            d, flag = self._arrived_innovation(arrived, j)
            total += self._node_credit(self.deployed, code, j, d)[0]
            flags.append(flag)
        mean = total / N
        if code is not None:
            self.in_use.observe(vs, vs[L], code[0], mean[code[0]])
        # the mean at I as bare f32 values in the relayed order (no indices: the nodes have the
        # positions), the rest (innovations outside I) sparse, with the arrival flags
        at = torch.zeros(n, dtype=torch.bool)
        down = [Message(list(common_pk))]
        if code is not None:
            at[code[0]] = True
            down.append(codec.encode_dense(mean[code[0]], payload_bytes=self.payload_bytes, dtype="f32",
                                           method=self.wire_id, kind=KIND_MEAN_AT_POSITIONS, iteration=it))
        nz = torch.nonzero((mean != 0) & ~at).reshape(-1)
        down = join(*down, sparse_message(nz, mean[nz], n, payload_bytes=self.payload_bytes,
                                          method=self.wire_id, iteration=it, kind=KIND_AGGREGATE,
                                          scalars=tuple(flags)))
        yield Downlink(down)

        parts = by_kind(down.packets)
        rest = codec.decode(parts[KIND_AGGREGATE], n)
        flags = [int(f) for f in rest.scalars]
        code = self._code([p for kind in (KIND_INDICES, KIND_LATENT) for p in parts.get(kind, [])])
        agg = rest.values
        if code is not None:
            agg[code[0]] = codec.decode(parts[KIND_MEAN_AT_POSITIONS]).values
        for w in range(N):
            d = self._delivered_innovation(own[w], flags[w])
            self._credit(w, *self._node_credit(self.worker_ae, code, w, d))
        return agg


def ablation_options() -> dict[str, Field]:
    """lgc_ps's options without the coder's: the schedule, DGC state, leader and innovation."""
    return {**{k: COMMON_OPTIONS[k] for k in PROTOCOL_OPTIONS}, **PS_OPTIONS}


def coder_values() -> dict:
    """What the ablation's LGC-PS body is given for the options it has not: their defaults."""
    kept = ablation_options()
    return {k: f.default for k, f in {**COMMON_OPTIONS, **PS_OPTIONS, **CODER_OPTIONS}.items()
            if k not in kept}

