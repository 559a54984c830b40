"""A model of one's own: `[model] name = "model.py:TinyTransformer"` (a path relative to the
experiment file) or `"package.module:TinyTransformer"` for an installed package.

The testbed calls `factory(input_shape, num_classes, **options)`, `options` being the other keys
of `[model]` (here `d_model`, `heads`, `layers`), and trains the `nn.Module` it returns on
batches of shape `(B, *input_shape)`, expecting logits `(B, num_classes)`.
"""
from __future__ import annotations

import math

import torch
from torch import nn


class TinyTransformer(nn.Module):
    """Sequences `(length, features)`: a linear embedding, learned positions, `layers`
    pre-norm encoder layers, and one linear head over every position's output. No dropout."""

    def __init__(self, input_shape, num_classes: int, d_model: int = 32, heads: int = 2,
                 layers: int = 1):
        super().__init__()
        length, features = input_shape
        self.embed = nn.Linear(features, d_model)
        self.pos = nn.Parameter(torch.randn(length, d_model) / math.sqrt(d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=2 * d_model,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(length * d_model, num_classes)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x) + self.pos).flatten(1))


def mlp(input_shape, num_classes: int, hidden: int = 64) -> nn.Module:
    """A function works as well as a class: a one-hidden-layer perceptron."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU(),
                         nn.Linear(hidden, num_classes))
