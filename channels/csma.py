"""802.11 DCF basic access on a shared cell (`sharing = "csma"`), for both engines.

Every node that transmits on the cell in a call (the access point included) is one station
with one transmit queue (its frames first-in first-out by ready time). The model is Bianchi's
(IEEE JSAC 18(3), 2000), so his saturation analysis applies to it:

- Time on the cell is a sequence of slot boundaries: the end of every busy period, then one
  every `slot_us` while the medium stays idle. A busy period ends with its DIFS.
- A station takes a frame into service at the first boundary at least DIFS after the frame was
  ready, and draws its backoff counter uniformly in [0, CW] from its own random stream (seeded
  by the Network's generator). At each boundary a station whose counter is 0 transmits; every
  other contender decrements its counter by one. So the counter is frozen while the medium is
  busy: a busy period counts as one boundary, like an idle slot.
- One transmitter: DATA = phy_header + frame bits / rate (the link's rate at the start).
  If the loss model keeps the frame, the receiver acknowledges it: the medium is held for
  DATA + SIFS + ACK + DIFS, ACK = phy_header + ack_bytes * 8 / rate. If the loss model drops it,
  no ACK comes: DATA + DIFS, a failure. Two or more transmitters collide: all fail, the medium
  is held for the longest DATA + DIFS (collided frames draw nothing from the loss model).
- CW starts at cw_min, becomes min(2 (CW + 1) - 1, cw_max) after each failure and returns to
  cw_min with the next frame. A frame that fails `retry_limit` + 1 times is dropped by the MAC;
  the link's delivery then decides: reliable delivery queues it again (ARQ, ready a
  retransmission timeout after the failed DATA ended), best effort reports it lost.
- Group frames (the access point's broadcast) are sent once without ACK and without MAC
  retries (DATA + DIFS); receivers that missed them get ARQ's repairs as before.
- The MAC's ACK replaces the link's own `ack_bytes` airtime on the cell.

The SimPy engine (`sim_medium`, the reference) visits every boundary and counts down, calling
`Cell.attempt` for the outcome of every attempt. The fast engine (`channels/csma_fast.py`) jumps
from attempt to attempt in a compiled loop that records the same attempt rows; `Cell.finish`
turns either's rows into link and flow figures.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from channels.errors import DeliveryError
from channels.loss import NoLoss
from channels.randomness import Prefetch, Stream
from channels.report import LinkStats

OK, LOST, COLLIDED = 0, 1, 2


@dataclass(frozen=True)
class CsmaParams:
    slot_s: float = 9e-6
    sifs_s: float = 16e-6
    difs_s: float = 34e-6
    phy_header_s: float = 20e-6
    cw_min: int = 15
    cw_max: int = 1023
    ack_bytes: int = 14
    retry_limit: int = 7

    @classmethod
    def from_table(cls, t: dict | None) -> "CsmaParams":
        """From a validated `[network.csma]` table (times in microseconds)."""
        if not t:
            return cls()
        return cls(t["slot_us"] * 1e-6, t["sifs_us"] * 1e-6, t["difs_us"] * 1e-6,
                   t["phy_header_us"] * 1e-6, t["cw_min"], t["cw_max"], t["ack_bytes"], t["retry_limit"])

    def cw(self, stage: int) -> int:
        return min((self.cw_min + 1) * 2 ** stage - 1, self.cw_max)


def first_boundary(base: float, x: float, slot: float) -> int:
    """The smallest j >= 0 with base + j * slot >= x (boundary times are always base + j * slot,
    computed the same way by both engines so they agree to the last bit)."""
    if x <= base:
        return 0
    j = int(math.ceil((x - base) / slot))
    while j > 0 and base + (j - 1) * slot >= x:
        j -= 1
    while base + j * slot < x:
        j += 1
    return j


class _LossCursor:
    """The loss model's outcomes one attempt at a time: peeked in blocks where time plays no
    part (`LossProcess.indexed`), drawn at the attempt's start otherwise (fading)."""

    def __init__(self, link):
        loss = link.loss
        self.none = isinstance(loss, NoLoss)
        self.pre = Prefetch(loss.peek, loss.skip) if loss.indexed and not self.none else None
        self.loss = loss

    def lost(self, t: float) -> bool:
        if self.none:
            return False
        if self.pre is not None:
            return self.pre.next()
        return bool(self.loss.draw(np.array([t]))[0])

    def close(self) -> None:
        if self.pre is not None:
            self.pre.close()


