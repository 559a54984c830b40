"""The gradient source of a torchrun rank, and the test-only fault injection it fires.

Rank r computes only worker r's gradient (with worker r's own batch generator, so it is the
one the single-process run computes); the other workers' entries are zeros, whose encoding the
transport replaces with the real bytes (testbed/distributed/transport.py). The losses,
bad-gradient flags and wall times of every worker are exchanged, so every rank stops on the
same bad gradient and charges the same compute time.
"""
from __future__ import annotations

import os
import time

import numpy as np
import torch

from nodes.compression.base import GradientError
from testbed.distributed.comm import Comm
from testbed.errors import ExperimentError

# Test-only fault injection: "RANK:ITERATION:exit" (os._exit) or "RANK:ITERATION:hang" (sleep).
FAULT_ENV = "TESTBED_TEST_FAULT_INJECTION"


class RankGradients:
    """This rank's worker's gradient; the losses, bad-gradient flags and wall times of all.

    Worker r's entry is its real gradient; the other workers' entries are zeros (the scheme
    encodes garbage for them, replaced by `share` with the real bytes)."""

    def __init__(self, comm: Comm, pool, fault=None, replicas=None):
        self.comm, self.pool, self.fault, self.replicas = comm, pool, fault, replicas

    def __call__(self):
        it = self.pool.iteration
        self.comm.iteration = it
        if self.fault and self.fault[0] == self.comm.rank and self.fault[1] == it:
            inject(self.fault[2])
        w0 = time.perf_counter()
        # at this worker's replica if it lost part of a lossy downlink (nodes/replicas.py)
        drift = None if self.replicas is None else self.replicas.drift.get(self.comm.rank)
        grads, losses = self.pool.gradients(offsets=None if drift is None else {0: drift})
        wall = time.perf_counter() - w0
        g = grads[0]
        bad = float(not bool(torch.isfinite(g).all()))
        rows = self.comm.all_gather_floats([losses[0], bad, wall], "loss exchange")
        for w, row in enumerate(rows):  # every rank stops on the same worker's bad gradient
            if row[1]:
                raise GradientError(w, it)
        full = [g if w == self.comm.rank else torch.zeros_like(g) for w in range(len(rows))]
        # The loop charges one wall time per worker: the mean, as in one process.
        return full, [row[0] for row in rows], float(np.mean([row[2] for row in rows]))


def parse_fault(spec: str | None):
    """`RANK:ITERATION:exit|hang` -> (rank, iteration, action); None when unset."""
    if not spec:
        return None
    try:
        rank, it, action = spec.split(":")
        if action not in ("exit", "hang"):
            raise ValueError
        return int(rank), int(it), action
    except ValueError:
        raise ExperimentError(f"{FAULT_ENV} = {spec!r}: expected RANK:ITERATION:exit or "
                              "RANK:ITERATION:hang") from None


def inject(action: str) -> None:
    """Test only: die at once (no clean-up, like a crash) or stop answering."""
    if action == "exit":
        os._exit(17)
    while True:
        time.sleep(3600)
