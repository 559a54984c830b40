import json
import os
from pathlib import Path

import torch
from flwr.app import ArrayRecord, Message, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


def ray_gpu_ids() -> list[str] | None:
    try:
        import ray
    except ImportError:
        return None
    return [str(g) for g in ray.get_gpu_ids()] if ray.is_initialized() else None


@app.train()
def train(msg, context):
    cfg, pid = context.run_config, int(context.node_config["partition-id"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator().manual_seed(pid)
    net = torch.nn.Sequential(torch.nn.Linear(64, int(cfg["hidden"])), torch.nn.ReLU(),
                              torch.nn.Linear(int(cfg["hidden"]), 10)).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(128, 64, generator=gen).to(device)
    y = torch.randint(0, 10, (128,), generator=gen).to(device)
    for _ in range(int(cfg["steps"])):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    if cfg["report-dir"]:
        seen = {"node": pid, "process": os.getpid(), "device": str(next(net.parameters()).device),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "ray_gpu_ids": ray_gpu_ids()}
        with open(Path(str(cfg["report-dir"])) / f"{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(seen) + "\n")
    state = {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}
    return Message(RecordDict({"arrays": ArrayRecord(state)}), reply_to=msg)
