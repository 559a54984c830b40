"""Pieces LGC-PS and LGC-RAR share: the three-stage schedule, the per-worker DGC state
(momentum correction + error feedback), the in-use figures, the options and the Scheme body.
The autoencoder's trainer is nodes.compression.lgc_trainer, the messages
nodes.compression.lgc_messages.

Stage schedule (iterations, from the experiment file):
    [0, warmup_iterations)                       "warmup"   DGC-style sparsified training, DGC's
                                                       exponential sparsity warm-up
    [warmup_iterations, warmup_iterations + ae_iterations) "ae_train" sparsified training at the final density;
                                                       the aggregator trains the AE online
    then                                    "lgc"      encoded exchange; if retrain_every = R > 0,
                                                       every R iterations `retrain_iterations` more
                                                       "ae_train" iterations refresh the AE
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from lgc_schema import Field, Rule
from nodes.compression import codec
from nodes.compression.base import Message, Scheme
from nodes.compression.dgc import DGC, MASKING_HELP
from nodes.compression.layers import OPTIONS as LAYER_OPTIONS
from nodes.compression.lgc_autoencoder import (
    GradientAutoencoder,
    channels_problem,
    latent_problem,
    parse_channels,
)
from nodes.compression.lgc_messages import (
    INDEX_CODINGS,
    ORDERS,
    order_of,
    positions_message,
    read_positions,
    sparse_message,
)
from nodes.compression.lgc_trainer import AETrainer
from nodes.compression.templates import check_leader

STAGES = ("warmup", "ae_train", "lgc")


@dataclass(frozen=True)
class Schedule:
    """The stages by iteration; its values are the schema's (COMMON_OPTIONS and LGC_RULES)."""
    warmup_iters: int
    ae_iters: int
    retrain_every: int = 0
    retrain_iters: int = 0

    @property
    def lgc_start(self) -> int:
        return self.warmup_iters + self.ae_iters

    def stage(self, it: int) -> str:
        if it < self.warmup_iters:
            return "warmup"
        if it < self.lgc_start:
            return "ae_train"
        if self.retrain_every:
            # the retraining window closes each period of R LGC iterations
            t = (it - self.lgc_start) % self.retrain_every
            if t >= self.retrain_every - self.retrain_iters:
                return "ae_train"
        return "lgc"

    def ships_after(self, it: int) -> bool:
        """True at the last AE-training iteration before an LGC iteration: ship the encoder."""
        return self.stage(it) == "ae_train" and self.stage(it + 1) == "lgc"


def topk_indices(v: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest |v|, sorted ascending (index order keeps neighbours together)."""
    idx = torch.topk(v.abs(), k, sorted=False).indices
    return torch.sort(idx).values


class DGCState:
    """The workers' DGC state, *owned by a dgc.DGC instance* so warm-up runs DGC's own code.

    `select` is DGC's (clipping at clip_norm / sqrt(N), momentum correction u = m u + g,
    v = v + u, sampled top-k, momentum factor masking). The LGC stage only needs the first half
    (`accumulate`) and then takes out of v exactly what the aggregate credited (`credit`).
    """

    def __init__(self, dgc: DGC):
        self.dgc = dgc

    def select(self, w: int, it: int, g: torch.Tensor):
        return self.dgc.select(w, it, g.reshape(-1).float())

    def accumulate(self, w: int, g: torch.Tensor) -> torch.Tensor:
        """DGC's clipping and momentum correction without its selection; returns v."""
        return self.dgc.memory.compensate(w, self.dgc.clip(g.reshape(-1).float()))

    def credit(self, w: int, idx: torch.Tensor, values: torch.Tensor) -> None:
        """Exact error feedback: take from v exactly what the aggregate credited this node with
        at `idx` (what is left is never lost), and mask its momentum there as DGC does (not in
        the small layers sent whole, nor anywhere with momentum_masking false: DGC.take)."""
        v = self.dgc.v[w]
        self.dgc.take(w, v, idx.to(v.device), values.to(v))

    def topk(self, w: int, it: int, density: float, salt: int = 11) -> torch.Tensor:
        """DGC's sampled top-k of v over the sparse layers (layers.py), sorted by index."""
        idx = self.dgc.layers.topk(self.dgc.v[w], density, self.dgc.picker(w, it, salt))
        return torch.sort(idx).values

    @property
    def dense(self) -> torch.Tensor:
        """The coordinates of the layers sent whole every iteration (dense_below)."""
        return self.dgc.layers.dense

