"""The cell as ns-3.37 sees it, beside the project's link layer: `python -m validation.ns3.run`.

Builds `cell.cc` (our own scenario against ns-3's API; Debian's `libns3-dev`) with g++ and runs
it, then runs the same cell through the project's network (`testbed.emulation.edge_network.build_network`, the
`[network]` table `testbed probe` reads, default `[network.csma]`; only the rate and frame sizes
are the scenario's): N saturated stations sending 1536-byte MPDUs (1500 bytes of payload) at
54 Mbit/s to one sink, ACK at 24 Mbit/s.

Figures per N: saturation throughput (payload Mbit/s) and collided attempts per success, in ns-3
over its measured window and in ours while every station still has frames (until the first
flow completes, as `testbed probe` reports `saturated_mbps`); and wall seconds per successful
frame of each whole run (ns-3 in C++, ours in Python + numba), whose ratio is the speed-up.
Both PHY settings: ns-3 with its preamble detection disabled against our default `[network.csma]`,
and ns-3's default PHY (threshold preamble detection) against `preamble_detection = true`. Then
walks (walk.py): 1, 3 and 5 stations walking away from the access point and 5 on random
waypoints in a 60 m square (`--walkers`, `--waypoint`), seeds 1-3 (`--walk-seeds`): throughput
and radio joules per 1 s window, the wall time of each side, and a last table of each one's worst
window where the links hold beside the noise floor (each side against itself with another RNG
run, walk.py; `--no-floor` skips it) and its speed ratio. Where ns-3 is missing, `available()` says why in one
line and nothing runs.
`radio_energy_defaults()` builds `energy_defaults.cc` and reads the WiFi radio energy model's
default currents, the source of channels/data/energy_profiles.toml's `ns3_wifi` radio.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from channels import csma
from channels.config import validate_network
from testbed.emulation.edge_network import build_network
from validation.ns3 import walk
from validation.ns3.build import HERE, LIBS, available, build  # noqa: F401 (re-exported)

SOURCE = HERE / "cell.cc"
RATE_MBPS, MPDU, PAYLOAD = 54.0, 1536, 1500
NS = (1, 2, 5, 10, 20, 50)


def radio_energy_defaults() -> dict[str, float]:
    """ns-3's WifiRadioEnergyModel currents (A) and BasicEnergySource voltage (V) as its
    libraries initialise them (energy_defaults.cc), e.g. {"TxCurrentA": 0.38, ...}: the figures
    behind channels/data/energy_profiles.toml's `ns3_wifi` radio."""
    exe = build(HERE / "energy_defaults.cc", ["ns3-wifi", "ns3-energy", "ns3-core"])
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    values = {}
    for line in out.splitlines():          # "ns3::Type Name = value"
        _, name, _, value = line.split(maxsplit=3)
        try:
            values[name] = float(value)
        except ValueError:                 # not a number (a callback, a pointer): not needed
            pass
    return values


def ns3_dcf(n: int, seconds: float, warmup: float = 0.5, seed: int = 1, preamble: bool = False) -> dict:
    """ns-3's saturated cell of n stations: throughput and collided attempts per success over
    `seconds` after `warmup`, and the whole run's wall seconds per successful frame. `preamble`:
    ns-3's default PHY (threshold preamble detection), else detection disabled."""
    out = subprocess.run([str(build()), "dcf", str(n), str(seconds), str(warmup), str(seed), str(int(preamble))],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out.strip().splitlines()[-1])
    ok = d["successes"]
    return {"n": n, "mbps": ok * PAYLOAD * 8 / seconds / 1e6, "collided_per_success": (d["attempts"] - ok) / ok,
            "drops": d["drops"], "frames": d["successes_all"], "wall_s": d["wall_s"],
            "wall_per_frame_s": d["wall_s"] / d["successes_all"]}


def cell_table(n: int, engine: str = "fast", preamble: bool = False) -> dict:
    """The `[network]` table of the scenario as `testbed probe` validates it."""
    return validate_network({"workers": n, "medium": "shared", "sharing": "csma", "engine": engine,
                             "csma": {"preamble_detection": preamble},
                             "link": {"bandwidth_mbps": RATE_MBPS, "delay_ms": 0.0, "mtu_bytes": MPDU,
                                      "header_bytes": MPDU - PAYLOAD}})


