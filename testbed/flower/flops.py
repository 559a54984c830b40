"""FLOPs of a ClientApp call: counted once per node, call kind and model, then reused.

Counting a call with `torch.utils.flop_counter.FlopCounterMode` costs several times the call
itself (a Python dispatch per torch op), so a call is counted only when its figure is not
known, and then with `TotalFlops`: FlopCounterMode's figures op by op at about half its cost. A call's FLOPs are fixed by what it computes on, which the grid sees before the call
(`call_key`): the node (its data), the call kind (train, evaluate, query), the model it is
sent (names and shapes of the message's arrays), the message's config and metrics
(every value but Flower's round number `server-round`) and the shapes of the node's context
state. The first call of a key is counted; later calls of it run bare and are charged its
figure.

A guard checks what the key cannot see (a batch size drawn at random, a model the ClientApp
builds whatever it is sent): during every call a global forward pre-hook (microseconds per
module call) records each module's forward as (module type, input shapes and dtypes, train
mode, grad mode), the call's *trace*. A bare call whose trace is one a counted call made is
charged that call's figure (a trace counts only under its own key: a call's FLOPs outside
modules, a bare matmul, are not in its trace); one whose trace is new is charged its key's figure (the best
figure there is: it cannot be counted after it ran) and its key is counted at every call from
then on (`estimated` counts such calls). A call that raised is charged what it spent until it
raised: counted when counted, else its key's figure times the share of the counted call's
module calls it made (its trace a prefix of that call's); such calls are never reused.
"""
from __future__ import annotations

import contextlib

import torch
from flwr.app import Message, RecordDict

from nodes.flops import TotalFlops

ROUND_KEY = "server-round"   # Flower's strategies put the round number in every config


def _records_key(content: RecordDict, skip: str = "") -> tuple:
    """Names and shapes of the arrays (not their dtypes: FLOPs are counted from shapes, and
    FedOpt strategies send float64 what the nodes return as float32); every config and metric
    value but `skip`."""
    arrays = tuple((name, key, tuple(a.shape))
                   for name, record in content.array_records.items()
                   for key, a in record.items())
    values = tuple((name, key, repr(v))
                   for records in (content.config_records, content.metric_records)
                   for name, record in records.items()
                   for key, v in record.items() if key != skip)
    return arrays, values


def call_key(msg: Message, state: RecordDict) -> tuple:
    """What fixes the FLOPs of the ClientApp call on `msg` (module doc)."""
    content = msg.content if msg.has_content() else RecordDict()
    state_arrays = _records_key(state)[0]
    return (msg.metadata.dst_node_id, msg.metadata.message_type,
            _records_key(content, ROUND_KEY), state_arrays)


@contextlib.contextmanager
def module_trace():
    """The forward of every module called in the block, as a list (module doc)."""
    trace: list[tuple] = []

    def pre_hook(module, args):
        trace.append((type(module), tuple((tuple(a.shape), a.dtype) for a in args
                                          if isinstance(a, torch.Tensor)),
                      module.training, torch.is_grad_enabled()))

    handle = torch.nn.modules.module.register_module_forward_pre_hook(pre_hook)
    try:
        yield trace
    finally:
        handle.remove()


def run_measured(call, count: bool) -> tuple:
    """`call()` -> (result, ok) run with its module trace, its FLOPs counted if `count`:
    (result, ok, FLOPs or None, trace). The part of a charge that runs where the call runs."""
    with module_trace() as trace:
        if not count:
            result, ok = call()
            return result, ok, None, tuple(trace)
        with TotalFlops() as counter:
            result, ok = call()
    return result, ok, float(counter.get_total_flops()), tuple(trace)


class CallFlops:
    """The FLOPs of ClientApp calls (module doc). `must_count(key)` before a call says whether
    to count it; `settle(...)` after gives its figure. `charge(key, call)` does both around
    `call()` (which returns (result, ok)) in this process: (result, its FLOPs)."""

    def __init__(self):
        self.by_key: dict[tuple, tuple] = {}      # key -> trace of its last counted call
        self.by_trace: dict[tuple, float] = {}    # (key, trace) -> FLOPs of a counted call
        self.volatile: set[tuple] = set()         # keys counted at every call
        self.counted = 0      # calls counted (TotalFlops: FlopCounterMode's total)
        self.estimated = 0    # bare calls whose trace no counted call made

    def must_count(self, key: tuple) -> bool:
        return key not in self.by_key or key in self.volatile

    def settle(self, key: tuple, ok: bool, flops: float | None, trace: tuple) -> float:
        """The FLOPs of a call of `key` that ran (counted: `flops`, else None) with `trace`."""
        if flops is not None:
            self.counted += 1
            if ok:
                self.by_key[key] = trace
                self.by_trace[key, trace] = flops
            return flops
        if (key, trace) in self.by_trace:
            return self.by_trace[key, trace]
        known = self.by_key[key]
        full = self.by_trace[key, known]
        if not ok and known[:len(trace)] == trace:   # raised part way through a known call
            return full * len(trace) / max(1, len(known))
        self.estimated += 1
        self.volatile.add(key)
        return full

    def charge(self, key: tuple, call):
        result, ok, flops, trace = run_measured(call, self.must_count(key))
        return result, self.settle(key, ok, flops, trace)
