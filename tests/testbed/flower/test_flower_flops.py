"""FLOPs of a ClientApp call: counted once per node, call kind and model, reused after, and
counted again when the model or the batch shape changes (hand-computed figures of a linear
layer: forward 2 B i o; training adds the weight gradient, another 2 B i o)."""
from __future__ import annotations

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.clientapp import ClientApp

from testbed.flower.driver import flower_identity
from tests.testbed.flower.flower_runs import ECHO, driver

HIDDEN = {"batch": 16}     # a batch size the message does not carry (the key cannot see it)

app = ClientApp()


def _layer(msg: Message) -> tuple[torch.nn.Linear, int]:
    weight = torch.from_numpy(msg.content["arrays"]["w"].numpy())
    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    layer.weight.data.copy_(weight)
    config = msg.content["config"]
    return layer, int(config["batch"]) if "batch" in config else HIDDEN["batch"]


@app.train()
def train(msg, context):
    layer, batch = _layer(msg)
    layer(torch.ones(batch, layer.in_features)).sum().backward()
    return Message(RecordDict(), reply_to=msg)


@app.evaluate()
def evaluate(msg, context):
    layer, batch = _layer(msg)
    with torch.no_grad():
        layer(torch.ones(batch, layer.in_features))
    return Message(RecordDict(), reply_to=msg)


def message(grid, kind: str, out: int, inp: int, server_round: int, dtype=np.float32,
            **config) -> Message:
    content = RecordDict({"arrays": ArrayRecord({"w": Array(np.ones((out, inp), dtype))}),
                          "config": ConfigRecord({"server-round": server_round, **config})})
    msg = Message(content, grid.node_ids[0], kind)
    grid.push_messages([msg])
    return msg


def test_a_calls_flops_are_counted_once_and_again_when_the_model_or_batch_changes():
    grid = driver(ECHO).grid
    grid.client_app = app
    counter = grid.flops
    HIDDEN["batch"] = 16

    def flops(kind, out, inp, server_round, dtype=np.float32, **config):
        with flower_identity(1):
            return grid._compute(message(grid, kind, out, inp, server_round, dtype, **config))[1]

    # train, a 4x8 layer on batches of 16: counted, then reused in later rounds, also when the
    # strategy sends the model in float64 (FedOpt's does): FLOPs are counted from shapes
    assert flops("train", 4, 8, 1) == 4 * 16 * 8 * 4 and counter.counted == 1
    assert flops("train", 4, 8, 2) == 4 * 16 * 8 * 4 and counter.counted == 1
    assert flops("train", 4, 8, 2, np.float64) == 4 * 16 * 8 * 4 and counter.counted == 1
    # evaluate is another call kind: counted on its own (forward only)
    assert flops("evaluate", 4, 8, 2) == 2 * 16 * 8 * 4 and counter.counted == 2
    assert flops("evaluate", 4, 8, 3) == 2 * 16 * 8 * 4 and counter.counted == 2
    # a changed model (the message's arrays): counted again
    assert flops("train", 4, 32, 3) == 4 * 16 * 32 * 4 and counter.counted == 3
    # a batch size the message carries: counted again
    assert flops("train", 4, 32, 4, batch=64) == 4 * 64 * 32 * 4 and counter.counted == 4
    # a batch size the message does not carry: the call's module trace differs from the
    # counted one's, so its key is counted at every call from then on (that one call, run
    # before anything could tell, is charged the figure it had)
    HIDDEN["batch"] = 8
    assert flops("train", 4, 32, 5) == 4 * 16 * 32 * 4 and counter.estimated == 1
    assert flops("train", 4, 32, 6) == 4 * 8 * 32 * 4 and counter.counted == 5
    HIDDEN["batch"] = 16     # counted still: the key now counts at every call
    assert flops("train", 4, 32, 7) == 4 * 16 * 32 * 4 and counter.counted == 6


def _workloads():
    """Training and evaluation steps over the op kinds ClientApps run: products, convolutions,
    recurrent cells, attention, in-place optimizer updates, inference mode (where linear and
    matmul come whole and FlopCounterMode decomposes them)."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 100), torch.nn.ReLU(), torch.nn.Linear(100, 10))
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                               torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 4 * 4, 10))
    gru = torch.nn.GRU(6, 12, batch_first=True)
    attention = torch.nn.MultiheadAttention(16, 4, batch_first=True)

    def train(model, x, y):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    def recurrent():
        out, _ = gru(torch.randn(4, 5, 6))
        (out.sum() + torch.einsum("bij,bkj->bik", out, out).mean()).backward()

    def attend():
        x = torch.randn(2, 7, 16)
        out, _ = attention(x, x, x, need_weights=False)
        torch.nn.functional.scaled_dot_product_attention(x, x, x).sum().add(out.sum()).backward()

    def evaluate():
        with torch.no_grad():
            conv.eval()(torch.randn(5, 3, 8, 8)).argmax(1)
        with torch.inference_mode():   # linear and matmul reach the mode whole: decomposed
            mlp(torch.randn(3, 64)).matmul(torch.randn(10, 2))
    return {"mlp": lambda: train(mlp, torch.randn(32, 64), torch.randint(0, 10, (32,))),
            "conv": lambda: train(conv.train(), torch.randn(5, 3, 8, 8), torch.randint(0, 10, (5,))),
            "recurrent": recurrent, "attention": attend, "evaluate": evaluate}


def test_the_total_counter_gives_flop_counter_modes_figures_op_by_op():
    """TotalFlops skips FlopCounterMode's per-module bookkeeping and caches its per-op
    decisions; each op's count must stay FlopCounterMode's."""
    from torch.utils.flop_counter import FlopCounterMode

    from nodes.flops import TotalFlops
    for name, work in _workloads().items():
        with FlopCounterMode(display=False) as reference:
            work()
        for _ in range(2):     # the second time with every op's decision cached
            with TotalFlops() as total:
                work()
            assert dict(total.flop_counts["Global"]) == dict(reference.flop_counts["Global"]), name
        assert total.get_total_flops() == reference.get_total_flops() > 0, name
