"""SGD as `torch.optim.SGD` computes it, without `torch.optim.Optimizer`'s machinery.

Every `torch.optim.Optimizer` imports `torch._dynamo` on its first `add_param_group` and
`step` (their dynamo-disabling wrappers), about a second of a fresh process's start-up that a
run which never compiles does not need; the per-step profiling hooks cost the many short
local steps of a federated round too. This class keeps `torch.optim.SGD`'s contract where the
testbed uses it (`param_groups` with the same keys, `state[p]["momentum_buffer"]`,
`zero_grad`, `step`, and a `state_dict` in the same layout, so checkpoints load either way)
and updates the parameters with torch's own functional SGD (`torch.optim.sgd.sgd`, the function
`SGD.step` calls), so the arithmetic is torch's, float for float.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.optim.sgd import sgd

_DEFAULTS = {"dampening": 0.0, "maximize": False, "foreach": None, "differentiable": False,
             "fused": None}


class SGD:
    """One parameter group of `torch.optim.SGD(params, lr, momentum, weight_decay=...,
    nesterov=...)`; no closures, sparse gradients or AMP scaling (the testbed uses none)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        if lr < 0.0:
            raise ValueError(f"SGD: lr = {lr}: must be >= 0")
        if momentum < 0.0:
            raise ValueError(f"SGD: momentum = {momentum}: must be >= 0")
        if weight_decay < 0.0:
            raise ValueError(f"SGD: weight_decay = {weight_decay}: must be >= 0")
        if nesterov and momentum <= 0:
            raise ValueError("SGD: nesterov = true needs a momentum above 0")
        self.param_groups = [{"params": list(params), "lr": lr, "momentum": momentum,
                              "weight_decay": weight_decay, "nesterov": nesterov, **_DEFAULTS}]
        self.state: dict[torch.Tensor, dict] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.param_groups[0]["params"]:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """`torch.optim.SGD.step()`: the same call of torch's functional SGD."""
        g = self.param_groups[0]
        params = [p for p in g["params"] if p.grad is not None]
        with_momentum = g["momentum"] != 0
        buffers = [self.state.get(p, {}).get("momentum_buffer") for p in params] \
            if with_momentum else []
        sgd(params, [p.grad for p in params], buffers, weight_decay=g["weight_decay"],
            momentum=g["momentum"], lr=g["lr"], dampening=g["dampening"],
            nesterov=g["nesterov"], maximize=g["maximize"], has_sparse_grad=False,
            foreach=g["foreach"], fused=g["fused"])
        if with_momentum:
            for p, buf in zip(params, buffers):
                self.state.setdefault(p, {})["momentum_buffer"] = buf

    def state_dict(self) -> dict:
        """`torch.optim.SGD.state_dict()`'s layout: parameters by their index in the group."""
        g = self.param_groups[0]
        index = {id(p): i for i, p in enumerate(g["params"])}
        return {"state": {index[id(p)]: dict(s) for p, s in self.state.items()},
                "param_groups": [{**{k: v for k, v in g.items() if k != "params"},
                                  "params": list(range(len(g["params"])))}]}

    def load_state_dict(self, state_dict: dict) -> None:
        """A state from `state_dict()` or from `torch.optim.SGD.state_dict()` (older
        checkpoints): the group's settings and each momentum buffer, cast like torch does."""
        groups = state_dict["param_groups"]
        params = self.param_groups[0]["params"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(params):
            raise ValueError("SGD: the saved state has another set of parameters "
                             f"({[len(g['params']) for g in groups]} in its groups, "
                             f"{len(params)} here)")
        self.param_groups[0].update({k: v for k, v in groups[0].items() if k != "params"})
        self.state = {}
        for i, s in state_dict["state"].items():
            p = params[int(i)]
            self.state[p] = {k: v.to(dtype=p.dtype, device=p.device)
                             if isinstance(v, torch.Tensor) else v for k, v in s.items()}
