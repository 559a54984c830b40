"""Ctrl-C and SIGTERM held back while a block writes something that must land whole."""
from __future__ import annotations

import contextlib
import signal


@contextlib.contextmanager
def stops_deferred():
    """SIGINT and SIGTERM wait until the block is done: a handler that raised midway (between a
    store's COMMIT and clearing its queue, or a study's trial asked for and claimed) would leave
    half of what the block writes. Where the platform cannot mask signals the block runs as is."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    old = mask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, old)
