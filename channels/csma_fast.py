"""The fast engine on an 802.11 DCF cell: attempt to attempt, compiled with numba.

Semantics are `channels/csma.py`'s (and its SimPy process is the reference the tests hold this to,
float for float). A station that draws counter b at its boundary g transmits at its boundary g + b
unless the medium turns busy first, so the loop (`_dcf`) jumps from one attempt to the next without
visiting the idle slots between: each station pends on boundary GNEXT of its own grid (from its own
base), the next attempt is the earliest of those times, and every station pending on it transmits
(two or more: a collision). A busy period takes from every other station's count the whole idle
slots it saw (`csma.elapsed_slots`) and moves every station's base to the busy period's end plus
the wait its role gives (`Cell.attempt`).

Everything random is drawn as `Cell` draws it, in the same order per stream: backoff counters from
each station's stream (peeked here, committed with `take`), loss outcomes of index-based links
peeked per link (committed with `skip`). A fading link (its rate and packet error rate a function
of the coherence block an attempt starts in, moving ends included: channels/fading.py) reads both
from per-block tables that `FadingChannel.block_tables` computes ahead, a span of blocks at a
time, and draws its loss outcome as `FadingLoss` does: the link's next uniform (peeked, committed
with `take`) below the block's packet error rate; a collision its receiver may capture
(`Cell._captured`) reads the frames' SNRs and the locked one's threshold from the same tables
and draws from its link's uniforms likewise. The loop stops before an attempt whose inputs it
lacks - more peeked values, room for its rows, or a fading link's block beyond its table - Python
supplies them and the loop resumes from the same point. Attempt rows are those `Cell.attempt` records, so
`Cell.finish` turns them into link and flow figures as for the SimPy engine.

State (`_Dcf`) lives in tables with named columns: per station its frames merged by ready time
(ties: queue order, then position, as the queues are served), a heap of ARQ resends keyed by
(ready, queue, sequence), the frame in its hands and its pending boundary; per queue its rate, ACK
airtime, delivery and links.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from channels.csma import (COLLIDED, LOST, OK, Cell, ack_rate, airtime, can_capture, capture_per, elapsed_slots,
                           first_boundary, prepare)
from channels.jit_heap import pop as heap_pop, sift_up
from channels.errors import DeliveryError
from channels.rate_steps import step_rate

INF = float("inf")
DONE, NEED_BACKOFF, NEED_OUTCOMES, NEED_ROWS, NEED_BLOCKS, GAVE_UP, NEED_UNIFORMS = range(7)
# Values peeked before the loop starts: PEEK per frame (backoff counters per station, loss
# outcomes per link), at least MIN_PEEK; room for ROWS attempt rows per frame and receiver, at
# least MIN_ROWS. The loop asks for more when they run out (tests shrink these to make it ask).
PEEK, MIN_PEEK, ROWS, MIN_ROWS = 2, 64, 4, 1024
# Coherence blocks a fading link's table spans when first computed (then twice as many each time
# the loop runs past it): BLOCKS of 10 ms are 20 s.
BLOCKS = 2048

# ST, per station (ints): frames [FOFF, FOFF + FN) with the next at FNEXT; ARQ heap at ROFF of RSIZE
# (sequence counter RSEQ); holds a frame?; the frame's queue, packet, attempt, stage; its pending
# boundary (-1: none); backoff values in `bu` at BOFF (BLEN peeked, BPOS used).
FOFF, FN, FNEXT, ROFF, RSIZE, RSEQ, HAS, CQ, CPKT, CATT, CSTAGE, GNEXT, BOFF, BLEN, BPOS = range(15)
# STF, per station (floats): the frame's bits and ready time, when it may take its next frame
# (INF: not waiting to), the base its boundaries count from.
CBITS, CREADY, JOIN, SBASE = range(4)
# Q, per queue (ints): multicast?, reliable?, ARQ retry limit, links, time-based rate and loss?,
# rate steps on a link (and no fading: the loop computes the rate, channels/rate_steps.py)?
MULTI, RELIABLE, ARQ_LIMIT, NLINKS, FADING, STEPS = range(6)
# QF, per queue (floats): fixed rate (nan: fading), ACK airtime at it, retransmission timeout.
RATE, ACK_S, RTO = range(3)
# LC, per link of the cell (a loss cursor): no loss?, time-based (fading)?, outcomes in `lo` at
# DOFF (DLEN peeked, DPOS used); its rate steps, rows LSOFF.. of `steps`, LSN of them (0: its
# constant rate); a fading link's uniforms in `fu` at UOFF (ULEN peeked, UPOS used) and its block
# table, rows FBOFF.. of `ft` (FT_* columns) for blocks FB0 .. FB0 + FBN - 1; whether its
# receiver may capture its frame in a collision (csma.can_capture), and its ends' node numbers.
NONE, TIMED, DOFF, DLEN, DPOS, LSOFF, LSN, UOFF, ULEN, UPOS, FBOFF, FB0, FBN, CAPT, RXN, TXN = range(16)
# LR, per link (floats): its constant rate, its steps' period, its coherence time (fading), its
# packet error waterfall's slope (per dB; capture).
LRATE, LPERIOD, LCOH, LSLOPE = range(4)
# ft columns (FadingChannel.block_tables): rate, packet error rate, SNR (linear), the rate's 10%
# packet error SNR (dB).
FT_RATE, FT_PER, FT_SNR, FT_THR = range(4)
# Rows as Cell.attempt records them: RWI (queue, link index, packet, outcome, ARQ attempt, MAC
# stage), RWF (bits, start, data end, airtime).
R_Q, R_K, R_PKT, R_CODE, R_ATT, R_STAGE = range(6)
R_BITS, R_START, R_END, R_AIR = range(4)
# eng: rows used, what the loop lacks (a station or link; NEED_BLOCK: the block), and what
# DeliveryError needs (queue, link index, packet, attempt). engf: when the medium is free for every
# station after the last busy period, the failed attempt's end.
NROWS, NEED, ERR_Q, ERR_K, ERR_PKT, ERR_ATT, NEED_BLOCK = range(7)
BASE, ERR_END = range(2)
# P (floats): slot, DIFS, SIFS, PHY header, ACK bits, OFDM symbol, basic rate, ACK timeout, EIFS;
# cwp1[stage] = CW + 1; the MAC retry limit (attempts).
# and the SINR (dB) below which no frame of a collision is locked onto (Cell.detect_db).
SLOT, DIFS, SIFS, PHY, ACK_BITS, SYMBOL, BASIC, ACK_TIMEOUT, EIFS, CCA, EIFS_FRAMES, EIFS_SHARE, DETECT = range(13)

_Dcf = namedtuple("_Dcf", [
    "ST", "STF", "CM", "FRF", "FRI", "QM", "QMOFF", "RHF", "RHI", "Q", "QF", "QL", "LC", "lo", "bu",
    "P", "cwp1", "mac_limit", "RWI", "RWF", "eng", "engf", "LR", "steps", "fu", "ft"])
# CM: the held frame's receivers still to reach (multicast; row per station). FRF (ready, bits) /
# FRI (queue, position, packet, attempt): the stations' frames. QM: each multicast queue's masks
# (rows from QMOFF[queue]). RHF (ready, bits) / RHI (key, queue, packet, attempt, mask...): ARQ
# heaps. QL: each queue's links (LC rows). steps: rows (breakpoint s, rate bit/s) of the links'
# rate steps. fu / ft: fading links' uniforms and block tables (LC).


# the same float operations as Cell's
_first_boundary = njit(cache=True)(first_boundary)
_airtime = njit(cache=True)(airtime)
_ack_rate = njit(cache=True)(ack_rate)
_elapsed_slots = njit(cache=True)(elapsed_slots)
_step_rate = njit(cache=True)(step_rate)
_capture_per = njit(cache=True)(capture_per)


@njit(cache=True)
def _steps_rate(Q, QL, LC, LR, steps, q, t):
    """Cell.rate of a queue with rate steps: the least of its links' rates at t."""
    r = INF
    for k in range(Q[q, NLINKS]):
        lc = QL[q, k]
        n = LC[lc, LSN]
        if n == 0:
            v = LR[lc, LRATE]
        else:
            o = LC[lc, LSOFF]
            v = _step_rate(steps[o:o + n, 0], steps[o:o + n, 1], LR[lc, LPERIOD], t)
        if v < r:
            r = v
    return r


