"""What energy accounting and mobility cost the link layer: packets per wall second of a gather
on an 8-station MCS fading cell, the stations fixed or walking (a per-block distance and
path-loss computation), and the wall time of `radio_seconds` per call report.

    python -m benchmarks energy [--full]
"""
from __future__ import annotations

import math
import time

import numpy as np

from channels.energy import radio_seconds
from channels.network import Network
from channels.topology import build_topology

LOSS = {"model": "fading", "fading": "none", "shadowing_db": 0.0, "rate": "mcs", "coherence_ms": 10.0,
        "path_loss_exponent": 3.5}


def _net(mobile: bool):
    table = {"topology": "star", "workers": 8, "medium": "shared",
             "link": {"delay_ms": 2.0, "delivery": "reliable", "loss": LOSS}}
    if mobile:
        table["mobility"] = {"model": "path", "paths": {
            f"w{i}": [[0, 10 * math.cos(2 * math.pi * i / 8), 10 * math.sin(2 * math.pi * i / 8)],
                      [140, 80 * math.cos(2 * math.pi * i / 8), 80 * math.sin(2 * math.pi * i / 8)]]
            for i in range(8)}}
    return Network(build_topology(table, 0), medium="shared", rng=np.random.default_rng(0))


def main(quick: bool = True) -> None:
    calls, packets = (5, 200) if quick else (20, 1000)
    print(f"{'stations':<10} {'packets':>9} {'wall s':>8} {'packets / wall s':>17} {'radio_seconds us/call':>22}")
    for mobile in (False, True):
        net = _net(mobile)
        net.gather({f"w{i}": [1460] * packets for i in range(8)}, "server", at=0.0)   # compile, warm
        t0, at, reps = time.perf_counter(), 1.0, []
        for _ in range(calls):
            rep = net.gather({f"w{i}": [1460] * packets for i in range(8)}, "server", at=at)
            reps.append(rep)
            at = rep.end_s + 1.0
        wall = time.perf_counter() - t0
        sent = sum(s.packets for r in reps for s in r.links.values())
        t1 = time.perf_counter()
        for r in reps:
            radio_seconds(r, True)
        per_call = (time.perf_counter() - t1) / len(reps) * 1e6
        print(f"{'walking' if mobile else 'fixed':<10} {sent:>9} {wall:>8.3f} {sent / wall:>17,.0f} {per_call:>22.1f}")


if __name__ == "__main__":
    main()
