"""The wall-clock timing hook of a run: `timer(what, wall_s, iteration)` and the `timed` block
that reports to it (the loop, the drivers and the transport time their pieces through it)."""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

Timer = Callable[[str, float, int], None]   # (what, wall seconds, iteration)


@contextmanager
def timed(timer: Timer | None, what: str, iteration: int):
    """The block's wall seconds to `timer` as `what` (nothing without a timer)."""
    if timer is None:
        yield
        return
    t = time.perf_counter()
    try:
        yield
    finally:
        timer(what, time.perf_counter() - t, iteration)
