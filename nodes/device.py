"""Which torch device a run uses: `device = "auto" | "cpu" | "cuda" | "cuda:N"`."""
from __future__ import annotations

import torch

ALLOWED = ("auto", "cpu", "cuda", "cuda:N")


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """Turn the config's device string into a torch.device.

    "auto" picks CUDA when a GPU is visible, else the CPU; asking for "cuda" on a machine
    without one is an error rather than a silent fall-back, so a GPU run never quietly
    becomes a (much slower) CPU run.
    """
    if isinstance(spec, torch.device):
        spec = str(spec)
    if spec is None:
        spec = "auto"
    if not isinstance(spec, str):
        raise ValueError(f"device = {spec!r} is not a string; allowed: {', '.join(ALLOWED)}")
    name = spec.strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        index = name[5:]
        if index and not index.isdigit():
            raise ValueError(f"device = {spec!r} is not valid; allowed: {', '.join(ALLOWED)}")
        if not torch.cuda.is_available():
            raise ValueError(f"device = {spec!r} but no CUDA GPU is available "
                             f"(torch.cuda.is_available() is False); use 'auto' or 'cpu'")
        if index and int(index) >= torch.cuda.device_count():
            raise ValueError(f"device = {spec!r} but only {torch.cuda.device_count()} CUDA "
                             f"device(s) exist (cuda:0..cuda:{torch.cuda.device_count() - 1})")
        return torch.device(name)
    raise ValueError(f"device = {spec!r} is not known; allowed: {', '.join(ALLOWED)}")
