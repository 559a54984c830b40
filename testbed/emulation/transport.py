"""The emulated transport: a scheme's phases carried over the emulated network (channels/).

`EmulatedTransport.carry(phase)` runs the phase's traffic on `channels.Network`, advances the
virtual clock, charges the time to the iteration's split (compute / uplink / aggregation /
downlink) and counts the bits of the real messages. Per phase:
  Members     -> the round's members (who takes part, below);
  Uplink      -> Network.gather, each worker starting at its own compute end (stragglers);
  Scatter     -> Network.scatter: each worker's own message from the server (not made whole);
  Downlink    -> Network.broadcast from the server, made whole (see `_whole`); a lossy one
                 (`phases.Downlink.lossy`: the aggregate, codec packets naming their own
                 coordinates) is not: each worker's lost packets go to `IterationReport.missed`;
  Broadcast   -> Network.broadcast from a worker to every other worker, made whole;
  AllGather   -> Network.allgather among the workers, every source made whole;
  AllReduce   -> Network.ring_allreduce for the timing, `ring_sum` on the real bytes;
  Server/WorkerCompute -> the clock.
The first traffic of an iteration starts at each worker's own compute end; later phases at
the clock.

Who takes part (`begin(present=, deadline=)`): a worker not `present` (a device trace says it is
away) sends nothing and receives nothing this iteration, and routes go around it where the
topology has another way (`Network.set_away`). With a
`deadline` (absolute virtual seconds) a worker whose compute ends at or after it does not send.
The others are the round's *members* (`Members` phase: every node knows them, as after an
elastic rendezvous). Per collective:
  Uplink     the server stops waiting at the deadline: a member whose update has not fully
             arrived by then is left out (its packets were on the air and count in its bits);
  AllGather  the members send from their own compute ends to every present node; a member
             whose message is not whole at every present node by the deadline is left out by
             all of them (so every replica takes the same step), the exchange closes at the
             deadline;
  AllReduce  a ring cannot finish without each of its nodes, so it is formed over the members
             only, at the deadline if some present worker is still computing then (before it,
             nobody can know who will make it), else when the last member is ready; it then
             runs to its end. A present worker left out of it is sent the result afterwards by
             the member before it in worker order (downlink time and bits);
  Broadcast  (a leader's) from a member to every present node; if the round forms at the
             deadline, not before it.
A left-out worker has no entry in an Uplink/AllGather result (as if all its packets were lost)
and no buffer on the ring; `left_out` says who and why ("unavailable" | "deadline"). Bits:
what a node sends counts in its bits_up, what it receives in its bits_down (message lengths,
not retransmissions; a ring node sends 2(M-1) chunks for M members).

The link layer is reached only through `link`, a `channels.link_layer.LinkLayer` (by default
the run's `channels.Network`), so the distributed transport can run it on rank 0 alone
(`testbed.distributed.transport.RankZeroLink`). `end()` returns the iteration's `IterationReport`. `timer(name, seconds, iteration)`
(optional) receives the wall seconds of the link layer ("emulation") and of the scheme's own steps and
ring sums ("compression"), for the timing harness.
"""
from __future__ import annotations

import time

import numpy as np

from channels.energy import radio_seconds
from channels.link_layer import LinkLayer
from nodes.compression import phases as ph
from nodes.compression.ring import allreduce_bytes_per_node, ring_sum
from nodes.compression.transport import Transport
from testbed.emulation.edge_network import EdgeNetwork
from testbed.emulation.iteration_report import IterationReport, IterationTiming, Traffic
from testbed.errors import TransportError
from testbed.emulation.timing import Timer, timed


