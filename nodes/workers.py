"""The workers: real forward/backward passes, one minibatch per worker per iteration.

`WorkerPool.gradients(params)` returns one flat fp32 gradient per worker. Two ways to compute
them, same numbers:
- "sequential": one worker after another (any model, BatchNorm included);
- "vmap": all workers at once with torch.func (functional_call + grad, vmapped over the stacked
  worker batches); needs a model without buffers or random layers (`models.vmap_safe`).
"auto" takes vmap where the model allows it and falls back to sequential otherwise.
"sequential" is the default (`run.workers_mode`): one process and torchrun (one worker per rank)
then compute the same gradients bit for bit, so a seed has one answer (vmap was measured slower
for the CNN, benchmarks/bench_workers.py).

Each worker shuffles its own shard once per epoch with its own seeded generator and takes the
next `batch_size` samples on every call (a shard smaller than `batch_size` is used whole); the
incomplete tail of an epoch is skipped, as with drop_last. Same seed, same batches.

BatchNorm (sequential mode only): the workers share the model's running statistics, which
therefore follow every worker's batches in turn; the trainable weights are what the workers
exchange, as in data-parallel training.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from nodes.device import resolve_device
from nodes.models import vmap_safe

MODES = ("sequential", "vmap", "auto")


# ----------------------------------------------------------------------- flat vector helpers
def flatten(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """Concatenate tensors into one flat float32 vector (the gradient format on the wire)."""
    return torch.cat([t.detach().reshape(-1).to(torch.float32) for t in tensors])


def unflatten(flat: torch.Tensor, shapes: Sequence[torch.Size]) -> list[torch.Tensor]:
    """Cut a flat vector back into tensors of `shapes` (views into `flat`)."""
    sizes = [torch.Size(s).numel() for s in shapes]
    if flat.dim() != 1 or flat.numel() != sum(sizes):
        raise ValueError(f"unflatten: vector of shape {tuple(flat.shape)} does not hold "
                         f"{sum(sizes)} elements for {len(sizes)} tensors")
    return [piece.view(s) for piece, s in zip(torch.split(flat, sizes), shapes)]


def param_shapes(model: nn.Module) -> list[torch.Size]:
    return [p.shape for p in model.parameters()]


def assign(model: nn.Module, params: torch.Tensor | Sequence[torch.Tensor]) -> None:
    """Copy a flat vector or a list of tensors into the model's parameters in place."""
    own = list(model.parameters())
    pieces = unflatten(params, [p.shape for p in own]) if isinstance(params, torch.Tensor) \
        else list(params)
    if len(pieces) != len(own):
        raise ValueError(f"assign: {len(pieces)} tensors for a model with {len(own)} parameters")
    with torch.no_grad():
        for p, v in zip(own, pieces):
            p.copy_(v.reshape(p.shape))


def set_gradients(model: nn.Module, flat: torch.Tensor) -> None:
    """Give each parameter its slice of the flat aggregated gradient as `.grad` (a copy on the
    parameter's device and dtype), ready for `optimizer.step()`."""
    own = list(model.parameters())
    for p, g in zip(own, unflatten(flat, [p.shape for p in own])):
        p.grad = g.to(p.device, p.dtype).clone()


# ----------------------------------------------------------------------------- evaluation
def evaluate(model: nn.Module, test_x: torch.Tensor, test_y: torch.Tensor,
             batch_size: int = 1024, params: Sequence[torch.Tensor] | None = None,
             device: str | torch.device | None = None) -> tuple[float, float]:
    """Mean cross-entropy and accuracy (a fraction in [0, 1]) of the model in eval mode.

    `device` (default: where the model's parameters are) is where the test batches go."""
    if len(test_y) == 0:
        raise ValueError("evaluate: the test set is empty")
    device = next(model.parameters()).device if device is None else torch.device(device)
    named = None if params is None else dict(zip(_names(model), params))
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(test_y), batch_size):
                x = test_x[start:start + batch_size].to(device)
                y = test_y[start:start + batch_size].to(device)
                out = model(x) if named is None else functional_call(model, named, (x,))
                loss_sum += float(F.cross_entropy(out, y, reduction="sum"))
                correct += int((out.argmax(1) == y).sum())
    finally:
        model.train(was_training)
    return loss_sum / len(test_y), correct / len(test_y)


def _names(model: nn.Module) -> list[str]:
    return [n for n, _ in model.named_parameters()]


