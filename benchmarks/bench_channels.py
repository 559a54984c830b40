"""Speed of the link layer: emulated packets (transmissions, one per hop) per wall second.

Single-hop target case: one iteration of 16 workers each sending 10 MB up a shared TDMA cell
with Bernoulli(0.01) loss and reliable delivery (selective repeat); the fast engine computes
packet trains with numpy. Multi-hop: a ring all-reduce of 16 workers over the same star, every
step relayed through the access point (2 hops per packet), on the relay engine, and on a routed
mesh. For comparison the per-packet SimPy engine on the same traffic (scaled down), and plain
SimPy's event rate (a bare timeout loop) as the ceiling of any one-event-per-packet design.
The single-hop case on an 802.11 DCF cell (`sharing = "csma"`): the fast engine takes one Python
step per attempt there (each station's next attempt depends on whether its last one collided),
the SimPy engine one event per slot. Run: `python -m benchmarks channels` (or `--full`).
"""
from __future__ import annotations

import time

import networkx as nx
import numpy as np
import simpy

from channels.link import LinkSpec
from channels.network import Network
from channels.topology import build_topology

WORKERS = 16
MB = 10


def _net(engine: str, medium: str = "shared", loss: float = 0.01, sharing: str = "tdma") -> Network:
    cfg = {"topology": "star", "workers": WORKERS, "medium": medium, "sharing": sharing,
           "link": {"bandwidth_mbps": 100.0, "delay_ms": 2.0, "delivery": "reliable",
                    "loss": {"model": "bernoulli", "p": loss}}}
    return Network(build_topology(cfg, 0), medium=medium, sharing=sharing, engine=engine,
                   rng=np.random.default_rng(0))


def _gather_rate(engine: str, megabytes: float, reps: int, medium: str = "shared",
                 sharing: str = "tdma") -> tuple[float, int, float]:
    best, packets, virt = float("inf"), 0, 0.0
    for r in range(reps):
        net = _net(engine, medium, sharing=sharing)
        per = net.payload_bytes("w0", "server")
        n = int(megabytes * 1e6) // per
        sends = {f"w{i}": [per] * n for i in range(WORKERS)}
        t0 = time.perf_counter()
        rep = net.gather(sends, "server", at=0.0)
        dt = time.perf_counter() - t0
        packets = sum(f.packets_sent for f in rep.flows)
        virt = rep.end_s
        best = min(best, dt)
    return packets / best, packets, virt


def _ring_rate(engine: str, megabytes: float, medium: str = "shared") -> tuple[float, int, float]:
    """A ring all-reduce relayed through the access point: hop transmissions per wall second."""
    net = _net(engine, medium)
    ring = [f"w{i}" for i in range(WORKERS)]
    t0 = time.perf_counter()
    rep = net.ring_allreduce(ring, int(megabytes * 1e6), at=0.0)
    dt = time.perf_counter() - t0
    packets = sum(s.packets for s in rep.links.values())
    return packets / dt, packets, rep.end_s


def _mesh_rate(engine: str, per_source: int) -> tuple[float, int, float]:
    """A gather over routes of 2-6 hops on a 4x4 grid of dedicated links (server in a corner);
    the relays next to the server overflow, so drops and retransmissions are part of it."""
    g = nx.grid_2d_graph(4, 4)
    g = nx.relabel_nodes(g, {(i, j): "server" if (i, j) == (0, 0) else f"w{4 * i + j}" for i, j in g.nodes})
    for n in g.nodes:
        g.nodes[n]["role"] = "server" if n == "server" else "worker"
    for a, b in g.edges:
        g.edges[a, b]["link"] = LinkSpec(bandwidth_mbps=100.0, delay_ms=2.0,
                                         loss={"model": "bernoulli", "p": 0.01}, retry_limit=1000)
    net = Network(g, medium="dedicated", engine=engine, rng=np.random.default_rng(0))
    far = [n for n in g.nodes if n != "server" and nx.shortest_path_length(g, n, "server") >= 2]
    per = net.payload_bytes(far[0], "server")
    t0 = time.perf_counter()
    rep = net.gather({w: [per] * per_source for w in far}, "server", at=0.0)
    dt = time.perf_counter() - t0
    packets = sum(s.packets for s in rep.links.values())
    return packets / dt, packets, rep.end_s


