"""Pieces LGC-PS and LGC-RAR share: the three-stage schedule, the per-worker DGC state
(momentum correction + error feedback), the online autoencoder trainer, and message plumbing.

Stage schedule (iterations, from the experiment file):
    [0, warmup_iterations)                       "warmup"   DGC-style sparsified training, DGC's
                                                       exponential sparsity warm-up
    [warmup_iterations, warmup_iterations + ae_iterations) "ae_train" sparsified training at the final density;
                                                       the aggregator trains the AE online
    then                                    "lgc"      encoded exchange; if retrain_every = R > 0,
                                                       every R iterations `retrain_iters` more
                                                       "ae_train" iterations refresh the AE
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from nodes.compression import codec
from nodes.compression.base import Message, Scheme
from nodes.compression.dgc import DGC, MASKING_HELP
from nodes.compression.layers import OPTIONS as LAYER_OPTIONS
from nodes.compression.lgc_autoencoder import GradientAutoencoder, parse_channels
from nodes.compression.precision import on_wire
from schema import Field

# Message kinds inside one LGC message (the codec's `kind` byte; the method byte says LGC)
KIND_SPARSE, KIND_AGGREGATE = codec.KIND_GRADIENT, codec.KIND_AGGREGATE
KIND_INDICES, KIND_LATENT, KIND_INNOVATION, KIND_WEIGHTS, KIND_COMMON = 10, 11, 12, 13, 14
KIND_MEAN_AT_POSITIONS = 15   # per-node decoders' downlink: the mean at I, in the relayed order
KIND_REFRESH = 16             # LGC-PS's coder refresh: a node's memory at the last leader's positions

ORDERS = ("value", "magnitude", "sign", "index")
INDEX_CODINGS = ("ordered", "sorted_ranks")

STAGES = ("warmup", "ae_train", "lgc")


@dataclass(frozen=True)
class Schedule:
    warmup_iters: int
    ae_iters: int
    retrain_every: int = 0
    retrain_iters: int = 0

    def __post_init__(self):
        for key in ("warmup_iters", "ae_iters", "retrain_every", "retrain_iters"):
            v = getattr(self, key)
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"{key}={v!r}: expected an integer >= 0")
        if self.ae_iters < 1:
            raise ValueError(f"ae_iters={self.ae_iters!r}: LGC needs at least 1 autoencoder-training iteration")
        if self.retrain_every and not 0 < self.retrain_iters < self.retrain_every:
            raise ValueError(f"retrain_iters={self.retrain_iters!r}: with retrain_every="
                             f"{self.retrain_every} it must be in [1, {self.retrain_every - 1}]")

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

    def _ensure(self, w: int, like: torch.Tensor) -> None:
        self.dgc.memory.ensure(w, like)

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


class AETrainer:
    """Online training of the autoencoder on (input, target) value vectors.

    Samples are kept in a bounded buffer (newest win); each call to `train` runs `steps` Adam
    steps on minibatches drawn with the trainer's own seeded generator, and returns the FLOPs
    it spent so that the caller can charge `flops / ae_gflops` of *virtual* time.

    Per-node decoders (ae.nodes = N): a sample's target is (N, k), one row per node, and `side`
    (N, k) the innovation each node's decoder is given; the loss is the mean over the nodes.
    `pull` > 0 adds the reference's term that pulls the latents of one iteration's samples (one
    per node, `group` = the iteration) together: pull * sum ||z_i - mean z||^2 / sum ||z_i||^2
    over each group (relative, so shrinking every latent does not satisfy it); minibatches are
    then whole groups.
    """

    def __init__(self, ae: GradientAutoencoder, *, lr: float, batch: int, buffer: int, seed: int,
                 pull: float = 0.0):
        self.ae = ae
        self.opt = torch.optim.Adam(ae.parameters(), lr=lr)
        self.batch, self.buffer = int(batch), int(buffer)
        self.pull = float(pull)
        self.gen = torch.Generator().manual_seed(seed)
        self.inputs: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        self.sides: list[torch.Tensor | None] = []
        self.groups: list[int] = []
        self.steps_done = 0
        self.last_loss = float("nan")

    def add(self, x: torch.Tensor, t: torch.Tensor, side: torch.Tensor | None = None,
            group: int = 0) -> None:
        if self.inputs and x.numel() != self.inputs[0].numel():
            # the top-k length changed (retraining after a density change): start afresh
            self.inputs, self.targets, self.sides, self.groups = [], [], [], []
        self.inputs.append(x.detach().float().cpu())
        self.targets.append(t.detach().float().cpu())
        self.sides.append(None if side is None else side.detach().float().cpu())
        self.groups.append(int(group))
        if len(self.inputs) > self.buffer:
            del self.inputs[0], self.targets[0], self.sides[0], self.groups[0]

    def clear(self) -> None:
        """Forget every sample (the target changed)."""
        self.inputs, self.targets, self.sides, self.groups = [], [], [], []

    def objective(self, X, T, S=None, G=None) -> torch.Tensor:
        """Reconstruction MSE (mean over the nodes' decoders), plus the latent pull."""
        k = X.shape[1]
        Z = self.ae.encode(X)
        if self.ae.nodes:
            loss = sum(((self.ae.decode(Z, k, node=j, side=S[:, j]) - T[:, j]) ** 2).mean()
                       for j in range(self.ae.nodes)) / self.ae.nodes
        else:
            loss = ((self.ae.decode(Z, k) - T) ** 2).mean()
        if self.pull and G is not None:
            _, inv = torch.unique(G, return_inverse=True)
            m = int(inv.max()) + 1
            count = torch.zeros(m).index_add_(0, inv, torch.ones(len(inv)))[:, None]
            mean = torch.zeros(m, Z.shape[1]).index_add_(0, inv, Z) / count
            spread = ((Z - mean[inv]) ** 2).sum()
            loss = loss + self.pull * spread / (Z.pow(2).sum() + 1e-12)
        return loss

    def loss(self, x: torch.Tensor, t: torch.Tensor, side=None) -> float:
        with torch.no_grad():
            return float(self.objective(x, t, side))

    def _pick(self, b: int) -> torch.Tensor:
        """b samples at random, or (pull on) whole groups until at least b samples."""
        if not self.pull:
            return torch.randperm(len(self.inputs), generator=self.gen)[:b]
        G = torch.tensor(self.groups)
        ids = torch.unique(G)
        chosen, total = [], 0
        for g in ids[torch.randperm(len(ids), generator=self.gen)]:
            members = torch.nonzero(G == g).reshape(-1)
            chosen.append(members)
            total += len(members)
            if total >= b:
                break
        return torch.cat(chosen)

    def train(self, steps: int) -> float:
        if not self.inputs:
            return 0.0
        X = torch.stack(self.inputs)
        T = torch.stack(self.targets)
        S = torch.stack(self.sides) if self.ae.nodes else None
        G = torch.tensor(self.groups)
        b = min(self.batch, X.shape[0])
        samples = 0
        for _ in range(steps):
            sel = self._pick(b)
            self.opt.zero_grad(set_to_none=True)
            loss = self.objective(X[sel], T[sel], None if S is None else S[sel], G[sel])
            loss.backward()
            self.opt.step()
            self.last_loss = float(loss.detach())
            samples += len(sel)
        self.steps_done += steps
        if not self.pull:   # every step a minibatch of b
            return steps * self.ae.train_step_flops(X.shape[1], b)
        return self.ae.train_step_flops(X.shape[1], samples)

    def state_dict(self) -> dict:
        return {"ae": {k: v.clone() for k, v in self.ae.state_dict().items()},
                "opt": self.opt.state_dict(), "gen": self.gen.get_state(),
                "inputs": [x.clone() for x in self.inputs], "targets": [t.clone() for t in self.targets],
                "sides": [None if x is None else x.clone() for x in self.sides],
                "groups": list(self.groups),
                "steps_done": self.steps_done, "last_loss": self.last_loss}

    def load_state_dict(self, s: dict) -> None:
        self.ae.load_state_dict(s["ae"])
        self.opt.load_state_dict(copy.deepcopy(s["opt"]))
        self.gen.set_state(s["gen"])
        self.inputs = [x.clone() for x in s["inputs"]]
        self.targets = [t.clone() for t in s["targets"]]
        self.sides = [None if x is None else x.clone() for x in s.get("sides", [None] * len(self.inputs))]
        self.groups = list(s.get("groups", [0] * len(self.inputs)))
        self.steps_done, self.last_loss = s["steps_done"], s["last_loss"]


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


# ---------------------------------------------------------------- message plumbing

def join(*messages: Message) -> Message:
    return Message([p for m in messages for p in m.packets])


def by_kind(packets: list[bytes]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for p in packets:
        out.setdefault(codec.read_header(p).kind, []).append(p)
    return out


def all_arrived(packets: list[bytes]) -> bool:
    """True when every packet the headers announce is here (needed to line up ranks)."""
    if not packets:
        return False
    return len({codec.read_header(p).index for p in packets}) == codec.read_header(packets[0]).count


def indices_message(idx: torch.Tensor, n: int, *, payload_bytes: int, method: int, iteration: int,
                    scale: float) -> Message:
    """Positions only (ScaleCom's shared positions): 1-bit codes (the codec needs a value per
    index); the scale the receivers need travels as a per-packet scalar."""
    return codec.encode_sparse(idx, torch.zeros(idx.numel(), dtype=torch.int64), n,
                               payload_bytes=payload_bytes, dtype="bits", bits=1, method=method,
                               kind=KIND_INDICES, iteration=iteration, scalars=(scale,))


def read_indices(packets: list[bytes], n: int) -> tuple[torch.Tensor, float] | None:
    """Sorted indices and scale, or None when part of them was lost (ranks cannot be lined up)."""
    if not all_arrived(packets):
        return None
    d = codec.decode(packets, n)
    return torch.nonzero(d.mask).reshape(-1), float(d.scalars[0])


def order_of(values: torch.Tensor, order: str) -> torch.Tensor:
    """Permutation that lays the values out for the autoencoder so that neighbours are similar:
    "value" (descending signed value: a smooth monotone curve), "magnitude" (descending |value|),
    "sign" (the positive values in index order, then the negative ones) or "index" (as the
    parameters lie in the model)."""
    if order == "sign":
        return torch.cat([torch.nonzero(values >= 0).reshape(-1), torch.nonzero(values < 0).reshape(-1)])
    if order == "value":
        return torch.argsort(values, descending=True, stable=True)
    if order == "magnitude":
        return torch.argsort(values.abs(), descending=True, stable=True)
    return torch.arange(values.numel(), device=values.device)


def positions_message(ordered: torch.Tensor, n: int, *, order: str, coding: str, payload_bytes: int,
                      method: int, iteration: int, scale: float) -> Message:
    """The leader's top-k positions in the order the autoencoder reads them, and the RMS scale.

    - order "index": sorted positions, delta varints (the codec wants a value per index: 1 bit);
    - order "sign": the same sorted positions, the 1 bit per index saying the sign's segment;
    - coding "ordered": the position list itself in that order, ceil(log2 n) bits per entry;
    - coding "sorted_ranks": sorted positions (delta varints) with each one's rank in the order,
      ceil(log2 k) bits per entry.
    The permutation rides on the index list that is sent anyway: no other message carries it.
    """
    k = ordered.numel()
    common = dict(payload_bytes=payload_bytes, method=method, kind=KIND_INDICES, iteration=iteration,
                  scalars=(scale,))
    if order in ("index", "sign"):
        # "sign": ordered = positives then negatives, each sorted; 1 marks the second segment
        codes = torch.zeros(k, dtype=torch.int64)
        if order == "sign" and k:
            split = int(torch.nonzero(ordered[1:] < ordered[:-1]).reshape(-1)[:1].add(1).sum()) or k
            codes[split:] = 1
        return codec.encode_sparse(ordered, codes, n, dtype="bits", bits=1, **common)
    if coding == "ordered":
        return codec.encode_dense(ordered.to(torch.int64), dtype="bits", bits=codec.index_bits(n),
                                  **common)
    ranks = torch.arange(k, dtype=torch.int64)  # paired with ordered; the codec sorts the pairs
    return codec.encode_sparse(ordered, ranks, n, dtype="bits", bits=max(1, (k - 1).bit_length()),
                               **common)


def read_positions(packets: list[bytes], n: int, *, order: str, coding: str
                   ) -> tuple[torch.Tensor, float] | None:
    """Positions in the sender's order and its scale, or None when part of them was lost."""
    if not all_arrived(packets):
        return None
    d = codec.decode(packets)
    if order == "index":
        return torch.nonzero(d.mask).reshape(-1), float(d.scalars[0])
    if order == "sign":
        pos = torch.nonzero(d.mask).reshape(-1)
        neg = d.values[pos] > 0
        return torch.cat([pos[~neg], pos[neg]]), float(d.scalars[0])
    if coding == "ordered":
        return d.values.to(torch.int64), float(d.scalars[0])
    pos = torch.nonzero(d.mask).reshape(-1)
    out = torch.empty_like(pos)
    out[d.values[pos].to(torch.int64)] = pos
    return out, float(d.scalars[0])


def weights_message(data: bytes, *, payload_bytes: int, method: int, iteration: int) -> Message:
    w = torch.frombuffer(bytearray(data), dtype=torch.float32)
    return codec.encode_dense(w, payload_bytes=payload_bytes, dtype="f32", method=method,
                              kind=KIND_WEIGHTS, iteration=iteration)


def sparse_message(idx: torch.Tensor, vals: torch.Tensor, n: int, *, payload_bytes: int, method: int,
                   iteration: int, kind: int = KIND_SPARSE, dtype: str = "f32",
                   scalars: tuple = ()) -> Message:
    return codec.encode_sparse(idx, vals, n, payload_bytes=payload_bytes, dtype=dtype, method=method,
                               kind=kind, iteration=iteration, scalars=scalars)


def aggregate_message(avg: torch.Tensor, *, payload_bytes: int, method: int, iteration: int) -> Message:
    """What the server broadcasts back: the sparse average (its non-zero coordinates)."""
    idx = torch.nonzero(avg).reshape(-1)
    return sparse_message(idx, avg[idx], avg.numel(), payload_bytes=payload_bytes, method=method,
                          iteration=iteration, kind=KIND_AGGREGATE)


def rms(x: torch.Tensor) -> float:
    s = float(x.pow(2).mean().sqrt()) if x.numel() else 0.0
    return s if s > 0 and math.isfinite(s) else 1.0


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
    retrain_iters=Field(5, int, min=1, help="iterations of each re-training window"),
    ae_channels=Field("16,16,16", str, help="widths of the stride-2 conv layers, e.g. '16,16,16'"),
    ae_kernel=Field(5, int, min=1, max=31, help="conv kernel size (odd)"),
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

# The options of the schedule, the DGC state and the leader: what the ablation keeps.
PROTOCOL_OPTIONS = ("ratio", "momentum", "momentum_masking", "clip_norm", "sample_fraction", "warmup_iterations",
                    "ae_iterations", "leader", *LAYER_OPTIONS)


class LGCBase(Scheme):
    """Options, per-worker DGC state, the AE, its trainer and the deployed copies."""

    linear_encoder = False
    linear = False           # a wholly linear AE (LGC-RAR: every node decodes its own share)
    handles_momentum = True  # DGC's momentum correction: the optimizer must not add momentum

    def __init__(self, *, ratio=0.01, momentum=0.9, clip_norm=10.0, sample_fraction=0.01, warmup_iterations=50, ae_iterations=20,
                 retrain_every=0, retrain_iters=5, ae_channels="16,16,16", ae_kernel=5,
                 latent_ratio=0.125, ae_lr=1e-3, ae_batch=16, ae_steps=25, ae_buffer=512,
                 ae_gflops=100.0, worker_gflops=10.0, latent_dtype="f16", leader=-1, order="sign",
                 index_coding="ordered", coder="ae", dense_below=0, topk_scope="global",
                 decoders="shared", latent_pull=0.0, momentum_masking=True, **kw):
        super().__init__(**kw)
        self.order, self.index_coding, self.coder = order, index_coding, coder
        # the schema checked each option alone; what it cannot see is the number of workers
        if not -1 <= leader < self.n_workers:
            raise ValueError(f"leader={leader!r} not allowed; allowed -1 (cyclic) or 0..{self.n_workers - 1}")
        self.sched = Schedule(int(warmup_iterations), int(ae_iterations), int(retrain_every),
                              int(retrain_iters) if retrain_every else 0)
        self.density = float(ratio)
        self.latent_dtype = latent_dtype
        self.leader = int(leader)
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
        self.workers = DGCState(self.dgc)
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
            idx, sent = self.workers.select(w, it, g)
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
        """What the orchestrator stores with each evaluation (testbed.store EVAL_COLUMNS)."""
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
