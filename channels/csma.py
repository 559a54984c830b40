"""802.11 DCF basic access on a shared cell (`sharing = "csma"`), for both engines.

Every node that transmits on the cell in a call (the access point included) is one station
with one transmit queue (its frames first-in first-out by ready time). The rules are the
standard's DCF as ns-3.37 implements it (non-QoS; checked against it by validation/ns3):

- Airtime of a frame of B bits at rate R: phy_header + whole OFDM symbols of (22 + B) / (R x
  symbol) (16 service + 6 tail bits; `symbol_us = 0`: exactly B / R). DATA goes at the link's
  rate at the attempt's start (a station's own rate steps, channels/rate_steps.py, included); the ACK at the basic rate: `basic_rate_mbps`, or the highest of
  802.11a's basic rates (6, 12, 24 Mbit/s) not above the data rate (the data rate below 6).
- Each station counts idle slots from its own `base`: the end of the last busy period plus the
  idle time it must wait first (below). Its slot boundaries are base + j * slot. A station
  takes a frame into service at its first boundary at least DIFS after the frame was ready and
  draws its backoff counter uniformly in [0, CW] from its own random stream (seeded by the
  Network's generator); it transmits when the counter reaches 0, and the counter drops by one
  at the end of every whole idle slot. So a busy period freezes the counter and the slot it
  interrupted does not count (plain DCF; Bianchi's model and ns-3's EDCA count one more slot).
- One transmitter: DATA = airtime(frame bits, rate). If the loss model keeps the frame, the
  receiver acknowledges it: every station waits DATA + SIFS + ACK + DIFS. If the loss model
  drops it, the sender waits for the ACK timeout (`ack_timeout_us`, SIFS + slot + PHY header)
  and DIFS; the others heard the frame's duration (NAV) and wait as for a success.
- A station senses a transmission `cca_us` after it began (ns-3: preamble detection, 4 us): one
  whose counter reaches 0 within that window transmits too, and the slots it saw end in that
  window count. Two or more transmitters collide: each sender waits for its ACK timeout, or
  until the longest DATA ended if later, then DIFS; every other station received a frame it could not decode and waits EIFS (`eifs_us`,
  SIFS + an ACK at 6 Mbit/s + DIFS) after the longest DATA if it decoded the PHY header of
  the collision, else DIFS. Without preamble detection (`preamble_detection = false`) ns-3's
  receivers lock onto the first frame and decode its header when 2 frames collide
  (`eifs_frames`), each with probability 0.71 when 3 do (`eifs_share`, drawn from the station's
  own stream), and not beyond: the shares of collisions whose L-SIG ns-3's PHY decodes, counted
  from the receive drops validation/ns3/cell.cc logs (docs/results.md, section 3).
  With it (`true`, ns-3's default threshold model) a receiver locks onto a frame only when its
  preamble stands 4 dB above everything else it hears; colliding frames of equal power leave
  each at most 0 dB, so no one decodes a collision's header and the others wait DIFS.
- Capture: where every frame of a collision is unicast to the same receiver (which does not
  send) over a fading link with an MCS table (the received power known: channels/fading.py), the
  receiver locks onto the first frame (the earliest start; of equal ones the strongest, which
  arrives first where the path loss grows with distance) and decodes it as ns-3's PHY does: at
  its SINR (its SNR over 1 + the others' SNRs summed) on its rate's packet error waterfall
  (`capture_per`; with preamble detection only at 4 dB or more), one uniform from its link's
  loss stream where that error rate is below 1. A frame so decoded succeeds (its ACK follows
  SIFS after it): every station, its failed fellow senders included, counts again DIFS after
  the ACK or the longest DATA, whichever ends later. Otherwise all fail, and collided frames
  draw nothing from the loss model.
- CW starts at cw_min, becomes min(2 (CW + 1) - 1, cw_max) after each failure and returns to
  cw_min with the next frame. A frame that fails `retry_limit` times (dot11ShortRetryLimit:
  attempts, not retries) is dropped by the MAC; the link's delivery then decides: reliable
  delivery queues it again (ARQ, ready a retransmission timeout after the failed DATA ended),
  best effort reports it lost.
- Group frames (the access point's broadcast) are sent once without ACK and without MAC
  retries; every station waits DATA + DIFS. Receivers that missed them get ARQ's repairs.
- The MAC's ACK replaces the link's own `ack_bytes` airtime on the cell; it is the receiver's
  transmission, airtime (`busy_s`) of the link back.

The SimPy engine (`sim_medium`, the reference) visits every station's slot boundaries and counts
down, calling `Cell.attempt` for the outcome of every attempt. The fast engine
(`channels/csma_fast.py`) jumps from attempt to attempt in a compiled loop that records the same
attempt rows; `Cell.finish` turns either's rows into link and flow figures.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from channels.config import validate_csma
from channels.errors import DeliveryError
from channels.loss import FadingLoss, NoLoss
from channels.randomness import Prefetch, Stream
from channels.report import LinkStats

OK, LOST, COLLIDED = 0, 1, 2
# ns-3's ThresholdPreambleDetectionModel: a preamble is detected when its SNR, interference
# included, is at least 4 dB (its `Threshold` attribute; its -82 dBm floor is far below a cell's
# stations)
DETECT_DB = 4.0


_DEFAULT = validate_csma(None)   # [network.csma]'s defaults: channels.config.CSMA_KEYS, only there


@dataclass(frozen=True)
class CsmaParams:
    """802.11 DCF timings in seconds, rates in bit/s; every default is CSMA_KEYS' (converted:
    microseconds / 1e6 is the nearest double to the seconds, as the literals were)."""
    slot_s: float = _DEFAULT["slot_us"] / 1e6
    sifs_s: float = _DEFAULT["sifs_us"] / 1e6
    difs_s: float = _DEFAULT["difs_us"] / 1e6
    phy_header_s: float = _DEFAULT["phy_header_us"] / 1e6
    cw_min: int = _DEFAULT["cw_min"]
    cw_max: int = _DEFAULT["cw_max"]
    ack_bytes: int = _DEFAULT["ack_bytes"]
    retry_limit: int = _DEFAULT["retry_limit"]
    basic_rate_bps: float = _DEFAULT["basic_rate_mbps"] * 1e6
    symbol_s: float = _DEFAULT["symbol_us"] / 1e6
    ack_timeout_s: float = _DEFAULT["ack_timeout_us"] / 1e6
    eifs_s: float = _DEFAULT["eifs_us"] / 1e6
    cca_s: float = _DEFAULT["cca_us"] / 1e6
    eifs_frames: int = _DEFAULT["eifs_frames"]
    eifs_share: float = _DEFAULT["eifs_share"]
    preamble_detection: bool = _DEFAULT["preamble_detection"]

    @property
    def decoded_frames(self) -> int:
        """Collisions of at most this many frames leave a PHY header the other stations decode
        (EIFS), those of one more each decodes with probability eifs_share. With preamble
        detection none: a receiver locks onto a preamble only when it stands DETECT_DB above all
        else it hears, and k >= 2 frames of equal power leave each 10 log10(1 / (k - 1)) <= 0 dB."""
        if not self.preamble_detection:
            return self.eifs_frames
        k = 2
        while 10 * math.log10(1 / (k - 1)) >= DETECT_DB:
            k += 1
        return k - 2

    @classmethod
    def from_table(cls, t: dict | None) -> CsmaParams:
        """From a validated `[network.csma]` table (times in microseconds); none: the defaults."""
        if not t:
            return cls()
        return cls(t["slot_us"] * 1e-6, t["sifs_us"] * 1e-6, t["difs_us"] * 1e-6,
                   t["phy_header_us"] * 1e-6, t["cw_min"], t["cw_max"], t["ack_bytes"], t["retry_limit"],
                   t["basic_rate_mbps"] * 1e6, t["symbol_us"] * 1e-6, t["ack_timeout_us"] * 1e-6,
                   t["eifs_us"] * 1e-6, t["cca_us"] * 1e-6, t["eifs_frames"], t["eifs_share"],
                   t["preamble_detection"])

    def cw(self, stage: int) -> int:
        return min((self.cw_min + 1) * 2 ** stage - 1, self.cw_max)

    def ack_s(self, rate: float) -> float:
        """The ACK's airtime after DATA at `rate` (it goes at the basic rate)."""
        return airtime(8.0 * self.ack_bytes, ack_rate(rate, self.basic_rate_bps), self.phy_header_s, self.symbol_s)


