"""`lgc_ablation`: LGC-PS's protocol with the learned coder taken out, to tell what the
autoencoder adds.

Everything is LGC-PS's (stages, DGC state, cyclic leader, innovations, relayed downlink, exact
error feedback) except the common part: the leader sends its top-k values at its positions in
f16 instead of a latent, and the server credits every node with them (ScaleCom's move: one
leader's positions for all). No autoencoder is trained or shipped; the "ae_train" stage is plain
DGC-style sparse exchange, so the final stage starts at the same iteration as LGC-PS's.
"""
from __future__ import annotations

from nodes.compression.lgc_ps import LGCPS, ablation_options, coder_values
from nodes.compression.registry import register


@register("lgc_ablation", wire_id=12, **ablation_options())
class LGCAblation(LGCPS):
    def __init__(self, **kw):
        super().__init__(coder="none", **coder_values(), **kw)
