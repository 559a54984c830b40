"""`python -m benchmarks ns3`: the same saturated 802.11a cell in ns-3.37 and in the project's DCF
engine, in one run: wall seconds per successful frame of each and the ratio (target: ours >= 100x
fewer at N = 20). Skips in one line where ns-3 (libns3-dev) or g++ is missing.

Quick: N = 20 (ns-3 2 simulated s, ours 20000 frames). Full: N = 1, 2, 5, 10, 20, 50 (4 s, 30000).
"""
from __future__ import annotations

from validation.ns3 import run as ns3


def main(quick: bool = True) -> None:
    why = ns3.available()
    if why:
        print(why)
        return
    rows = ns3.compare([20] if quick else list(ns3.NS), seconds=2.0 if quick else 4.0,
                       frames=20000 if quick else 30000)
    print(f"{'N':>3} {'ns-3 us/frame':>14} {'ours us/frame':>14} {'speed-up':>9} {'ns-3 Mb/s':>10} {'ours Mb/s':>10}")
    for r in rows:
        a, b = r["ns3"], r["ours"]
        print(f"{r['n']:>3} {a['wall_per_frame_s'] * 1e6:>14.1f} {b['wall_per_frame_s'] * 1e6:>14.2f} "
              f"{r['speedup']:>8.0f}x {a['mbps']:>10.3f} {b['mbps']:>10.3f}")