class Frame:
    """A frame in a station's hands: its queue, packet, wire bits, ready time, ARQ attempt,
    receivers still to reach (group frames only; None for unicast) and MAC stage."""
    __slots__ = ("qi", "pkt", "bits", "ready", "att", "mask", "stage")

    def __init__(self, qi, pkt, bits, ready, att, mask):
        self.qi, self.pkt, self.bits, self.ready, self.att, self.mask = qi, pkt, bits, ready, att, mask
        self.stage = 0


def prepare(queues) -> None:
    """Each transmitter queue in first-in first-out order by ready time (stable)."""
    for q in queues:
        if q.n > 1 and np.any(np.diff(q.ready) < 0):
            o = np.argsort(q.ready, kind="stable")
            q.pkt, q.bits, q.ready, q.att, q.mask = q.pkt[o], q.bits[o], q.ready[o], q.att[o], q.mask[o]


def station_nodes(queues) -> list:
    """The cell's stations: the queues' transmitting nodes, in order of first appearance."""
    nodes = []
    for q in queues:
        if q.links[0].u not in nodes:
            nodes.append(q.links[0].u)
    return nodes


class Cell:
    """One call's CSMA state on a medium: parameters, random streams, and the outcome of every
    attempt (recorded as rows, turned into link and flow figures by `finish`)."""

    def __init__(self, medium, queues, stats: dict):
        self.p: CsmaParams = medium.csma
        self.medium, self.queues, self.stats = medium, queues, stats
        self.nodes = station_nodes(queues)
        self.station_of = [self.nodes.index(q.links[0].u) for q in queues]
        streams = medium.csma_streams
        for n in self.nodes:
            if n not in streams:
                streams[n] = Stream([*medium.csma_seed, zlib.crc32(str(n).encode())])
        self.backoff_u = [Prefetch(streams[n].peek, streams[n].take) for n in self.nodes]
        self.cursors = {}
        for q in queues:
            for link in q.links:
                if id(link) not in self.cursors:
                    self.cursors[id(link)] = _LossCursor(link)
        self.qcur = [[self.cursors[id(l)] for l in q.links] for q in queues]
        self.fixed_rate = [None if q.fading else min(l.spec.rate_bps for l in q.links) for q in queues]
        self.multicast = [len(q.links) > 1 for q in queues]
        self.ack_bits = 8.0 * self.p.ack_bytes
        # rows: queue, link index, packet, bits, start, data end, airtime, outcome, ARQ attempt, MAC stage
        self.rows: list[tuple] = []

    def close(self) -> None:
        for b in self.backoff_u:
            b.close()
        for c in self.cursors.values():
            c.close()

    def backoff(self, sid: int, stage: int) -> int:
        return int(self.backoff_u[sid].next() * (self.p.cw(stage) + 1))

    def rate(self, qi: int, t: float) -> float:
        r = self.fixed_rate[qi]
        return r if r is not None else min(l.rate_at(t) for l in self.queues[qi].links)

    def attempt(self, t: float, frames: list) -> tuple[float, list]:
        """Transmit `frames` (one per station) at boundary time t. Returns the busy period's
        length (DIFS included) and, per frame, (done, follow): done = the station is finished
        with it; follow = ARQ / forwarding items as `state.record` returns them."""
        p = self.p
        rows = self.rows
        datas = []
        for f in frames:
            r = self.rate(f.qi, t)
            datas.append((p.phy_header_s + f.bits / r, r))
        out = []
        if len(frames) > 1:
            hold = max(d for d, _ in datas) + p.difs_s
            for f, (d, _) in zip(frames, datas):
                lost = [0] if f.mask is None else np.flatnonzero(f.mask).tolist()
                for k in lost:
                    rows.append((f.qi, k, f.pkt, f.bits, t, t + d, d, COLLIDED, f.att, f.stage))
                out.append(self._failed(f, lost, t + d))
            return hold, out
        f = frames[0]
        d, r = datas[0]
        if self.multicast[f.qi]:
            lost = []
            for k in np.flatnonzero(f.mask).tolist():
                bad = self.qcur[f.qi][k].lost(t)
                rows.append((f.qi, k, f.pkt, f.bits, t, t + d, d, LOST if bad else OK, f.att, 0))
                if bad:
                    lost.append(k)
            return d + p.difs_s, [self._failed(f, lost, t + d) if lost else (True, self._delivered(f, t + d))]
        if self.qcur[f.qi][0].lost(t):
            rows.append((f.qi, 0, f.pkt, f.bits, t, t + d, d, LOST, f.att, f.stage))
            return d + p.difs_s, [self._failed(f, [0], t + d)]
        ack = p.phy_header_s + self.ack_bits / r
        rows.append((f.qi, 0, f.pkt, f.bits, t, t + d, d + p.sifs_s + ack, OK, f.att, f.stage))
        return d + p.sifs_s + ack + p.difs_s, [(True, self._delivered(f, t + d))]

    def _delivered(self, f: Frame, end: float) -> list:
        q = self.queues[f.qi]
        if q.next is None:
            return []
        arr = end + q.links[0].delay_s
        return [("fwd", np.array([f.pkt]), np.array([f.bits]), np.array([arr]), np.array([end]),
                 np.array([f.att]))]

    def _failed(self, f: Frame, lost_links: list, end: float) -> tuple[bool, list]:
        """A failed attempt: retry (stage + 1) while the MAC may, else hand the frame to ARQ."""
        q = self.queues[f.qi]
        if not self.multicast[f.qi] and f.stage < self.p.retry_limit:
            f.stage += 1
            return False, []
        if not q.reliable:
            if q.next is not None:  # best effort: the packet's fate is known now
                fl = q.flows[0]
                fl.last_s[f.pkt] = max(fl.last_s[f.pkt], end + q.links[0].delay_s)
            return True, []
        if f.att + 1 > q.retry_limit:
            k = lost_links[0]
            raise DeliveryError(q.flows[k].src, q.flows[k].dst, int(f.pkt), int(f.att) + 1, float(end))
        mask = np.zeros((1, len(q.links)), bool)
        mask[0, lost_links] = True
        return True, [("retx", np.array([f.pkt]), np.array([f.bits]), np.array([end + q.rto_s]),
                       np.array([f.att + 1]), mask)]

    def finish(self, cols=None) -> None:
        """Turn the attempt rows into link statistics and flow figures (vectorised). `cols`: the
        rows as columns (the fast engine's), else `self.rows`."""
        if cols is None:
            if not self.rows:
                return
            cols = list(zip(*self.rows))
        elif not len(cols[0]):
            return
        qi, k, pkt = (np.array(c, dtype=np.int64) for c in cols[:3])
        bits, start, end, air = (np.array(c, dtype=float) for c in cols[3:7])
        code, att, stage = (np.array(c, dtype=np.int64) for c in cols[7:])
        wire = (bits / 8).astype(np.int64)
        # rows grouped by (queue, link), each group in attempt order
        kmax = max(len(q.links) for q in self.queues)
        key = qi * kmax + k
        order = np.argsort(key, kind="stable")
        bounds = np.searchsorted(key[order], np.arange(len(self.queues) * kmax + 1))
        for i, q in enumerate(self.queues):
            for kk, link in enumerate(q.links):
                sel = order[bounds[i * kmax + kk]:bounds[i * kmax + kk + 1]]
                if not sel.size:
                    continue
                ok = sel[code[sel] == OK]
                st = self.stats.setdefault((link.u, link.v), LinkStats())
                st.packets += sel.size
                st.bytes += int(wire[sel].sum())
                st.lost += int((code[sel] == LOST).sum())
                st.collisions += int((code[sel] == COLLIDED).sum())
                st.retries += int((stage[sel] > 0).sum())
                st.retransmitted += int((att[sel] > 0).sum())
                st.busy_s += float(air[sel].sum())
                if link.fading is not None:   # as state.record: the SNR each attempt started in
                    st.snr_db_sum += float((10 * np.log10(link.fading.snr(start[sel]))).sum())
                    st.snr_samples += sel.size
                if not self.multicast[i] and link.v is not None and ok.size:
                    rst = self.stats.setdefault((link.v, link.u), LinkStats())
                    rst.bytes += ok.size * self.p.ack_bytes
                flow = q.flows[kk]
                if q.first_hop:
                    flow.sent += sel.size
                    flow.retrans += int(((att[sel] > 0) | (stage[sel] > 0)).sum())
                    flow.bytes += int(wire[sel].sum())
                flow.lost_any += int((code[sel] != OK).sum())
                if q.next is None:
                    arr = end[ok] + link.delay_s
                    flow.arrived[pkt[ok]] = True
                    flow.arrival_s[pkt[ok]] = arr
                    np.maximum.at(flow.last_s, pkt[sel], end[sel] + link.delay_s)