@njit(cache=True)
def _fading_row(LC, LR, lc, t):
    """The row of `ft` for fading link lc at time t (its block, as FadingChannel.block
    computes it), or -1 when the block is beyond the link's table."""
    b = np.int64(np.floor(t / LR[lc, LCOH]))
    if b < LC[lc, FB0] or b >= LC[lc, FB0] + LC[lc, FBN]:
        return -1
    return LC[lc, FBOFF] + b - LC[lc, FB0]


@njit(cache=True)
def _fading_rate(Q, QL, LC, LR, steps, ft, q, t):
    """Cell.rate of a queue with a fading link: the least of its links' rates at t (each as
    LinkState.rate_at gives it: its block's, its steps', or its constant rate)."""
    r = INF
    for k in range(Q[q, NLINKS]):
        lc = QL[q, k]
        if LC[lc, TIMED]:
            v = ft[_fading_row(LC, LR, lc, t), FT_RATE]
        elif LC[lc, LSN] > 0:
            o = LC[lc, LSOFF]
            n = LC[lc, LSN]
            v = _step_rate(steps[o:o + n, 0], steps[o:o + n, 1], LR[lc, LPERIOD], t)
        else:
            v = LR[lc, LRATE]
        if v < r:
            r = v
    return r


@njit(cache=True)
def _missing_block(Q, QL, LC, LR, eng, q, t):
    """Whether a fading link of queue q has no table row at t (then eng names it and the block)."""
    for k in range(Q[q, NLINKS]):
        lc = QL[q, k]
        if LC[lc, TIMED] and _fading_row(LC, LR, lc, t) < 0:
            eng[NEED] = lc
            eng[NEED_BLOCK] = np.int64(np.floor(t / LR[lc, LCOH]))
            return True
    return False


