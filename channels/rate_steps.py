"""A link's rate as a step function of virtual time: a device's own uplink or downlink rate
(testbed/emulation/device_trace.py's `uplink_mbps` / `downlink_mbps`), set per direction by
`Network.set_rate_steps`.

Breakpoints `times_s` (strictly increasing from 0) and the rate in force from each, in bit/s;
with `period_s` > 0 the steps repeat (FedScale's `finish_time`). Every engine takes a packet's
rate at the start of its transmission (`LinkState.rate_at`): a packet that starts before a
breakpoint goes at the old rate to its end. `step_rate` is plain arithmetic so that the numba
engines compile this very function (channels/relay.py, channels/csma_fast.py) and agree with
the SimPy engine to the last bit. A fading model still sets its link's rate (the steps replace
`bandwidth_mbps`, as before); a constant rate is no RateSteps at all (the link's
`bandwidth_mbps`: the engines' constant-rate path, unchanged).
"""
from __future__ import annotations

import math

import numpy as np


def step_rate(times, rates, period, t):
    """The rate in force at virtual time t: rates[i] for the last times[i] <= t (t taken modulo
    `period` when it is > 0)."""
    if period > 0.0:
        t = t - math.floor(t / period) * period
    lo, hi = 0, times.shape[0]
    while lo < hi:      # bisect_right
        mid = (lo + hi) // 2
        if times[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return rates[lo - 1]


def valid_until(times, period, t):
    """A time before which the rate in force at t still holds for every t' >= t (the next
    breakpoint, less a margin that absorbs the rounding of t modulo `period`): an engine that
    caches the rate recomputes it once its clock reaches this."""
    local = t
    if period > 0.0:
        local = t - math.floor(t / period) * period
    lo, hi = 0, times.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid] <= local:
            lo = mid + 1
        else:
            hi = mid
    if lo < times.shape[0]:
        nxt = times[lo]
    elif period > 0.0:
        nxt = period
    else:
        return math.inf
    at = (t - local) + nxt
    return at - 1e-9 * (abs(at) + 1.0)


class RateSteps:
    def __init__(self, times_s, rates_bps, period_s: float = 0.0):
        self.times = np.asarray(times_s, dtype=float)
        self.rates = np.asarray(rates_bps, dtype=float)
        self.period = float(period_s or 0.0)
        if self.times.size < 1 or self.times[0] != 0.0 or np.any(np.diff(self.times) <= 0) \
                or self.times.shape != self.rates.shape or np.any(self.rates <= 0):
            raise ValueError("RateSteps: times must start at 0 and increase, one rate > 0 each")

    def rate(self, t: float) -> float:
        return float(step_rate(self.times, self.rates, self.period, float(t)))

    def block(self, t) -> np.ndarray:
        """A number per time that changes exactly where the rate in force may change (the fast
        engine ends a train there, as at a fading block's boundary)."""
        t = np.asarray(t, dtype=float)
        if self.period > 0.0:
            cycle = np.floor(t / self.period)
            t = t - cycle * self.period
        else:
            cycle = np.zeros(t.shape)
        i = np.searchsorted(self.times, t, side="right") - 1
        return cycle.astype(np.int64) * self.times.size + i

    def __eq__(self, other) -> bool:
        return isinstance(other, RateSteps) and self.period == other.period \
            and np.array_equal(self.times, other.times) and np.array_equal(self.rates, other.rates)

    __hash__ = None