def airtime(bits: float, rate: float, phy: float, symbol: float) -> float:
    """PHY header + the frame in whole OFDM symbols (16 service and 6 tail bits added), or
    exactly bits / rate when `symbol` is 0. (Both engines compute it with these operations.)"""
    if symbol <= 0.0:
        return phy + bits / rate
    return phy + math.ceil((bits + 22.0) / (rate * symbol) - 1e-9) * symbol


def ack_rate(rate: float, basic: float) -> float:
    """The control response rate: the highest of 802.11a's basic rates (6, 12, 24 Mbit/s) and
    `basic` that is at most both `basic` and the data rate; the data rate itself below 6 Mbit/s."""
    best = 0.0
    for b in (6e6, 12e6, 24e6, basic):
        if b <= basic and b <= rate and b > best:
            best = b
    return best if best > 0.0 else rate


def capture_per(snr: float, interference: float, thr_db: float, slope: float, detect_db: float) -> float:
    """The packet error rate of a frame received at SNR `snr` (linear) while frames of SNR
    `interference` (linear, summed) overlap it, at the rate whose 10% packet error SNR is
    `thr_db`: the fading model's waterfall (channels/fading.py, slope `slope` per dB) at the
    SINR; 1 where the SINR is below `detect_db` (preamble detection; -inf without). (Both
    engines compute it with these operations.)"""
    sinr_db = 10.0 * math.log10(snr / (1.0 + interference))
    if sinr_db < detect_db:
        return 1.0
    x = min(max(slope * (sinr_db - thr_db), -50.0), 50.0)
    return 1.0 / (1.0 + 9.0 * math.exp(x))