@njit(cache=True)
def _head_ready(ST, FRF, RHF, s):
    """When station s's next frame is ready (INF: it has none)."""
    a = FRF[ST[s, FOFF] + ST[s, FNEXT], 0] if ST[s, FNEXT] < ST[s, FN] else INF
    if ST[s, RSIZE] > 0 and RHF[ST[s, ROFF], 0] < a:
        return RHF[ST[s, ROFF], 0]
    return a


@njit(cache=True)
def _take(ST, STF, CM, FRF, FRI, RHF, RHI, Q, QM, QMOFF, bu, cwp1, s):
    """Station s takes its next frame (an ARQ resend first if it was ready before, or as early
    and from an earlier queue) and draws its first counter; returns the counter. (The loop's
    helpers take its arrays one by one: reading them from the state tuple in the loop would
    count references at every access.)"""
    i, ro = ST[s, FNEXT], ST[s, ROFF]
    k = ST[s, FOFF] + i
    if ST[s, RSIZE] > 0 and (i == ST[s, FN] or RHF[ro, 0] < FRF[k, 0]
                             or (RHF[ro, 0] == FRF[k, 0] and RHI[ro, 1] < FRI[k, 0])):
        ST[s, CQ], ST[s, CPKT], ST[s, CATT] = RHI[ro, 1], RHI[ro, 2], RHI[ro, 3]
        STF[s, CREADY], STF[s, CBITS] = RHF[ro, 0], RHF[ro, 1]
        for c in range(CM.shape[1]):
            CM[s, c] = RHI[ro, 4 + c]
        ST[s, RSIZE] = heap_pop(RHF, RHI, ro, ST[s, RSIZE])
    else:
        q = FRI[k, 0]
        ST[s, CQ], ST[s, CPKT], ST[s, CATT] = q, FRI[k, 2], FRI[k, 3]
        STF[s, CREADY], STF[s, CBITS] = FRF[k, 0], FRF[k, 1]
        if Q[q, MULTI]:
            row = QMOFF[q] + FRI[k, 1]
            for c in range(Q[q, NLINKS]):
                CM[s, c] = QM[row, c]
        ST[s, FNEXT] = i + 1
    ST[s, HAS], ST[s, CSTAGE] = 1, 0
    return _backoff(ST, bu, cwp1, s, 0)


@njit(cache=True)
def _backoff(ST, bu, cwp1, s, stage):
    u = bu[ST[s, BOFF] + ST[s, BPOS]]
    ST[s, BPOS] += 1
    return np.int64(u * cwp1[stage])


@njit(cache=True)
def _row(RWI, RWF, eng, q, k, pkt, bits, t, end, air, code, att, stage):
    n = eng[NROWS]
    RWI[n, R_Q], RWI[n, R_K], RWI[n, R_PKT], RWI[n, R_CODE] = q, k, pkt, code
    RWI[n, R_ATT], RWI[n, R_STAGE] = att, stage
    RWF[n, R_BITS], RWF[n, R_START], RWF[n, R_END], RWF[n, R_AIR] = bits, t, end, air
    eng[NROWS] = n + 1


@njit(cache=True)
def _outcome(ST, QL, LC, LR, lo, fu, ft, s, k, t):
    """Loss outcome for the k-th link of station s's frame's queue (lost?), its attempt at t."""
    lc = QL[ST[s, CQ], k]
    if LC[lc, NONE]:
        return False
    if LC[lc, TIMED]:     # FadingLoss.draw: the next uniform below the block's error rate
        u = fu[LC[lc, UOFF] + LC[lc, UPOS]]
        LC[lc, UPOS] += 1
        return u < ft[_fading_row(LC, LR, lc, t), FT_PER]
    v = lo[LC[lc, DOFF] + LC[lc, DPOS]]
    LC[lc, DPOS] += 1
    return v


