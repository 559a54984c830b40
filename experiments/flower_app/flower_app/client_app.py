"""The ClientApp: local training and evaluation on this node's share of the digits."""
from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from flower_app.task import Net, load_data, test, train

try:  # the testbed's compression mod: a no-op unless `testbed flower run` names a method
    from testbed.flower.compress import compress
    MODS = [compress]
except ImportError:  # plain Flower (`flwr run`) without the testbed installed
    MODS = []

app = ClientApp(mods=MODS)


@app.train()
def train_fn(msg: Message, context: Context) -> Message:
    torch.set_num_threads(1)
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    pid, parts = context.node_config["partition-id"], context.node_config["num-partitions"]
    cfg = context.run_config
    if pid == int(cfg["fail-partition"]):   # a node to test the strategy against
        raise RuntimeError(f"node of partition {pid} fails every train call")
    data, _ = load_data(pid, parts)
    server_round = int(msg.content["config"]["server-round"])
    loss = train(net, data, int(cfg["local-epochs"]), int(cfg["batch-size"]), float(cfg["lr"]),
                 seed=1000 * int(cfg["seed"]) + 100 * server_round + pid)
    content = RecordDict({"arrays": ArrayRecord(net.state_dict()),
                          "metrics": MetricRecord({"train_loss": loss,
                                                   "num-examples": len(data[1])})})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate_fn(msg: Message, context: Context) -> Message:
    torch.set_num_threads(1)
    net = Net()
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    _, data = load_data(context.node_config["partition-id"], context.node_config["num-partitions"])
    loss, acc = test(net, data)
    content = RecordDict({"metrics": MetricRecord({"eval_loss": loss, "eval_acc": acc,
                                                   "num-examples": len(data[1])})})
    return Message(content=content, reply_to=msg)
