"""`python -m benchmarks moving`: a moving 802.11 cell beside the static one, frames per wall
second, and how much of a training run's wall time the link layer takes when the stations walk.

Frames: the walks of validation/ns3/walk.py (saturated 1536-byte MPDUs, best effort, LogDistance
path loss, 802.11a rate per SNR band, table-derived packet errors), ours only (no ns-3 needed):
1 and 5 stations walking away from 40 m at 5 m/s for 52 virtual s, and 5 stations on random
waypoints in a 60 m square for 40 s; beside them the same cell with the stations standing at
40 m (the same fading link, no mobility) and the static DCF cell of validation/ns3/run.py
(54 Mbit/s, no loss; 5 stations, 30000 frames). Frames = successful DATA frames of the timed
call (the link layer's gather alone: not building the network or the walk's accounting); each row
is the best of `reps` after a first call that loads (or compiles) the numba loop.

Training: experiments/fashion_mobile.toml (8 stations walking from 10 m to 80 m) and the same file
without its [network.mobility] table (the stations stay at 10 m), `iterations` iterations each
through experiments.results.harness (its `emulation` piece of the wall split: the link layer's calls), and the
ratio of the link layer's share of wall time, moving over static (target: <= 1).
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.results.harness import TableRun, run_many
from testbed.emulation.edge_network import build_network
from validation.ns3 import walk
from validation.ns3.run import cell_table

ROOT = Path(__file__).resolve().parents[1]
SLOPE = 2.97     # per_slope_db the walks derive from ns-3's curves (validation/ns3/walk.py)
MOBILE = "experiments/fashion_mobile.toml"


def _frames(fn, reps: int) -> tuple[int, float]:
    """fn() -> (frames, wall seconds of its link-layer call): the best of `reps`."""
    best, frames = float("inf"), 0
    for _ in range(reps):
        frames, wall = fn()
        best = min(best, wall)
    return frames, best


def _gather(edge, sizes: dict) -> tuple[int, float]:
    t0 = time.perf_counter()
    rep = edge.network.gather(sizes, edge.server, at=0.0) if len(sizes) > 1 else \
        edge.network.transfer(edge.workers[0], edge.server, next(iter(sizes.values())), at=0.0)
    wall = time.perf_counter() - t0
    return int(sum(f.arrived.sum() for f in rep.flows)), wall


def _walk(stations: int, seconds: float, scenario: str = "away", still: bool = False) -> tuple[int, float]:
    """A walk (walk.ours: its timed call is the one with each station's frames of the walk and
    8 more), or with `still` the same cell with no mobility, as many frames per station."""
    if not still:
        a = walk.ours(stations, 5.0, 40.0, seconds, SLOPE, scenario=scenario)
        return a["frames"], a["wall_s"]
    table = walk.table(stations, 5.0, 40.0, SLOPE)
    table["mobility"] = None
    edge = build_network(table, 1)
    per = walk._capacity_frames(np.array([54.0]), seconds, edge.network.csma, stations)
    return _gather(edge, {w: [walk.PAYLOAD] * per for w in edge.workers})


def _static_dcf(stations: int = 5, frames: int = 30000) -> tuple[int, float]:
    edge = build_network(cell_table(stations), 1)
    return _gather(edge, {w: [1500] * (frames // stations) for w in edge.workers})


def cells(reps: int = 3) -> list[dict]:
    walk.ours(1, 5.0, 40.0, 1.0, SLOPE)     # the numba loop loaded (or compiled) before any timing
    cases = [("static DCF cell, 5 stations, 54 Mbit/s, no loss", lambda: _static_dcf()),
             ("static fading cell, 5 stations standing at 40 m, 52 s", lambda: _walk(5, 52.0, still=True)),
             ("moving: 1 station walking away at 5 m/s, 52 s", lambda: _walk(1, 52.0)),
             ("moving: 5 stations walking away at 5 m/s, 52 s", lambda: _walk(5, 52.0)),
             ("moving: 5 stations on random waypoints, 60 m square, 40 s",
              lambda: _walk(5, 40.0, scenario="waypoint"))]
    rows = []
    for name, fn in cases:
        frames, wall = _frames(fn, reps)
        rows.append({"case": name, "frames": frames, "wall_s": wall, "frames_per_wall_s": frames / wall})
    return rows


def _static_copy(path: Path, into: Path) -> Path:
    """The experiment file without its [network.mobility] table."""
    text = path.read_text()
    text = re.sub(r"(?ms)^\[network\.mobility\]\n.*?(?=^\[|\Z)", "", text)
    out = into / path.name.replace(".toml", "_static.toml")
    out.write_text(text)
    return out


def training(iterations: int) -> dict:
    """The link layer's share of the training loop's wall time, moving and static."""
    with tempfile.TemporaryDirectory() as tmp:
        static = _static_copy(ROOT / MOBILE, Path(tmp))
        sets = [f"run.iterations={iterations}", "run.stop_at_accuracy=false", "run.eval_every=1000",
                "run.device=cpu"]
        results = run_many([TableRun("moving", MOBILE, sets), TableRun("static", str(static), sets)],
                           log=lambda *a, **k: None)
    out = {}
    for r in results:
        if r.status != "completed":
            out[r.spec.label] = {"status": r.status, "note": r.note.splitlines()[0] if r.note else ""}
            continue
        emu = r.timers.get("emulation", 0.0)
        out[r.spec.label] = {"status": r.status, "iterations": r.iterations, "wall_s": r.wall_s,
                             "link_s": emu, "link_share": emu / r.wall_s if r.wall_s else float("nan")}
    if all(v.get("status") == "completed" for v in out.values()):
        out["share_ratio"] = out["moving"]["link_share"] / out["static"]["link_share"]
        out["link_s_ratio"] = out["moving"]["link_s"] / out["static"]["link_s"]
    return out


def main(quick: bool = True) -> dict:
    rows = cells(3 if quick else 10)
    print(f"{'cell (ours, fast engine)':<62} {'frames':>8} {'wall s':>8} {'frames per wall s':>18}")
    for r in rows:
        print(f"{r['case']:<62} {r['frames']:>8} {r['wall_s']:>8.3f} {r['frames_per_wall_s']:>18,.0f}")
    static = rows[0]["frames_per_wall_s"]
    print("moving / static DCF cell, frames per wall s: " + ", ".join(
        f"{r['case'].split(',')[0].removeprefix('moving: ')} {r['frames_per_wall_s'] / static:.2f}"
        for r in rows[2:]))
    its = 10 if quick else 60
    t = training(its)
    for label in ("moving", "static"):
        v = t[label]
        if v.get("status") != "completed":
            print(f"{MOBILE} ({label}): {v.get('status')}: {v.get('note')}")
            continue
        print(f"{MOBILE} ({label}{', no [network.mobility]' if label == 'static' else ''}): {v['iterations']} "
              f"iterations, {v['wall_s']:.2f} s wall, link layer {v['link_s']:.3f} s ({v['link_share']:.2%})")
    if "share_ratio" in t:
        print(f"link layer's share of the training wall time, moving / static: {t['share_ratio']:.2f} "
              f"(target <= 1; its seconds {t['link_s_ratio']:.2f}x)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return {"rows": rows, "training": t, "cells_reps": 3 if quick else 10}


if __name__ == "__main__":
    main()