@njit(cache=True)
def _failed(ST, STF, Q, QF, RHF, RHI, mac_limit, eng, engf, s, end, lost):
    """Cell._failed: a failed attempt of station s's frame (`lost`: its links that failed). Retry
    (stage + 1) while the MAC may, else ARQ resends it (reliable) or it is lost. Returns 1 when
    the station is done with the frame, 0 when it retries, -1 when ARQ gives up."""
    q = ST[s, CQ]
    if not Q[q, MULTI] and ST[s, CSTAGE] + 1 < mac_limit:
        ST[s, CSTAGE] += 1
        return 0
    if not Q[q, RELIABLE]:
        return 1
    if ST[s, CATT] + 1 > Q[q, ARQ_LIMIT]:
        k = 0
        while not lost[k]:
            k += 1
        eng[ERR_Q], eng[ERR_K], eng[ERR_PKT], eng[ERR_ATT] = q, k, ST[s, CPKT], ST[s, CATT] + 1
        engf[ERR_END] = end
        return -1
    ro, n = ST[s, ROFF], ST[s, RSIZE]
    RHF[ro + n, 0], RHF[ro + n, 1] = end + QF[q, RTO], STF[s, CBITS]
    RHI[ro + n, 0] = (q << 40) | ST[s, RSEQ]
    RHI[ro + n, 1], RHI[ro + n, 2], RHI[ro + n, 3] = q, ST[s, CPKT], ST[s, CATT] + 1
    for c in range(lost.size):
        RHI[ro + n, 4 + c] = lost[c] if c < Q[q, NLINKS] else 0
    ST[s, RSEQ] += 1
    sift_up(RHF, RHI, ro, n)
    ST[s, RSIZE] = n + 1
    return 1


@njit(cache=True)
def _lock(ST, Q, QL, LC, LR, ft, tx, starts, n, detect):
    """Cell._captured up to its draw: the collision's frame its receiver locks onto (its index
    among the n senders tx) and that frame's packet error rate at its SINR; (-1, 1.0) where no
    frame may be captured."""
    rx = -1
    for i in range(n):
        q = ST[tx[i], CQ]
        if Q[q, MULTI] or Q[q, NLINKS] != 1 or not LC[QL[q, 0], CAPT]:
            return -1, 1.0
        lc = QL[q, 0]
        if i == 0:
            rx = LC[lc, RXN]
        elif LC[lc, RXN] != rx:
            return -1, 1.0
    for i in range(n):
        if LC[QL[ST[tx[i], CQ], 0], TXN] == rx:
            return -1, 1.0
    first = INF
    for i in range(n):
        if starts[i] < first:
            first = starts[i]
    lock, best = -1, 0.0
    for i in range(n):
        if starts[i] == first:
            x = ft[_fading_row(LC, LR, QL[ST[tx[i], CQ], 0], starts[i]), FT_SNR]
            if lock < 0 or x > best:
                lock, best = i, x
    interference = 0.0
    for i in range(n):
        if i != lock:
            interference += ft[_fading_row(LC, LR, QL[ST[tx[i], CQ], 0], starts[i]), FT_SNR]
    lc = QL[ST[tx[lock], CQ], 0]
    thr = ft[_fading_row(LC, LR, lc, starts[lock]), FT_THR]
    return lock, _capture_per(best, interference, thr, LR[lc, LSLOPE], detect)


@njit(cache=True)
def _sends(tx, n, s):
    for i in range(n):
        if tx[i] == s:
            return True
    return False


