"""The per-packet engine: every transmission is a SimPy event.

It is the reference the fast engines are checked against (channels/fast.py single-hop,
channels/relay.py multi-hop), and the engine for what they do not cover. Each medium is one
SimPy process that picks the next backlogged transmitter (round robin) at the time it becomes
free, holds the medium for the packet's airtime and records the outcome; arrivals at relays are
timed callbacks, run before any medium decides at the same instant.
"""
from __future__ import annotations

import numpy as np
import simpy
from simpy.events import URGENT

from channels import csma
from channels.errors import DeliveryError
from channels.report import LinkStats
from channels.state import Medium, TxQueue, record


class SimEngine:
    def __init__(self, t0: float):
        self.env = simpy.Environment(initial_time=t0)
        self.wake: dict[int, simpy.Event] = {}
        self.error: BaseException | None = None
        self.cells: list = []       # CSMA cells of this run, finished after it

    def _fail(self, error: BaseException) -> None:
        """Keep the first failure in virtual time: events already scheduled (arrivals at relays)
        still run after it and may fail too."""
        if self.error is None:
            self.error = error

    def _wake(self, medium: Medium) -> None:
        ev = self.wake.get(id(medium))
        if ev is not None and not ev.triggered:
            ev.succeed()

    def run(self, media: dict, stats: dict) -> None:
        for medium, queues in media.values():
            if medium.csma is not None:
                self.env.process(csma.sim_medium(self, medium, queues, stats))
            else:
                self.env.process(self._medium(medium, queues, stats))
        try:
            self.env.run()
        finally:
            for cell in self.cells:
                cell.close()
        if self.error is not None:
            raise self.error
        for cell in self.cells:
            cell.finish()

    def _follow(self, q: TxQueue, follow: list, stats: dict) -> None:
        for item in follow:
            if item[0] == "retx":
                q.insert(*item[1:])
                continue
            _, pkt, bits, arr, ends, att = item
            for i in range(pkt.size):
                # Urgent: an arrival at time T is queued before any medium decides at T.
                ev = simpy.Event(self.env)
                ev._ok, ev._value = True, None
                self.env.schedule(ev, URGENT, max(float(arr[i]) - self.env.now, 0.0))
                ev.callbacks.append(self._arrival(q, int(pkt[i]), float(bits[i]), float(arr[i]),
                                                  float(ends[i]), int(att[i]), stats))

    def _arrival(self, q: TxQueue, pkt: int, bits: float, arr: float, end: float, att: int, stats):
        def at_relay(_ev):
            nxt = q.next
            waiting = int(np.sum(nxt.ready <= arr))
            if waiting >= nxt.queue_packets:  # drop-tail at the relay: a loss on this hop
                link, flow = q.links[0], q.flows[0]
                stats.setdefault((link.u, link.v), LinkStats()).lost += 1
                flow.lost_any += 1
                if q.reliable:
                    if att + 1 > q.retry_limit:
                        self._fail(DeliveryError(flow.src, flow.dst, pkt, att + 1, end))
                        return
                    q.insert(np.array([pkt]), np.array([bits]), np.array([end + q.rto_s]),
                             np.array([att + 1]), np.ones((1, 1), bool))
                    self._wake(q.medium)
                else:
                    flow.last_s[pkt] = max(flow.last_s[pkt], arr)
                return
            nxt.insert(np.array([pkt]), np.array([bits]), np.array([arr]), np.array([0]),
                       np.ones((1, 1), bool))
            self._wake(nxt.medium)
        return at_relay

    def _medium(self, medium: Medium, queues: list[TxQueue], stats: dict):
        env = self.env
        t = medium.free_at
        rr, nq = 0, len(queues)
        while self.error is None:
            if t > env.now:  # decide at t itself, having seen every arrival up to t
                yield env.timeout(t - env.now)
            pick = None
            for i in range(nq):
                q = queues[(rr + i) % nq]
                if q.n and q.ready[0] <= t:
                    pick = q
                    break
            if pick is None:
                heads = [float(q.ready[0]) for q in queues if q.n]
                ev = self.wake[id(medium)] = env.event()
                if heads:
                    target = max(t, min(heads))
                    yield env.timeout(max(target - env.now, 0.0)) | ev
                    if env.now >= target or not ev.triggered:
                        t = target
                    else:
                        t = max(t, env.now)
                else:
                    yield ev  # idle until a relay hands this medium a packet
                    t = max(t, env.now)
                continue
            q = pick
            pkt, bits, _, att, mask = q.pop(1)
            if q.trace is not None:
                link = q.links[0]
                k = max(link.trace_next, link.trace.first_at_or_after(t))
                start = end = float(link.trace.time_s(k))
                link.trace_next = k + 1
                air = np.zeros(1)
            else:
                air = q.airtime(bits, mask, q.rate_at(t))
                start, end = t, t + float(air[0])
            if end > env.now:
                yield env.timeout(end - env.now)
            try:
                follow = record(q, pkt, bits, att, mask, np.array([start]), np.array([end]), air, stats)
            except Exception as e:  # surface DeliveryError from env.run()
                self._fail(e)
                return
            self._follow(q, follow, stats)
            t = end
            medium.free_at = end
            rr = (queues.index(q) + 1) % nq
