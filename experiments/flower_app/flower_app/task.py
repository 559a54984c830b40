"""The model, the data split and the local training / evaluation of the app."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn


class Net(nn.Module):
    """A two-layer MLP on the 64 pixels of an 8x8 digit."""

    def __init__(self, hidden: int = 100):
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@lru_cache(maxsize=1)
def _digits(seed: int = 0):
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    x = torch.tensor(x[order] / 16.0, dtype=torch.float32)
    y = torch.tensor(y[order], dtype=torch.long)
    cut = int(0.8 * len(y))
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def load_data(partition_id: int, num_partitions: int):
    """This node's share of the training set (an IID split) and of the test set."""
    (xt, yt), (xv, yv) = _digits()
    return ((xt[partition_id::num_partitions], yt[partition_id::num_partitions]),
            (xv[partition_id::num_partitions], yv[partition_id::num_partitions]))


def test_set():
    """The whole held-out set (the server's centralized evaluation)."""
    return _digits()[1]


def train(net: Net, data, epochs: int, batch_size: int, lr: float, seed: int) -> float:
    """Local SGD; the mean training loss."""
    x, y = data
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    net.train()
    total, count = 0.0, 0
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), batch_size):
            idx = order[i:i + batch_size]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            count += len(idx)
    return total / max(1, count)


def test(net: Net, data) -> tuple[float, float]:
    """Loss and accuracy on `data`."""
    x, y = data
    net.eval()
    with torch.no_grad():
        out = net(x)
        return float(nn.functional.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean())