@njit(cache=True)
def _dcf(D):
    """Run the cell until no station has a frame, or until it lacks an input (see the module
    docstring); returns DONE or what it lacks (details in eng)."""
    ST, STF, CM, Q, QF, P, eng, engf = D.ST, D.STF, D.CM, D.Q, D.QF, D.P, D.eng, D.engf
    FRF, FRI, RHF, RHI, QM, QMOFF, bu, cwp1 = D.FRF, D.FRI, D.RHF, D.RHI, D.QM, D.QMOFF, D.bu, D.cwp1
    QL, LC, lo, RWI, RWF, mac_limit = D.QL, D.LC, D.lo, D.RWI, D.RWF, D.mac_limit
    LR, steps, fu, ft = D.LR, D.steps, D.fu, D.ft
    slot, difs, sifs, phy, symbol, cca = P[SLOT], P[DIFS], P[SIFS], P[PHY], P[SYMBOL], P[CCA]
    ns = ST.shape[0]
    kmax = CM.shape[1]
    tx = np.empty(ns, np.int64)
    datas = np.empty(ns)
    waits = np.empty(ns)
    starts = np.empty(ns)
    rates = np.empty(ns)
    lost = np.zeros(kmax, np.bool_)
    while True:
        t = INF
        for s in range(ns):
            if ST[s, GNEXT] >= 0:
                ts = STF[s, SBASE] + ST[s, GNEXT] * slot
                if ts < t:
                    t = ts
        # Stations whose next frame is ready take it, earliest boundary first, while they can
        # still take part in the next attempt (begin before the others sense it).
        while True:
            js, jt, jb = -1, INF, 0
            for s in range(ns):
                if STF[s, JOIN] < INF:
                    b = _first_boundary(STF[s, SBASE], STF[s, JOIN], slot)
                    tb = STF[s, SBASE] + b * slot
                    if tb < jt:
                        js, jt, jb = s, tb, b
            if js < 0 or jt > t + cca:
                break
            if ST[js, BPOS] >= ST[js, BLEN]:
                eng[NEED] = js
                return NEED_BACKOFF
            STF[js, JOIN] = INF
            ST[js, GNEXT] = jb + _take(ST, STF, CM, FRF, FRI, RHF, RHI, Q, QM, QMOFF, bu, cwp1, js)
            ts = STF[js, SBASE] + ST[js, GNEXT] * slot
            if ts < t:
                t = ts
        if t == INF:
            return DONE
        window = t + cca
        n = 0
        for s in range(ns):
            if ST[s, GNEXT] >= 0:
                ts = STF[s, SBASE] + ST[s, GNEXT] * slot
                if ts <= window:
                    tx[n] = s
                    starts[n] = ts
                    n += 1
        # Everything this attempt will use, before it changes anything.
        for i in range(n):
            s = tx[i]
            if ST[s, BPOS] >= ST[s, BLEN]:
                eng[NEED] = s
                return NEED_BACKOFF
            if Q[ST[s, CQ], FADING] and _missing_block(Q, QL, LC, LR, eng, ST[s, CQ], starts[i]):
                return NEED_BLOCKS
        # a collision its receiver may capture: the locked frame's link's uniform
        cap, cper = -1, 1.0
        if n > 1:
            cap, cper = _lock(ST, Q, QL, LC, LR, ft, tx, starts, n, P[DETECT])
            if cap >= 0 and cper < 1.0:
                lc = QL[ST[tx[cap], CQ], 0]
                if LC[lc, UPOS] >= LC[lc, ULEN]:
                    eng[NEED] = lc
                    return NEED_UNIFORMS
        draw = n > 1 and n == P[EIFS_FRAMES] + 1     # every other station draws EIFS or DIFS
        if draw:
            for s in range(ns):
                if ST[s, BPOS] >= ST[s, BLEN] and not _sends(tx, n, s):
                    eng[NEED] = s
                    return NEED_BACKOFF
        if n == 1:
            s, q = tx[0], ST[tx[0], CQ]
            for k in range(Q[q, NLINKS]):
                lc = QL[q, k]
                if (not Q[q, MULTI] or CM[s, k]) and not LC[lc, NONE] and not LC[lc, TIMED] \
                        and LC[lc, DPOS] >= LC[lc, DLEN]:
                    eng[NEED] = lc
                    return NEED_OUTCOMES
                if (not Q[q, MULTI] or CM[s, k]) and LC[lc, TIMED] and LC[lc, UPOS] >= LC[lc, ULEN]:
                    eng[NEED] = lc
                    return NEED_UNIFORMS
        if eng[NROWS] + n * kmax > RWI.shape[0]:
            return NEED_ROWS
        for i in range(n):
            s = tx[i]
            q = ST[s, CQ]
            if Q[q, FADING]:
                r = _fading_rate(Q, QL, LC, LR, steps, ft, q, starts[i])
            elif Q[q, STEPS]:
                r = _steps_rate(Q, QL, LC, LR, steps, q, starts[i])
            else:
                r = QF[q, RATE]
            rates[i] = r
            datas[i] = _airtime(STF[s, CBITS], r, phy, symbol)
        busy = starts[0] + datas[0]
        for i in range(1, n):
            if starts[i] + datas[i] > busy:
                busy = starts[i] + datas[i]
        got = -1
        if cap >= 0 and cper < 1.0:     # decoded unless the draw says lost (FadingLoss.draw_below)
            lc = QL[ST[tx[cap], CQ], 0]
            u = fu[LC[lc, UOFF] + LC[lc, UPOS]]
            LC[lc, UPOS] += 1
            if not u < cper:
                got = cap
        if got >= 0:     # its ACK follows; everyone counts again DIFS after it (Cell._capture)
            cair = datas[got] + sifs + _airtime(P[ACK_BITS], _ack_rate(rates[got], P[BASIC]), phy, symbol)
            over = max(busy, starts[got] + cair)
            others = over + difs
            draw = False
        else:
            cair, over = 0.0, busy
            others = busy + (P[EIFS] if n <= P[EIFS_FRAMES] else difs)
        for i in range(n):
            s = tx[i]
            q = ST[s, CQ]
            d, t = datas[i], starts[i]
            pkt, bits, att, stage = ST[s, CPKT], STF[s, CBITS], ST[s, CATT], ST[s, CSTAGE]
            for k in range(kmax):
                lost[k] = False
            if n > 1 and i == got:
                _row(RWI, RWF, eng, q, 0, pkt, bits, t, t + d, cair, OK, att, stage)
                waits[i] = over + difs
                done = 1
            elif n > 1:
                for k in range(Q[q, NLINKS]):
                    if not Q[q, MULTI] or CM[s, k]:
                        _row(RWI, RWF, eng, q, k, pkt, bits, t, t + d, d, COLLIDED, att, stage)
                        lost[k] = True
                if Q[q, MULTI]:
                    waits[i] = busy + difs
                else:
                    waits[i] = max(t + d + P[ACK_TIMEOUT], over) + difs
                done = _failed(ST, STF, Q, QF, RHF, RHI, mac_limit, eng, engf, s, t + d, lost)
            elif Q[q, MULTI]:
                bad = False
                for k in range(Q[q, NLINKS]):
                    if CM[s, k]:
                        lost[k] = _outcome(ST, QL, LC, LR, lo, fu, ft, s, k, t)
                        _row(RWI, RWF, eng, q, k, pkt, bits, t, t + d, d, LOST if lost[k] else OK, att, 0)
                        bad = bad or lost[k]
                others = t + d + difs
                waits[i] = t + d + difs
                done = _failed(ST, STF, Q, QF, RHF, RHI, mac_limit, eng, engf, s, t + d, lost) if bad else 1
            else:
                r = rates[i]
                ack = QF[q, ACK_S] if not (Q[q, FADING] or Q[q, STEPS]) else \
                    _airtime(P[ACK_BITS], _ack_rate(r, P[BASIC]), phy, symbol)
                air = d + sifs + ack
                others = t + air + difs
                if _outcome(ST, QL, LC, LR, lo, fu, ft, s, 0, t):
                    _row(RWI, RWF, eng, q, 0, pkt, bits, t, t + d, d, LOST, att, stage)
                    waits[i] = t + d + P[ACK_TIMEOUT] + difs
                    lost[0] = True
                    done = _failed(ST, STF, Q, QF, RHF, RHI, mac_limit, eng, engf, s, t + d, lost)
                else:
                    _row(RWI, RWF, eng, q, 0, pkt, bits, t, t + d, air, OK, att, stage)
                    waits[i] = t + air + difs
                    done = 1
            if done < 0:
                return GAVE_UP
            tx[i] = s if done == 0 else -1 - s     # remember which retry
        # The others keep the whole idle slots they saw until they sensed the medium busy;
        # everyone counts again from its own base.
        free = -INF
        for s in range(ns):
            w = others
            sender = False
            for i in range(n):
                if tx[i] == s or tx[i] == -1 - s:
                    w, sender = waits[i], True
            if not sender and draw:
                u = bu[ST[s, BOFF] + ST[s, BPOS]]
                ST[s, BPOS] += 1
                w = busy + P[EIFS] if u < P[EIFS_SHARE] else busy + difs
            if w > free:
                free = w
            if ST[s, GNEXT] >= 0 and not sender:
                ST[s, GNEXT] -= _elapsed_slots(STF[s, SBASE], window, slot)
            STF[s, SBASE] = w
        engf[BASE] = free
        for i in range(n):
            if tx[i] >= 0:
                s = tx[i]
                ST[s, GNEXT] = _backoff(ST, bu, cwp1, s, ST[s, CSTAGE])
                continue
            s = -1 - tx[i]
            ST[s, HAS], ST[s, GNEXT] = 0, -1
            r = _head_ready(ST, FRF, RHF, s)
            if r < INF:
                if r + difs <= STF[s, SBASE]:    # takes its next frame at once
                    ST[s, GNEXT] = _take(ST, STF, CM, FRF, FRI, RHF, RHI, Q, QM, QMOFF, bu, cwp1, s)
                else:
                    STF[s, JOIN] = r + difs


