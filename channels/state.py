"""Run-time state shared by both engines: links (capacity, loss), media (airtime), flows, and
the transmitter queues of one call, plus `record()`, which turns transmissions into outcomes.

Semantics both engines implement (and tests hold them to):
- A medium sends one packet at a time. A dedicated link is its own medium; on a shared cell
  (TDMA) every link touching the access point uses the access point's medium and backlogged
  transmitters take turns, one packet each (round robin); OFDMA gives each of the n links of
  a cell carrying traffic in a call its own 1/n of the rate. A CSMA cell (802.11 DCF) contends
  instead: its semantics are in `channels/csma.py`.
- A transmitter queue serves its packets first-in first-out by the time they became ready:
  new data at the call's `at`, a retransmission once its loss is known (its transmission's end
  + the retransmission timeout 2*delay + rto_margin).
- A packet's airtime is wire bits / rate at its start (fading: the rate of the coherence block it
  starts in; a device's rate steps, `channels/rate_steps.py`: the step in force when it
  starts, even if the rate changes before it ends); on a trace link it leaves at the first
  unused delivery opportunity after it is ready. It arrives `delay` after its last bit leaves,
  unless its link's loss process drops it.
- Reliable delivery resends lost packets (selective repeat) up to `retry_limit` times, then
  raises DeliveryError. Best-effort reports the packet lost.
- Multi-hop: every hop of a flow is its own transmitter (per-hop ARQ). A packet reaching a relay
  at time T joins that hop's queue, ready at T, unless `queue_packets` packets ready by T are
  already waiting there (drop-tail: a loss on the hop before, which a reliable sender resends).
  Arrivals at an instant are taken in before any medium decides at that instant.
"""
from __future__ import annotations

import numpy as np

from channels.errors import DeliveryError
from channels.fading import FadingChannel
from channels.link import LinkSpec
from channels.loss import build_loss
from channels.report import FlowReport, LinkStats
from channels.trace import Trace


class LinkState:
    steps = None    # a device's rate over time (RateSteps, set_steps); None: spec.bandwidth_mbps

    def __init__(self, u: str, v: str, spec: LinkSpec, seed: int, distance_at=None):
        self.u, self.v = u, v
        self.seed = seed
        self.distance_at = distance_at   # ends that move (channels/mobility.py): distance(t)
        self.set_spec(spec, reset_loss=True)

    def set_spec(self, spec: LinkSpec, *, reset_loss: bool) -> None:
        old_loss = getattr(self, "spec", None) and self.spec.loss
        self.spec = spec
        self.fading = None
        if spec.loss["model"] == "fading":
            dist = spec.distance_m if spec.distance_m is not None else spec.loss["distance_m"]
            self.fading = FadingChannel(spec.loss, dist, self.seed + 7,
                                        distance_at=getattr(self, "distance_at", None))
        if reset_loss or spec.loss != old_loss:
            self.loss = build_loss(spec.loss, self.seed, self.fading)
        elif self.fading is not None:
            self.loss.fading = self.fading
        self.trace = Trace.load(spec.trace) if spec.trace else None
        self.trace_next = getattr(self, "trace_next", 0)
        self.delay_s = spec.delay_s
        self.rto_s = 2 * spec.delay_s + spec.rto_margin_ms / 1000.0

    def set_steps(self, steps) -> None:
        """The link's rate as a step function of time (`RateSteps`; None: its bandwidth_mbps
        again). A fading model still sets the rate of a link that has one."""
        self.steps = steps

    def rate_at(self, t: float) -> float:
        if self.fading is not None:
            return float(self.fading.rate_bps(t)[0])
        if self.steps is not None:
            return self.steps.rate(t)
        return self.spec.rate_bps

    def block_at(self, t) -> np.ndarray:
        """Changes where the rate may change: a fading block's or a rate step's boundary."""
        if self.fading is not None:
            return self.fading.block(t)
        if self.steps is not None:
            return self.steps.block(t)
        return np.zeros(np.shape(t), dtype=np.int64)


class Medium:
    """Airtime that one or more links share; `free_at` persists across calls. A CSMA cell also
    has its DCF parameters (`csma`, a `channels.csma.CsmaParams`) and each station's backoff
    stream, which persist across calls too."""

    def __init__(self, key, csma=None, csma_seed: tuple = ()):
        self.key = key
        self.free_at = 0.0
        self.csma = csma
        self.csma_seed = csma_seed
        self.csma_streams: dict = {}


class FlowAcc:
    """What one flow has achieved so far (filled in by `record`)."""

    def __init__(self, src: str, dst: str, n: int, at: float, payload=None):
        self.src, self.dst, self.at = src, dst, at
        self.payload = payload
        self.arrived = np.zeros(n, dtype=bool)
        self.arrival_s = np.full(n, np.nan)
        self.last_s = np.full(n, at)    # when each packet's last attempt arrived or would have
        self.sent = self.lost = self.retrans = self.bytes = 0
        self.lost_any = 0

    def report(self) -> FlowReport:
        done = float(self.last_s.max()) if self.last_s.size else self.at
        return FlowReport(self.src, self.dst, self.arrived, self.arrival_s, done, self.sent,
                          self.lost_any, self.retrans, self.bytes, self.payload)


