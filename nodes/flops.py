"""FLOPs of one training step, counted as torch.utils.flop_counter.FlopCounterMode counts them.

The testbed's loop turns compute into deterministic virtual seconds: flops / (device GFLOP/s).
FlopCounterMode counts the matrix products and convolutions (2 FLOPs per multiply-add) of the
forward and the backward pass; element-wise ops (ReLU, softmax, BatchNorm) are not counted,
which for these models is a few percent. `TotalFlops` is that counter for its total alone, at
about half its cost per op and without importing torch._dynamo.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch._ops import HigherOrderOperator
from torch.utils.flop_counter import FlopCounterMode, _FlopCounterMode

_CACHE: dict[tuple, tuple[int, int]] = {}
# A step of at most this many FLOPs is counted by computing it on zeros on the CPU (about 0.3 s
# here); a larger one on the meta device (module doc of step_flops).
CPU_COUNT_LIMIT = 10e9
_PROBE_BATCH = 2      # not 1: BatchNorm refuses a batch of one sample in training mode


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
        _CACHE[key] = _count_cheapest(model, input_shape, int(batch_size))
    return _CACHE[key]


def _count_cheapest(model: nn.Module, input_shape, batch_size: int) -> tuple[int, int]:
    # Shapes alone decide the count, so it is the same on any device. On the meta device
    # nothing is computed, but each op costs Python (0.2 s for a ResNet-20 step) and its first
    # use imports torch._dynamo (about 1 s: meta kernels written in Python are wrapped in
    # dynamo's disable), so a small step is cheaper computed on zeros: a step of two samples,
    # counted on the CPU, says how large this one is.
    probe_batch = min(_PROBE_BATCH, batch_size)
    try:
        probe = _count(model, input_shape, probe_batch, "cpu")
    except Exception:
        probe = None
    if probe is not None and sum(probe) * batch_size / probe_batch <= CPU_COUNT_LIMIT:
        return probe if probe_batch == batch_size else _count(model, input_shape, batch_size, "cpu")
    try:
        return _count(model, input_shape, batch_size, "meta")
    except Exception:   # an op without a meta kernel or data-dependent code: really run it
        return _count(model, input_shape, batch_size, "cpu")


def _count(model: nn.Module, input_shape, batch_size: int, device: str) -> tuple[int, int]:
    # Count on a copy: the original's weights, BatchNorm statistics and .grad stay untouched.
    probe = copy.deepcopy(model).to(device).train()
    params = [p for p in probe.parameters() if p.requires_grad]
    x = torch.zeros(batch_size, *input_shape, device=device)
    y = torch.zeros(batch_size, dtype=torch.int64, device=device)
    with TotalFlops() as fwd:
        loss = F.cross_entropy(probe(x), y)
    with TotalFlops() as bwd:
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


class _TotalOnly:
    """FlopCounterMode's module tracker reduced to the one figure read here, the total ("Global"):
    the tracker's hooks on every module's forward and backward walk their inputs and outputs."""
    parents = ("Global",)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


# how _TotalMode treats an op, decided once per op: as FlopCounterMode's dispatch does
_AS_COUNTER, _RUN, _RUN_COUNTED = 0, 1, 2
_SKIPPED = {"sym_is_contiguous", "is_contiguous", "is_strides_like_format",
            "is_non_overlapping_and_dense", "size", "sym_size", "stride", "sym_stride",
            "storage_offset", "sym_storage_offset", "numel", "sym_numel", "dim", "layout"}
_DECOMPOSES = torch._C.DispatchKey.CompositeImplicitAutograd
_TREATMENT: dict = {}     # op -> its treatment, for the default registry


def _treatment(func, registry: dict) -> int:
    """FlopCounterMode's dispatch (torch/utils/flop_counter.py) hands an op on untouched (the
    size queries), splits a higher-order op, decomposes an op that has a decomposition and is
    not in its registry (the check it makes on the overload), else runs it and counts the FLOPs
    its registry gives. The first three stay FlopCounterMode's (`_AS_COUNTER`)."""
    if isinstance(func, HigherOrderOperator) or func._overloadpacket.__name__ in _SKIPPED:
        return _AS_COUNTER
    if func not in registry and func is not torch.ops.prim.device.default and (
            _DECOMPOSES in func.py_kernels
            or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _DECOMPOSES)):
        return _AS_COUNTER
    return _RUN_COUNTED if func._overloadpacket in registry else _RUN


class _TotalMode(_FlopCounterMode):
    """FlopCounterMode's dispatch with its per-op decisions made once per op (it re-enters
    itself to try a decomposition on every op, most of which have none)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a dispatch mode's __torch_dispatch__ in dynamo's disable unless its
        # class says no: the wrapper imports torch._dynamo (about a second) on the first op,
        # and nothing here is ever compiled.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        how = _TREATMENT.get(func)
        if how is None:
            how = _TREATMENT[func] = _treatment(func, self.counter.flop_registry)
        kwargs = kwargs if kwargs else {}
        if how == _AS_COUNTER:      # FlopCounterMode's own branches, as it takes them
            if isinstance(func, HigherOrderOperator):
                return self._handle_higher_order_ops(func, types, args, kwargs)
            if func._overloadpacket.__name__ in _SKIPPED:
                return NotImplemented
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
            how = _RUN_COUNTED if func._overloadpacket in self.counter.flop_registry else _RUN
        out = func(*args, **kwargs)
        if how == _RUN_COUNTED:
            self.counter._count_flops(func._overloadpacket, out, args, kwargs)
        return out


class TotalFlops(FlopCounterMode):
    """`FlopCounterMode(display=False)` for its total alone (`get_total_flops()`, the same
    figure), at about half its cost per op."""

    def __init__(self):
        super().__init__(display=False)
        self.mod_tracker = _TotalOnly()

    def __enter__(self):
        self.flop_counts.clear()
        self.mode = _TotalMode(self)
        self.mode.__enter__()
        return self