def sim_medium(engine, medium, queues, stats: dict):
    """The SimPy engine's process for a CSMA cell: visits every slot boundary, counts down."""
    env = engine.env
    prepare(queues)
    cell = Cell(medium, queues, stats)
    p = cell.p
    slot, difs = p.slot_s, p.difs_s
    mine = [[i for i, s in enumerate(cell.station_of) if s == sid] for sid in range(len(cell.nodes))]
    current: list = [None] * len(mine)     # [frame, counter] of a contending station
    base, j = medium.free_at, 0            # boundary time = base + j * slot

    def head(sid):
        best = None
        for i in mine[sid]:
            q = queues[i]
            if q.n and (best is None or q.ready[0] < queues[best].ready[0]):
                best = i
        return best

    engine.cells.append(cell)   # closed and finished after env.run(): this process may never end
    while engine.error is None:
        t = base + j * slot
        if t > env.now:
            yield env.timeout(t - env.now)
        for sid in range(len(mine)):
            if current[sid] is None:
                i = head(sid)
                if i is not None and queues[i].ready[0] + difs <= t:
                    pkt, bits, ready, att, mask = queues[i].pop(1)
                    f = Frame(i, int(pkt[0]), float(bits[0]), float(ready[0]), int(att[0]),
                              mask[0] if cell.multicast[i] else None)
                    current[sid] = [f, cell.backoff(sid, 0)]
        tx = [sid for sid in range(len(mine)) if current[sid] is not None and current[sid][1] == 0]
        for sid in range(len(mine)):
            if current[sid] is not None and current[sid][1] > 0:
                current[sid][1] -= 1
        if tx:
            try:
                hold, outs = cell.attempt(t, [current[s][0] for s in tx])
            except DeliveryError as e:
                engine._fail(e)
                return
            base, j = t + hold, 0
            medium.free_at = base
            for s, (done, follow) in zip(tx, outs):
                f = current[s][0]
                for item in follow:
                    if item[0] == "retx":
                        queues[f.qi].insert(*item[1:])
                    else:
                        engine._follow(queues[f.qi], [item], stats)
                current[s] = None if done else [f, cell.backoff(s, f.stage)]
            continue
        if any(c is not None for c in current):
            j += 1
            continue
        # Nobody contends: sleep until the first boundary a frame can be taken at, or until
        # a relay hands this cell a packet.
        heads = [queues[i].ready[0] for sid in range(len(mine)) for i in [head(sid)] if i is not None]
        ev = engine.wake[id(medium)] = env.event()
        if heads:
            jt = first_boundary(base, min(heads) + difs, slot)
            target = base + jt * slot
            yield env.timeout(max(target - env.now, 0.0)) | ev
            j = jt if env.now >= target or not ev.triggered else first_boundary(base, env.now, slot)
        else:
            yield ev
            j = first_boundary(base, env.now, slot)
