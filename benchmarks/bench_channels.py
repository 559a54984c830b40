"""Speed of the link layer: emulated packets per wall second.

The target case: one iteration of 16 workers each sending 10 MB up a shared TDMA cell with
Bernoulli(0.01) loss and reliable delivery (selective repeat). The fast engine computes packet
trains with numpy; for comparison the same traffic (scaled down) through the per-packet SimPy
engine, and plain SimPy's event rate (a bare timeout loop) as the ceiling of any
one-event-per-packet design. Run: `python -m benchmarks channels` (or `--full`).
"""
from __future__ import annotations

import time

import numpy as np
import simpy

from channels.network import Network
from channels.topology import build_topology

WORKERS = 16
MB = 10


def _net(engine: str, medium: str = "shared", loss: float = 0.01) -> Network:
    cfg = {"topology": "star", "workers": WORKERS, "medium": medium,
           "link": {"bandwidth_mbps": 100.0, "delay_ms": 2.0, "delivery": "reliable",
                    "loss": {"model": "bernoulli", "p": loss}}}
    return Network(build_topology(cfg, 0), medium=medium, engine=engine, rng=np.random.default_rng(0))


def _gather_rate(engine: str, megabytes: float, reps: int, medium: str = "shared") -> tuple[float, int, float]:
    best, packets, virt = float("inf"), 0, 0.0
    for r in range(reps):
        net = _net(engine, medium)
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
    ev = _plain_simpy_events_per_s(100_000 if quick else 1_000_000)
    rows.append({"case": "plain SimPy: bare timeout events per wall second",
                 "packets": 0, "virtual_s": 0.0, "packets_per_wall_s": ev})
    return rows


def main(quick: bool = True) -> None:
    rows = run(quick)
    print(f"{'case':<66} {'packets':>9} {'virtual s':>10} {'per wall s':>12}")
    for r in rows:
        print(f"{r['case']:<66} {r['packets']:>9} {r['virtual_s']:>10.3f} {r['packets_per_wall_s']:>12,.0f}")
    target = rows[0]["packets_per_wall_s"]
    print(f"target >= 1,000,000 packets/s on the shared cell: {'met' if target >= 1e6 else 'NOT met'} "
          f"({target:,.0f})")


if __name__ == "__main__":
    main()
