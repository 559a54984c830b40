"""The online trainer of LGC's autoencoder (nodes.compression.lgc_autoencoder): a bounded buffer
of value vectors, seeded minibatches, Adam steps, and the FLOPs each call spent."""
from __future__ import annotations

import copy

import torch

from nodes.compression.lgc_autoencoder import GradientAutoencoder


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
