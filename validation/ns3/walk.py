"""Stations walking away from the access point, in ns-3.37 (walk.cc) and in the project's
network (`mobility = "away"` on a fading CSMA cell): throughput and radio joules per 1 s window.

The walk: `stations` stations start side by side `d0` metres from the access point (station i at
(d0, i) m) and walk straight away from it at `speed` m/s, each sending saturated 1536-byte MPDUs
(1500 bytes of payload) upstream, best effort. Both sides: 802.11a DCF (non-QoS, no RTS/CTS),
20 dBm, LogDistance path loss (exponent 3, 40 dB at 1 m), a 7 dB noise figure over 20 MHz, no
fading or shadowing, preamble detection off.

Rate choice: a constant rate per distance band. Ours picks the highest 802.11a rate whose
threshold (channels/data/mcs_80211a.csv: ns-3's 10% packet error SNR) the SNR meets, per 10 ms
coherence block (5 cm of the walk); ns-3's ConstantRateWifiManager is handed the same rate at the
same instants.
(ns-3's IdealWifiManager chooses from the SNR of the last ACK against BER-1e-6 thresholds of its
own: it would compare two rate controllers rather than the link underneath.)
Packet errors: ours is the fading model's logistic waterfall through each threshold, its slope
derived from ns-3's curves (ln 9 / the mean dB between 10% and 50% error); ns-3's is its
TableBasedErrorRateModel.
Energy: ns-3's WifiRadioEnergyModel with a BasicEnergySource (3 V) per station, its PHY's time in
each state; ours the `ns3_wifi` radio (the same currents x volts) over the radio seconds that
channels/energy.py charges (transmitting its DATA; receiving its ACKs and the others' frames that
did not collide, less their PHY preambles and headers, and of each collision it did not send into
the frame it locked onto, `csma.collided_receptions`; a collision's frame the access point
captured is one that did not collide, not received by its fellow senders), split per window from
the attempt rows.
5 m/s walks the bands in a minute; at a walker's 1.5 m/s the same bands take 3.3 times as long.

The random-waypoint scenario (`scenario = "waypoint"`, `waypoint_compare`): `stations` stations
start on the star's 10 m circle around the access point (at the origin) and walk random
waypoints in the 60 m square centred on it (`mobility = "random_waypoint"`, speeds uniform in
WAYPOINT_SPEED m/s, WAYPOINT_PAUSE_S s pauses), legs drawn by ours and handed to ns-3 as the
waypoints of its WaypointMobilityModel; everything else as in the walk. No station is ever more
than 42.4 m out, so the link holds throughout (no break).

The noise floor (`compare(..., floor=True)`): how far two independent random draws of the same
scenario lie apart per window. ns-3 runs the scenario again with RNG run seed + FLOOR_RUN
(`RngRun`: other backoffs and packet errors, the same positions and rate schedule), and ours again
with the link layer's draws from seed + FLOOR_RUN (`ours(..., run=)`: the legs and positions stay
the seed's); each pair is compared as ours is with ns-3, over the same held windows.
"""
from __future__ import annotations

import json
import math
import subprocess
import tempfile
import time
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np

from channels import csma
from channels.config import validate_network
from channels.energy import radio_seconds
from testbed.emulation.edge_network import build_network
from validation.ns3.build import build as build_cc

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "walk.cc"
LIBS = ["ns3-wifi", "ns3-core", "ns3-network", "ns3-mobility", "ns3-propagation", "ns3-energy"]
MPDU, PAYLOAD = 1536, 1500
TABLE = "channels/data/mcs_80211a.csv"
STATES = ("tx", "rx", "idle", "sleep")
COHERENCE_MS = 10.0
TRIM_MARGIN = 8     # frames each station is given beyond what it took into service in the walk
WAYPOINT_SIDE_M, WAYPOINT_SPEED, WAYPOINT_PAUSE_S = 60.0, (1.0, 5.0), 2.0
FLOOR_RUN = 100     # the noise floor's other RNG run: seed s against s + FLOOR_RUN


def build() -> Path:
    return build_cc(SOURCE, LIBS)