class TxQueue:
    """One transmitter in one call: a unicast flow's hop, or a multicast to several links.

    Pending attempts are parallel arrays (packet index, wire bits, ready time, attempt number,
    target mask [attempt, target])."""

    def __init__(self, medium: Medium, links: list[LinkState], flows: list[FlowAcc], *,
                 share: float = 1.0, hop: int = 0, first_hop: bool = True):
        self.medium, self.links, self.flows = medium, links, flows
        self.share = share
        self.hop, self.first_hop = hop, first_hop
        self.next: TxQueue | None = None            # multi-hop: the queue of the next hop
        spec = links[0].spec
        self.reliable = spec.delivery == "reliable"
        self.retry_limit = spec.retry_limit
        self.ack_bits = 8 * spec.ack_bytes if self.reliable else 0
        self.rto_s = max(l.rto_s for l in links)
        self.trace = links[0].trace if len(links) == 1 else None
        self.fading = any(l.fading is not None for l in links)
        # rate steps but no fading: a rate known in advance, changing at breakpoints
        self.steps = not self.fading and any(l.steps is not None for l in links)
        self.queue_packets = spec.queue_packets
        self.pkt = np.empty(0, np.int64)
        self.bits = np.empty(0)
        self.ready = np.empty(0)
        self.att = np.empty(0, np.int64)
        self.mask = np.empty((0, len(links)), bool)

    @property
    def n(self) -> int:
        return self.pkt.size

    def push(self, pkt, bits, ready, att, mask) -> None:
        self.pkt = np.concatenate([self.pkt, pkt])
        self.bits = np.concatenate([self.bits, bits])
        self.ready = np.concatenate([self.ready, ready])
        self.att = np.concatenate([self.att, att])
        self.mask = np.concatenate([self.mask, mask])

    def insert(self, pkt, bits, ready, att, mask) -> None:
        """Push keeping first-in first-out by ready time (relays receive out of order)."""
        self.push(pkt, bits, ready, att, mask)
        if self.n > 1 and np.any(np.diff(self.ready) < 0):
            o = np.argsort(self.ready, kind="stable")
            self.pkt, self.bits, self.ready = self.pkt[o], self.bits[o], self.ready[o]
            self.att, self.mask = self.att[o], self.mask[o]

    def pop(self, k: int):
        out = (self.pkt[:k], self.bits[:k], self.ready[:k], self.att[:k], self.mask[:k])
        self.pkt, self.bits, self.ready = self.pkt[k:], self.bits[k:], self.ready[k:]
        self.att, self.mask = self.att[k:], self.mask[k:]
        return out

    def rate_at(self, t: float) -> float:
        return min(l.rate_at(t) for l in self.links) * self.share

    def airtime(self, bits: np.ndarray, mask: np.ndarray, rate: float) -> np.ndarray:
        return (bits + self.ack_bits * mask.sum(axis=1)) / rate


def record(q: TxQueue, pkt, bits, att, mask, starts, ends, air, stats: dict) -> list:
    """Outcomes of transmissions that happened, in order. Updates flows and link stats and
    returns what follows: [("retx", arrays)] to resend and [("fwd", k, arrays)] to forward."""
    wire = (bits / 8).astype(np.int64)
    follow = []
    retx_mask = np.zeros_like(mask)
    for k, link in enumerate(q.links):
        sel = mask[:, k]
        if not sel.any():
            continue
        idx = np.flatnonzero(sel)
        lost = link.loss.draw(starts[idx])
        st = stats.setdefault((link.u, link.v), LinkStats())
        st.packets += idx.size
        st.bytes += int(wire[idx].sum())
        st.lost += int(lost.sum())
        st.retransmitted += int((att[idx] > 0).sum())
        st.busy_s += float(air[idx].sum())
        if link.fading is not None:
            st.snr_db_sum += float((10 * np.log10(link.fading.snr(starts[idx]))).sum())
            st.snr_samples += idx.size
        if q.ack_bits and link.v is not None:
            rst = stats.setdefault((link.v, link.u), LinkStats())
            rst.bytes += int((~lost).sum()) * q.ack_bits // 8
        flow = q.flows[k]
        if q.first_hop:
            flow.sent += idx.size
            flow.retrans += int((att[idx] > 0).sum())
            flow.bytes += int(wire[idx].sum())
        flow.lost_any += int(lost.sum())
        ok = idx[~lost]
        arr = ends[ok] + link.delay_s
        if q.next is None:
            flow.arrived[pkt[ok]] = True
            flow.arrival_s[pkt[ok]] = arr
        else:
            follow.append(("fwd", pkt[ok], bits[ok], arr, ends[ok], att[ok]))
        bad = idx[lost]
        done = idx if q.next is None else (bad if not q.reliable else bad[:0])
        flow.last_s[pkt[done]] = np.maximum(flow.last_s[pkt[done]], ends[done] + link.delay_s)
        if q.reliable:
            retx_mask[bad, k] = True
    if q.reliable and retx_mask.any():
        rows = np.flatnonzero(retx_mask.any(axis=1))
        over = rows[att[rows] + 1 > q.retry_limit]
        if over.size:
            r = int(over[0])
            k = int(np.flatnonzero(retx_mask[r])[0])
            raise DeliveryError(q.flows[k].src, q.flows[k].dst, int(pkt[r]), int(att[r]) + 1, float(ends[r]))
        follow.append(("retx", pkt[rows], bits[rows], ends[rows] + q.rto_s, att[rows] + 1, retx_mask[rows]))
    return follow
