"""The relay engine: multi-hop store-and-forward (relayed and routed unicast paths) without SimPy.

It implements the semantics of channels/state.py exactly as the per-packet SimPy engine does
(tests/channels/test_channels_relay.py holds them to identical reports, float for float), drop-tail
relay queues included, as one loop compiled with numba (`_drive`) over flat arrays:

- Each medium steps itself: at its decision time it first takes in the arrivals due by then
  (drop-tail check against the relay queue as it stands), then sends the head of the first
  backlogged transmitter in round robin order. A loss queues the retransmission (end + rto) on
  its own transmitter, FIFO by ready time. A successful hop queues the packet at the next relay,
  ready on arrival (end + delay), right away when that relay cannot be full by then, else as an
  arrival event that makes the drop-tail check when it is due.
- Several media advance in time order, conservatively: the medium that can act first runs as
  far as no other can reach it (the least chain of link delays from any other medium's next
  act), and no further than a retransmission a possible drop of its own packets could make
  ready (the medium's guards).
- Loss outcomes are peeked per link (the k-th transmission's outcome does not depend on when it
  starts, see LossProcess.indexed) and committed at the end; when a link runs out of peeked
  outcomes the loop stops where it stands, more are peeked, and it resumes.
- Flow and link figures are accumulated per transmission in the loop, in transmission order, so
  even the summed airtime (`busy_s`) is the SimPy engine's float.

State lives in tables with named columns (`_State`): per transmitter a FIFO of new data (`MQ*`,
fixed slots: a packet enters a hop's FIFO at most once) and a heap of retransmissions (`R*`); per
medium a heap of arrivals due at its relays (`A*`) and of guards (`G*`); heaps order by (time,
sequence number), as the Python tuples of the interpreted loop before it did. The loop reads the
tables into locals once per medium step: numba counts references at every read of an array from
a tuple, which in the hot loop cost more than the work.

What it does not cover, and `auto` leaves to SimPy (`unsupported` says which): fading links
(outcomes and rates depend on the start time), trace links, a multicast transmitter in a
multi-hop call, and zero-delay hops (no lookahead between media). A link's rate steps (a
device's own rate) are covered: the rate in force at each transmission's start.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from channels.jit_heap import pop as _heap_pop, sift_down as _sift_down, sift_up as _sift_up

from channels.errors import DeliveryError
from channels.rate_steps import step_rate, valid_until
from channels.report import LinkStats

INF = float("inf")
DONE, NEED_DRAWS, GAVE_UP = 0, 1, 2
# Loss outcomes peeked per link before the loop starts: PEEK per packet it will carry (at least
# MIN_PEEK); the loop asks for more when they run out (tests shrink these to make it ask often).
PEEK, MIN_PEEK = 2, 64

# Columns of the state's tables (`_State`).
# X, per transmitter (ints): its medium, next hop's and previous hop's transmitter (-1: none),
# link, flow, first hop?, reliable?, ARQ retry limit, relay queue capacity, packets on their way
# to it, sequence number of the last arrival it took in, its slots' offset (FIFO and heap), the
# FIFO's head and tail, the heap's size.
MED, NXT, PREV, LINK, FLOW, FIRST, RELIABLE, LIMIT, CAP, INFLIGHT, DONE_SEQ, MOFF, MHEAD, MTAIL, RSIZE = range(15)
# XF, per transmitter (floats): rate, ACK bits, retransmission timeout, delay, least time from
# an act of the next hop's medium back to this one's.
RATE, ACK, RTO, DELAY, NXT_BACK = range(5)
# MI, per medium (ints): round robin position, its transmitters [TX0, TX1), arrival heap and
# guard heap (offset, size; guards' capacity), touched by another medium's step.
RR, TX0, TX1, AOFF, ASIZE, GOFF, GSIZE, GCAP, TOUCHED = range(9)
# MF, per medium (floats): decision time, end of its last transmission (nan: none), next act.
MT, LAST_END, NT = range(3)
# DI, per link: peeked loss outcomes in `dout` (offset, count, used). LI: link figures (LF: busy s).
DOFF, DLEN, DPOS = range(3)
PACKETS, BYTES, LOST, RETX, ACKED = range(5)
# FI, per flow: offset of its packets in FP / arrived, then its figures. FP: arrival, last.
FOFF, SENT, FRETX, FBYTES, FLOST = range(5)
ARRIVAL, LAST = range(2)
# eng: sequence counter, medium being run (-1: none, -2: not started), link short of outcomes,
# and what DeliveryError needs (transmitter, packet, attempt). engf: the bound of the medium
# being run, the failed transmission's end, and when the give-up happens (INF: none yet): the
# transmission's end for a channel loss, the arrival for a drop at a relay, as SimPy meets them.
SEQ, CUR, NEED, ERR_TX, ERR_PKT, ERR_ATT = range(6)
BOUND, ERR_END, ERR_AT = range(3)

# Heaps are rows of a float table F and an int table I, keyed by (F[., 0], I[., 0]) = (time,
# sequence number): retransmissions RF (ready, bits) / RI (seq, packet, attempt) in each
# transmitter's slots; arrivals due at a medium's relays AF (time, bits, upstream end) / AI
# (seq, relay, packet, attempt); guards GF (time) / GI (seq, relay). New data waits in each
# transmitter's FIFO MQF (ready, bits) / MQI (packet, attempt).
_State = namedtuple("_State", ["X", "XF", "MQF", "MQI", "RF", "RI", "MI", "MF", "dist", "AF", "AI", "GF",
                               "GI", "DI", "dout", "LI", "LF", "FI", "FP", "arrived", "eng", "engf"])

# Links whose rate steps over time (channels/rate_steps.py) come as a second argument, `steps`:
# None when no transmitter of the call has any (numba then compiles the check away, so the
# constant-rate loop is the one it always was), else (SI, SF, rows): per transmitter its steps'
# first row and count (SI: SOFF, SN), its share of the rate, the steps' period and until when
# the rate in force, cached in XF[x, RATE], holds (SF: SHARE, PERIOD, UNTIL; INF: constant);
# rows: (breakpoint s, rate bit/s).
SOFF, SN = range(2)
SHARE, PERIOD, UNTIL = range(3)
_step_rate = njit(cache=True)(step_rate)    # the SimPy engine's arithmetic, compiled
_valid_until = njit(cache=True)(valid_until)


@njit(cache=True)
def _restep(XF, steps, x, t):
    """Transmitter x's rate at t (LinkState.rate_at x share, as SimPy computes it) and until
    when it holds (a medium's clock only moves forward)."""
    SI, SF, rows = steps
    so, sn = SI[x, SOFF], SI[x, SN]
    XF[x, RATE] = _step_rate(rows[so:so + sn, 0], rows[so:so + sn, 1], SF[x, PERIOD], t) * SF[x, SHARE]
    SF[x, UNTIL] = _valid_until(rows[so:so + sn, 0], SF[x, PERIOD], t)


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
            if q.n > 1 and q.ready[0] != q.ready[-1] and np.any(q.ready[1:] < q.ready[:-1]):
                return "a source whose packets are not in ready order"
    return None


# ---------------------------------------------------------------- heaps keyed by (time, seq)
@njit(cache=True)
def _push_guard(GF, GI, X, off, n, cap, time, seq, r):
    """Guard (time, seq, relay r) onto a medium's heap of n; returns the new size. A full heap is
    first cleared of guards whose packet r has taken in (the live ones fit: at most one per
    packet on its way)."""
    if n == cap:
        k = 0
        for i in range(n):
            if X[GI[off + i, 1], DONE_SEQ] < GI[off + i, 0]:
                GF[off + k, 0], GI[off + k, 0], GI[off + k, 1] = GF[off + i, 0], GI[off + i, 0], GI[off + i, 1]
                k += 1
        n = k
        for i in range(n // 2 - 1, -1, -1):
            _sift_down(GF, GI, off, i, n)
    GF[off + n, 0], GI[off + n, 0], GI[off + n, 1] = time, seq, r
    _sift_up(GF, GI, off, n)
    return n + 1


# ---------------------------------------------------------------- the engine
@njit(cache=True)
def _head(X, MQF, RF, x):
    """The earliest ready time among transmitter x's pending packets (INF: none)."""
    h = INF
    if X[x, MTAIL] > X[x, MHEAD]:
        h = MQF[X[x, MOFF] + X[x, MHEAD], 0]
    if X[x, RSIZE] > 0 and RF[X[x, MOFF], 0] < h:
        h = RF[X[x, MOFF], 0]
    return h


@njit(cache=True)
def _next_time(X, MQF, RF, MI, MF, AF, m):
    """The earliest instant medium m can act: an arrival due, or a decision."""
    h = INF
    for x in range(MI[m, TX0], MI[m, TX1]):
        hx = _head(X, MQF, RF, x)
        if hx < h:
            h = hx
    d = max(MF[m, MT], h) if h < INF else INF
    if MI[m, ASIZE] > 0 and AF[MI[m, AOFF], 0] < d:
        d = AF[MI[m, AOFF], 0]
    return d


@njit(cache=True)
def _run(S, m, bound, steps):
    """Act on medium m at every instant before `bound` (lowered as m hands packets on).
    Returns DONE, or NEED_DRAWS having saved where it stands (resumable). A packet whose sender
    gives up is noted (the earliest give-up so far, `_drive` raises it once nothing earlier can
    happen) and goes no further."""
    X, XF, MQF, MQI, RF, RI, MI, MF = S.X, S.XF, S.MQF, S.MQI, S.RF, S.RI, S.MI, S.MF
    dist, AF, AI, GF, GI, DI, dout = S.dist, S.AF, S.AI, S.GF, S.GI, S.DI, S.dout
    LI, LF, FI, FP, arrived, eng, engf = S.LI, S.LF, S.FI, S.FP, S.arrived, S.eng, S.engf
    t, rr = MF[m, MT], MI[m, RR]
    t0, t1 = MI[m, TX0], MI[m, TX1]
    nq = t1 - t0
    goff, aoff = MI[m, GOFF], MI[m, AOFF]
    while MI[m, GSIZE] > 0 and X[GI[goff, 1], DONE_SEQ] >= GI[goff, 0]:
        MI[m, GSIZE] = _heap_pop(GF, GI, goff, MI[m, GSIZE])
    if MI[m, GSIZE] > 0 and GF[goff, 0] < bound:
        bound = GF[goff, 0]
    seq = eng[SEQ]
    status = DONE
    pick_rr = rr
    while True:
        # Arrivals first: the medium may still be busy (t) past one that is due. Each reaches
        # its relay queue: joins it, or is dropped (a loss on the hop before).
        while MI[m, ASIZE] > 0 and AF[aoff, 0] <= t and AF[aoff, 0] < bound:
            a, bits, end = AF[aoff, 0], AF[aoff, 1], AF[aoff, 2]
            r, pkt, att = AI[aoff, 1], AI[aoff, 2], AI[aoff, 3]
            X[r, DONE_SEQ] = AI[aoff, 0]
            MI[m, ASIZE] = _heap_pop(AF, AI, aoff, MI[m, ASIZE])
            X[r, INFLIGHT] -= 1
            n = X[r, MTAIL] - X[r, MHEAD]
            if n + X[r, RSIZE] >= X[r, CAP]:        # retransmissions count once ready by then
                ro = X[r, MOFF]
                for i in range(X[r, RSIZE]):
                    if RF[ro + i, 0] <= a:
                        n += 1
            if n < X[r, CAP]:
                k = X[r, MOFF] + X[r, MTAIL]
                MQF[k, 0], MQF[k, 1], MQI[k, 0], MQI[k, 1] = a, bits, pkt, 0
                X[r, MTAIL] += 1
                continue
            u = X[r, PREV]
            LI[X[u, LINK], LOST] += 1
            FI[X[u, FLOW], FLOST] += 1
            if not X[u, RELIABLE]:
                k = FI[X[u, FLOW], FOFF] + pkt
                if a > FP[k, LAST]:
                    FP[k, LAST] = a
                continue
            if att + 1 > X[u, LIMIT]:
                if a < engf[ERR_AT]:
                    eng[ERR_TX], eng[ERR_PKT], eng[ERR_ATT], engf[ERR_END], engf[ERR_AT] = u, pkt, att + 1, end, a
                    bound = min(bound, a)
                continue
            ready = end + XF[u, RTO]
            k = X[u, MOFF] + X[u, RSIZE]
            RF[k, 0], RF[k, 1], RI[k, 0], RI[k, 1], RI[k, 2] = ready, bits, seq, pkt, att + 1
            _sift_up(RF, RI, X[u, MOFF], X[u, RSIZE])
            X[u, RSIZE] += 1
            seq += 1
            um = X[u, MED]
            if um != m:
                MI[um, TOUCHED] = 1
                if ready + dist[um, m] < bound:
                    bound = ready + dist[um, m]
        if status != DONE or t >= bound:
            break
        x = -1
        for i in range(nq):
            y = t0 + (rr + i) % nq
            if (X[y, MTAIL] > X[y, MHEAD] and MQF[X[y, MOFF] + X[y, MHEAD], 0] <= t) or \
                    (X[y, RSIZE] > 0 and RF[X[y, MOFF], 0] <= t):
                x = y
                pick_rr = (rr + i + 1) % nq
                break
        if x < 0:
            h = INF
            for y in range(t0, t1):
                hy = _head(X, MQF, RF, y)
                if hy < h:
                    h = hy
            nt = max(t, h) if h < INF else INF
            if MI[m, ASIZE] > 0 and AF[aoff, 0] < nt:
                nt = AF[aoff, 0]
            if nt >= bound:
                break
            t = nt
            continue
        lk = X[x, LINK]
        if DI[lk, DPOS] >= DI[lk, DLEN]:
            eng[NEED] = lk
            status = NEED_DRAWS
            break
        rr = pick_rr
        xo = X[x, MOFF]
        mo = xo + X[x, MHEAD]
        if X[x, RSIZE] > 0 and (X[x, MTAIL] == X[x, MHEAD] or RF[xo, 0] <= MQF[mo, 0]):
            bits, pkt, att = RF[xo, 1], RI[xo, 1], RI[xo, 2]
            X[x, RSIZE] = _heap_pop(RF, RI, xo, X[x, RSIZE])
        else:
            bits, pkt, att = MQF[mo, 1], MQI[mo, 0], MQI[mo, 1]
            X[x, MHEAD] += 1
        lost = dout[DI[lk, DOFF] + DI[lk, DPOS]]
        DI[lk, DPOS] += 1
        # the transmission's figures, as state.record keeps them
        if steps is not None:      # pruned at compile time when the call has no rate steps
            if t >= steps[1][x, UNTIL]:     # the step in force at the transmission's start
                _restep(XF, steps, x, t)
        air = (bits + XF[x, ACK]) / XF[x, RATE]
        end = t + air
        f = X[x, FLOW]
        wire = np.int64(bits / 8.0)
        LI[lk, PACKETS] += 1
        LI[lk, BYTES] += wire
        LF[lk] += air
        if att > 0:
            LI[lk, RETX] += 1
        if lost:
            LI[lk, LOST] += 1
            FI[f, FLOST] += 1
        elif XF[x, ACK] > 0:
            LI[lk, ACKED] += 1
        if X[x, FIRST]:
            FI[f, SENT] += 1
            FI[f, FBYTES] += wire
            if att > 0:
                FI[f, FRETX] += 1
        k = FI[f, FOFF] + pkt
        arr = end + XF[x, DELAY]
        if X[x, NXT] < 0:
            if not lost:
                arrived[k] = True
                FP[k, ARRIVAL] = arr
            if arr > FP[k, LAST]:
                FP[k, LAST] = arr
        elif lost and not X[x, RELIABLE] and arr > FP[k, LAST]:
            FP[k, LAST] = arr
        MF[m, LAST_END] = end
        t = end
        if lost:
            if X[x, RELIABLE]:
                if att + 1 > X[x, LIMIT]:
                    if end < engf[ERR_AT]:
                        eng[ERR_TX], eng[ERR_PKT], eng[ERR_ATT], engf[ERR_END], engf[ERR_AT] = \
                            x, pkt, att + 1, end, end
                        bound = min(bound, end)
                    continue
                k = xo + X[x, RSIZE]
                RF[k, 0], RF[k, 1], RI[k, 0], RI[k, 1], RI[k, 2] = end + XF[x, RTO], bits, seq, pkt, att + 1
                _sift_up(RF, RI, xo, X[x, RSIZE])
                X[x, RSIZE] += 1
                seq += 1
        elif X[x, NXT] >= 0:
            a = end + XF[x, DELAY]
            r = X[x, NXT]
            rm = X[r, MED]
            # Everything that could be waiting there when it arrives: queued, on its way, or
            # sent on but possibly dropped further on and handed back.
            room = X[r, CAP] - (X[r, MTAIL] - X[r, MHEAD]) - X[r, RSIZE] - X[r, INFLIGHT]
            if X[r, NXT] >= 0:
                room -= X[X[r, NXT], INFLIGHT]
            if room > 0 and X[r, INFLIGHT] == 0:
                k = X[r, MOFF] + X[r, MTAIL]    # cannot be dropped: ready on arrival
                MQF[k, 0], MQF[k, 1], MQI[k, 0], MQI[k, 1] = a, bits, pkt, 0
                X[r, MTAIL] += 1
            else:
                ao, n = MI[rm, AOFF], MI[rm, ASIZE]
                AF[ao + n, 0], AF[ao + n, 1], AF[ao + n, 2] = a, bits, end
                AI[ao + n, 0], AI[ao + n, 1], AI[ao + n, 2], AI[ao + n, 3] = seq, r, pkt, att
                _sift_up(AF, AI, ao, n)
                MI[rm, ASIZE] = n + 1
                X[r, INFLIGHT] += 1
                if rm != m:
                    # may be dropped there and handed back: ready here again at end + rto
                    MI[m, GSIZE] = _push_guard(GF, GI, X, goff, MI[m, GSIZE], MI[m, GCAP], end + XF[x, RTO], seq, r)
                    if end + XF[x, RTO] < bound:
                        bound = end + XF[x, RTO]
                seq += 1
            if rm != m:
                MI[rm, TOUCHED] = 1
                if a + XF[x, NXT_BACK] < bound:
                    bound = a + XF[x, NXT_BACK]
    MF[m, MT], MI[m, RR], eng[SEQ], engf[BOUND] = t, rr, seq, bound
    return status


@njit(cache=True)
def _drive(S, steps):
    """Always advance the medium that can act first, as far as no other can reach it; resumes
    the medium it stopped in (eng[CUR]) when it stopped for loss outcomes."""
    X, MQF, RF, MI, MF, AF, dist, eng, engf = S.X, S.MQF, S.RF, S.MI, S.MF, S.AF, S.dist, S.eng, S.engf
    nm = MF.shape[0]
    if eng[CUR] == -2:
        eng[CUR] = -1
        for j in range(nm):
            MF[j, NT] = _next_time(X, MQF, RF, MI, MF, AF, j)
    while True:
        i = eng[CUR]
        if i < 0:
            i = 0
            for j in range(1, nm):
                if MF[j, NT] < MF[i, NT]:
                    i = j
            if engf[ERR_AT] < INF and MF[i, NT] >= engf[ERR_AT]:
                return GAVE_UP          # no medium can act before the earliest give-up
            if MF[i, NT] == INF:
                return DONE
            bound = engf[ERR_AT]        # nothing after a give-up matters
            for j in range(nm):
                if j != i and MF[j, NT] + dist[j, i] < bound:
                    bound = MF[j, NT] + dist[j, i]
            MI[:, TOUCHED] = 0
            eng[CUR] = i
        else:
            bound = engf[BOUND]
        status = _run(S, i, bound, steps)
        if status != DONE:
            return status
        eng[CUR] = -1
        MI[i, TOUCHED] = 1
        for j in range(nm):
            if MI[j, TOUCHED]:
                MF[j, NT] = _next_time(X, MQF, RF, MI, MF, AF, j)


def run(media: dict, stats: dict) -> None:
    """Run one call's transmitters (as built by Network._run) to completion; fills `stats`."""
    S, txs, links, flows, meds, steps = _build(media, stats)
    try:
        while True:
            status = _drive(S, steps)
            if status == NEED_DRAWS:
                S = _more_draws(S, links, int(S.eng[NEED]))
            elif status == GAVE_UP:
                q = txs[int(S.eng[ERR_TX])]
                raise DeliveryError(q.flows[0].src, q.flows[0].dst, int(S.eng[ERR_PKT]), int(S.eng[ERR_ATT]),
                                    float(S.engf[ERR_END]))
            else:
                break
    finally:
        for link, used in zip(links, S.DI[:, DPOS].tolist()):
            if used:
                link.loss.skip(used)
        for medium, end in zip(meds, S.MF[:, LAST_END].tolist()):
            if end == end:          # not nan: it sent something
                medium.free_at = end
    _account(S, txs, links, flows, stats)


def _build(media: dict, stats: dict):
    """The call's transmitters, media, links and flows as the tables of a `_State`."""
    meds, txs, txoff = [], [], [0]
    for medium, queues in media.values():
        meds.append(medium)
        txs += queues
        txoff.append(len(txs))
    index = {id(q): i for i, q in enumerate(txs)}
    links, lidx, flows, fidx = [], {}, [], {}
    xi, xf, slots, stepped = [], [], [], []
    for m, (lo, hi) in enumerate(zip(txoff, txoff[1:])):
        for q in txs[lo:hi]:
            link, flow = q.links[0], q.flows[0]
            if id(link) not in lidx:
                lidx[id(link)] = len(links)
                links.append(link)
            if id(flow) not in fidx:
                fidx[id(flow)] = len(flows)
                flows.append(flow)
            xi.append((m, index[id(q.next)] if q.next is not None else -1, -1, lidx[id(link)], fidx[id(flow)],
                       q.first_hop, q.reliable, q.retry_limit, q.queue_packets, 0, -1, 0, 0, 0, 0))
            xf.append((link.spec.rate_bps * q.share, q.ack_bits, q.rto_s, link.delay_s, INF))
            if link.steps is not None:
                stepped.append((len(xf) - 1, link.steps, q.share))
            # a packet enters a hop's FIFO at most once and has at most one retransmission
            # pending there: slots for as many packets as the flow has
            slots.append(max(flow.arrived.size, q.n))
    nm, nl, nf = len(meds), len(links), len(flows)
    X, XF = np.array(xi, dtype=np.int64), np.array(xf, dtype=float)
    med, nxt, lk = X[:, MED], X[:, NXT], X[:, LINK]
    X[nxt[nxt >= 0], PREV] = np.flatnonzero(nxt >= 0)
    slots = np.array(slots, dtype=np.int64)
    X[:, MOFF] = np.concatenate(([0], np.cumsum(slots)))[:-1]
    total = int(slots.sum())
    MQF, MQI = np.empty((total, 2)), np.zeros((total, 2), np.int64)
    for i, q in enumerate(txs):
        if q.n:
            s = slice(X[i, MOFF], X[i, MOFF] + q.n)
            MQF[s, 0], MQF[s, 1], MQI[s, 0], MQI[s, 1] = q.ready, q.bits, q.pkt, q.att
            X[i, MTAIL] = q.n
    nxt_med = np.where(nxt >= 0, med[np.maximum(nxt, 0)], -1)
    dist = _lookahead(nm, med, nxt_med, XF[:, DELAY])
    XF[:, NXT_BACK] = np.where(nxt >= 0, dist[np.maximum(nxt_med, 0), med], INF)
    np.fill_diagonal(dist, INF)
    MI = np.zeros((nm, 9), np.int64)
    MI[:, TX0], MI[:, TX1] = txoff[:-1], txoff[1:]
    # Arrivals due at a medium's relays: at most one per packet per hop feeding it. Guards: one
    # per packet on its way to another medium's relay.
    acap = np.bincount(nxt_med[nxt >= 0], weights=slots[nxt >= 0], minlength=nm).astype(np.int64)
    far = (nxt >= 0) & (nxt_med != med)
    MI[:, GCAP] = np.bincount(med[far], weights=slots[far], minlength=nm).astype(np.int64) + 1
    MI[:, AOFF] = np.concatenate(([0], np.cumsum(acap)))[:-1]
    MI[:, GOFF] = np.concatenate(([0], np.cumsum(MI[:, GCAP])))[:-1]
    na, ng = int(acap.sum()), int(MI[:, GCAP].sum())
    MF = np.empty((nm, 3))
    MF[:, MT], MF[:, LAST_END] = [m.free_at for m in meds], np.nan
    DI = np.zeros((nl, 3), np.int64)
    DI[:, DLEN] = np.maximum(PEEK * np.bincount(lk, weights=slots, minlength=nl).astype(np.int64), MIN_PEEK)
    DI[:, DOFF] = np.concatenate(([0], np.cumsum(DI[:, DLEN])))[:-1]
    dout = np.concatenate([link.loss.peek(int(n)) for link, n in zip(links, DI[:, DLEN])]).astype(np.bool_)
    # busy seconds go on from what the link carried before (earlier calls of a collective), one
    # transmission at a time as the SimPy engine adds them
    LF = np.array([stats[(l.u, l.v)].busy_s if (l.u, l.v) in stats else 0.0 for l in links])
    FI = np.zeros((nf, 5), np.int64)
    FI[:, FOFF] = np.concatenate(([0], np.cumsum([f.arrived.size for f in flows])))[:-1]
    cat = lambda name: np.concatenate([getattr(f, name) for f in flows])
    S = _State(X=X, XF=XF, MQF=MQF, MQI=MQI, RF=np.empty((total, 2)), RI=np.zeros((total, 3), np.int64),
               MI=MI, MF=MF, dist=dist, AF=np.empty((na, 3)), AI=np.zeros((na, 4), np.int64),
               GF=np.empty((ng, 1)), GI=np.zeros((ng, 2), np.int64), DI=DI, dout=dout,
               LI=np.zeros((nl, 5), np.int64), LF=LF, FI=FI,
               FP=np.stack([cat("arrival_s"), cat("last_s")], axis=1).astype(float),
               arrived=cat("arrived").astype(np.bool_),
               eng=np.array([0, -2, -1, -1, -1, -1], dtype=np.int64), engf=np.array([0.0, 0.0, INF]))
    return S, txs, links, flows, meds, _steps(stepped, len(txs))


def _steps(stepped: list, ntx: int):
    """The `steps` argument of `_drive` (None: every rate constant)."""
    if not stepped:
        return None
    SI = np.zeros((ntx, 2), np.int64)
    SF = np.zeros((ntx, 3))
    SF[:, UNTIL] = INF
    rows, at = [], 0
    for x, st, share in stepped:
        SI[x] = at, st.times.size
        SF[x] = share, st.period, -INF          # -INF: computed at its first transmission
        rows.append(np.stack([st.times, st.rates], axis=1))
        at += st.times.size
    return SI, SF, np.concatenate(rows).astype(float)


def _more_draws(S: _State, links: list, short: int) -> _State:
    """Four times as many peeked outcomes for link `short` (peeked again from the committed position:
    the same values, and more)."""
    DI = S.DI.copy()
    DI[short, DLEN] *= 4
    DI[:, DOFF] = np.concatenate(([0], np.cumsum(DI[:, DLEN])))[:-1]
    dout = np.concatenate([link.loss.peek(int(n)) for link, n in zip(links, DI[:, DLEN])]).astype(np.bool_)
    return S._replace(DI=DI, dout=dout)


def _lookahead(nm: int, med, nxt_med, delay) -> np.ndarray:
    """Least time from an act of medium i to an effect on medium j, over chains of hops (a packet
    sent on i arrives on j's relay a delay later). A drop at a relay only ever returns the packet
    to the medium that sent it, which bounds itself for that when it sends (`_run`)."""
    d = np.full((nm, nm), INF)
    far = (nxt_med >= 0) & (nxt_med != med)
    np.minimum.at(d, (med[far], nxt_med[far]), delay[far])
    _floyd_warshall(d)
    return d


@njit(cache=True)
def _floyd_warshall(d):
    n = d.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                if d[i, k] + d[k, j] < d[i, j]:
                    d[i, j] = d[i, k] + d[k, j]


def _account(S: _State, txs: list, links: list, flows: list, stats: dict) -> None:
    """What the loop accumulated, into `stats` (entries as `state.record` makes them: every link
    that carried a transmission, and its reverse where ARQ acknowledges) and the flows."""
    LI, LF = S.LI.tolist(), S.LF.tolist()       # Python numbers: cheaper to read one by one
    for q, l in zip(txs, S.X[:, LINK].tolist()):
        if LI[l][PACKETS]:
            link = q.links[0]
            stats.setdefault((link.u, link.v), LinkStats())
            if q.ack_bits:
                stats.setdefault((link.v, link.u), LinkStats())
    for link, li, busy in zip(links, LI, LF):
        if not li[PACKETS]:
            continue
        st = stats[(link.u, link.v)]
        st.packets += li[PACKETS]
        st.bytes += li[BYTES]
        st.lost += li[LOST]
        st.retransmitted += li[RETX]
        st.busy_s = busy
        if li[ACKED]:
            stats[(link.v, link.u)].bytes += li[ACKED] * link.spec.ack_bytes
    for flow, fi in zip(flows, S.FI.tolist()):
        s = slice(fi[FOFF], fi[FOFF] + flow.arrived.size)
        flow.arrived[:] = S.arrived[s]
        flow.arrival_s[:] = S.FP[s, ARRIVAL]
        flow.last_s[:] = S.FP[s, LAST]
        flow.sent += fi[SENT]
        flow.retrans += fi[FRETX]
        flow.bytes += fi[FBYTES]
        flow.lost_any += fi[FLOST]
