import numpy as np
import torch
from flwr.app import ArrayRecord, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.serde import message_to_proto

from echo_app import SEEN

app = ClientApp()


@app.train()
def train(msg, context):
    cfg, pid = context.run_config, int(context.node_config["partition-id"])
    SEEN["client"].append((msg.metadata.group_id, pid, message_to_proto(msg).ByteSize()))
    if pid == int(cfg["raise-on"]) and msg.metadata.group_id == "1":
        raise ValueError("this node's data is corrupt")
    if pid == int(cfg["slow-node"]):
        n = int(cfg["matmul-n"])
        torch.ones(n, n) @ torch.ones(n, n)
    return Message(RecordDict({"y": ArrayRecord([np.zeros(100 * (pid + 1), np.float32)])}),
                   reply_to=msg)
