"""`lgc_scaled`: LGC-PS's protocol with the learned coder replaced by one fitted scalar.

The baseline the learned coder must beat at equal format. Everything is the ablation's
(lgc_ablation: stages, DGC state, cyclic leader, the leader's top-k values in f16 at its
positions, innovations, relayed downlink, exact error feedback) except what the server credits
at the leader's positions I: beta times the leader's values, not the values themselves.

beta is a least-squares fit at the server of the nodes' mean at a leader's positions on that
leader's values, both over the leader's RMS there (so every pair weighs alike):
    beta = sum_p <x_p, m_p> / sum_p <x_p, x_p>
over the newest `ae_buffer` pairs p:
- fitting stage (LGC-PS's AE-training window, the same iterations): for every node L whose
  message arrived whole, x = L's sent top-k values, m = the mean over the nodes of their sent
  values at L's positions (the pairs LGC-PS trains its coder on; no extra bytes);
- refresh (`ae_refresh_every = R` > 0, LGC-PS's protocol): every R-th LGC iteration the nodes
  keep their memory at the leader's positions and send it with the next uplink (k values each in
  innovation_dtype, counted); with every node's arrived whole, the pair (x = the leader's, m =
  the nodes' mean) is added (the first refresh drops the fitting stage's pairs, whose target was
  the mean of *sent* values) and beta refitted. 0 (default): beta frozen after the fitting stage.
beta goes down as one f32 scalar in every LGC-stage aggregate (4 bytes per packet, counted);
every node credits itself with beta times the relayed leader's values, as the server does.
Before the first fit (no pairs) beta is 1: the ablation's credit.

`common_source = "momentum"` (a variant that codes the shared part before error feedback drains
it): the nodes share more in their fresh gradients than in their error memories, whose shared
part the aggregate has already taken out. The leader picks I as the top-k of its momentum u_L
(DGC's corrected gradient, which v accumulates) and sends u_L at I (f16); every node is credited
with beta u_L at I, taken out of its memory v (error feedback keeps the residual
v_j - beta u_L); beta is fitted on momenta: the refresh's kept values are the nodes' u at I,
pairs (u_L, mean_j u_j) (needs ae_refresh_every > 0). Until the first refresh beta is the
fitting stage's fit on sent values.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from nodes.compression.lgc_common import COMMON_OPTIONS, PROTOCOL_OPTIONS
from nodes.compression.lgc_messages import KIND_COMMON, rms, sparse_message
from nodes.compression.lgc_ps import CODER_OPTIONS, LGCPS, PS_OPTIONS
from nodes.compression.registry import register
from lgc_schema import Field, Rule

OPTIONS = {**{k: COMMON_OPTIONS[k] for k in (*PROTOCOL_OPTIONS, "ae_buffer")}, **PS_OPTIONS,
           "ae_refresh_every": CODER_OPTIONS["ae_refresh_every"],
           "common_source": Field("memory", str, choices=("memory", "momentum"),
                                  help="what the leader's shared values are: its error memory v at "
                                       "its top-k of v, or its momentum u at its top-k of u (fitted "
                                       "on the nodes' momenta: needs ae_refresh_every > 0)")}
SOURCE_RULE = Rule("common_source", needs=("ae_refresh_every",),
                   check=lambda t: None if t["common_source"] == "memory" or t["ae_refresh_every"]
                   else "'memory' with ae_refresh_every = 0 (beta is fitted on momenta at refreshes)")


def _f32(x: float) -> float:
    """What an f32 scalar on the wire holds: the server rounds before it credits with it."""
    return float(np.float32(x))


@register("lgc_scaled", wire_id=11, rules=(SOURCE_RULE,), **OPTIONS)
class LGCScaled(LGCPS):
    def __init__(self, *, common_source: str = "memory", **kw):
        self.source = common_source
        # the coder's options it has not: their defaults (no AE is trained or shipped)
        unused = {k: f.default for k, f in {**COMMON_OPTIONS, **CODER_OPTIONS}.items() if k not in kw}
        super().__init__(coder="scaled", **unused, **kw)
        self.pairs: list[tuple[float, float]] = []   # (<x, m>, <x, x>) per pair, newest last
        self.buffer = int(kw["ae_buffer"])
        self.beta_use = 1.0

    def beta(self) -> float:
        xm = sum(p[0] for p in self.pairs)
        xx = sum(p[1] for p in self.pairs)
        return _f32(xm / xx) if xx > 0 and math.isfinite(xm / xx) else 1.0

    def _add(self, x: torch.Tensor, m: torch.Tensor) -> None:
        x, m = x.double(), m.double()
        self.pairs.append((float(x @ m), float(x @ x)))
        del self.pairs[:-self.buffer]

    # ---- the fitting stage: pairs from the arrived DGC messages (no extra bytes)
    def _fit(self, it, decoded, k):
        mean = sum(d.values for d in decoded) / len(decoded)
        for d in decoded:
            sent = d.mask.clone()
            sent[self.dgc_state.dense] = False
            idx = torch.nonzero(sent).reshape(-1)
            if idx.numel() != k:   # lost, or not at the final density yet
                continue
            s = rms(d.values[idx])
            self._add(d.values[idx] / s, mean[idx] / s)
        return
        yield  # a generator, as LGC-PS's (the fit costs no modelled time)

    # ---- the LGC stage: the credit at I is beta times the leader's values
    def shared(self, w: int) -> torch.Tensor:
        """What node w's shared values are read from: its memory v or its momentum u."""
        return self.dgc.u[w] if self.source == "momentum" else self.dgc.v[w]

    def _leader_parts(self, it, v):
        if self.source == "memory":
            return super()._leader_parts(it, v)
        L = self.leader_of(it)
        u = self.dgc.u[L]
        idx = torch.sort(self.dgc.layers.topk(u, self.density, self.dgc.picker(L, it, 11))).values
        return [sparse_message(idx.cpu(), u[idx].cpu(), self.numel, payload_bytes=self.payload_bytes,
                               method=self.wire_id, iteration=it, kind=KIND_COMMON, dtype="f16")]

    def _lgc(self, it, vs):
        self.beta_use = self.beta()     # server side: the fitted scalar, as it goes on the wire
        return (yield from super()._lgc(it, vs))

    def _common(self, packets, ae):
        idx, vals = super()._common(packets, ae)
        return idx, self.beta_use * vals

    def _down_scalars(self) -> tuple[float, ...]:
        return (self.beta_use,)

    def _read_down_scalars(self, scalars) -> list[float]:
        self.beta_use = float(scalars[0])   # node side: beta as the downlink carried it
        return list(scalars[1:])

    # ---- refresh: the nodes' kept memories refit beta (LGC-PS's protocol and bytes)
    def refits(self) -> bool:
        return True

    def _keep_for_refresh(self, it, vs, L, ordered, position_packets) -> None:
        self.pending = None
        if not self.refresh_due(it) or not ordered.numel():
            return
        self.pending = {"iteration": it, "leader": L, "scale": 1.0,
                        "values": [self.shared(w)[ordered.to(v.device)].cpu().clone()
                                   for w, v in enumerate(vs)]}

    def _refit(self, leader: torch.Tensor, mean: torch.Tensor) -> float:
        if self.refreshes == 0:
            self.pairs = []   # the fitting stage's pairs had another target
        s = rms(leader)
        self._add(leader / s, mean / s)
        return 0.0

    def state_dict(self) -> dict:
        return {**super().state_dict(), "pairs": list(self.pairs), "beta_use": self.beta_use}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.pairs = [tuple(p) for p in state.get("pairs", [])]
        self.beta_use = state.get("beta_use", 1.0)