def run(medium, queues, stats: dict) -> None:
    """Run one call's queues on the CSMA cell `medium` to completion; fills `stats`."""
    prepare(queues)
    cell = Cell(medium, queues, stats)
    D, streams, links = _build(cell)
    try:
        while True:
            status = _dcf(D)
            if status == DONE:
                break
            if status == NEED_BACKOFF:
                D = _more(D, "bu", "ST", BOFF, BLEN, BPOS, int(D.eng[NEED]),
                          lambda s, n: streams[s].peek(n))
            elif status == NEED_OUTCOMES:
                D = _more(D, "lo", "LC", DOFF, DLEN, DPOS, int(D.eng[NEED]),
                          lambda l, n: links[l].loss.peek(n))
            elif status == NEED_ROWS:
                D = D._replace(RWI=np.concatenate([D.RWI, np.zeros_like(D.RWI)]),
                               RWF=np.concatenate([D.RWF, np.zeros_like(D.RWF)]))
            elif status == NEED_UNIFORMS:
                D = _more(D, "fu", "LC", UOFF, ULEN, UPOS, int(D.eng[NEED]),
                          lambda l, n: links[l].loss._u.peek(n))
            elif status == NEED_BLOCKS:
                D = _blocks(D, links, int(D.eng[NEED]), int(D.eng[NEED_BLOCK]))
            else:
                q = cell.queues[int(D.eng[ERR_Q])]
                k = int(D.eng[ERR_K])
                raise DeliveryError(q.flows[k].src, q.flows[k].dst, int(D.eng[ERR_PKT]), int(D.eng[ERR_ATT]),
                                    float(D.engf[ERR_END]))
        medium.free_at = float(D.engf[BASE])
    finally:       # commit what was used, even when delivery gave up
        for stream, used in zip(streams, D.ST[:, BPOS].tolist()):
            stream.take(used)
        for link, used, drawn in zip(links, D.LC[:, DPOS].tolist(), D.LC[:, UPOS].tolist()):
            if used:
                link.loss.skip(used)
            if drawn:
                link.loss._u.take(drawn)
        cell.close()
    n = int(D.eng[NROWS])
    cell.finish((D.RWI[:n, R_Q], D.RWI[:n, R_K], D.RWI[:n, R_PKT], D.RWF[:n, R_BITS], D.RWF[:n, R_START],
                 D.RWF[:n, R_END], D.RWF[:n, R_AIR], D.RWI[:n, R_CODE], D.RWI[:n, R_ATT], D.RWI[:n, R_STAGE]))


