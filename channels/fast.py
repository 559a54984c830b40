"""The fast engine: packet trains computed with numpy wherever no event can intervene.

A medium's schedule is built segment by segment. In a segment the set of backlogged
transmitters is fixed, so round robin is a fixed interleaving and the start of every packet is a
cumulative sum of airtimes. A segment ends just before the first thing that would change the
schedule - a transmitter whose next packet is not ready yet, another becoming ready, a fading
block boundary or a rate step (a device's rate, channels/rate_steps.py), or a transmitter running out of known packets - and the next segment starts
from there. The result is exactly what the per-packet SimPy engine computes (tests/channels
checks it), at a cost per segment, not per packet. Single-hop traffic only.
"""
from __future__ import annotations

import numpy as np

from channels.state import Medium, TxQueue, record


def _apply(q: TxQueue, follow: list) -> None:
    for item in follow:
        if item[0] == "retx":
            q.push(*item[1:])
        else:  # single-hop engine never forwards
            raise AssertionError("fast engine got a multi-hop queue")


def run_medium(medium: Medium, queues: list[TxQueue], stats: dict) -> None:
    if medium.csma is not None:
        from channels import csma_fast   # deferred: numba's compiled DCF, imported by a CSMA cell only
        return csma_fast.run(medium, queues, stats)
    if len(queues) == 1 and queues[0].trace is not None:
        return _run_trace(medium, queues[0], stats)
    t = medium.free_at
    rr = 0
    nq = len(queues)
    while True:
        live = [q for q in queues if q.n]
        if not live:
            break
        order = [queues[(rr + i) % nq] for i in range(nq)]
        busy = [q for q in order if q.n and q.ready[0] <= t]
        if not busy:
            t = max(t, min(float(q.ready[0]) for q in live))
            continue
        waiting = [float(q.ready[0]) for q in live if q.ready[0] > t]
        m = min(q.n for q in busy)
        nb = len(busy)
        air = np.empty((m, nb))
        ready = np.empty((m, nb))
        for c, q in enumerate(busy):
            air[:, c] = q.airtime(q.bits[:m], q.mask[:m], q.rate_at(t))
            ready[:, c] = q.ready[:m]
        air = air.ravel()
        ready = ready.ravel()
        cs = np.cumsum(np.concatenate(([t], air)))
        starts, ends = cs[:-1], cs[1:]
        cut = air.size
        late = np.flatnonzero(ready > starts)
        if late.size:
            cut = min(cut, int(late[0]))
        if waiting:
            cut = min(cut, int(np.searchsorted(starts, min(waiting), side="left")))
        for c, q in enumerate(busy):
            if q.fading or q.steps:     # the rate may change at a block or step boundary
                b0 = [l.block_at(t) for l in q.links]
                sl = starts[c::nb]
                for l, b in zip(q.links, b0):
                    moved = np.flatnonzero(l.block_at(sl) != b)
                    if moved.size:
                        cut = min(cut, int(moved[0]) * nb + c)
        assert cut >= 1
        rows, extra = divmod(cut, nb)
        for c, q in enumerate(busy):
            k = rows + (1 if c < extra else 0)
            if k == 0:
                continue
            pkt, bits, _, att, mask = q.pop(k)
            sel = slice(c, c + nb * k, nb)
            _apply(q, record(q, pkt, bits, att, mask, starts[sel], ends[sel], air[sel], stats))
        t = float(ends[cut - 1])
        last = busy[(cut - 1) % nb]
        rr = (queues.index(last) + 1) % nq
    medium.free_at = t


def _run_trace(medium: Medium, q: TxQueue, stats: dict) -> None:
    """One packet per delivery opportunity at or after it is ready; unused opportunities pass."""
    link = q.links[0]
    tr = link.trace
    while q.n:
        first = max(link.trace_next, tr.first_at_or_after(max(float(q.ready[0]), medium.free_at)))
        idx = first + np.arange(q.n)
        times = tr.time_s(idx)
        late = np.flatnonzero(q.ready > times)
        cut = int(late[0]) if late.size else q.n
        pkt, bits, _, att, mask = q.pop(cut)
        ts = times[:cut]
        _apply(q, record(q, pkt, bits, att, mask, ts, ts, np.zeros(cut), stats))
        link.trace_next = int(idx[cut - 1]) + 1
        medium.free_at = float(ts[-1])