def ns3_curves(nbytes: int = MPDU) -> list[dict]:
    """Per 802.11a rate: the SNR (dB) of 10%, 50% and 90% packet error in ns-3's table-based model."""
    out = subprocess.run([str(build()), "per", str(nbytes)], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def ns3_per_curve(nbytes: int = MPDU, lo: float = -1.0, hi: float = 3.0, step: float = 0.25) -> list[dict]:
    """ns-3's packet error rate per 802.11a rate at SNRs from `lo` to `hi` dB around the rate's
    10% point (its TableBasedErrorRateModel): [{"rate_mbps", "snr_db", "per"}, ...]."""
    out = subprocess.run([str(build()), "curve", str(nbytes), repr(lo), repr(hi), repr(step)],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def per_slope(curves: list[dict]) -> float:
    """The logistic's slope (1/dB) with ns-3's 10% and 50% points: PER = 1 / (1 + 9 e^(s x))
    is 50% at x = -ln 9 / s."""
    return math.log(9) / float(np.mean([c["per10_db"] - c["per50_db"] for c in curves]))


def table(stations: int, speed: float, d0: float, slope: float, scenario: str = "away") -> dict:
    """The `[network]` table of the walk (`scenario` "away"), or of the random-waypoint cell
    ("waypoint": `speed` and `d0` unused)."""
    root = Path(__file__).resolve().parents[2]
    if scenario == "waypoint":
        half = WAYPOINT_SIDE_M / 2
        nodes, mobility = {}, {"model": "random_waypoint", "area_m": [-half, -half, half, half],
                               "speed_mps": list(WAYPOINT_SPEED), "pause_s": WAYPOINT_PAUSE_S}
    elif scenario == "away":
        nodes = {f"w{i}": {"pos": [d0, float(i)]} for i in range(stations)}
        mobility = {"model": "away", "speed_mps": [speed, speed], "until_m": 1e4}
    else:
        raise ValueError(f"scenario = {scenario!r}: one of 'away', 'waypoint'")
    return validate_network({
        "workers": stations, "medium": "shared", "sharing": "csma", "engine": "fast",
        "link": {"bandwidth_mbps": 54.0, "delay_ms": 0.0, "mtu_bytes": MPDU, "header_bytes": MPDU - PAYLOAD,
                 "delivery": "best_effort",
                 "loss": {"model": "fading", "fading": "none", "shadowing_db": 0.0, "coherence_ms": COHERENCE_MS,
                          "tx_power_dbm": 20.0, "noise_figure_db": 7.0, "channel_bandwidth_mhz": 20.0,
                          "path_loss_exponent": 3.0, "reference_loss_db": 40.0, "rate": "mcs",
                          "mcs_table": str(root / TABLE), "per_slope_db": slope}},
        "nodes": nodes, "mobility": mobility,
    })


def _capacity_frames(rates_mbps: np.ndarray, seconds: float, p: csma.CsmaParams, stations: int) -> int:
    """Frames enough to keep one of `stations` stations saturated for `seconds` at these rates
    (one per coherence block): its share of a cell in which every frame takes DATA + SIFS + ACK +
    DIFS with no backoff, and a quarter more. (Frames left at the end cost time after the walk:
    once the link is gone each takes every MAC attempt.)"""
    per_s = [1.0 / (csma.airtime(8.0 * MPDU, r * 1e6, p.phy_header_s, p.symbol_s) + p.sifs_s
                    + p.ack_s(r * 1e6) + p.difs_s) for r in rates_mbps]
    return int(np.mean(per_s) * seconds * (1.0 if stations == 1 else 1.25 / stations)) + 100


def ours(stations: int, speed: float, d0: float, seconds: float, slope: float, seed: int = 1,
         scenario: str = "away", run: int | None = None) -> dict:
    """Our walk: per station and 1 s window, payload bytes delivered and radio seconds per state;
    and each station's rate schedule [(t, Mbit/s), ...] (where its rate changes) and, for the
    random-waypoint cell, its waypoints [(t, x, y), ...] over `seconds`, for ns-3.

    Two calls on the same fresh network: the first with frames enough to keep every station
    saturated (`_capacity_frames`, most of them sent after the walk, long after its links broke:
    each then takes every MAC attempt), the second with what each station took into service
    before `seconds` and TRIM_MARGIN more; the second is the first to the last attempt before
    `seconds` (checked) and gives the figures and the wall time (`wall_s`; the first's is
    `wall_full_s`). ns-3 likewise stops at `seconds`. `run`: the RNG run of the link layer's
    draws (default `seed`; the noise floor's other run)."""
    run = seed if run is None else run
    table_ = table(stations, speed, d0, slope, scenario)
    edge = build_network(table_, seed, draws_seed=run)
    net = edge.network
    coh = COHERENCE_MS / 1e3
    blocks = np.arange(int(math.ceil(seconds / coh))) * coh
    schedules, sizes = [], {}
    for w in edge.workers:
        link = net.link_state(w, edge.server)
        r = link.fading.rate_bps(blocks) / 1e6
        change = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
        schedules.append([(float(blocks[i]), float(r[i])) for i in change])
        sizes[w] = [PAYLOAD] * _capacity_frames(r, seconds, net.csma, stations)
    rep, rows, wall_full = _call(edge, sizes)
    qi, start, pkt = (np.asarray(rows[0][i]) for i in (0, 4, 2))
    early = start < seconds
    taken = {w: int(pkt[early & (qi == i)].max(initial=-1)) + 1 for i, w in enumerate(edge.workers)}
    trimmed = {w: [PAYLOAD] * min(len(sizes[w]), taken[w] + TRIM_MARGIN) for w in edge.workers}
    edge = build_network(table_, seed, draws_seed=run)
    net = edge.network
    rep, rows2, wall = _call(edge, trimmed)
    start2 = np.asarray(rows2[0][4])
    if not (np.array_equal(start2[start2 < seconds], start[early])
            and np.array_equal(np.asarray(rows2[0][7])[start2 < seconds], np.asarray(rows[0][7])[early])):
        raise AssertionError("the trimmed call's attempts before the walk's end differ from the full call's")
    rows = rows2
    p = net.csma
    qi, start, end, air = (np.asarray(rows[0][i], float) for i in (0, 4, 5, 6))
    code = np.asarray(rows[0][7])
    nw = int(math.ceil(seconds))
    charged = radio_seconds(rep, shared=True)
    station = np.asarray([edge.workers.index(f.src) for f in rep.flows])[qi.astype(int)]
    locked, rx0, rx1, weight, captured, srows, sgroup = csma.collided_receptions(station, start, end, code, p)
    out = []
    for s, f in enumerate(rep.flows):
        mine = qi == s
        got = f.arrival_s[f.arrived]
        b = np.histogram(got, bins=nw, range=(0, nw))[0] * PAYLOAD
        # radio seconds per window, as channels/energy.py charges them: its DATA at transmit
        # power; receiving its ACKs and, overheard, the others' frames that did not collide,
        # each less its PHY preamble and header (idle power); cut at the window edges
        ok, others = mine & (code == csma.OK), ~mine & (code == csma.OK)
        heard = ~mine & (code != csma.COLLIDED)
        ack_from = lambda sel: end[sel] + p.sifs_s + p.phy_header_s     # noqa: E731
        spans = [(ack_from(ok), start[ok] + air[ok]), (start[heard] + p.phy_header_s, end[heard]),
                 (ack_from(others), start[others] + air[others])]
        # and of the collisions it did not send into, the frame it locked onto (weighted); not
        # the captured frame of one it sent into (heard above, while it was sending)
        apart = np.ones(locked.size, bool)
        apart[sgroup[station[srows] == s]] = False
        deaf = captured & ~apart
        tx = _spread(start[mine], end[mine], nw)
        rx = (sum(_spread(a, b, nw) for a, b in spans) + _spread(rx0[apart], rx1[apart], nw, weight[apart])
              - _spread(rx0[deaf], rx1[deaf], nw))
        # the same intervals over the whole call are what channels/energy.py charges the station
        whole = [float((end[mine] - start[mine]).sum()),
                 sum(float((b - a).sum()) for a, b in spans) + float(((rx1 - rx0) * weight)[apart].sum())
                 - float((rx1 - rx0)[deaf].sum())]
        if not all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(whole, charged[f.src])):
            raise AssertionError(f"{f.src}: radio seconds {whole} per window, {charged[f.src]} charged")
        out.append({"bytes": b.astype(float).tolist(), "tx_s": tx.tolist(), "rx_s": rx.tolist(),
                    "idle_s": (1.0 - tx - rx).tolist(), "sleep_s": [0.0] * nw,
                    "attempts_w": np.histogram(start[mine], bins=nw, range=(0, nw))[0].tolist(),
                    "lost_w": np.histogram(start[mine & (code == csma.LOST)], bins=nw, range=(0, nw))[0].tolist(),
                    "attempts": int(mine.sum()), "ok": int((mine & (code == csma.OK)).sum())})
    waypoints = [_waypoints(net.link_state(w, edge.server).fading.distance_at.mobility.tracks[w], seconds)
                 for w in edge.workers] if scenario == "waypoint" else None
    mid = np.arange(nw) + 0.5       # each station's distance to the access point mid-window
    distances = [net.link_state(w, edge.server).fading.distance_at(mid).tolist() for w in edge.workers]
    frames = sum(s["ok"] for s in out)
    return {"stations": out, "schedules": schedules, "waypoints": waypoints, "distances_m": distances,
            "wall_s": wall, "frames": frames,
            "wall_full_s": wall_full}


def _waypoints(track, seconds: float) -> list[tuple[float, float, float]]:
    """A random-waypoint track as (t, x, y) waypoints through `seconds` and one beyond (a
    pause: the same point at arrival and departure; one waypoint where they coincide)."""
    track.at([seconds + 1.0])
    out = []
    for p, a, b in zip(track.pts, track.arrive, track.leave):
        for t in (a, b):
            if not out or t > out[-1][0]:
                out.append((float(t), float(p[0]), float(p[1])))
    return out


def _call(edge, sizes: dict) -> tuple:
    """One gather (a transfer for one station) of `sizes` on a fresh network: its report, the
    attempt rows as the engine hands them to Cell.finish, and its wall seconds."""
    net = edge.network
    rows = []
    finish = csma.Cell.finish

    def keep(cell, cols=None):
        rows.append(list(zip(*cell.rows)) if cols is None else [np.asarray(c) for c in cols])
        return finish(cell, cols)

    csma.Cell.finish = keep
    try:
        t0 = time.perf_counter()
        rep = net.gather(sizes, edge.server, at=0.0) if len(sizes) > 1 else \
            net.transfer(edge.workers[0], edge.server, sizes[edge.workers[0]], at=0.0)
        wall = time.perf_counter() - t0
    finally:
        csma.Cell.finish = finish
    return rep, rows, wall


def _spread(a: np.ndarray, b: np.ndarray, nw: int, weight=None) -> np.ndarray:
    """Seconds of the intervals [a, b) inside each 1 s window 0..nw-1 (each times its weight)."""
    out = np.zeros(nw)
    for w in range(nw):
        inside = np.clip(np.minimum(b, w + 1) - np.maximum(a, w), 0, None)
        out[w] = (inside if weight is None else inside * weight).sum()
    return out


def ns3(stations: int, speed: float, d0: float, seconds: float, schedules: list, seed: int = 1,
        waypoints: list | None = None) -> dict:
    """ns-3's walk with the same positions, velocities (or waypoints) and rate schedules."""
    lines = []
    for i in range(stations):
        x, y = d0, float(i)
        r = math.hypot(x, y) or 1.0      # (the random-waypoint cell: at rest, its waypoints move it)
        lines.append(f"sta {x!r} {y!r} {speed * x / r!r} {speed * y / r!r}")
    for i, wps in enumerate(waypoints or []):
        lines += [f"wp {i} {t!r} {x!r} {y!r}" for t, x, y in wps]
    for i, sched in enumerate(schedules):
        lines += [f"rate {i} {t!r} {r:g}" for t, r in sched]
    with tempfile.NamedTemporaryFile("w", suffix=".walk", delete=False) as fh:
        fh.write("\n".join(lines) + "\n")
    try:
        out = subprocess.run([str(build()), "run", fh.name, str(seconds), str(seed)],
                             check=True, capture_output=True, text=True).stdout
    finally:
        Path(fh.name).unlink()
    recs = [json.loads(line) for line in out.splitlines() if line.strip()]
    wall = recs.pop()["wall_s"]
    nw = int(math.ceil(seconds))
    frames = int(round(sum(r["bytes"] for r in recs) / PAYLOAD))
    st = [{k: [0.0] * nw for k in ("bytes", "tx_s", "rx_s", "idle_s", "sleep_s", "joules")} for _ in range(stations)]
    for r in recs:
        for k in st[r["station"]]:
            st[r["station"]][k][r["window"]] = r[k]
    return {"stations": st, "wall_s": wall, "frames": frames}


def break_second(mbps: list[float], rates: list[float]) -> int | None:
    """The window in which the link breaks: the first, once the lowest rate is in use, that
    delivers less than half of the best window at that rate."""
    low = min(rates)
    at_low = [w for w, r in enumerate(rates) if r == low]
    if not at_low:
        return None
    half = 0.5 * max(mbps[w] for w in at_low)
    return next((w for w in range(at_low[0], len(mbps)) if mbps[w] < half), None)


def compare(stations: int = 1, speed: float = 5.0, d0: float = 40.0, seconds: float = 52.0, seed: int = 1,
            scenario: str = "away", floor: bool = False) -> dict:
    """ns-3 and ours over the same walk: per window, throughput (Mbit/s, all stations) and each
    state's joules (all stations), the break second of each, and both wall times and frames
    delivered (ns-3's within `seconds`; ours in the whole call, which sends on after the walk).
    `floor`: also each side again with RNG run seed + FLOOR_RUN (`ns3_other_*`, `ours_other_*`
    per window: the noise floor, module doc)."""
    slope = per_slope(ns3_curves())
    a = ours(stations, speed, d0, seconds, slope, seed, scenario)
    b = ns3(stations, speed, d0, seconds, a["schedules"], seed, a["waypoints"])
    sides = [("ours", a), ("ns3", b)]
    if floor:
        a2 = ours(stations, speed, d0, seconds, slope, seed, scenario, run=seed + FLOOR_RUN)
        if a2["schedules"] != a["schedules"] or a2["waypoints"] != a["waypoints"]:
            raise AssertionError("the other run's positions or rates differ from the seed's")
        sides += [("ours_other", a2),
                  ("ns3_other", ns3(stations, speed, d0, seconds, a["schedules"], seed + FLOOR_RUN, a["waypoints"]))]
    watts = _ns3_wifi_watts()
    nw = int(math.ceil(seconds))
    rates = [_rate_in(a["schedules"][0], w) for w in range(nw)]
    rows = []
    for w in range(nw):
        row = {"window": w, "rate_mbps": rates[w]}
        for side, d in sides:
            row[f"{side}_mbps"] = sum(s["bytes"][w] for s in d["stations"]) * 8 / 1e6
            for k in STATES:
                row[f"{side}_{k}_j"] = sum(s[f"{k}_s"][w] for s in d["stations"]) * watts[k]
        row["ns3_model_j"] = sum(s["joules"][w] for s in b["stations"])
        # per station: distance mid-window, rate at its end, Mbit/s in ns-3 and ours
        row["station_m"] = [d[w] for d in a["distances_m"]]
        row["station_rate_mbps"] = [_rate_in(sc, w) for sc in a["schedules"]]
        for side, d in (("ours", a), ("ns3", b)):
            row[f"{side}_station_mbps"] = [st["bytes"][w] * 8 / 1e6 for st in d["stations"]]
        tried = sum(s["attempts_w"][w] for s in a["stations"])
        row["ours_loss"] = sum(s["lost_w"][w] for s in a["stations"]) / tried if tried else 1.0
        rows.append(row)
    brk = {side: break_second([r[f"{side}_mbps"] for r in rows], rates) if scenario == "away" else None
           for side in ("ours", "ns3")}
    return {"stations": stations, "scenario": scenario, "speed_mps": speed, "d0_m": d0, "seconds": seconds,
            "per_slope_db": slope, "rows": rows, "break_s": brk, "seed": seed,
            "floor_run": seed + FLOOR_RUN if floor else None,
            "wall_s": {"ours": a["wall_s"], "ns3": b["wall_s"], "ours_full": a["wall_full_s"]}, "frames": {"ours": a["frames"], "ns3": b["frames"]}}


def waypoint_compare(stations: int = 5, seconds: float = 40.0, seed: int = 1, floor: bool = False) -> dict:
    """`compare` over the random-waypoint cell (module doc)."""
    return compare(stations, speed=0.0, d0=0.0, seconds=seconds, seed=seed, scenario="waypoint", floor=floor)


def _worst(gs: list[dict], held: set) -> dict:
    """Over the held windows: the worst throughput and energy gap, and the windows whose
    throughput gap is over 2%."""
    gs = [g for g in gs if g["window"] in held]
    return {"mbps": max((abs(g["mbps"]) for g in gs), default=0.0),
            "j": max((abs(g[k]) for g in gs for k in STATES), default=0.0),
            "over_2pct": sum(abs(g["mbps"]) > 0.02 for g in gs)}


def summary(result: dict) -> dict:
    """One scenario's headline: windows where the link holds, worst throughput and energy gap
    over them (and how many windows' throughput gap is over 2%), the speed ratio (ns-3's wall
    seconds per delivered frame over ours), and with the noise floor the same worst gaps of
    ns-3 against its other run and of ours against ours (`floor_*`, `ours_floor_*`)."""
    held = {g["window"] for g in gaps(result) if g["holds"]}
    w, f = result["wall_s"], result["frames"]
    per = {side: w[side] / max(f[side], 1) for side in ("ours", "ns3")}
    name = f"{result['stations']} walking away" if result.get("scenario", "away") == "away" \
        else f"{result['stations']} random waypoint"
    main = _worst(gaps(result), held)
    out = {"scenario": name, "seed": result.get("seed"), "windows": len(result["rows"]), "held": len(held),
           "worst_mbps": main["mbps"], "worst_j": main["j"], "over_2pct": main["over_2pct"],
           "ns3_wall_s": w["ns3"], "ours_wall_s": w["ours"], "wall_ratio": w["ns3"] / w["ours"],
           "frame_ratio": per["ns3"] / per["ours"]}
    if result.get("floor_run") is not None:
        for key, side, ref in (("floor", "ns3_other", "ns3"), ("ours_floor", "ours_other", "ours")):
            x = _worst(gaps(result, side, ref), held)
            out.update({f"{key}_mbps": x["mbps"], f"{key}_j": x["j"], f"{key}_over_2pct": x["over_2pct"]})
        out["floor_run"] = result["floor_run"]
    return out


def print_summary(results: list[dict]) -> None:
    """One line per scenario: its worst window (and the windows over 2%), beside the noise
    floor's where it was measured (ns-3 against ns-3's other run; ours against ours'), and its
    speed ratio."""
    print("worst window over the held ones, throughput / joules (windows with throughput over 2%); "
          f"floor: the same scenario with RNG run seed + {FLOOR_RUN}")
    print(f"{'scenario':<22} {'seed':>4} {'held':>7} {'ours vs ns-3':>19} {'ns-3 vs ns-3, other run':>24} "
          f"{'ours vs ours, other run':>24} {'ns-3 s':>7} {'ours s':>6} {'per frame':>10}")
    cell = lambda s, k: (f"{s[k + '_mbps']:.2%} / {s[k + '_j']:.2%} ({s[k + '_over_2pct']})"  # noqa: E731
                         if k + "_mbps" in s else "-")
    for r in results:
        s = summary(r)
        main = f"{s['worst_mbps']:.2%} / {s['worst_j']:.2%} ({s['over_2pct']})"
        print(f"{s['scenario']:<22} {s['seed']!s:>4} {s['held']:>3}/{s['windows']:<3} {main:>19} "
              f"{cell(s, 'floor'):>24} {cell(s, 'ours_floor'):>24} {s['ns3_wall_s']:>7.2f} {s['ours_wall_s']:>6.3f} "
              f"{s['frame_ratio']:>9.1f}x")


def _rate_in(schedule: list, w: int) -> float:
    """The rate at the end of window w (the lowest it had in the window)."""
    r = schedule[0][1]
    for t, x in schedule:
        if t < w + 1:
            r = x
    return r


def _ns3_wifi_watts() -> dict:
    radio = tomllib.loads(resources.files("channels").joinpath("data/energy_profiles.toml").read_text())["radios"]["ns3_wifi"]
    return {k: radio[f"{k}_w"] for k in STATES}


def holds(row: dict, brk: dict | None) -> bool:
    """A window in which the link holds: before either side's break (none: no break), with
    under 2% of our attempts lost (not in a packet error waterfall at a band's edge)."""
    first = min((b for b in (brk or {}).values() if b is not None), default=math.inf)
    return row["window"] < first and row["ours_loss"] < 0.02


def gaps(result: dict, side: str = "ours", ref: str = "ns3") -> list[dict]:
    """Per window: ours / ns-3 - 1 in throughput, and per state ours - ns-3 as a share of ns-3's
    radio joules in the window (idle is what transmitting and receiving leave, so its own
    relative gap says little where it is small); `side` against `ref` likewise (the noise
    floor: "ns3_other" against "ns3", "ours_other" against "ours")."""
    out = []
    for row in result["rows"]:
        total = sum(row[f"{ref}_{k}_j"] for k in STATES)
        g = {"window": row["window"], "holds": holds(row, result["break_s"]),
             "mbps": row[f"{side}_mbps"] / row[f"{ref}_mbps"] - 1 if row[f"{ref}_mbps"] else math.inf}
        for k in STATES:
            g[k] = (row[f"{side}_{k}_j"] - row[f"{ref}_{k}_j"]) / total
        out.append(g)
    return out


def print_stations(result: dict) -> None:
    """Per window and station: its distance to the access point mid-window, its rate at the
    window's end and its Mbit/s in ns-3 and in ours; then the cell's, our loss and the gap."""
    r = result
    print(f"per station: {r['stations']} station(s), {r.get('scenario', 'away')}, seed {r.get('seed')}: "
          "metres, rate, ns-3 / ours Mbit/s | cell ns-3, ours, gap, our attempts lost")
    for row, g in zip(r["rows"], gaps(r)):
        cells = " | ".join(f"{m:5.1f} m {q:>2g} {a:5.2f}/{b:5.2f}" for m, q, a, b in
                           zip(row["station_m"], row["station_rate_mbps"], row["ns3_station_mbps"],
                               row["ours_station_mbps"]))
        print(f"{row['window']:>3} | {cells} | {row['ns3_mbps']:6.2f} {row['ours_mbps']:6.2f} {g['mbps']:>+7.2%} "
              f"{row['ours_loss']:6.2%}{' *' if g['holds'] else ''}")


def print_walk(result: dict) -> None:
    r = result
    where = f"from {r['d0_m']:g} m at {r['speed_mps']:g} m/s" if r.get("scenario", "away") == "away" else \
        f"on random waypoints in a {WAYPOINT_SIDE_M:g} m square at {WAYPOINT_SPEED[0]:g}-{WAYPOINT_SPEED[1]:g} m/s"
    print(f"walk: {r['stations']} station(s) {where}, {r['seconds']:g} s, seed {r.get('seed')} "
          f"(per_slope_db {r['per_slope_db']:.2f} from ns-3's curves); joules of all stations, ns-3 / ours; "
          f"gap = ours - ns-3 over ns-3's window joules; * = the link holds")
    print(f"{'s':>3} {'Mb/s':>5} {'ns-3 Mb/s':>9} {'ours':>7} {'gap':>7} {'tx J':>13} {'rx J':>13} {'idle J':>13} "
          f"{'energy gap tx/rx/idle':>22}")
    for row, g in zip(r["rows"], gaps(r)):
        j = " ".join(f"{row[f'ns3_{k}_j']:>6.3f}/{row[f'ours_{k}_j']:<6.3f}" for k in ("tx", "rx", "idle"))
        print(f"{row['window']:>3} {row['rate_mbps']:>5g} {row['ns3_mbps']:>9.3f} {row['ours_mbps']:>7.3f} "
              f"{g['mbps']:>+7.2%} {j} {g['tx']:>+7.2%}{g['rx']:>+7.2%}{g['idle']:>+7.2%}{' *' if g['holds'] else ''}")
    held = [g for g in gaps(r) if g["holds"]]
    worst = max((abs(g["mbps"]) for g in held), default=0.0)
    worst_j = max((abs(g[k]) for g in held for k in STATES), default=0.0)
    print(f"link holds in {len(held)} windows: worst throughput gap {worst:.2%}, worst energy gap {worst_j:.2%}; "
          f"breaks at second {r['break_s']['ns3']} in ns-3, {r['break_s']['ours']} in ours")
    s = summary(r)
    print(f"wall time of the walk: ns-3 {r['wall_s']['ns3']:.2f} s, ours {r['wall_s']['ours']:.2f} s "
          f"(ns-3 / ours = {s['wall_ratio']:.2f}; per delivered frame, {r['frames']['ns3']} in ns-3 and "
          f"{r['frames']['ours']} in ours: {s['frame_ratio']:.2f}); ours with frames to spare after the walk "
          f"{r['wall_s'].get('ours_full', math.nan):.2f} s")


def figure(results: list[dict], path) -> Path:
    """The walks (`compare`'s results, or a stored run's "walks") as one PNG: per walk, throughput
    per window (ns-3 and ours) above, radio joules per window and state below; drawn by plotly,
    rendered by headless Chromium."""
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.subplots import make_subplots

    # deferred: plotly and a headless Chromium, only for the figure
    from dashboards.export import screenshot

    titles = []
    for r in results:
        if r.get("scenario", "away") == "waypoint":
            where = (f"{r['stations']} stations on random waypoints in a {WAYPOINT_SIDE_M:g} m square, seed "
                     f"{r.get('seed')}: throughput per 1 s (all stations)")
        else:
            who = "1 station" if r["stations"] == 1 else f"{r['stations']} stations side by side"
            where = (f"{who} walking away at {r['speed_mps']:g} m/s from {r['d0_m']:g} m, seed {r.get('seed')}: "
                     "throughput per 1 s (all stations; dashed: where each breaks)")
        titles += [where, "radio joules per 1 s and state, all stations"]
    fig = make_subplots(rows=2 * len(results), cols=1, subplot_titles=titles,
                        vertical_spacing=min(0.07, 0.3 / (2 * len(results))))
    colours = {"tx": "#dc2626", "rx": "#2563eb", "idle": "#6b7280"}
    for i, r in enumerate(results):
        x = [row["window"] + 0.5 for row in r["rows"]]
        for side, dash, name in (("ns3", "solid", "ns-3.37"), ("ours", "dot", "ours")):
            first = i == 0
            fig.add_trace(go.Scatter(x=x, y=[row[f"{side}_mbps"] for row in r["rows"]], mode="lines",
                                     line={"color": "#111827", "dash": dash, "width": 2},
                                     name=f"{name} throughput", legendgroup=f"{side}-mbps", showlegend=first),
                          row=2 * i + 1, col=1)
            for k, c in colours.items():
                fig.add_trace(go.Scatter(x=x, y=[row[f"{side}_{k}_j"] for row in r["rows"]], mode="lines",
                                         line={"color": c, "dash": dash, "width": 2}, name=f"{name} {k}",
                                         legendgroup=f"{side}-{k}", showlegend=first),
                              row=2 * i + 2, col=1)
        for b, side in ((r["break_s"]["ns3"], "ns-3"), (r["break_s"]["ours"], "ours")):
            if b is not None:
                fig.add_vline(x=b, line={"color": "#9ca3af", "dash": "dash"}, row=2 * i + 1, col=1)
        fig.update_yaxes(title_text="Mbit/s", row=2 * i + 1, col=1)
        fig.update_yaxes(title_text="J", row=2 * i + 2, col=1)
        fig.update_xaxes(title_text="s", row=2 * i + 2, col=1)
    height = (420 if len(results) < 3 else 330) * 2 * len(results)
    fig.update_layout(width=1200, height=height, template="plotly_white", margin={"t": 60, "b": 40},
                      title="Moving stations: ns-3.37 (solid) and ours (dotted)")
    path = Path(path).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "walk.html"
        page.write_text(pio.to_html(fig, include_plotlyjs=True, full_html=True, config={"displayModeBar": False}), encoding="utf-8")
        screenshot(page, path, 1200, height + 20, tmp)
    return path
