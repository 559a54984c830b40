"""A data set of one's own: `[data] dataset = "data.py:waves"`.

The testbed calls the loader with the other keys of `[data]` as keyword arguments (here
`n_train`, `n_test`, `length`, `noise`), plus `seed=` as it takes one, and expects a dict:
  "train", "test": an (inputs, labels) pair of tensors or arrays, or a map-style
                   torch.utils.data.Dataset whose items are (x, y);
  "num_classes":   an integer >= 2;
  "input_shape":   optional (else the shape of one input).
A map-style Dataset is read by index, one batch at a time: it need not fit in memory (only its
labels are read whole; a `targets` attribute saves reading every item for them).

`waves`: which of four frequencies a noisy two-channel wave has. The training split is a
Dataset that makes each sample from its index when asked; the test split is held as tensors.
"""
from __future__ import annotations

import math

import torch
from torch.utils.data import Dataset

FREQUENCIES = (1.0, 2.0, 3.0, 4.0)


def wave(index: int, seed: int, length: int, noise: float) -> tuple[torch.Tensor, int]:
    g = torch.Generator().manual_seed(seed * 1_000_003 + index)
    label = int(torch.randint(len(FREQUENCIES), (1,), generator=g))
    phase = float(torch.rand(1, generator=g)) * 2 * math.pi
    t = torch.linspace(0, 2 * math.pi, length)
    x = torch.stack([torch.sin(FREQUENCIES[label] * t + phase),
                     torch.cos(FREQUENCIES[label] * t + phase)], dim=1)
    return x + noise * torch.randn(length, 2, generator=g), label


class Waves(Dataset):
    """Sample i made on demand from (seed, i): nothing is held but the labels."""

    def __init__(self, n: int, seed: int, length: int, noise: float):
        self.n, self.seed, self.length, self.noise = n, seed, length, noise
        self.targets = torch.tensor([self._label(i) for i in range(n)])

    def _label(self, i: int) -> int:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        return int(torch.randint(len(FREQUENCIES), (1,), generator=g))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return wave(i, self.seed, self.length, self.noise)


def waves(seed: int = 0, n_train: int = 2000, n_test: int = 400, length: int = 16,
          noise: float = 0.5) -> dict:
    test = [wave(i, seed + 1, length, noise) for i in range(n_test)]
    return {"train": Waves(n_train, seed, length, noise),
            "test": (torch.stack([x for x, _ in test]), torch.tensor([y for _, y in test])),
            "num_classes": len(FREQUENCIES), "input_shape": (length, 2)}
