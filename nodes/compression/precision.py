"""Precision on the wire, declared once: the `values` (what workers send) and `downlink` (the
server's broadcast) options every method shares, and the one rounding to what the wire carries.

A method lists `**precision(values="f32", downlink="f16")` among its registered options (only
the ones it has); `Scheme.__init__` stores them as `values_dtype` / `downlink_dtype`. The
schema has checked them, so no method re-checks, and `on_wire` is the only rounding rule.
"""
from __future__ import annotations

import torch

from lgc_schema import Field

DTYPES = ("f32", "f16")
_HELP = {"values": "precision of the values each worker sends",
         "downlink": "precision of the server's broadcast of the mean"}


def precision(**defaults: str) -> dict[str, Field]:
    """Option fields for `values=` and/or `downlink=` with the given defaults."""
    return {key: Field(d, str, choices=DTYPES, help=_HELP[key]) for key, d in defaults.items()}


def on_wire(values: torch.Tensor, dtype: str) -> torch.Tensor:
    """The values exactly as the wire carries them (fp32 out)."""
    return values.to(torch.float16).float() if dtype == "f16" else values.float()