def collided_receptions(station: np.ndarray, start: np.ndarray, end: np.ndarray, code: np.ndarray,
                        p: CsmaParams) -> tuple[np.ndarray, ...]:
    """What the stations that did not transmit receive of each collision, as ns-3's PHY (preamble
    detection off) and its WifiRadioEnergyModel count it: such a station locks onto the collision's
    first frame (the earliest start; the first recorded of equal ones) and, where it decodes that
    frame's PHY header (the collisions after which it waits EIFS: `decoded_frames`), is in RX from
    the header's end to that frame's end, then CCA-busy (idle power) while the rest of the medium
    is busy; where it does not, it is CCA-busy throughout. A collision of decoded_frames + 1
    frames, after which each such station draws EIFS with probability eifs_share, is counted at
    that share of the time (its expectation: the draws are not recorded). A collision its
    receiver captured (an OK row among its frames: `Cell.attempt`) is received by the others as
    that frame (weight 0 here: they hear it as a success), and not by its other senders, which
    were sending (`captured`: their receive time of it is taken back).

    Arguments: the attempt rows' station, start, DATA end and outcome (in attempt order). Returns
    per collision the row of the frame locked onto (the captured one where one was), the RX
    interval's start and end, its weight (1, eifs_share or 0) and whether it was captured; and
    its senders: per sending station of each collision its first COLLIDED row and the
    collision's number."""
    rows = np.flatnonzero(code == COLLIDED)
    if not rows.size:
        z, zi = np.zeros(0), np.zeros(0, np.int64)
        return zi, z, z, z, np.zeros(0, bool), zi, zi
    # the frames of one collision start within cca_s of its first; collisions are further apart
    st = start[rows]
    new = np.r_[True, np.diff(st) > p.cca_s]
    gid = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    earliest = np.minimum.reduceat(st, first)
    cand = np.flatnonzero(st == earliest[gid])
    _, pick = np.unique(gid[cand], return_index=True)      # the first of the earliest, per collision
    locked = rows[cand[pick]]
    sid = np.asarray(station, np.int64)[rows]
    key = gid * (int(sid.max()) + 1) + sid
    _, once = np.unique(key, return_index=True)             # each sender's first row, per collision
    sender_rows, sender_group = rows[once], gid[once]
    k = np.bincount(sender_group, minlength=first.size)
    decoded = p.decoded_frames
    weight = np.where(k <= decoded, 1.0, np.where(k == decoded + 1, p.eifs_share, 0.0))
    # a success within cca_s of a collision's first frame is its captured frame (attempts are
    # further apart)
    ok = np.flatnonzero(code == OK)
    ok = ok[np.argsort(start[ok], kind="stable")]
    at = np.searchsorted(start[ok], earliest - p.cca_s)
    hit = at < ok.size
    hit[hit] = np.abs(start[ok[at[hit]]] - earliest[hit]) <= p.cca_s
    captured = hit
    locked[captured] = ok[at[captured]]
    weight[captured] = 0.0
    return (locked, start[locked] + p.phy_header_s, end[locked], weight, captured, sender_rows,
            sender_group)


