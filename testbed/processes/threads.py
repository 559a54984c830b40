"""The thread policy of a run's process (`run.threads`)."""
from __future__ import annotations

import torch

DEFAULT_THREADS = 1  # run.threads = 0: why one, see the Field in testbed/configuration/schema.py


def apply_threads(threads: int) -> int:
    """Set this process's torch threads for a run (`run.threads`, 0 = DEFAULT_THREADS) and
    return the count. The one place the thread policy lives: in-process runs, torchrun ranks,
    resumed runs and the harness's `--jobs` processes all build their run's world through it."""
    n = threads or DEFAULT_THREADS
    torch.set_num_threads(n)
    try:  # the inter-op pool too; torch allows setting it once, before any inter-op work
        torch.set_num_interop_threads(n)
    except RuntimeError:
        pass
    return n
