"""The garbage collector during a run: what the process held before the loop is left alone.

Python's cyclic collector walks every tracked object on each full (generation 2) pass. With
torch, flwr and an app imported a process holds about half a million of them, and a pass takes
10-280 ms (measured: 8 such passes in a 3 s Flower run of 12 short rounds), pauses that land in
the rounds at random. What can become cyclic garbage during a run is mostly what the loop makes,
not the modules, data and model made before it. `frozen_heap()` moves every object alive when
the loop starts out of the collector's sight (`gc.freeze`) and gives them back when it ends
(`gc.unfreeze`): a cycle among them that died meanwhile is collected after the run, so a process
that runs several (a sweep's worker, a notebook) keeps nothing. It yields a function that
freezes what is alive then as well: the loop calls it after its first round, whose calls
import what the run uses lazily (torch's compiler stack with the first optimizer, 200,000
objects; a Flower app's modules).
"""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def frozen_heap():
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()
