"""`Network`: the collectives of a run over one topology, in absolute virtual time.

Each call builds the transmitter queues of its traffic, runs them on the fast engine (single-hop
traffic), the relay engine (multi-hop) or the SimPy engine (when asked, or for multi-hop cases
the relay engine does not cover), and returns a CollectiveReport. Link
state (free airtime, loss-process state, fading blocks, trace position) persists across calls,
and every random draw comes from generators seeded by the `rng` given here. Virtual time only
moves forward: a call's `at` is at or after the end of the earlier calls on the same links.
`sizes` are packets' payload lengths (each <= `payload_bytes(src, dst)`, the smallest
`mtu_bytes - header_bytes` of the path); each link adds `header_bytes` per packet on the wire.
On a shared medium a broadcast is sent once; a broadcast or all-gather whose destinations are
not all adjacent to its source is relayed by a `server` adjacent to everyone.
"""
from __future__ import annotations

import pickle
from collections.abc import Iterable

import networkx as nx
import numpy as np

import zlib

from channels import fast
from channels.config import NETWORK_KEYS, validate_link
from channels.csma import CsmaParams
from channels.errors import ChannelConfigError
from channels.link import LinkSpec
from channels.link_layer import LinkLayer
from channels.mobility import link_distance
from channels.report import CollectiveReport, build_report
from channels.sim import SimEngine
from channels.state import FlowAcc, LinkState, Medium, TxQueue
from channels.topology import link_spec

STEERABLE = ("bandwidth_mbps", "delay_ms", "loss", "queue_packets", "delivery", "retry_limit",
             "rto_margin_ms", "ack_bytes")


