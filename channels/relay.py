"""The relay engine: multi-hop store-and-forward (relayed and routed unicast paths) without SimPy.

It implements the semantics of channels/state.py exactly as the per-packet SimPy engine does
(tests/channels/test_channels_relay.py holds them to identical reports), drop-tail relay queues
included, but as a tight loop over plain Python deques and heaps instead of SimPy events and
per-packet numpy calls:

- Each medium steps itself: at its decision time it first takes in the arrivals due by then
  (drop-tail check against the relay queue as it stands), then sends the head of the first
  backlogged transmitter in round robin order. A loss queues the retransmission (end + rto) on
  its own transmitter, FIFO by ready time. A successful hop queues the packet at the next relay,
  ready on arrival (end + delay), right away when that relay cannot be full by then, else as an
  arrival event that makes the drop-tail check when it is due.
- Several media advance in time order, conservatively: the medium that can act first runs as
  far as no other can reach it (the least chain of link delays from any other medium's next
  act), and no further than a retransmission a possible drop of its own packets could make
  ready (`_Med.guards`).
- Loss outcomes are peeked per link (the k-th transmission's outcome does not depend on when it
  starts, see LossProcess.indexed) and committed at the end; flows and link figures are
  accounted with numpy once per transmitter.

What it does not cover, and `auto` leaves to SimPy (`unsupported` says which): fading links
(outcomes and rates depend on the start time), trace links, a multicast transmitter in a
multi-hop call, and zero-delay hops (no lookahead between media).
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from channels.errors import DeliveryError
from channels.report import LinkStats
from channels.state import Medium, TxQueue

INF = float("inf")


def unsupported(media: dict) -> str | None:
    """Why the transmitters of this call cannot run on the relay engine (None: they can)."""
    for medium, queues in media.values():
        if medium.csma is not None:
            return "a CSMA cell"
        for q in queues:
            if len(q.links) != 1:
                return "a multicast transmitter"
            link = q.links[0]
            if link.trace is not None:
                return "a trace link"
            if link.fading is not None or not link.loss.indexed:
                return "a fading link"
            if link.delay_s <= 0:
                return "a zero-delay link"
            if q.n > 1 and np.any(np.diff(q.ready) < 0):
                return "a source whose packets are not in ready order"
    return None


class _Draws:
    """Peeked loss outcomes of one link, consumed in transmission order."""
    __slots__ = ("loss", "out", "pos")

    def __init__(self, loss, guess: int):
        self.loss, self.pos = loss, 0
        self.out = loss.peek(max(guess, 64)).tolist()

    def more(self) -> None:
        self.out = self.loss.peek(2 * len(self.out)).tolist()


class _Tx:
    """One transmitter (a flow's hop) in the engine's own lean form."""
    __slots__ = ("q", "link", "flow", "med", "main", "retx", "nxt", "prev", "nxt_med", "nxt_arrivals",
                 "nxt_back", "inflight", "done", "rate", "ack", "rto", "delay", "reliable", "limit",
                 "cap", "draws", "log", "drops")

    def __init__(self, q: TxQueue, draws: _Draws):
        self.q, self.link, self.flow = q, q.links[0], q.flows[0]
        self.main = deque(zip(q.ready.tolist(), q.pkt.tolist(), q.bits.tolist(), q.att.tolist()))
        self.retx: list = []    # heap of (ready, seq, pkt, bits, attempt)
        self.nxt = self.prev = self.med = self.nxt_med = self.nxt_arrivals = None
        self.nxt_back = INF     # least time from an act of the next hop's medium back to ours
        self.inflight = 0       # packets on their way to this relay queue
        self.done = -1          # sequence number of the last arrival taken in (or dropped)
        self.rate = self.link.spec.rate_bps * q.share
        self.ack = q.ack_bits
        self.rto, self.delay = q.rto_s, self.link.delay_s
        self.reliable, self.limit, self.cap = q.reliable, q.retry_limit, q.queue_packets
        self.draws = draws
        self.log: list = []     # (pkt, attempt, end, lost, bits) per transmission
        self.drops: list = []   # (pkt, arrival) of this hop's packets dropped at the next relay


class _Med:
    def __init__(self, medium: Medium, txs: list[_Tx], idx: int):
        self.medium, self.txs, self.idx = medium, txs, idx
        self.t = medium.free_at
        self.rr = 0
        self.arrivals: list = []    # heap of (time, seq, relay _Tx, pkt, bits, upstream end, attempt)
        self.last_end = None
        # (time, seq, relay): a packet this medium sent that the relay may drop, which would make
        # its retransmission ready here at `time`; kept until the relay has taken it in.
        self.guards: list = []

    def next_time(self) -> float:
        """The earliest instant this medium can act: an arrival due, or a decision."""
        h = INF
        for x in self.txs:
            if x.main and x.main[0][0] < h:
                h = x.main[0][0]
            if x.retx and x.retx[0][0] < h:
                h = x.retx[0][0]
        d = max(self.t, h) if h < INF else INF
        return min(d, self.arrivals[0][0]) if self.arrivals else d


class _Engine:
    def __init__(self, dist: list):
        self.seq = 0
        self.dist = dist            # dist[i][j]: least time for an act of medium i to reach j
        self.touched: set = set()   # other media that received a packet or a retransmission

    def arrive(self, entry, me: _Med) -> float:
        """A packet reaches relay queue R: queue it, or drop it (a loss on the hop before).
        Returns the earliest time the consequence can reach `me` back (INF: none)."""
        a, _, r, pkt, bits, end, att = entry
        n = len(r.main)
        if r.retx and n + len(r.retx) >= r.cap:
            n += sum(1 for e in r.retx if e[0] <= a)
        if n < r.cap:
            r.main.append((a, pkt, bits, 0))
            return INF
        u = r.prev
        u.drops.append((pkt, a))
        if not u.reliable:
            return INF
        if att + 1 > u.limit:
            raise DeliveryError(u.flow.src, u.flow.dst, pkt, att + 1, end)
        ready = end + u.rto
        heapq.heappush(u.retx, (ready, self.seq, pkt, bits, att + 1))
        self.seq += 1
        if u.med is not me:
            self.touched.add(u.med)
            return ready + self.dist[u.med.idx][me.idx]
        return INF

    def run(self, m: _Med, bound: float) -> None:
        """Act on medium m at every instant before `bound` (lowered as m hands packets on).

        The hot loop of the engine: plain locals, the common cases inline."""
        txs, nq, arrivals = m.txs, len(m.txs), m.arrivals
        t, rr, seq = m.t, m.rr, self.seq
        push, pop = heapq.heappush, heapq.heappop
        guards = m.guards
        while guards and guards[0][2].done >= guards[0][1]:
            pop(guards)
        if guards and guards[0][0] < bound:
            bound = guards[0][0]
        try:
            while True:
                # Arrivals first: the medium may still be busy (t) past one that is due.
                while arrivals and arrivals[0][0] <= t and arrivals[0][0] < bound:
                    entry = pop(arrivals)
                    r = entry[2]
                    r.inflight -= 1
                    r.done = entry[1]
                    if len(r.main) + len(r.retx) < r.cap:      # room for sure: no drop
                        r.main.append((entry[0], entry[3], entry[4], 0))
                        continue
                    self.seq = seq
                    back = self.arrive(entry, m)
                    seq = self.seq
                    if back < bound:
                        bound = back
                if t >= bound:
                    break
                pick = None
                for i in range(nq):
                    x = txs[(rr + i) % nq]
                    main, retx = x.main, x.retx
                    if (main and main[0][0] <= t) or (retx and retx[0][0] <= t):
                        pick, rr = x, (rr + i + 1) % nq
                        break
                if pick is None:
                    h = INF
                    for x in txs:
                        if x.main and x.main[0][0] < h:
                            h = x.main[0][0]
                        if x.retx and x.retx[0][0] < h:
                            h = x.retx[0][0]
                    nt = max(t, h) if h < INF else INF
                    if arrivals and arrivals[0][0] < nt:
                        nt = arrivals[0][0]
                    if nt >= bound:
                        break
                    t = nt
                    continue
                x = pick
                if retx and (not main or retx[0][0] <= main[0][0]):
                    _, _, pkt, bits, att = pop(retx)
                else:
                    _, pkt, bits, att = main.popleft()
                end = t + (bits + x.ack) / x.rate
                dr = x.draws
                k = dr.pos
                if k >= len(dr.out):
                    dr.more()
                lost = dr.out[k]
                dr.pos = k + 1
                x.log.append((pkt, att, end, lost, bits))
                t = end
                if lost:
                    if x.reliable:
                        if att + 1 > x.limit:
                            raise DeliveryError(x.flow.src, x.flow.dst, pkt, att + 1, end)
                        push(retx, (end + x.rto, seq, pkt, bits, att + 1))
                        seq += 1
                elif x.nxt is not None:
                    a = end + x.delay
                    r = x.nxt
                    # Everything that could be waiting there when it arrives: queued, on its way,
                    # or sent on but possibly dropped further on and handed back.
                    room = r.cap - len(r.main) - len(r.retx) - r.inflight
                    if r.nxt is not None:
                        room -= r.nxt.inflight
                    if room > 0 and not r.inflight:
                        r.main.append((a, pkt, bits, 0))    # cannot be dropped: ready on arrival
                    else:
                        push(x.nxt_arrivals, (a, seq, r, pkt, bits, end, att))
                        r.inflight += 1
                        if x.nxt_med is not m:
                            # may be dropped there and handed back: ready here again at end + rto
                            push(guards, (end + x.rto, seq, r))
                            if end + x.rto < bound:
                                bound = end + x.rto
                        seq += 1
                    if x.nxt_med is not m:
                        self.touched.add(x.nxt_med)
                        if a + x.nxt_back < bound:
                            bound = a + x.nxt_back
        finally:
            m.t, m.rr, self.seq = t, rr, seq
            if m.txs and any(x.log for x in txs):
                m.last_end = max(x.log[-1][2] for x in txs if x.log)


def run(media: dict, stats: dict) -> None:
    """Run one call's transmitters (as built by Network._run) to completion; fills `stats`."""
    draws: dict = {}
    by_queue: dict = {}
    meds = []
    for medium, queues in media.values():
        txs = []
        for q in queues:
            link = q.links[0]
            if id(link) not in draws:
                draws[id(link)] = _Draws(link.loss, 2 * q.n)
            x = _Tx(q, draws[id(link)])
            by_queue[id(q)] = x
            txs.append(x)
        m = _Med(medium, txs, len(meds))
        for x in txs:
            x.med = m
        meds.append(m)
    for x in by_queue.values():
        if x.q.next is not None:
            x.nxt = by_queue[id(x.q.next)]
            x.nxt.prev = x
            x.nxt_med, x.nxt_arrivals = x.nxt.med, x.nxt.med.arrivals
    dist = _lookahead(meds)
    for x in by_queue.values():
        if x.nxt is not None:
            x.nxt_back = dist[x.nxt_med.idx][x.med.idx]
    eng = _Engine(dist)
    try:
        if len(meds) == 1:
            eng.run(meds[0], INF)
        else:
            _run_in_time_order(eng, meds)
    finally:
        for d in draws.values():
            if d.pos:
                d.loss.skip(d.pos)
        for m in meds:
            if m.last_end is not None:
                m.medium.free_at = m.last_end
    for x in by_queue.values():
        _account(x, stats)


def _lookahead(meds: list[_Med]) -> list:
    """Least time from an act of medium i to an effect on medium j, over chains of hops (a packet
    sent on i arrives on j's relay a delay later). A drop at a relay only ever returns the packet
    to the medium that sent it, which bounds itself for that when it sends (`_Engine.run`)."""
    n = len(meds)
    d = np.full((n, n), INF)
    for m in meds:
        for x in m.txs:
            if x.nxt is not None and x.nxt_med is not m:
                i, j = m.idx, x.nxt_med.idx
                d[i, j] = min(d[i, j], x.delay)
    for k in range(n):      # Floyd-Warshall; a call has tens of media at most
        d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
    return d.tolist()


def _run_in_time_order(eng: _Engine, meds: list[_Med]) -> None:
    """Always advance the medium that can act first, as far as no other can reach it."""
    dist = np.array(eng.dist)
    np.fill_diagonal(dist, INF)
    nt = np.array([m.next_time() for m in meds])
    heap = [(nt[m.idx], m.idx) for m in meds]
    heapq.heapify(heap)
    while heap:
        t, i = heapq.heappop(heap)
        if t != nt[i]:
            continue            # stale entry
        if t == INF:
            break
        m = meds[i]
        eng.touched.clear()
        eng.run(m, float(np.min(nt + dist[:, i])))
        for o in [m, *eng.touched]:
            t2 = o.next_time()
            if t2 != nt[o.idx] or o is m:
                nt[o.idx] = t2
                heapq.heappush(heap, (t2, o.idx))


def _account(x: _Tx, stats: dict) -> None:
    """What `state.record` does per transmission, for all of this transmitter's at once."""
    if not x.log:
        return
    a = np.array(x.log, dtype=float)
    pkt, att = a[:, 0].astype(np.int64), a[:, 1].astype(np.int64)
    ends, lost, bits = a[:, 2], a[:, 3].astype(bool), a[:, 4]
    air = (bits + x.ack) / x.rate      # the same division the loop did, element by element
    wire = (bits / 8).astype(np.int64)
    link, flow, q = x.link, x.flow, x.q
    st = stats.setdefault((link.u, link.v), LinkStats())
    st.packets += pkt.size
    st.bytes += int(wire.sum())
    st.lost += int(lost.sum()) + len(x.drops)
    st.retransmitted += int((att > 0).sum())
    st.busy_s += float(air.sum())
    if q.ack_bits and link.v is not None:
        rst = stats.setdefault((link.v, link.u), LinkStats())
        rst.bytes += int((~lost).sum()) * q.ack_bits // 8
    if q.first_hop:
        flow.sent += pkt.size
        flow.retrans += int((att > 0).sum())
        flow.bytes += int(wire.sum())
    flow.lost_any += int(lost.sum()) + len(x.drops)
    arr = ends + link.delay_s
    if q.next is None:
        ok = ~lost
        flow.arrived[pkt[ok]] = True
        flow.arrival_s[pkt[ok]] = arr[ok]
        np.maximum.at(flow.last_s, pkt, arr)
    elif not q.reliable:
        np.maximum.at(flow.last_s, pkt[lost], arr[lost])
        if x.drops:
            d = np.array(x.drops, dtype=float)
            np.maximum.at(flow.last_s, d[:, 0].astype(np.int64), d[:, 1])