class EmulatedTransport(Transport):
    MAX_RESENDS = 50   # rounds of resending what receivers of a broadcast missed
    MAX_SILENT = 50    # iterations in a row with packets on the air and none through: fail

    def __init__(self, edge_network: EdgeNetwork, *, measured: bool = False,
                 link: LinkLayer | None = None, timer: Timer | None = None):
        self.edge_network = edge_network
        self.workers = list(edge_network.workers)
        self.measured = measured                  # scheme wall time charged to the clock
        self.link: LinkLayer = edge_network.network if link is None else link
        self.timer = timer
        self._silent = 0   # iterations in a row in which nothing got through
        self._away: list[str] = []   # the workers the link layer routes around
        self.begin(0, 0.0, {w: 0.0 for w in self.workers})

    # ------------------------------------------------------------------ per iteration
    def begin(self, iteration: int, start: float, ready: dict[str, float], *,
              present=None, deadline: float | None = None) -> None:
        self.iteration = iteration
        self.clock = float(start)
        self.ready = dict(ready)
        self.deadline = None if deadline is None else float(deadline)
        self.present = [w for w in self.workers if present is None or w in present]
        away = [w for w in self.workers if w not in self.present]
        if away != self._away:  # routes go around away workers (a call to the link layer)
            with self._emulating():
                self.link.set_away(away)
            self._away = away
        self.left_out: dict[str, str] = {w: "unavailable" for w in self.workers if w not in self.present}
        for w in self.present:  # its compute ends after the round closed: it does not send
            if self.deadline is not None and self.ready[w] >= self.deadline:
                self.left_out[w] = "deadline"
        self.members = [w for w in self.present if w not in self.left_out]
        # with a worker still computing at the deadline, the round is formed only then
        self.forms_at_deadline = len(self.members) < len(self.present)
        self.compute_end = max([self.ready[w] for w in self.members], default=self.clock)
        self.first = True  # the first traffic of an iteration starts at each worker's own end
        self.timing = IterationTiming(compute_s=self.compute_end - self.clock)
        self.traffic = Traffic()
        self.missed: dict[str, list[bytes]] = {}
        self._sent = self._through = False   # did any packet go on the air / get through

    def end(self) -> IterationReport:
        self._check_through()
        return IterationReport(self.clock, self.timing, self.traffic, dict(self.left_out),
                               {w: list(p) for w, p in self.missed.items()})

    def _check_through(self) -> None:
        """Lost packets that are not resent (a best-effort uplink, a lossy downlink) can leave
        a run training on nothing: after MAX_SILENT iterations in a row in which packets went
        on the air and none got through, the run fails rather than go on."""
        if self._sent and not self._through:
            self._silent += 1
        elif self._through:
            self._silent = 0
        if self._silent >= self.MAX_SILENT:
            raise TransportError(f"no packet got through in {self._silent} iterations in a row "
                                 f"(up to iteration {self.iteration}; best_effort delivery does "
                                 "not resend updates or the server's aggregate): the links' "
                                 "network.link.loss is too high for a run")

    def carriers(self):
        return {ph.Members: self.roll, ph.Uplink: self.uplink, ph.Downlink: self.downlink,
                ph.Scatter: self.scatter,
                ph.Broadcast: self.broadcast,
                ph.AllGather: self.allgather, ph.AllReduce: self.allreduce,
                ph.ServerCompute: self.server_compute, ph.WorkerCompute: self.worker_compute}

    def stepped(self, seconds: float) -> None:
        if self.timer is not None:
            self.timer("compression", seconds, self.iteration)
        if self.measured:  # encoding (before the first traffic) and decoding, as timed here
            if self.first:
                self.timing.compute_s += seconds
            else:
                self.timing.aggregation_s += seconds
            self.clock += seconds

    def _emulating(self):
        """A call to the link layer: its wall seconds go to the timer as "emulation"."""
        return timed(self.timer, "emulation", self.iteration)

    def _start(self, nodes) -> float | dict[str, float]:
        return {n: self.ready[n] for n in nodes} if self.first else self.clock

    def _advance(self, reports, kind: str, end: float | None = None) -> None:
        """Charge a phase's network time to `kind` and move the clock to its end (`end`: when
        the phase closes if not at its last packet, e.g. an uplink closed at its deadline)."""
        reports = reports if isinstance(reports, list) else [reports]
        if end is None:
            end = max(float(r.end_s) for r in reports)
        start = max(self.clock, self.compute_end) if self.first else self.clock
        setattr(self.timing, f"{kind}_s", getattr(self.timing, f"{kind}_s") + max(0.0, end - start))
        self.clock = max(self.clock, end)
        for r in reports:
            for f in r.flows:
                if len(f.arrived):
                    self._sent = True
                    self._through = self._through or bool(f.arrived.any())
            self.traffic.add_links(r)
            self.traffic.add_radio(radio_seconds(r, self.edge_network.shared))
        self.first = False

    # ------------------------------------------------------------------ compute phases
    def server_compute(self, phase: ph.ServerCompute) -> None:
        self.timing.aggregation_s += phase.seconds
        self.clock += phase.seconds

    def worker_compute(self, phase: ph.WorkerCompute) -> None:
        self.timing.compute_s += phase.seconds
        self.clock += phase.seconds

    # ------------------------------------------------------------------ traffic phases
    def uplink(self, phase: ph.Uplink) -> dict[int, list[bytes]]:
        names = self.workers
        sends = {names[w]: m.sizes for w, m in phase.messages.items() if names[w] not in self.left_out}
        late = [w for w, why in self.left_out.items() if why == "deadline"]
        if not sends:  # nobody sends: the server waits for the deadline (if any) and goes on
            self._advance([], "uplink", end=self.deadline if late else max(self.clock, self.compute_end))
            return {}
        with self._emulating():
            report = self.link.gather(sends, self.edge_network.server, at=self._start(sends))
        delivered = {}
        for flow in report.flows:
            w = names.index(flow.src)
            message = phase.messages[w]
            self.traffic.add_bits(self.traffic.bits_up, flow.src, message.nbits)
            self.traffic.uplink_done[flow.src] = float(flow.completion_s)
            if self.deadline is not None and float(flow.completion_s) > self.deadline:
                self.left_out[flow.src] = "deadline"  # still on the air when the round closed
                continue
            delivered[w] = [p for p, ok in zip(message.packets, flow.arrived) if ok]
        closed = any(why == "deadline" for why in self.left_out.values())
        self._advance(report, "uplink", end=self.deadline if closed else None)
        return delivered

    def scatter(self, phase: ph.Scatter) -> dict[int, tuple[list[bytes], float]]:
        """Each present worker's own message from the server, from the clock; not made whole."""
        names = self.workers
        sends = {names[w]: m for w, m in phase.messages.items() if names[w] in self.present}
        if not sends:
            return {}
        with self._emulating():
            report = self.link.scatter(self.edge_network.server, {n: m.sizes for n, m in sends.items()},
                                       at=self.clock)
        got = {}
        for flow in report.flows:
            message = sends[flow.dst]
            self.traffic.add_bits(self.traffic.bits_down, flow.dst, message.nbits)
            arrived = [p for p, ok in zip(message.packets, flow.arrived) if ok]
            last = float(np.nanmax(flow.arrival_s)) if flow.arrived.any() else float("nan")
            got[names.index(flow.dst)] = (arrived, last)
        self._advance(report, "downlink")
        return got

    def roll(self, phase: ph.Members) -> list[int]:
        return [i for i, w in enumerate(self.workers) if w in self.members]

    def _receivers(self) -> list[str]:
        """Every present worker (a late one still needs the round's result)."""
        return [w for w in self.workers if self.left_out.get(w) != "unavailable"]

    def _member(self, w: int, what: str) -> str:
        name = self.workers[w]
        if name not in self.members:
            raise TransportError(f"{what} from {name}, which takes no part in iteration "
                                 f"{self.iteration} ({self.left_out[name]}); a scheme picks "
                                 "senders among the Members")
        return name

    def downlink(self, phase: ph.Downlink) -> None:
        # an away worker receives nothing; it is sent the model when it is back (not modelled)
        dsts = self._receivers()
        with self._emulating():
            reports = [self.link.broadcast(self.edge_network.server, dsts, phase.message.sizes, at=self.clock)]
        if phase.lossy:  # lost is lost: each worker's replica lacks those coordinates
            for f in reports[0].flows:
                if f.src == self.edge_network.server and f.dst in dsts and not f.arrived.all():
                    lost = [p for p, ok in zip(phase.message.packets, f.arrived) if not ok]
                    self.missed.setdefault(f.dst, []).extend(lost)
        else:
            reports += self._whole(reports[0], {self.edge_network.server: phase.message.sizes})
        for n in dsts:
            self.traffic.add_bits(self.traffic.bits_down, n, phase.message.nbits)
        self._advance(reports, "downlink")

    def broadcast(self, phase: ph.Broadcast) -> list[bytes]:
        src = self._member(phase.src, "a broadcast")
        dsts = [n for n in self._receivers() if n != src]
        if not dsts:  # the only node present: nothing goes on the air
            return list(phase.message.packets)
        at = self.ready[src] if self.first else self.clock
        if self.first and self.forms_at_deadline:  # the leader is known when the round forms
            at = max(at, self.deadline)
        with self._emulating():
            reports = [self.link.broadcast(src, dsts, phase.message.sizes, at=at)]
        reports += self._whole(reports[0], {src: phase.message.sizes})
        self.traffic.add_bits(self.traffic.bits_up, src, phase.message.nbits)
        for n in dsts:
            self.traffic.add_bits(self.traffic.bits_down, n, phase.message.nbits)
        self._advance(reports, "uplink")
        return list(phase.message.packets)

    def allgather(self, phase: ph.AllGather) -> dict[int, list[bytes]]:
        names = {self.workers[w]: m for w, m in phase.messages.items() if self.workers[w] in self.members}
        if not names:  # nobody sends: the nodes wait for the deadline (if any) and go on
            self._advance([], "uplink", end=self.deadline if self.forms_at_deadline
                          else max(self.clock, self.compute_end))
            return {}
        if len(self._receivers()) == 1:  # the only node present: nothing goes on the air
            return {w: list(m.packets) for w, m in phase.messages.items() if self.workers[w] in names}
        sizes = {n: m.sizes for n, m in names.items()}
        # a present worker that does not send still receives: an empty message of its own,
        # "sent" when the first member's starts (its own compute end may lie far ahead)
        calls = {**sizes, **{n: [] for n in self._receivers() if n not in sizes}}
        at = self._start(sizes)
        if isinstance(at, dict):
            at = {**at, **{n: min(at.values()) for n in calls if n not in at}}
        with self._emulating():
            reports = [self.link.allgather(calls, at=at)]
        reports += self._whole(reports[0], sizes)
        whole = self._whole_at(reports, sizes)
        got = {}
        for w, message in phase.messages.items():
            src = self.workers[w]
            if src not in names:
                continue
            self.traffic.add_bits(self.traffic.bits_up, src, message.nbits)
            for dst in calls:
                if dst != src:
                    self.traffic.add_bits(self.traffic.bits_down, dst, message.nbits)
            if self.deadline is not None and whole[src] > self.deadline:
                self.left_out[src] = "deadline"  # not yet everywhere when the round closed
                continue
            got[w] = list(message.packets)
        closed = any(why == "deadline" for why in self.left_out.values())
        self._advance(reports, "uplink", end=self.deadline if closed else None)
        return got

    def allreduce(self, phase: ph.AllReduce):
        ring = [self.workers[w] for w in sorted(phase.buffers)]
        if ring != self.members:
            raise TransportError(f"a ring all-reduce over {', '.join(ring) or 'nobody'}, but the "
                                 f"members of iteration {self.iteration} are "
                                 f"{', '.join(self.members) or 'nobody'} (phases.Members)")
        # the ring is formed at the deadline if a present worker is still computing then
        start = max(self.clock, self.deadline if self.forms_at_deadline else self.compute_end)
        if not ring:  # nobody made it: the round closes empty
            self._advance([], "uplink", end=start)
            return None
        buffers = [phase.buffers[w] for w in sorted(phase.buffers)]
        size = len(buffers[0])
        if any(len(b) != size for b in buffers):
            raise TransportError("all-reduce buffers differ in length")
        with self._emulating():
            report = self.link.ring_allreduce(ring, size, at=start)
        sent = allreduce_bytes_per_node(size, len(ring), 4 if phase.dtype == "f32" else 2)
        for name in ring:
            self.traffic.add_bits(self.traffic.bits_up, name, 8 * sent)
        t = time.perf_counter()
        total = ring_sum(buffers, phase.dtype)
        if self.timer is not None:  # the sum on the real bytes is the method's work
            self.timer("compression", time.perf_counter() - t, self.iteration)
        self._advance(report, "uplink")
        self._hand_over(ring, size)
        return total

    def _hand_over(self, ring: list[str], size: int) -> None:
        """The ring's result to each present worker that was not on it, from the member before
        it in worker order (sent once per sender, made whole), as downlink time and bits."""
        late = [w for w in self._receivers() if w not in ring]
        if not late:
            return
        by_src: dict[str, list[str]] = {}
        for w in late:
            i = self.workers.index(w)
            src = next(self.workers[(i - j) % len(self.workers)] for j in range(1, len(self.workers))
                       if self.workers[(i - j) % len(self.workers)] in ring)
            by_src.setdefault(src, []).append(w)
        reports = []
        for src, dsts in by_src.items():
            per = min(self.link.payload_bytes(src, d) for d in dsts)
            q, r = divmod(size, per)
            sizes = [per] * q + ([r] if r else [])
            with self._emulating():
                rep = self.link.broadcast(src, dsts, sizes, at=self.clock)
            reports += [rep] + self._whole(rep, {src: sizes})
            self.traffic.add_bits(self.traffic.bits_up, src, 8 * size)
            for d in dsts:
                self.traffic.add_bits(self.traffic.bits_down, d, 8 * size)
        self._advance(reports, "downlink")

    # ------------------------------------------------------------------ making a spread whole
    def _whole(self, report, sizes: dict[str, list[int]]) -> list:
        """Resend what receivers missed until every receiver has every source's packets, as
        the link layer times it; model updates must arrive everywhere or the replicas would
        drift apart. Per source, on a shared cell one resend of the union reaches everyone; on
        dedicated links each receiver gets only what it missed. Returns the resends' reports."""
        missing: dict[str, dict[str, set]] = {}
        for f in report.flows:
            if f.src in sizes and f.dst != f.src and f.dst in self.workers:
                missing.setdefault(f.src, {})[f.dst] = set(np.flatnonzero(~f.arrived).tolist())
        reports: list = []
        t = float(report.end_s)
        for _ in range(self.MAX_RESENDS):
            missing = {s: m for s, per in missing.items() if (m := {d: x for d, x in per.items() if x})}
            if not missing:
                return reports
            round_reports = []
            for src, per in missing.items():
                sends = ([(list(per), sorted(set().union(*per.values())))] if self.edge_network.shared else
                         [([d], sorted(m)) for d, m in per.items()])
                for targets, idx in sends:
                    with self._emulating():
                        rep = self.link.broadcast(src, targets, [sizes[src][i] for i in idx], at=t)
                    round_reports.append(rep)
                    for f in rep.flows:
                        if f.dst in per:
                            per[f.dst] &= {idx[j] for j in np.flatnonzero(~f.arrived)}
            reports += round_reports
            t = max(float(r.end_s) for r in round_reports)
        src = next(iter(missing))
        dsts = ", ".join(sorted(missing[src]))
        raise TransportError(f"the broadcast from {src} still missed packets at {dsts} after "
                             f"{self.MAX_RESENDS} resends (a model update is resent until every "
                             "node has it, under best_effort delivery too): the links' "
                             "network.link.loss is too high for a run")

    def _whole_at(self, reports, sizes: dict[str, list[int]]) -> dict[str, float]:
        """When each source's packets were all at every receiver (over a spread and its resends)."""
        done = {src: -np.inf for src in sizes}
        for rep in reports:
            for f in rep.flows:
                if f.src in done and f.dst != f.src and f.dst in self.workers and f.arrived.any():
                    done[f.src] = max(done[f.src], float(np.max(f.arrival_s[f.arrived])))
        return done