def _blocks(D: _Dcf, links: list, lc: int, block: int) -> _Dcf:
    """Fading link lc's table from `block` on, twice as long as before (at least BLOCKS)."""
    LC = D.LC.copy()
    n = max(BLOCKS, 2 * int(LC[lc, FBN]))
    cols = links[lc].fading.block_tables(block, n)
    parts, at = [], 0
    for l in range(LC.shape[0]):
        if l == lc:
            part = np.stack(cols, axis=1)
            LC[l, FB0], LC[l, FBN] = block, n
        else:
            o = int(LC[l, FBOFF])
            part = D.ft[o:o + int(LC[l, FBN])]
        LC[l, FBOFF] = at
        at += part.shape[0]
        parts.append(part)
    return D._replace(LC=LC, ft=np.concatenate(parts).astype(float).reshape(-1, 4))


def _more(D: _Dcf, values: str, table: str, off: int, count: int, used: int, short: int, peek) -> _Dcf:
    """Four times as many peeked values for row `short` of `table` (peeked again from the
    committed position: the same values, and more)."""
    T = getattr(D, table).copy()
    T[short, count] *= 4
    T[:, off] = np.concatenate(([0], np.cumsum(T[:, count])))[:-1]
    arr = np.concatenate([np.asarray(peek(i, int(n))) if n else np.zeros(0) for i, n in enumerate(T[:, count])])
    return D._replace(**{table: T, values: arr.astype(getattr(D, values).dtype)})


