"""A store that reports how long its writes take: the "store" piece of a run's wall split."""
from __future__ import annotations

import time
from collections.abc import Callable

from testbed.records.store import Store

# what the loop calls on its store while it runs: the writes and the steering polls
TIMED_CALLS = ("create_run", "append_iteration", "append_eval", "append_event", "flush",
               "finish_run", "pending_controls", "resolve_control")


class TimedStore(Store):
    """`Store` whose TIMED_CALLS report their wall seconds as `timer("store", seconds, -1)`."""

    def __init__(self, path, timer: Callable[[str, float, int], None], **kw):
        super().__init__(path, **kw)
        self.timer = timer


def _timed(name: str):
    inner = getattr(Store, name)

    def call(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(self, *args, **kwargs)
        finally:
            self.timer("store", time.perf_counter() - t, -1)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = inner.__doc__
    return call


for _name in TIMED_CALLS:
    setattr(TimedStore, _name, _timed(_name))
