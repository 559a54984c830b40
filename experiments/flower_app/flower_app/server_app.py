"""The ServerApp: FedAvg or FedAdam over the nodes, with a centralized evaluation."""
from __future__ import annotations

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAdam, FedAvg

from flower_app.task import Net, test, test_set

app = ServerApp()


def central_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    net = Net()
    net.load_state_dict(arrays.to_torch_state_dict())
    loss, acc = test(net, test_set())
    return MetricRecord({"loss": loss, "accuracy": acc})


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    torch.manual_seed(int(cfg["seed"]))
    arrays = ArrayRecord(Net().state_dict())
    common = dict(fraction_train=float(cfg["fraction-train"]),
                  fraction_evaluate=float(cfg["fraction-evaluate"]))
    if cfg["strategy"] == "fedadam":
        strategy = FedAdam(eta=float(cfg["server-lr"]), **common)
    else:
        strategy = FedAvg(**common)
    strategy.start(grid=grid, initial_arrays=arrays, num_rounds=int(cfg["num-server-rounds"]),
                   train_config=ConfigRecord({"lr": float(cfg["lr"])}),
                   evaluate_fn=central_evaluate)
