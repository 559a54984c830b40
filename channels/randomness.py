"""Random streams whose values do not depend on how they are consumed.

A link draws the k-th value of its stream for its k-th transmission whether the fast engine asks
for 10,000 values at once or the SimPy engine asks one at a time, so both engines see the same
losses. Numbers come in fixed-size chunks from a generator seeded by the experiment.
"""
from __future__ import annotations

import numpy as np

CHUNK = 4096


class Stream:
    def __init__(self, seed: int, kind: str = "uniform"):
        self._gen = np.random.default_rng(seed)
        self._kind = kind
        self._buf = np.empty(0)
        self._pos = 0

    def _chunk(self) -> np.ndarray:
        if self._kind == "uniform":
            return self._gen.random(CHUNK)
        return self._gen.standard_normal(CHUNK)

    def peek(self, n: int) -> np.ndarray:
        """The next n values, left to be taken (the relay engine looks ahead, then commits)."""
        avail = self._buf.size - self._pos
        if avail < n:
            need = -(-(n - avail) // CHUNK)
            self._buf = np.concatenate([self._buf[self._pos:], *[self._chunk() for _ in range(need)]])
            self._pos = 0
        return self._buf[self._pos:self._pos + n]

    def take(self, n: int) -> np.ndarray:
        out = self.peek(n)
        self._pos += n
        return out



class Prefetch:
    """One value at a time from a source that looks ahead (`Stream.peek`, `LossProcess.peek`)
    and commits what was used (`Stream.take`, `LossProcess.skip`): blocks are peeked, and only
    the values used are committed (at the next block and at `close()`), so the source's k-th
    value still goes to its k-th use however the uses are spread over calls."""

    def __init__(self, peek, commit, block: int = 256):
        self._peek, self._commit, self._block = peek, commit, block
        self._vals: list = []
        self._i = 0

    def next(self):
        if self._i == len(self._vals):
            self._commit(self._i)
            self._vals = self._peek(self._block).tolist()
            self._i = 0
        v = self._vals[self._i]
        self._i += 1
        return v

    def close(self) -> None:
        self._commit(self._i)
        self._vals, self._i = [], 0


class IndexedStream:
    """Values addressed by index (e.g. one fading gain per coherence block since time 0)."""

    def __init__(self, seed: int, kind: str = "normal", width: int = 1):
        self._stream = Stream(seed, kind)
        self._width = width
        self._vals = np.empty((0, width))

    def get(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        top = int(idx.max()) + 1 if idx.size else 0
        if top > self._vals.shape[0]:
            n = max(top - self._vals.shape[0], 1024)
            more = self._stream.take(n * self._width).reshape(n, self._width)
            self._vals = np.concatenate([self._vals, more])
        return self._vals[idx]