class InUse:
    """The LGC stage's figures of what the aggregate credits at the leader's positions I, from
    the simulator's view of every node's memory (an oracle: nothing is sent for it). Per LGC
    iteration, with m = the mean over the nodes of their memories v_j at I before crediting
    (what each would contribute there: the coder's in-use target) and x = the leader's v_L at I:
      beta          = <x, m> / <x, x>, the best scalar multiple of the leader's values fitting m
                      (1/N when the other nodes' memories there are uncorrelated with x; 1 when
                      every node holds the leader's values);
      scalar_error  = ||m - beta x|| / ||m||, that fit's relative error;
      coder_error   = ||c - m|| / ||m||, c the values the aggregate credits at I from the common
                      part (LGC-PS: the decoded common code; per-node decoders: the mean of the
                      nodes' decoded credits there, innovations included; the ablation: the
                      leader's f16 values; LGC-RAR: the decoded mean of the ring).
    `take` gives the means over the LGC iterations since the last call, and starts afresh."""

    KEYS = ("lgc_beta", "lgc_scalar_error", "lgc_coder_error")

    def __init__(self):
        self.sums = {"n": 0, **{k: 0.0 for k in self.KEYS}}

    def observe(self, memories: list[torch.Tensor], leader: torch.Tensor,
                idx: torch.Tensor, credited: torch.Tensor) -> None:
        if idx.numel() == 0:
            return
        idx = idx.to(leader.device)
        m = torch.stack([v[idx] for v in memories]).mean(0).double().cpu()
        x = leader[idx].double().cpu()
        xx, mm = float(x @ x), float(m.norm())
        if xx == 0 or mm == 0:
            return
        beta = float(x @ m) / xx
        for key, value in zip(self.KEYS, (beta, float((m - beta * x).norm()) / mm,
                                          float((credited.double().cpu() - m).norm()) / mm)):
            self.sums[key] += value
        self.sums["n"] += 1

    def take(self) -> dict[str, float]:
        n = self.sums["n"]
        out = {k: self.sums[k] / n for k in self.KEYS} if n else {}
        self.__init__()
        return out



# ---------------------------------------------------------------- the shared Scheme body

COMMON_OPTIONS: dict[str, Field] = dict(
    ratio=Field(0.01, float, min=1e-6, max=1.0, old_names=("density",),
                help="final top-k density (fraction of coordinates), as DGC's"),
    momentum=Field(0.9, float, min=0.0, max=1.0, max_open=True,
                    help="DGC momentum correction factor; 0 = plain error feedback"),
    clip_norm=Field(10.0, float, min=0.0,
                     help="DGC's global gradient-norm cap (per worker clip_norm/sqrt(N)); 0 = off"),
    sample_fraction=Field(0.01, float, min=1e-6, max=1.0,
                           help="share of v DGC samples to estimate the top-k threshold"),
    momentum_masking=Field(True, bool, help=MASKING_HELP),
    warmup_iterations=Field(50, int, min=0, old_names=("warmup_iters",),
                            help="iterations of DGC-style warm-up (sparsity warm-up)"),
    ae_iterations=Field(20, int, min=1, old_names=("ae_iters",),
                        help="iterations in which the autoencoder is trained online"),
    retrain_every=Field(0, int, min=0, help="re-train the AE every R LGC iterations; 0 = never"),
    retrain_iterations=Field(5, int, min=1, old_names=("retrain_iters",),
                             help="iterations of each re-training window"),
    ae_channels=Field("16,16,16", str, check=channels_problem,
                      help="widths of the stride-2 conv layers, e.g. '16,16,16'"),
    ae_kernel=Field(5, int, min=1, max=31, check=lambda k: None if k % 2 else "an odd integer in [1, 31]",
                    help="conv kernel size (odd)"),
    latent_ratio=Field(0.125, float, min=1e-3, max=1.0,
                        help="latent length / value-vector length; a multiple of 1/2**layers"),
    ae_lr=Field(1e-3, float, min=1e-6, max=1.0, help="Adam learning rate of the AE"),
    ae_batch=Field(16, int, min=1, max=4096, help="AE minibatch (value vectors)"),
    ae_steps=Field(25, int, min=0, max=10000, help="AE optimizer steps per AE-training iteration"),
    ae_buffer=Field(512, int, min=1, help="value vectors kept for AE training (newest win)"),
    ae_gflops=Field(100.0, float, min=1e-3,
                     help="virtual GFLOP/s of the node that trains/decodes the AE (charged FLOPs)"),
    worker_gflops=Field(10.0, float, min=1e-3, help="virtual GFLOP/s of a worker for encoding"),
    latent_dtype=Field("f16", str, choices=("f32", "f16"), help="precision of the latent on the wire"),
    leader=Field(-1, int, min=-1, help="node whose top-k positions/latent are shared; -1 = cyclic"),
    order=Field("sign", str, choices=ORDERS,
                 help="layout of the AE's input: positives then negatives in index order (free on "
                      "the wire), by signed value, by magnitude, or index order"),
    index_coding=Field("ordered", str, choices=INDEX_CODINGS,
                        help="how the ordered positions travel: the list itself (log2 n bits each) "
                             "or sorted delta varints plus ranks (log2 k bits each)"),
    **LAYER_OPTIONS,
)

