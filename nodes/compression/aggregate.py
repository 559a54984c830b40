"""Aggregation rules over decoded messages (the codec turns bits into values; what the values
add up to is the aggregator's rule, kept here)."""
from __future__ import annotations

import torch


def mean_over_arrived(decoded, n: int) -> torch.Tensor:
    """Per-coordinate mean over the messages in which that coordinate arrived (a coordinate
    lost everywhere is 0): how dense aggregates cope with best-effort loss."""
    total, count = torch.zeros(n), torch.zeros(n)
    for d in decoded:
        total += d.values
        count += d.mask
    return total / count.clamp(min=1)