def _build(cell: Cell) -> tuple[_Dcf, list, list]:
    """The cell's stations, queues and links as the tables of a `_Dcf`; the stations' backoff
    streams and the links (rows of LC), in table order."""
    queues, p = cell.queues, cell.p
    ns, nq = len(cell.nodes), len(queues)
    kmax = max(len(q.links) for q in queues)
    streams = [cell.medium.csma_streams[n] for n in cell.nodes]
    links, lidx = [], {}
    for q in queues:
        for link in q.links:
            if id(link) not in lidx:
                lidx[id(link)] = len(links)
                links.append(link)
    Q = np.zeros((nq, 6), np.int64)
    QF = np.zeros((nq, 3))
    QL = np.full((nq, kmax), -1, np.int64)
    for i, q in enumerate(queues):
        Q[i] = (cell.multicast[i], q.reliable, q.retry_limit, len(q.links), q.fading, q.steps)
        r = cell.fixed_rate[i]
        QF[i] = (r if r is not None else np.nan, p.ack_s(r) if r else 0.0, q.rto_s)
        QL[i, :len(q.links)] = [lidx[id(l)] for l in q.links]
    multi = [i for i in range(nq) if cell.multicast[i]]
    QMOFF = np.zeros(nq, np.int64)
    masks = [np.zeros((0, kmax), np.bool_)]
    at = 0
    for i in multi:
        QMOFF[i] = at
        m = np.zeros((queues[i].n, kmax), np.bool_)
        m[:, :len(queues[i].links)] = queues[i].mask
        masks.append(m)
        at += queues[i].n
    # each station's frames: its queues' data merged by ready time, ties by queue then position
    ST = np.zeros((ns, 15), np.int64)
    STF = np.zeros((ns, 4))
    STF[:, JOIN] = INF
    STF[:, SBASE] = cell.medium.free_at
    FRF, FRI = [], []
    at = 0
    for s in range(ns):
        qis = [i for i, st in enumerate(cell.station_of) if st == s]
        ready = np.concatenate([queues[i].ready for i in qis])
        qn = np.concatenate([np.full(queues[i].n, i) for i in qis])
        pos = np.concatenate([np.arange(queues[i].n) for i in qis])
        o = np.lexsort((pos, qn, ready))
        cols = lambda name: np.concatenate([getattr(queues[i], name) for i in qis])[o]
        FRF.append(np.stack([ready[o], cols("bits")], axis=1))
        FRI.append(np.stack([qn[o], pos[o], cols("pkt"), cols("att")], axis=1).astype(np.int64))
        ST[s, FOFF], ST[s, FN], ST[s, ROFF] = at, o.size, at
        at += o.size
    ST[:, GNEXT] = -1
    # a station's ARQ heap holds at most one resend per frame: the same slots as its frames
    # ...and, where collisions of eifs_frames + 1 frames make every other station draw, a value
    # for about one in four of the cell's frames (asking for more re-peeks every station)
    others = at // 4 if ns > p.decoded_frames + 1 else 0
    guess = [max(MIN_PEEK, PEEK * int(ST[s, FN]) + others) for s in range(ns)]
    ST[:, BLEN] = guess
    ST[:, BOFF] = np.concatenate(([0], np.cumsum(guess)))[:-1]
    bu = np.concatenate([streams[s].peek(g) for s, g in enumerate(guess)])
    LC = np.zeros((len(links), 16), np.int64)
    LR = np.zeros((len(links), 4))
    node_no: dict = {}
    steps = [np.zeros((0, 2))]
    nsteps = 0
    outs, uni = [], [np.zeros(0)]
    use = np.zeros(len(links), np.int64)
    for i, q in enumerate(queues):
        for l in QL[i, :len(q.links)]:
            use[l] += q.n
    for l, link in enumerate(links):
        cur = cell.cursors[id(link)]
        LC[l, NONE], LC[l, TIMED] = cur.none, not cur.none and cur.pre is None
        LC[l, DLEN] = max(MIN_PEEK, PEEK * int(use[l])) if not (cur.none or cur.pre is None) else 0
        outs.append(link.loss.peek(int(LC[l, DLEN])) if LC[l, DLEN] else np.zeros(0, np.bool_))
        if LC[l, TIMED]:       # a fading link: uniforms peeked; its block table on first use
            LC[l, ULEN] = max(MIN_PEEK, PEEK * int(use[l]))
            uni.append(link.loss._u.peek(int(LC[l, ULEN])))
            LR[l, LCOH] = link.fading.coherence_s
        if can_capture(link):
            LC[l, CAPT], LR[l, LSLOPE] = 1, link.fading.p["per_slope_db"]
        LC[l, TXN] = node_no.setdefault(link.u, len(node_no))
        LC[l, RXN] = node_no.setdefault(link.v, len(node_no))
        LR[l, LRATE] = link.spec.rate_bps
        if link.steps is not None:
            LC[l, LSOFF], LC[l, LSN], LR[l, LPERIOD] = nsteps, link.steps.times.size, link.steps.period
            steps.append(np.stack([link.steps.times, link.steps.rates], axis=1))
            nsteps += link.steps.times.size
    LC[:, DOFF] = np.concatenate(([0], np.cumsum(LC[:, DLEN])))[:-1]
    LC[:, UOFF] = np.concatenate(([0], np.cumsum(LC[:, ULEN])))[:-1]
    rows = max(MIN_ROWS, ROWS * at * kmax)
    D = _Dcf(ST=ST, STF=STF, CM=np.zeros((ns, kmax), np.bool_),
             FRF=np.concatenate(FRF), FRI=np.concatenate(FRI), QM=np.concatenate(masks), QMOFF=QMOFF,
             RHF=np.zeros((at, 2)), RHI=np.zeros((at, 4 + kmax), np.int64), Q=Q, QF=QF, QL=QL, LC=LC,
             lo=np.concatenate(outs).astype(np.bool_), bu=bu.astype(float),
             P=np.array([p.slot_s, p.difs_s, p.sifs_s, p.phy_header_s, 8.0 * p.ack_bytes, p.symbol_s,
                         p.basic_rate_bps, p.ack_timeout_s, p.eifs_s, p.cca_s, p.decoded_frames, p.eifs_share,
                         cell.detect_db]),
             cwp1=np.array([p.cw(k) + 1 for k in range(p.retry_limit + 1)], dtype=np.int64),
             mac_limit=np.int64(p.retry_limit), RWI=np.zeros((rows, 6), np.int64), RWF=np.zeros((rows, 4)),
             eng=np.array([0, -1, -1, -1, -1, -1, -1], dtype=np.int64),
             engf=np.array([cell.medium.free_at, 0.0]), LR=LR, steps=np.concatenate(steps).astype(float),
             fu=np.concatenate(uni).astype(float), ft=np.zeros((0, 4)))
    for s in range(ns):
        r = _head_ready(ST, D.FRF, D.RHF, s)
        if r < INF:
            STF[s, JOIN] = r + p.difs_s
    return D, streams, links