def ours_dcf(n: int, frames: int, seed: int = 1, preamble: bool = False) -> dict:
    """The project's cell of n stations, `frames` frames in all, sent at once (a gather): the
    same figures, over the time every station still had frames."""
    rows = []
    finish = csma.Cell.finish

    def keep(cell, cols=None):     # the attempt rows, as the engines hand them to Cell.finish
        rows.append(list(zip(*cell.rows)) if cols is None else [np.asarray(c) for c in cols])
        return finish(cell, cols)

    edge = build_network(cell_table(n, preamble=preamble), seed)
    net = edge.network
    per = max(frames // n, 1)
    csma.Cell.finish = keep
    try:
        t0 = time.perf_counter()
        rep = net.gather({w: [PAYLOAD] * per for w in edge.workers}, edge.server, at=0.0)
        wall = time.perf_counter() - t0
    finally:
        csma.Cell.finish = finish
    cols = rows[0]
    end, code = np.asarray(cols[5], float), np.asarray(cols[7])
    first = min(f.completion_s for f in rep.flows)
    window = end <= first
    ok = int((window & (code == csma.OK)).sum())
    delivered = sum(int(f.payload[f.arrived & (f.arrival_s <= first)].sum()) for f in rep.flows)
    return {"n": n, "mbps": delivered * 8 / (first - rep.start_s) / 1e6,
            "collided_per_success": int((window & (code == csma.COLLIDED)).sum()) / ok,
            "frames": int((code == csma.OK).sum()), "wall_s": wall, "wall_per_frame_s": wall / int((code == csma.OK).sum())}


def compare(ns=NS, seconds: float = 4.0, frames: int = 30000, seed: int = 1, preamble: bool = False) -> list[dict]:
    """ns-3 and ours side by side, one row per n, with ns-3's preamble detection on (its default
    PHY) and ours `preamble_detection = true`, or both off."""
    ours_dcf(2, 200)     # compile the numba loop first: the speed figures are steady-state
    out = []
    for n in ns:
        a, b = ns3_dcf(n, seconds, seed=seed, preamble=preamble), ours_dcf(n, frames, seed=seed, preamble=preamble)
        out.append({"n": n, "ns3": a, "ours": b, "throughput_gap": b["mbps"] / a["mbps"] - 1,
                    "collided_gap": (b["collided_per_success"] / a["collided_per_success"] - 1)
                    if a["collided_per_success"] else b["collided_per_success"],
                    "speedup": a["wall_per_frame_s"] / b["wall_per_frame_s"]})
    return out


def burst(count: int = 1000, nbytes: int = 1500, per: float = 0.05, seed: int = 1) -> dict:
    """A burst of `count` frames of `nbytes` on a dedicated 54 Mbit/s link that loses each with
    probability `per` (best effort, no delay): last arrival and losses in ns-3 (PointToPoint +
    RateErrorModel) and in ours (a dedicated link with Bernoulli loss)."""
    out = subprocess.run([str(build()), "burst", str(count), str(nbytes), str(per), str(seed)],
                         check=True, capture_output=True, text=True).stdout
    a = json.loads(out.strip().splitlines()[-1])
    table = validate_network({"workers": 1, "medium": "dedicated",
                              "link": {"bandwidth_mbps": RATE_MBPS, "delay_ms": 0.0, "mtu_bytes": nbytes,
                                       "header_bytes": 2, "delivery": "best_effort",
                                       "loss": {"model": "bernoulli", "p": per}}})
    edge = build_network(table, seed)
    rep = edge.network.transfer(edge.workers[0], edge.server, [nbytes - 2] * count, at=0.0)
    f = rep.flows[0]
    return {"count": count, "bytes": nbytes, "per": per,
            "ns3": {"received": a["received"], "last_arrival_s": a["last_arrival_s"]},
            "ours": {"received": int(f.arrived.sum()), "last_arrival_s": float(f.arrival_s[f.arrived].max())}}


def per_thresholds(nbytes: int = 1500) -> list[dict]:
    """SNR (dB) at 10% packet error per VHT MCS 0-8 from ns-3's error-rate models."""
    out = subprocess.run([str(build()), "per", str(nbytes)], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


PHYS = ((False, "preamble detection off (our default; ns-3 with DisablePreambleDetectionModel)"),
        (True, "preamble detection on (ns-3's default PHY; ours preamble_detection = true)"))


def print_dcf(rows: list[dict], title: str) -> None:
    print(title)
    print(f"{'N':>3} {'ns-3 Mb/s':>10} {'ours':>8} {'gap':>7} {'ns-3 coll/succ':>15} {'ours':>7} {'gap':>7} "
          f"{'ns-3 us/frame':>14} {'ours':>7} {'ratio':>7}")
    for r in rows:
        a, b = r["ns3"], r["ours"]
        print(f"{r['n']:>3} {a['mbps']:>10.3f} {b['mbps']:>8.3f} {r['throughput_gap']:>+7.2%} "
              f"{a['collided_per_success']:>15.4f} {b['collided_per_success']:>7.4f} {r['collided_gap']:>+7.2%} "
              f"{a['wall_per_frame_s'] * 1e6:>14.1f} {b['wall_per_frame_s'] * 1e6:>7.2f} {r['speedup']:>6.0f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default=",".join(map(str, NS)), help="station counts, comma-separated")
    ap.add_argument("--seconds", type=float, default=4.0, help="ns-3's measured window (simulated s)")
    ap.add_argument("--frames", type=int, default=30000, help="frames in our gather")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--walkers", default="1,3,5", help="walks: stations walking side by side, comma-separated")
    ap.add_argument("--waypoint", type=int, default=5,
                    help="stations of the random-waypoint cell (60 m square; 0: none)")
    ap.add_argument("--walk-seeds", default="1,2,3", help="seeds of the walks, comma-separated")
    ap.add_argument("--no-floor", action="store_true",
                    help="without the noise floor (each moving scenario again with RNG run seed + "
                         f"{walk.FLOOR_RUN} in ns-3 and in ours)")
    ap.add_argument("--stations", action="store_true",
                    help="also print each moving cell per window and station (distance, rate, throughput)")
    ap.add_argument("--no-dcf", action="store_true", help="only the walks (no saturated cell, burst or MCS table)")
    ap.add_argument("--figure", default=None, help="also draw the walks as a PNG (headless Chromium) at this path")
    ap.add_argument("--from", dest="stored", default=None, metavar="FILE",
                    help="with --figure: draw the walks of a stored run (--save's file) of the first seed, "
                         "run nothing")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON instead of tables")
    ap.add_argument("--save", default=None, help="also write the figures as JSON to this new file")
    args = ap.parse_args(argv)
    if args.save and Path(args.save).exists():
        ap.error(f"--save {args.save}: the file exists (a stored result is never overwritten; name a new one)")
    started = {"load_1min_at_start": os.getloadavg()[0],
               "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.stored:
        if not args.figure:
            ap.error("--from needs --figure")
        walks = json.loads(Path(args.stored).read_text())["walks"]
        first = min(w["seed"] for w in walks)
        print(walk.figure([w for w in walks if w["seed"] == first], args.figure))
        return 0
    why = available()
    if why:
        print(why)
        return 0
    ns = [int(x) for x in args.n.split(",")]
    dcf = {pre: [] if args.no_dcf else compare(ns, args.seconds, args.frames, args.seed, preamble=pre)
           for pre, _ in PHYS}
    seeds = [int(x) for x in args.walk_seeds.split(",") if x]
    walk.ours(1, 5.0, 40.0, 1.0, walk.per_slope(walk.ns3_curves()))   # compile first: steady-state speed
    floor = not args.no_floor
    walks = [walk.compare(stations=int(k), seed=s, floor=floor) for s in seeds for k in args.walkers.split(",") if k]
    walks += [walk.waypoint_compare(args.waypoint, seed=s, floor=floor) for s in seeds if args.waypoint]
    if args.figure:
        walk.figure(walks, args.figure)
    figures = {"dcf": dcf[False], "dcf_preamble": dcf[True], "walks": walks,
               "burst": None if args.no_dcf else burst(), "per": None if args.no_dcf else per_thresholds(),
               "walk_summary": [walk.summary(w) for w in walks]}
    if args.save:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
        figures["meta"] = {"argv": sys.argv[1:], "commit": head, **started, "load_1min_at_end": os.getloadavg()[0],
                           "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        Path(args.save).write_text(json.dumps(figures, indent=1))
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    for pre, title in PHYS:
        if dcf[pre]:
            print_dcf(dcf[pre], title)
    for w in walks:
        walk.print_walk(w)
        if args.stations:
            walk.print_stations(w)
    if walks:
        print("moving cells beside ns-3.37: worst window where the links hold, and speed (ns-3 / ours)")
        walk.print_summary(walks)
    if args.no_dcf:
        return 0
    b = figures["burst"]
    print(f"burst of {b['count']} x {b['bytes']} B at {RATE_MBPS:g} Mbit/s, PER {b['per']}: ns-3 "
          f"{b['ns3']['received']} received, last at {b['ns3']['last_arrival_s'] * 1e3:.3f} ms; ours "
          f"{b['ours']['received']} received, last at {b['ours']['last_arrival_s'] * 1e3:.3f} ms")
    print("MCS  10% PER at 1500 B (dB): " + ", ".join(
        f"{d['mcs']}: {d['table_based_db']:.2f} (NIST {d['nist_db']:.2f})" for d in figures["per"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