# -------------------------------------------------------------------------------- sampling
class ShardSampler:
    """Epoch-wise shuffled minibatches of one worker's shard, from its own generator."""

    def __init__(self, indices: torch.Tensor, batch_size: int, seed: int):
        self.indices = torch.as_tensor(indices, dtype=torch.int64).cpu()
        self.batch_size = min(int(batch_size), len(self.indices))
        self.generator = torch.Generator().manual_seed(int(seed))
        self.epoch, self._pos = 0, 0
        self._perm = torch.randperm(len(self.indices), generator=self.generator)

    def next(self) -> torch.Tensor:
        if self._pos + self.batch_size > len(self.indices):   # drop the short tail, reshuffle
            self._perm = torch.randperm(len(self.indices), generator=self.generator)
            self._pos = 0
            self.epoch += 1
        batch = self.indices[self._perm[self._pos:self._pos + self.batch_size]]
        self._pos += self.batch_size
        return batch

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "epoch": self.epoch,
                "pos": self._pos, "perm": self._perm.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.epoch, self._pos, self._perm = state["epoch"], state["pos"], state["perm"].clone()


def worker_seed(seed: int, worker: int) -> int:
    """Independent, reproducible seed for each worker's batch order."""
    return int(np.random.SeedSequence([int(seed), int(worker)]).generate_state(1)[0])


