"""FLOPs of one training step, counted by torch.utils.flop_counter.FlopCounterMode.

The orchestrator turns compute into deterministic virtual seconds: flops / (device GFLOP/s).
FlopCounterMode counts the matrix products and convolutions (2 FLOPs per multiply-add) of the
forward and the backward pass; element-wise ops (ReLU, softmax, BatchNorm) are not counted,
which for these models is a few percent.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

_CACHE: dict[tuple, tuple[int, int]] = {}


def _key(model: nn.Module, input_shape, batch_size: int) -> tuple:
    # The architecture (repr) and parameter shapes decide the count; the weights do not.
    return (repr(model), tuple(tuple(p.shape) for p in model.parameters()),
            tuple(int(s) for s in input_shape), int(batch_size))


def step_flops(model: nn.Module, input_shape, batch_size: int) -> tuple[int, int]:
    """(forward FLOPs, backward FLOPs) of one step on a batch of `batch_size` inputs."""
    if int(batch_size) < 1:
        raise ValueError(f"batch_size = {batch_size!r}: must be >= 1")
    key = _key(model, input_shape, batch_size)
    if key not in _CACHE:
        # Count on a CPU copy: the original's weights, BatchNorm statistics and
        # .grad fields stay untouched.
        probe = copy.deepcopy(model).cpu().train()
        params = [p for p in probe.parameters() if p.requires_grad]
        x = torch.zeros(int(batch_size), *input_shape)
        y = torch.zeros(int(batch_size), dtype=torch.int64)
        with FlopCounterMode(display=False) as fwd:
            loss = F.cross_entropy(probe(x), y)
        with FlopCounterMode(display=False) as bwd:
            torch.autograd.grad(loss, params, allow_unused=True)
        _CACHE[key] = (int(fwd.get_total_flops()), int(bwd.get_total_flops()))
    return _CACHE[key]


def train_step_flops(model: nn.Module, input_shape, batch_size: int) -> int:
    """FLOPs of one forward + backward step (cached per architecture, input shape, batch)."""
    forward, backward = step_flops(model, input_shape, batch_size)
    return forward + backward
