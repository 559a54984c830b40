"""Mahimahi capacity traces: one line per 1500-byte delivery opportunity, in milliseconds.

The trace repeats with a period equal to its last timestamp, as in Mahimahi's link shell, and
its clock starts at virtual time 0, so a link's position in the trace persists across calls.
Per direction (`[network.link]`, `[network.nodes.X]` or a graph file's edges): `uplink_trace`
towards the server (the end with fewer hops to it), `downlink_trace` away from it, `trace` both
(and what an edge with no such direction, e.g. worker-worker on a mesh, uses);
`[[network.links]]` entries, one direction each, win.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from channels.errors import ChannelConfigError


class Trace:
    def __init__(self, ms: np.ndarray, name: str = "<trace>"):
        self.ms = np.asarray(ms, dtype=np.int64)
        self.name = name
        self.period_ms = int(self.ms[-1])
        self.n = self.ms.size

    @classmethod
    def load(cls, path: str, key: str = "network.link.trace") -> Trace:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ChannelConfigError(key, path, f"a readable Mahimahi trace file ({e.strerror})")
        values, prev = [], 0
        for lineno, line in enumerate(text.splitlines(), start=1):
            s = line.strip()
            if not s:
                continue
            if not s.isdigit():
                raise ChannelConfigError(f"{path}:{lineno}", s,
                                         "one non-negative integer timestamp in milliseconds per line")
            v = int(s)
            if v < prev:
                raise ChannelConfigError(f"{path}:{lineno}", s, f"timestamps that never decrease (previous {prev})")
            values.append(v)
            prev = v
        if not values or values[-1] <= 0:
            raise ChannelConfigError(path, values[-1] if values else "", "at least one line and a last timestamp > 0 ms")
        return cls(np.asarray(values), name=path)

    def time_s(self, idx) -> np.ndarray:
        """Absolute time of delivery opportunity number `idx` (counting across repeats)."""
        idx = np.asarray(idx, dtype=np.int64)
        cycle, pos = np.divmod(idx, self.n)
        return (cycle * self.period_ms + self.ms[pos]) / 1000.0

    def first_at_or_after(self, t: float) -> int:
        """Index of the first opportunity at a time >= t."""
        ms = t * 1000.0
        cycle = max(int(ms // self.period_ms) - 1, 0)
        while True:
            times = (cycle * self.period_ms + self.ms) / 1000.0
            j = int(np.searchsorted(times, t, side="left"))
            if j < self.n:
                return cycle * self.n + j
            cycle += 1