def elapsed_slots(base: float, t: float, slot: float) -> int:
    """Whole idle slots a station counting from `base` saw before a busy period began at t: the
    largest j >= 0 with base + j * slot <= t (0 when t < base)."""
    if t < base:
        return 0
    j = int((t - base) / slot)
    while j > 0 and base + j * slot > t:
        j -= 1
    while base + (j + 1) * slot <= t:
        j += 1
    return j


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


def can_capture(link) -> bool:
    """A link whose receiver may decode its frame in a collision: the received power known (a
    fading link with an MCS table, its packet errors drawn from it)."""
    return link.fading is not None and link.fading.mcs is not None and isinstance(link.loss, FadingLoss)


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
        # a rate that changes with time (fading, a device's rate steps): taken per attempt
        self.fixed_rate = [None if q.fading or q.steps else min(l.spec.rate_bps for l in q.links)
                           for q in queues]
        self.multicast = [len(q.links) > 1 for q in queues]
        # a unicast queue whose receiver may capture its frame in a collision: its link
        self.capture_link = [q.links[0] if len(q.links) == 1 and can_capture(q.links[0]) else None
                             for q in queues]
        self.detect_db = DETECT_DB if self.p.preamble_detection else -math.inf
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

    def attempt(self, starts: list, frames: list) -> tuple[float, list]:
        """Transmit `frames` (one per station), each at its start time (the first is the
        earliest; the others began within `cca_s` of it). Returns when the stations that did not
        transmit count idle slots again (after DIFS or EIFS; a pair (EIFS, DIFS) when each
        draws which, see `others_resume`) and, per frame, (done, follow, at):
        done = the station is finished with it; follow = ARQ / forwarding items as
        `state.record` returns them; at = when its own sender counts again."""
        p = self.p
        rows = self.rows
        datas = []
        for t, f in zip(starts, frames):
            r = self.rate(f.qi, t)
            datas.append((airtime(f.bits, r, p.phy_header_s, p.symbol_s), r))
        out = []
        if len(frames) > 1:
            busy = max(t + d for t, (d, _) in zip(starts, datas))
            got = self._captured(starts, frames)
            if got >= 0:
                return self._capture(starts, frames, datas, got, busy)
            for t, f, (d, _) in zip(starts, frames, datas):
                lost = [0] if f.mask is None else np.flatnonzero(f.mask).tolist()
                for k in lost:
                    rows.append((f.qi, k, f.pkt, f.bits, t, t + d, d, COLLIDED, f.att, f.stage))
                # a unicast sender waits for its ACK timeout (or the medium's end), then DIFS
                own = busy + p.difs_s if self.multicast[f.qi] else max(t + d + p.ack_timeout_s, busy) + p.difs_s
                out.append((*self._failed(f, lost, t + d), own))
            if len(frames) == p.decoded_frames + 1:
                return (busy + p.eifs_s, busy + p.difs_s), out
            return busy + (p.eifs_s if len(frames) <= p.decoded_frames else p.difs_s), out
        t, f = starts[0], frames[0]
        d, r = datas[0]
        if self.multicast[f.qi]:
            lost = []
            for k in np.flatnonzero(f.mask).tolist():
                bad = self.qcur[f.qi][k].lost(t)
                rows.append((f.qi, k, f.pkt, f.bits, t, t + d, d, LOST if bad else OK, f.att, 0))
                if bad:
                    lost.append(k)
            done = self._failed(f, lost, t + d) if lost else (True, self._delivered(f, t + d))
            return t + d + p.difs_s, [(*done, t + d + p.difs_s)]
        air = d + p.sifs_s + p.ack_s(r)      # the others hold off for the ACK (NAV) either way
        if self.qcur[f.qi][0].lost(t):
            rows.append((f.qi, 0, f.pkt, f.bits, t, t + d, d, LOST, f.att, f.stage))
            return t + air + p.difs_s, [(*self._failed(f, [0], t + d), t + d + p.ack_timeout_s + p.difs_s)]
        rows.append((f.qi, 0, f.pkt, f.bits, t, t + d, air, OK, f.att, f.stage))
        return t + air + p.difs_s, [(True, self._delivered(f, t + d), t + air + p.difs_s)]

    def _captured(self, starts: list, frames: list) -> int:
        """The frame of a collision its receiver decodes (its index), or -1 (module doc:
        capture). Draws from the locked frame's loss stream where its error rate is below 1."""
        links = [self.capture_link[f.qi] for f in frames]
        if any(link is None for link in links):
            return -1
        rx = links[0].v
        if any(link.v != rx or link.u == rx for link in links):
            return -1
        snr = [float(link.fading.snr(t)[0]) for link, t in zip(links, starts)]
        first = min(starts)
        lock = -1
        for i, t in enumerate(starts):
            if t == first and (lock < 0 or snr[i] > snr[lock]):
                lock = i
        interference = 0.0
        for i, x in enumerate(snr):
            if i != lock:
                interference += x
        link = links[lock]
        per = capture_per(snr[lock], interference, float(link.fading.threshold_db(starts[lock])[0]),
                          link.fading.p["per_slope_db"], self.detect_db)
        if per >= 1.0 or link.loss.draw_below(per):
            return -1
        return lock

    def _capture(self, starts: list, frames: list, datas: list, got: int, busy: float) -> tuple[float, list]:
        """A collision whose frame `got` its receiver decoded: that one succeeds, the others fail;
        everyone counts again DIFS after its ACK or the longest DATA, whichever ends later."""
        p = self.p
        d, r = datas[got]
        air = d + p.sifs_s + p.ack_s(r)
        over = max(busy, starts[got] + air)
        out = []
        for i, (t, f, (d, _)) in enumerate(zip(starts, frames, datas)):
            if i == got:
                self.rows.append((f.qi, 0, f.pkt, f.bits, t, t + d, air, OK, f.att, f.stage))
                out.append((True, self._delivered(f, t + d), over + p.difs_s))
            else:
                self.rows.append((f.qi, 0, f.pkt, f.bits, t, t + d, d, COLLIDED, f.att, f.stage))
                out.append((*self._failed(f, [0], t + d), max(t + d + p.ack_timeout_s, over) + p.difs_s))
        return over + p.difs_s, out

    def others_resume(self, sid: int, others) -> float:
        """When station sid, which did not transmit, counts again: `others` from `attempt`, or,
        for a pair, EIFS with probability eifs_share (one draw from its stream), else DIFS."""
        if isinstance(others, tuple):
            return others[0] if self.backoff_u[sid].next() < self.p.eifs_share else others[1]
        return others

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
        if not self.multicast[f.qi] and f.stage + 1 < self.p.retry_limit:
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
        cell = str(self.medium.key[-1])
        # what the stations that did not send a collision receive of it: the frame they lock onto
        # (its link's `heard_collided_s`, received by every station but its ends; a captured
        # frame's link's `heard_s`) and not by its other senders (each sender's link's
        # `collided_deaf_s`, taken back from it)
        sid = np.asarray(self.station_of, np.int64)[qi]
        locked, rx0, rx1, w, captured, srows, sgroup = collided_receptions(sid, start, end, code, self.p)
        got = (rx1 - rx0) * w
        heard_col = np.zeros(len(qi))
        deaf = np.zeros(len(qi))
        np.add.at(heard_col, locked, got)
        other = sid[srows] != sid[locked[sgroup]]
        np.add.at(deaf, srows[other], np.where(captured, rx1 - rx0, got)[sgroup[other]])
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
                # DATA on this link; a success's ACK (after SIFS) on the link back
                data = end[sel] - start[sel]
                st.busy_s += float(data.sum())
                st.header_s += sel.size * self.p.phy_header_s
                st.cell = cell
                if not self.multicast[i]:   # the others lock onto a frame that did not collide
                    clear = code[sel] != COLLIDED
                    st.heard_s += float(data[clear].sum()) - int(clear.sum()) * self.p.phy_header_s
                if locked.size:
                    st.heard_collided_s += float(heard_col[sel].sum())
                    st.collided_deaf_s += float(deaf[sel].sum())
                if link.fading is not None:   # as state.record: the SNR each attempt started in
                    st.snr_db_sum += float((10 * np.log10(link.fading.snr(start[sel]))).sum())
                    st.snr_samples += sel.size
                if not self.multicast[i] and link.v is not None and ok.size:
                    rst = self.stats.setdefault((link.v, link.u), LinkStats())
                    rst.bytes += ok.size * self.p.ack_bytes
                    ack = float((air[ok] - (end[ok] - start[ok]) - self.p.sifs_s).sum())
                    rst.busy_s += ack
                    rst.header_s += ok.size * self.p.phy_header_s
                    rst.heard_s += ack - ok.size * self.p.phy_header_s
                    rst.cell = cell
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
    """The SimPy engine's process for a CSMA cell: visits every station's slot boundaries (each
    station counts from its own base) and counts down."""
    env = engine.env
    prepare(queues)
    cell = Cell(medium, queues, stats)
    p = cell.p
    slot, difs = p.slot_s, p.difs_s
    mine = [[i for i, s in enumerate(cell.station_of) if s == sid] for sid in range(len(cell.nodes))]
    ns = len(mine)
    current: list = [None] * ns    # [frame, counter, boundary it was taken at] of a contending station
    base = [medium.free_at] * ns   # station sid's boundaries: base[sid] + j * slot
    nxt = [0] * ns                 # the next boundary a contending station visits

    def head(sid):
        best = None
        for i in mine[sid]:
            q = queues[i]
            if q.n and (best is None or q.ready[0] < queues[best].ready[0]):
                best = i
        return best

    def next_boundary(sid):
        """The boundary station sid acts at next: its countdown's, or where it may take a frame."""
        if current[sid] is not None:
            return nxt[sid]
        i = head(sid)
        if i is None:
            return None
        return first_boundary(base[sid], max(queues[i].ready[0] + difs, env.now), slot)

    def visit(t, skip):
        """Every station (not in `skip`) acting at time t: takes a frame and draws its counter,
        or counts the idle slot that ends here; returns those whose counter is 0 (and t each)."""
        tx = []
        for sid in range(ns):
            j = next_boundary(sid)
            if sid in skip or j is None or base[sid] + j * slot != t:
                continue
            if current[sid] is None:     # takes its next frame here and draws its counter
                i = head(sid)
                pkt, bits, ready, att, mask = queues[i].pop(1)
                f = Frame(i, int(pkt[0]), float(bits[0]), float(ready[0]), int(att[0]),
                          mask[0] if cell.multicast[i] else None)
                current[sid] = [f, cell.backoff(sid, 0), j]
            elif j > current[sid][2]:    # the slot that ends here was idle
                current[sid][1] -= 1
            if current[sid][1] == 0:
                tx.append(sid)
            else:
                nxt[sid] = j + 1
        return tx, [t] * len(tx)

    engine.cells.append(cell)   # closed and finished after env.run(): this process may never end
    while engine.error is None:
        times = [base[sid] + j * slot for sid in range(ns) for j in [next_boundary(sid)] if j is not None]
        if not times:   # nobody has a frame: sleep until a relay hands this cell a packet
            yield _wake(engine, medium, env)
            continue
        t = min(times)
        if t > env.now:
            if any(c is not None for c in current):
                yield env.timeout(t - env.now)
            else:    # or until a relay hands this cell a packet that may go earlier
                yield env.timeout(t - env.now) | _wake(engine, medium, env)
                if env.now < t:
                    continue
        tx, starts = visit(t, set())
        if not tx:
            continue
        # stations that cannot sense the first transmission yet keep counting (and may join it)
        window = t + p.cca_s
        while True:
            later = [base[sid] + j * slot for sid in range(ns) if sid not in tx
                     for j in [next_boundary(sid)] if j is not None]
            u = min(later, default=math.inf)
            if u > window:
                break
            more, at = visit(u, set(tx))
            tx += more
            starts += at
        try:
            others, outs = cell.attempt(starts, [current[s][0] for s in tx])
        except DeliveryError as e:
            engine._fail(e)
            return
        own = dict(zip(tx, (o[2] for o in outs)))
        resume = [own[sid] if sid in own else cell.others_resume(sid, others) for sid in range(ns)]
        for sid in range(ns):
            base[sid], nxt[sid] = resume[sid], 0
            if current[sid] is not None:
                current[sid][2] = 0      # counting resumes at the new base
        medium.free_at = max(resume)
        for s, (done, follow, _) in zip(tx, outs):
            f = current[s][0]
            for item in follow:
                if item[0] == "retx":
                    queues[f.qi].insert(*item[1:])
                else:
                    engine._follow(queues[f.qi], [item], stats)
            current[s] = None if done else [f, cell.backoff(s, f.stage), 0]


def _wake(engine, medium, env):
    """The event a relay triggers when it hands this cell a packet."""
    ev = engine.wake[id(medium)] = env.event()
    return ev