def _plain_simpy_events_per_s(n: int = 200_000) -> float:
    env = simpy.Environment()

    def proc():
        for _ in range(n):
            yield env.timeout(1e-6)

    env.process(proc())
    t0 = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - t0)


def run(quick: bool = True) -> list[dict]:
    reps = 3 if quick else 10
    rows = []
    rate, pk, virt = _gather_rate("fast", MB, reps)
    rows.append({"case": f"fast: {WORKERS} x {MB} MB, shared TDMA cell, Bernoulli 1%, reliable",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    rate, pk, virt = _gather_rate("fast", MB, reps, medium="dedicated")
    rows.append({"case": f"fast: {WORKERS} x {MB} MB, dedicated links, Bernoulli 1%, reliable",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    small = 0.2 if quick else 1.0
    rate, pk, virt = _gather_rate("simpy", small, 1)
    rows.append({"case": f"per-packet SimPy engine: {WORKERS} x {small} MB, same cell",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    ring_mb = 2 if quick else 40
    rate, pk, virt = _ring_rate("auto", ring_mb)
    rows.append({"case": f"multi-hop relay: ring all-reduce {ring_mb} MB via AP, shared TDMA cell",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    rate, pk, virt = _ring_rate("auto", ring_mb, medium="dedicated")
    rows.append({"case": f"multi-hop relay: ring all-reduce {ring_mb} MB via AP, dedicated links",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    n_mesh = 500 if quick else 10_000
    rate, pk, virt = _mesh_rate("auto", n_mesh)
    rows.append({"case": f"multi-hop relay: 4x4 grid mesh, 13 x {n_mesh} packets over 2-6 hops",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    rate, pk, virt = _ring_rate("simpy", 0.1 if quick else 1.0)
    rows.append({"case": f"per-packet SimPy engine: ring all-reduce {0.1 if quick else 1.0} MB, same cell",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    csma_mb = 2 if quick else MB
    rate, pk, virt = _gather_rate("fast", csma_mb, 1 if quick else 3, sharing="csma")
    rows.append({"case": f"fast: {WORKERS} x {csma_mb} MB, 802.11 DCF cell (csma), Bernoulli 1%, reliable",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    rate, pk, virt = _gather_rate("simpy", small, 1, sharing="csma")
    rows.append({"case": f"per-slot SimPy engine: {WORKERS} x {small} MB, same DCF cell",
                 "packets": pk, "virtual_s": virt, "packets_per_wall_s": rate})
    ev = _plain_simpy_events_per_s(100_000 if quick else 1_000_000)
    rows.append({"case": "plain SimPy: bare timeout events per wall second",
                 "packets": 0, "virtual_s": 0.0, "packets_per_wall_s": ev})
    return rows


def main(quick: bool = True) -> None:
    rows = run(quick)
    print(f"{'case':<72} {'packets':>9} {'virtual s':>10} {'per wall s':>12}")
    for r in rows:
        print(f"{r['case']:<72} {r['packets']:>9} {r['virtual_s']:>10.3f} {r['packets_per_wall_s']:>12,.0f}")
    target = rows[0]["packets_per_wall_s"]
    print(f"target >= 1,000,000 packets/s on the shared cell: {'met' if target >= 1e6 else 'NOT met'} "
          f"({target:,.0f})")
    multi = min(r["packets_per_wall_s"] for r in rows if r["case"].startswith("multi-hop"))
    print(f"target >= 1,000,000 packets/s multi-hop: {'met' if multi >= 1e6 else 'NOT met'} "
          f"(slowest multi-hop case {multi:,.0f})")
    csma = next(r["packets_per_wall_s"] for r in rows if "(csma)" in r["case"])
    print(f"target >= 1,000,000 packets/s on the 802.11 DCF cell: {'met' if csma >= 1e6 else 'NOT met'} "
          f"({csma:,.0f})")


if __name__ == "__main__":
    main()