class Network(LinkLayer):
    """The link layer of one topology (implements `channels.link_layer.LinkLayer`)."""

    def __init__(self, graph: nx.Graph, *, medium: str = "dedicated", sharing: str = "tdma",
                 rng: np.random.Generator | None = None, engine: str = "auto", csma: dict | None = None):
        for key, value in (("medium", medium), ("sharing", sharing), ("engine", engine)):
            NETWORK_KEYS[key].validate(f"network.{key}", value, ChannelConfigError)
        self.graph = graph
        self.medium, self.sharing, self.engine = medium, sharing, engine
        rng = rng if rng is not None else np.random.default_rng(0)
        pairs = sorted(((u, v) for a, b in graph.edges for u, v in ((a, b), (b, a))),
                       key=lambda p: (str(p[0]), str(p[1])))
        seeds = rng.integers(0, 2 ** 40, size=len(pairs))
        mobility = graph.graph.get("mobility")   # moving nodes: distance over time per link
        self._links = {(u, v): LinkState(u, v, link_spec(graph, u, v), int(s) * 16,
                                         distance_at=link_distance(mobility, u, v))
                       for (u, v), s in zip(pairs, seeds)}
        # 802.11 DCF parameters: given here, else the graph's (build_topology puts the validated
        # [network.csma] table there), else the 802.11a defaults. Drawn after the links' seeds.
        self.csma = CsmaParams.from_table(csma if csma is not None else graph.graph.get("csma"))
        self._csma_seed = int(rng.integers(0, 2 ** 40))
        self._media: dict = {}
        self._clock = 0.0
        self._paths: dict = {}      # (src, dst) -> route; cleared when link delays change
        self._away: frozenset = frozenset()   # nodes that forward nothing (set_away)...
        # ...of those that could: a node with fewer than two neighbours is inside no route, so
        # taking it away changes none (a cell's stations: routes stay cached as rounds sample)
        self._relays = frozenset(n for n in graph if len(set(nx.all_neighbors(graph, n))) >= 2)

    # ------------------------------------------------------------------ topology helpers
    def _role(self, n) -> str:
        return self.graph.nodes[n].get("role", "worker")

    def _hub_of(self, u, v):
        """The access point whose airtime the link u->v uses, if the medium is shared."""
        if self.medium != "shared":
            return None
        for n in (u, v):
            if self._role(n) == "server":
                return n
        return None

    def _check_node(self, n) -> None:
        if n not in self.graph:
            raise ChannelConfigError("node", n, f"a node of the topology ({', '.join(map(str, self.graph.nodes))})")

    def set_away(self, nodes) -> None:
        """Nodes that forward nothing for now (a device trace's away workers): routes go around
        them where the topology has another route, and through them only where it has none."""
        away = frozenset(nodes) & self._relays
        if away != self._away:
            self._away = away
            self._paths.clear()

    def path(self, src, dst) -> list:
        if (src, dst) in self._paths:
            return list(self._paths[(src, dst)])
        self._check_node(src)
        self._check_node(dst)

        def weight(a, b, d):
            return self._links[(a, b)].delay_s + 1e-9
        p = None
        if self._away:
            around = nx.restricted_view(self.graph, [n for n in self._away if n not in (src, dst)], [])
            try:
                p = nx.shortest_path(around, src, dst, weight=weight)
            except nx.NetworkXNoPath:
                p = None
        if p is None:
            try:
                p = nx.shortest_path(self.graph, src, dst, weight=weight)
            except nx.NetworkXNoPath:
                raise ChannelConfigError("network.topology", f"{src}->{dst}", "a graph with a path between them") from None
        self._paths[(src, dst)] = p
        return list(p)

    def payload_bytes(self, src, dst) -> int:
        p = self.path(src, dst)
        return min(self._links[(a, b)].spec.payload_bytes for a, b in zip(p, p[1:]))

    def links(self) -> list[tuple[str, str, LinkSpec]]:
        return [(u, v, st.spec) for (u, v), st in self._links.items()]

    def link_state(self, u, v) -> LinkState:
        return self._links[(u, v)]

    def set_link(self, u=None, v=None, *, one_way: bool = False, **changes) -> list[tuple[str, str]]:
        """Steer links: u=None every link; v=None every link of u; else the edge u-v, both ways
        (or only u->v with `one_way=True`)."""
        for k in changes:
            if k not in STEERABLE:
                raise ChannelConfigError(f"set_link.{k}", changes[k], "one of " + ", ".join(STEERABLE))
        checked = validate_link(changes, "set_link", partial=True)
        if u is not None:
            self._check_node(u)
        if v is not None:
            self._check_node(v)
            if not self.graph.has_edge(u, v):
                raise ChannelConfigError("set_link", f"{u}-{v}", "an edge of the topology")
        chosen = [(a, b) for (a, b) in self._links
                  if u is None or (v is None and u in (a, b))
                  or ((a, b) == (u, v) if one_way else {a, b} == {u, v})]
        self._paths.clear()
        for key in chosen:
            st = self._links[key]
            st.set_spec(st.spec.with_changes(**checked), reset_loss=False)
        for a, b in {tuple(sorted(k, key=str)) for k in chosen}:
            if (a, b) in self._links and (b, a) in self._links:
                self.graph.edges[a, b]["link"] = self._links[(a, b)].spec
        return chosen

    def set_rate_steps(self, u, v, steps) -> None:
        """The link u->v's rate over virtual time (one way): a `channels.rate_steps.RateSteps`
        (a device's own rate, taken at each packet's start), or None for its bandwidth_mbps.
        Kept in the link's state, so checkpoints carry it; steering bandwidth_mbps does not
        change a stepped link's rate."""
        if (u, v) not in self._links:
            raise ChannelConfigError("set_rate_steps", f"{u}->{v}", "a link of the topology")
        self._links[(u, v)].set_steps(steps)

    # ------------------------------------------------------------------ building a call
    def _medium(self, key) -> Medium:
        if key not in self._media:
            if self.sharing == "csma" and key[0] == "cell":
                self._media[key] = Medium(key, self.csma, (self._csma_seed, zlib.crc32(str(key).encode())))
            else:
                self._media[key] = Medium(key)
        return self._media[key]

    def _check_sizes(self, src, dst, sizes) -> np.ndarray:
        arr = np.asarray(list(sizes), dtype=np.int64)
        limit = self.payload_bytes(src, dst)
        if arr.size and (arr.max() > limit or arr.min() < 0):
            bad = int(arr.max()) if arr.max() > limit else int(arr.min())
            raise ValueError(f"packet of {bad} bytes from {src} to {dst}: sizes must be 0..{limit} "
                             "(payload_bytes of the path, mtu_bytes - header_bytes)")
        return arr

    class _Call:
        def __init__(self):
            self.unicast: list = []     # (flow, path, sizes, ready)
            self.multicast: list = []   # (src, dsts, flows, sizes, ready)

    def _run(self, call: _Call, start: float, pattern: str, stats: dict | None = None) -> list[FlowAcc]:
        stats = {} if stats is None else stats
        # OFDMA: links of one cell that carry traffic in this call split its band equally.
        cell_links: dict = {}
        for flow, path, _, _ in call.unicast:
            for a, b in zip(path, path[1:]):
                hub = self._hub_of(a, b)
                if hub is not None:
                    cell_links.setdefault(hub, set()).add((a, b))
        for src, dsts, _, _, _ in call.multicast:
            hub = self._hub_of(src, dsts[0])
            if hub is not None:
                cell_links.setdefault(hub, set()).add(("mcast", src))

        def medium_and_share(a, b, mkey):
            hub = self._hub_of(a, b)
            if hub is None:
                return self._medium(("link", a, b)), 1.0
            if self.sharing in ("tdma", "csma"):
                return self._medium(("cell", hub)), 1.0
            return self._medium(mkey), 1.0 / len(cell_links[hub])

        media: dict = {}
        multi_hop = False
        for flow, path, sizes, ready in call.unicast:
            prev = None
            for h, (a, b) in enumerate(zip(path, path[1:])):
                link = self._links[(a, b)]
                med, share = medium_and_share(a, b, ("link", a, b))
                q = TxQueue(med, [link], [flow], share=share, hop=h, first_hop=h == 0)
                if h == 0:
                    n = sizes.size
                    q.push(np.arange(n), (sizes + link.spec.header_bytes) * 8.0, ready,
                           np.zeros(n, np.int64), np.ones((n, 1), bool))
                else:
                    multi_hop = True
                    prev.next = q
                media.setdefault(id(med), (med, []))[1].append(q)
                prev = q
        for src, dsts, flows, sizes, ready in call.multicast:
            links = [self._links[(src, d)] for d in dsts]
            med, share = medium_and_share(src, dsts[0], ("mcast", src))
            q = TxQueue(med, links, flows, share=share)
            n = sizes.size
            hdr = max(l.spec.header_bytes for l in links)
            q.push(np.arange(n), (sizes + hdr) * 8.0, ready, np.zeros(n, np.int64), np.ones((n, len(links)), bool))
            media.setdefault(id(med), (med, []))[1].append(q)

        for med, _ in media.values():
            med.free_at = max(med.free_at, 0.0)
        engine = self._engine_for(media, multi_hop)
        if engine == "simpy":
            t0 = min([start, *(m.free_at for m, _ in media.values())])
            SimEngine(t0).run(media, stats)
        elif engine == "relay":
            from channels import relay   # deferred: numba's compiled relay, imported by multi-hop only
            relay.run(media, stats)
        else:
            for med, queues in media.values():
                fast.run_medium(med, queues, stats)
        return stats

    def _engine_for(self, media: dict, multi_hop: bool) -> str:
        """SimPy when asked; else numpy trains for single-hop traffic, the relay engine for
        multi-hop traffic it covers (`auto` falls back to SimPy for the rest)."""
        if self.engine == "simpy":
            return "simpy"
        if not multi_hop:
            return "fast"
        # deferred: numba's compiled relay, imported by multi-hop only
        from channels import relay
        why = relay.unsupported(media)
        if why is None:
            return "relay"
        if self.engine == "fast":
            raise ChannelConfigError("network.engine", "fast",
                                     f'"auto" or "simpy" for multi-hop paths over {why}')
        return "simpy"

    def _finish(self, pattern, start, flows: list[FlowAcc], stats) -> CollectiveReport:
        rep = build_report(pattern, start, [f.report() for f in flows], stats)
        self._clock = max(self._clock, rep.end_s)
        return rep

    def _flow(self, call, src, dst, sizes, ready) -> FlowAcc:
        arr = self._check_sizes(src, dst, sizes)
        ready_arr = np.full(arr.size, float(ready)) if np.isscalar(ready) else np.asarray(ready, float)
        flow = FlowAcc(src, dst, arr.size, float(np.min(ready_arr)) if arr.size else float(ready if np.isscalar(ready) else 0),
                       payload=arr)
        call.unicast.append((flow, self.path(src, dst), arr, ready_arr))
        return flow

    # ------------------------------------------------------------------ collectives
    def transfer(self, src, dst, sizes: list[int], at: float) -> CollectiveReport:
        call = self._Call()
        flow = self._flow(call, src, dst, sizes, at)
        stats = self._run(call, at, "p2p")
        return self._finish("p2p", at, [flow], stats)

    def gather(self, sends: dict, dst, at) -> CollectiveReport:
        call = self._Call()
        ats = at if isinstance(at, dict) else {s: at for s in sends}
        missing = [s for s in sends if s not in ats]
        if missing:
            raise ValueError(f"gather: no start time for {', '.join(map(str, missing))} in `at`")
        flows = [self._flow(call, s, dst, sizes, float(ats[s])) for s, sizes in sends.items() if s != dst]
        start = min([float(ats[s]) for s in sends] or [0.0])
        stats = self._run(call, start, "gather")
        return self._finish("gather", start, flows, stats)

    def scatter(self, src, sends: dict, at) -> CollectiveReport:
        """The mirror of `gather`: each destination's own packets from `src`, one unicast flow
        each, in one call (on a cell, `src` is one station whose frames queue first in, first
        out; on dedicated links the flows run side by side). `at`: one start, or one per
        destination."""
        call = self._Call()
        ats = at if isinstance(at, dict) else {d: at for d in sends}
        flows = [self._flow(call, src, d, sizes, float(ats[d])) for d, sizes in sends.items() if d != src]
        start = min([float(ats[d]) for d in sends] or [0.0])
        stats = self._run(call, start, "scatter")
        return self._finish("scatter", start, flows, stats)

    def _spread(self, src, dsts, sizes_arr, ready, call) -> list[FlowAcc]:
        """One source's packets to several destinations adjacent to it (sent once on a cell)."""
        dsts = [d for d in dsts if d != src]
        if not dsts:
            return []
        hub = self._hub_of(src, dsts[0])
        if hub == src and all(self.graph.has_edge(src, d) for d in dsts):
            flows = [FlowAcc(src, d, sizes_arr.size, float(np.min(ready)) if sizes_arr.size else 0.0, payload=sizes_arr)
                     for d in dsts]
            call.multicast.append((src, dsts, flows, sizes_arr, ready))
            return flows
        return [self._flow(call, src, d, sizes_arr, ready) for d in dsts]

    def _relay_hub(self, srcs: Iterable, dsts: list):
        """A server adjacent to every source and destination, to relay through, if any."""
        for n, a in self.graph.nodes(data=True):
            if a.get("role") == "server" and all(self.graph.has_edge(n, x) for x in [*srcs, *dsts] if x != n):
                return n
        return None

    def broadcast(self, src, dsts: list, sizes: list[int], at: float) -> CollectiveReport:
        self._check_node(src)
        dsts = [d for d in dsts if d != src]
        for d in dsts:
            self._check_node(d)
        sizes_arr = np.asarray(list(sizes), dtype=np.int64)
        hub = self._relay_hub([src], dsts)
        if all(self.graph.has_edge(src, d) for d in dsts) or hub is None:
            call = self._Call()
            for d in dsts:
                self._check_sizes(src, d, sizes_arr)
            flows = self._spread(src, dsts, sizes_arr, np.full(sizes_arr.size, float(at)), call)
            stats = self._run(call, at, "broadcast")
            return self._finish("broadcast", at, flows, stats)
        # Through the hub: the source sends once to it, the hub spreads what arrived.
        up, stats = self._Call(), {}
        first = self._flow(up, src, hub, sizes_arr, at)
        self._run(up, at, "broadcast", stats)
        down = self._Call()
        got = np.flatnonzero(first.arrived)
        rest = [d for d in dsts if d != hub]
        for d in rest:
            self._check_sizes(hub, d, sizes_arr)
        part = self._spread(hub, rest, sizes_arr[got], first.arrival_s[got], down)
        self._run(down, at, "broadcast", stats)
        flows = [first] if hub in dsts else []
        for f in part:
            flows.append(_remap(f, got, sizes_arr.size, first))
        return self._finish("broadcast", at, flows, stats)

    def allgather(self, sends: dict, at) -> CollectiveReport:
        names = list(sends)
        ats = at if isinstance(at, dict) else {s: at for s in names}
        start = min(float(ats[s]) for s in names) if names else 0.0
        hub = self._relay_hub(names, names)
        pairs_adjacent = all(self.graph.has_edge(a, b) for a in names for b in names if a != b)
        stats: dict = {}
        if pairs_adjacent or hub is None:
            call = self._Call()
            flows = []
            for s in names:
                arr = np.asarray(list(sends[s]), dtype=np.int64)
                for d in names:
                    if d != s:
                        self._check_sizes(s, d, arr)
                flows += self._spread(s, names, arr, np.full(arr.size, float(ats[s])), call)
            self._run(call, start, "allgather", stats)
            return self._finish("allgather", start, flows, stats)
        up = self._Call()
        firsts = {s: self._flow(up, s, hub, sends[s], float(ats[s])) for s in names if s != hub}
        self._run(up, start, "allgather", stats)
        down = self._Call()
        flows = [f for f in firsts.values()]
        pending = []
        for s in names:
            arr = np.asarray(list(sends[s]), dtype=np.int64)
            others = [d for d in names if d not in (s, hub)]
            if s == hub:
                pending += [(None, None, f) for f in self._spread(hub, others, arr, np.full(arr.size, float(ats[s])), down)]
                continue
            got = np.flatnonzero(firsts[s].arrived)
            part = self._spread(hub, others, arr[got], firsts[s].arrival_s[got], down)
            pending += [(got, firsts[s], f) for f in part]
        self._run(down, start, "allgather", stats)
        for got, first, f in pending:
            flows.append(f if first is None else _remap(f, got, first.arrived.size, first))
        return self._finish("allgather", start, flows, stats)

    def ring_allreduce(self, ring: list, payload_bytes: int, at: float) -> CollectiveReport:
        """Reduce-scatter then all-gather: 2(N-1) steps; in each, every node sends one chunk
        (about payload/N bytes) to its successor once it has received the previous step's."""
        n = len(ring)
        for r in ring:
            self._check_node(r)
        if n < 2 or payload_bytes <= 0:
            return self._finish("allreduce", at, [], {})
        base, extra = divmod(payload_bytes, n)
        chunks = [base + 1] * extra + [base] * (n - extra)     # np.array_split's sizes
        ready = {r: float(at) for r in ring}
        stats: dict = {}
        flows: list[FlowAcc] = []
        for step in range(2 * (n - 1)):
            call = self._Call()
            step_flows = []
            for i, node in enumerate(ring):
                succ = ring[(i + 1) % n]
                c = (i - step) % n if step < n - 1 else (i + 1 - (step - n + 1)) % n
                per = self.payload_bytes(node, succ)
                q, r = divmod(chunks[c], per)
                sizes = [per] * q + ([r] if r else [])
                step_flows.append((succ, self._flow(call, node, succ, sizes, ready[node])))
            self._run(call, at, "allreduce", stats)
            for succ, f in step_flows:
                ready[succ] = f.report().completion_s
            flows += [f for _, f in step_flows]
        return self._finish("allreduce", at, flows, stats)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> bytes:
        """What a resumed run needs so that this network draws what it would have drawn next:
        every link's spec (steering included), loss-process state (Gilbert-Elliott's state),
        fading channel, trace position and random streams (their generators' bit_generator
        states and the values already drawn), every medium's free time, and the clock. Between
        calls no packet is queued, so nothing else is in flight. Pickled: the objects are the
        link layer's own and only a network of the same topology loads them."""
        return pickle.dumps({"links": self._links, "media": self._media, "clock": self._clock})

    def load_state_dict(self, state: bytes) -> None:
        s = pickle.loads(state)
        if set(s["links"]) != set(self._links):
            raise ValueError("Network.load_state_dict: the state is of another topology "
                             f"({len(s['links'])} links, this network has {len(self._links)})")
        self._links, self._media, self._clock = s["links"], s["media"], s["clock"]
        for a, b in {tuple(sorted(k, key=str)) for k in self._links}:  # as set_link keeps them
            if self.graph.has_edge(a, b):
                self.graph.edges[a, b]["link"] = self._links[(a, b)].spec


def _remap(f: FlowAcc, got: np.ndarray, n: int, first: FlowAcc) -> FlowAcc:
    """A relayed flow in the numbering of the source's packets (lost at the hub = lost)."""
    out = FlowAcc(first.src, f.dst, n, first.at, payload=first.payload)
    out.arrived[got] = f.arrived
    out.arrival_s[got] = f.arrival_s
    out.last_s[:] = first.last_s
    out.last_s[got] = np.maximum(first.last_s[got], f.last_s)
    out.sent, out.retrans, out.bytes, out.lost_any = f.sent, f.retrans, f.bytes, f.lost_any + first.lost_any
    return out