# ------------------------------------------------------------------------------------ pool
class WorkerPool:
    def __init__(self, model: nn.Module, train_x: torch.Tensor, train_y: torch.Tensor,
                 shards: Sequence[torch.Tensor], batch_size: int, seed: int = 0,
                 device: str | torch.device = "cpu", mode: str = "auto",
                 vmap_chunk: int | None = None):
        if mode not in MODES:  # the pool is also built without a file (tests, benchmarks)
            raise ValueError(f"run.workers_mode = {mode!r} is not known; allowed: {', '.join(MODES)}")
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size = {batch_size!r}: must be an integer >= 1")
        if not shards:
            raise ValueError("WorkerPool: no shards given (need one per worker)")
        if len(train_x) != len(train_y):
            raise ValueError(f"WorkerPool: train_x has {len(train_x)} samples, train_y {len(train_y)}")
        for w, s in enumerate(shards):
            if len(s) == 0:
                raise ValueError(f"WorkerPool: shard of worker w{w} is empty")
            if int(s.min()) < 0 or int(s.max()) >= len(train_y):
                raise ValueError(f"WorkerPool: shard of worker w{w} indexes outside the "
                                 f"{len(train_y)} training samples")
        safe = vmap_safe(model)
        if mode == "vmap" and not safe:
            # run.workers_mode's Field checks the name; only the model can say vmap cannot run it
            raise ValueError("run.workers_mode = 'vmap' needs a model without buffers, BatchNorm "
                             "or dropout; allowed for this model: 'sequential' or 'auto'")
        self.device = resolve_device(device)
        self.model = model.to(self.device).train()
        self.train_x = train_x.to(self.device)
        self.train_y = train_y.to(self.device)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.mode = "vmap" if mode == "vmap" or (mode == "auto" and safe) else "sequential"
        self.requested_mode = mode
        self.fallback_reason: str | None = None if safe or mode != "auto" else \
            "model has buffers, BatchNorm or dropout"
        self.vmap_chunk = vmap_chunk
        self.samplers = [ShardSampler(s, batch_size, worker_seed(seed, w))
                         for w, s in enumerate(shards)]
        self.names = _names(self.model)
        self.shapes = param_shapes(self.model)
        self.iteration = 0      # calls to gradients() so far
        per_iteration = sum(s.batch_size for s in self.samplers)
        # One epoch = as many iterations as it takes to draw as many samples as the shards hold.
        self.iterations_per_epoch = max(1, sum(len(s.indices) for s in self.samplers) // per_iteration)
        self._vmapped = vmap(grad_and_value(self._masked_loss), in_dims=(None, 0, 0, 0),
                             chunk_size=vmap_chunk)

    # -- bookkeeping ---------------------------------------------------------------------
    @property
    def n_workers(self) -> int:
        return len(self.samplers)

    @property
    def numel(self) -> int:
        return int(sum(s.numel() for s in self.shapes))

    def epoch(self, iteration: int | None = None) -> float:
        """Epochs done after `iteration` calls (default: the calls made so far)."""
        return (self.iteration if iteration is None else iteration) / self.iterations_per_epoch

    def state_dict(self) -> dict:
        return {"iteration": self.iteration, "samplers": [s.state_dict() for s in self.samplers]}

    def load_state_dict(self, state: dict) -> None:
        if len(state["samplers"]) != self.n_workers:
            raise ValueError(f"WorkerPool.load_state_dict: state for {len(state['samplers'])} "
                             f"workers, pool has {self.n_workers}")
        self.iteration = state["iteration"]
        for s, st in zip(self.samplers, state["samplers"]):
            s.load_state_dict(st)

    # -- gradients -----------------------------------------------------------------------
    def gradients(self, params: Sequence[torch.Tensor] | torch.Tensor | None = None,
                  offsets: dict[int, torch.Tensor] | None = None
                  ) -> tuple[list[torch.Tensor], list[float]]:
        """One minibatch per worker at `params` (list like model.parameters(), one flat vector,
        or None for the model's current parameters). The model's weights are not changed.
        `offsets`: worker -> flat vector added to the parameters for that worker alone (its
        replica differs from the model, nodes/replicas.py); then every worker runs in turn."""
        plist = self._params(params)
        batches = [s.next() for s in self.samplers]
        self.iteration += 1
        if offsets:
            return self._gradients_offset(plist, batches, offsets)
        if self.mode == "vmap":
            try:
                return self._gradients_vmap(plist, batches)
            except RuntimeError as e:   # an op without a batching rule: loop instead
                if self.requested_mode != "auto":
                    raise
                self.mode, self.fallback_reason = "sequential", f"vmap failed: {e}"
        return self._gradients_sequential(plist, batches)

    def _params(self, params) -> list[torch.Tensor]:
        if params is None:
            return [p.detach() for p in self.model.parameters()]
        if isinstance(params, torch.Tensor):
            params = unflatten(params.to(self.device), self.shapes)
        params = list(params)
        if len(params) != len(self.shapes) or any(p.shape != s for p, s in zip(params, self.shapes)):
            raise ValueError(f"gradients: params do not match the model's {len(self.shapes)} "
                             f"parameter shapes")
        return [p.detach().to(self.device) for p in params]

    def _gradients_sequential(self, plist, batches):
        leaves = [p.detach().requires_grad_(True) for p in plist]
        named = dict(zip(self.names, leaves))
        grads, losses = [], []
        for idx in batches:
            idx = idx.to(self.device)
            out = functional_call(self.model, named, (self.train_x[idx],))
            loss = F.cross_entropy(out, self.train_y[idx])
            g = torch.autograd.grad(loss, leaves, allow_unused=True)
            grads.append(flatten(torch.zeros_like(p) if gi is None else gi
                                 for gi, p in zip(g, leaves)))
            losses.append(float(loss.detach()))
        return grads, losses

    def _gradients_offset(self, plist, batches, offsets):
        """As `_gradients_sequential`, worker w at plist + offsets[w] where it has one."""
        grads, losses = [], []
        for w, idx in enumerate(batches):
            at = plist if w not in offsets else \
                [p + o for p, o in zip(plist, unflatten(offsets[w].to(self.device), self.shapes))]
            g, loss = self._gradients_sequential(at, [idx])
            grads += g
            losses += loss
        return grads, losses

    def _masked_loss(self, named, x, y, mask):
        out = functional_call(self.model, named, (x,))
        per = F.cross_entropy(out, y, reduction="none")
        return (per * mask).sum() / mask.sum()

    def _gradients_vmap(self, plist, batches):
        # Workers whose shard is smaller than batch_size are padded; the mask keeps the
        # padding out of their loss, so the gradient is the mean over their real samples.
        width = max(len(b) for b in batches)
        idx = torch.stack([torch.cat([b, b[:1].expand(width - len(b))]) for b in batches])
        mask = torch.stack([torch.arange(width) < len(b) for b in batches]).to(torch.float32)
        idx, mask = idx.to(self.device), mask.to(self.device)
        named = dict(zip(self.names, plist))
        g, loss = self._vmapped(named, self.train_x[idx], self.train_y[idx], mask)
        flat = torch.cat([g[n].reshape(len(batches), -1).to(torch.float32) for n in self.names], 1)
        return list(flat.unbind(0)), [float(v) for v in loss.detach().cpu()]

    def evaluate(self, test_x: torch.Tensor, test_y: torch.Tensor, batch_size: int = 1024,
                 params: Sequence[torch.Tensor] | None = None) -> tuple[float, float]:
        return evaluate(self.model, test_x, test_y, batch_size, params)
