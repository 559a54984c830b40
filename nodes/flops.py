"""FLOPs of one training step, counted by torch.utils.flop_counter.FlopCounterMode.

The testbed's loop turns compute into deterministic virtual seconds: flops / (device GFLOP/s).
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
        try:   # shapes alone decide the count: on the meta device nothing is computed
            _CACHE[key] = _count(model, input_shape, int(batch_size), "meta")
        except Exception:   # an op without a meta kernel or data-dependent code: really run it
            _CACHE[key] = _count(model, input_shape, int(batch_size), "cpu")
    return _CACHE[key]


def _count(model: nn.Module, input_shape, batch_size: int, device: str) -> tuple[int, int]:
    # Count on a copy: the original's weights, BatchNorm statistics and .grad stay untouched.
    probe = copy.deepcopy(model).to(device).train()
    params = [p for p in probe.parameters() if p.requires_grad]
    x = torch.zeros(batch_size, *input_shape, device=device)
    y = torch.zeros(batch_size, dtype=torch.int64, device=device)
    with FlopCounterMode(display=False) as fwd:
        loss = F.cross_entropy(probe(x), y)
    with FlopCounterMode(display=False) as bwd:
        torch.autograd.grad(loss, params, allow_unused=True)
    return int(fwd.get_total_flops()), int(bwd.get_total_flops())


def train_step_flops(model: nn.Module, input_shape, batch_size: int) -> int:
    """FLOPs of one forward + backward step (cached per architecture, input shape, batch)."""
    forward, backward = step_flops(model, input_shape, batch_size)
    return forward + backward


def count_or_reason(model: nn.Module, input_shape, batch_size: int) -> tuple[int | None, str | None]:
    """`(train_step_flops, None)`, or `(None, why)` where a model's step cannot be counted (it
    fails on zero inputs of `input_shape`, or no matrix product or convolution is in it): what
    lets a run charge measured time instead, saying why in one line."""
    try:
        flops = train_step_flops(model, input_shape, batch_size)
    except Exception as e:
        return None, (f"the model's FLOPs cannot be counted on a zero batch of shape "
                      f"{(int(batch_size), *input_shape)} ({type(e).__name__}: "
                      f"{' '.join(str(e).split())[:200]})")
    if flops <= 0:
        return None, "the FLOP counter found no matrix product or convolution in the model's step"
    return flops, None