# What one option alone cannot say (each rule skips a table without its keys: the ablation).
LGC_RULES = (
    Rule("retrain_iterations", needs=("retrain_every",),
         check=lambda t: None if not t["retrain_every"] or t["retrain_iterations"] < t["retrain_every"]
         else f"in [1, {t['retrain_every'] - 1}] with retrain_every = {t['retrain_every']}"),
    Rule("latent_ratio", needs=("ae_channels",),
         check=lambda t: latent_problem(t["latent_ratio"], len(parse_channels(t["ae_channels"])))),
)

# The options of the schedule, the DGC state and the leader: what the ablation keeps.
PROTOCOL_OPTIONS = ("ratio", "momentum", "momentum_masking", "clip_norm", "sample_fraction", "warmup_iterations",
                    "ae_iterations", "leader", *LAYER_OPTIONS)


class LGCBase(Scheme):
    """Options, per-worker DGC state, the AE, its trainer and the deployed copies."""

    linear_encoder = False
    linear = False           # a wholly linear AE (LGC-RAR: every node decodes its own share)
    handles_momentum = True  # DGC's momentum correction: the optimizer must not add momentum

    def __init__(self, *, ratio, momentum, clip_norm, sample_fraction, warmup_iterations,
                 ae_iterations, retrain_every, retrain_iterations, ae_channels, ae_kernel, latent_ratio,
                 ae_lr, ae_batch, ae_steps, ae_buffer, ae_gflops, worker_gflops, latent_dtype,
                 leader, order, index_coding, dense_below, topk_scope, momentum_masking, coder,
                 decoders, latent_pull, **kw):
        # every value is the schema's (registry.build_scheme fills the defaults); `coder`,
        # `decoders` and `latent_pull` are fixed by the classes whose schema has no such option
        super().__init__(**kw)
        self.order, self.index_coding, self.coder = order, index_coding, coder
        self.sched = Schedule(int(warmup_iterations), int(ae_iterations), int(retrain_every),
                              int(retrain_iterations) if retrain_every else 0)
        self.density = float(ratio)
        self.latent_dtype = latent_dtype
        self.leader = check_leader(leader, self.n_workers)
        self.ae_steps = int(ae_steps)
        self.ae_gflops, self.worker_gflops = float(ae_gflops), float(worker_gflops)
        self._arch = dict(channels=parse_channels(ae_channels), kernel=int(ae_kernel),
                          latent_ratio=float(latent_ratio), linear_encoder=self.linear_encoder,
                          linear=self.linear,
                          nodes=self.n_workers if decoders == "per_node" else 0)
        self.per_node = decoders == "per_node"
        self.ae = GradientAutoencoder(**self._arch, seed=self.seed)
        self.trainer = AETrainer(self.ae, lr=float(ae_lr), batch=int(ae_batch),
                                 buffer=int(ae_buffer), seed=self.seed + 1, pull=float(latent_pull))
        # warm-up is DGC itself, with its exponential sparsity warm-up over warmup_iterations
        self.dgc = DGC(ratio=self.density, momentum=momentum, clip_norm=clip_norm,
                       warmup_iterations=int(warmup_iterations), sample_fraction=sample_fraction,
                       dense_below=dense_below, topk_scope=topk_scope,
                       momentum_masking=momentum_masking,
                       n_workers=self.n_workers, shapes=self.shapes, payload_bytes=self.payload_bytes,
                       seed=self.seed, device=self.device)
        self.dgc_state = DGCState(self.dgc)   # the workers' DGC state, as this class uses it
        self.deployed: GradientAutoencoder | None = None   # aggregator's copy at shipping time
        self.worker_ae: GradientAutoencoder | None = None  # what the workers rebuilt from bytes
        self.ships = 0
        self.in_use = InUse()

    @property
    def memory(self):
        """The workers' error memory (DGC's momentum memory, shared by every stage)."""
        return self.dgc.memory

    def stage(self, iteration: int) -> str:
        return self.sched.stage(iteration)

    def leader_of(self, iteration: int) -> int:
        return iteration % self.n_workers if self.leader < 0 else self.leader

    def positions_message(self, ordered, iteration, scale) -> Message:
        order = self.order if self.coder == "ae" else "index"
        return positions_message(ordered.cpu(), self.numel, order=order, coding=self.index_coding,
                                 payload_bytes=self.payload_bytes, method=self.wire_id,
                                 iteration=iteration, scale=scale)

    def read_positions(self, packets):
        order = self.order if self.coder == "ae" else "index"
        return read_positions(packets, self.numel, order=order, coding=self.index_coding)

    def ordered(self, idx: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """The positions in the AE's input order (index order when there is no coder)."""
        return idx[order_of(values, self.order if self.coder == "ae" else "index")]

    def dgc_messages(self, it: int, grads) -> dict[int, Message]:
        """Warm-up and AE training, for the whole family: DGC's own selection (its sparsity
        warm-up, clipping, momentum correction, masking) and its (index, f32 value) messages;
        only the header's method byte says LGC."""
        msgs = {}
        for w, g in enumerate(grads):
            idx, sent = self.dgc_state.select(w, it, g)
            msgs[w] = sparse_message(idx.cpu(), sent.cpu(), self.numel, payload_bytes=self.payload_bytes,
                                     method=self.wire_id, iteration=it)
        return msgs

    def k_final(self) -> int:
        """Length of the value vector the AE codes: the sparse top-k (dense layers aside)."""
        return self.dgc.layers.k(self.density)

    def k_at(self, iteration: int) -> int:
        return self.dgc.layers.k(self.dgc.density(iteration))

    def _seconds(self, flops: float, gflops: float) -> float:
        return flops / (gflops * 1e9)

    def _deploy(self, shipped: bytes, encoder_only: bool) -> None:
        """The aggregator freezes its AE; the workers rebuild theirs from the bytes that travelled."""
        self.deployed = copy.deepcopy(self.ae)
        self.worker_ae = GradientAutoencoder(**self._arch, seed=self.seed)
        if encoder_only:
            self.worker_ae.load_encoder_bytes(shipped)
        else:
            self.worker_ae.load_full_bytes(shipped)
        self.ships += 1

    @staticmethod
    def received_bytes(packets: list[bytes]) -> bytes:
        return codec.decode(packets).values.numpy().astype("<f4").tobytes()

    def _wire(self, z: torch.Tensor) -> bytes:
        return z.detach().cpu().numpy().astype("<f2" if self.latent_dtype == "f16" else "<f4").tobytes()

    def eval_metrics(self) -> dict[str, float]:
        """What the testbed's loop stores with each evaluation (testbed.records.store EVAL_COLUMNS)."""
        return self.in_use.take()

    def state_dict(self) -> dict:
        return {"dgc": self.dgc.state_dict(), "in_use": dict(self.in_use.sums),
                "trainer": self.trainer.state_dict(),
                "deployed": None if self.deployed is None else
                {k: v.clone() for k, v in self.deployed.state_dict().items()},
                "worker_ae": None if self.worker_ae is None else
                {k: v.clone() for k, v in self.worker_ae.state_dict().items()},
                "ships": self.ships}

    def load_state_dict(self, state: dict) -> None:
        self.dgc.load_state_dict(state["dgc"])
        self.in_use.sums = dict(state.get("in_use", InUse().sums))
        self.trainer.load_state_dict(state["trainer"])
        for attr in ("deployed", "worker_ae"):
            s = state[attr]
            if s is None:
                setattr(self, attr, None)
            else:
                m = GradientAutoencoder(**self._arch, seed=self.seed)
                m.load_state_dict(s)
                setattr(self, attr, m)
        self.ships = state["ships"]
