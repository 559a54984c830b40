"""Nodes that move on the virtual clock (`[network.mobility]`), so that distance sets the path
loss, SNR and MCS of every transmission on a fading link as it happens.

Models (`model`):
  random_waypoint  each moving node (`nodes`, default every worker) starts at its topology
                   position, walks in a straight line to a point drawn uniformly in `area_m`
                   [xmin, ymin, xmax, ymax] at a speed drawn uniformly in `speed_mps` [min, max],
                   pauses `pause_s`, and so on. Draws come from a generator seeded by the
                   experiment's seed and the node's name, so a position is a pure function of
                   (seed, node, t): a resumed run, or any order of queries, sees the same path.
  away             each moving node (`nodes`, default every worker) walks in a straight line
                   away from the server (the access point) from its topology position, at a
                   speed drawn uniformly in `speed_mps` (seeded as above), and stops when it is
                   `until_m` from the server (a node already that far stays put).
  path             `[network.mobility.paths]` NODE = [[t, x, y], ...]: waypoints (t strictly
                   increasing from >= 0), straight lines at constant speed between them; before
                   the first the node is at the first, after the last at the last.
  trace            `file`: a CSV of positions over time, one row per sample:
                       time_s,node,x_m,y_m
                       0,w0,10,0
                       30.5,w0,25,4
                   (a header row, '#' comments; rows of a node in increasing time) read as a
                   path per node.
Nodes not moving keep their topology position (`pos`). Every node of a moving link needs one.

Per transmission: a fading link's mean SNR is computed from the distance between its two ends
at the start of the coherence block the transmission starts in (the block's gain and SNR are
one value per block, as without mobility), so SNR, rate (Shannon or MCS) and packet error rate
follow the movement block by block. Links without the fading model do not depend on distance.
"""
from __future__ import annotations

import csv
import math
import zlib
from pathlib import Path

import numpy as np

from channels.errors import ChannelConfigError

MODELS = ("random_waypoint", "away", "path", "trace")


class PathTrack:
    """Straight lines at constant speed between waypoints (t, x, y)."""

    def __init__(self, t, xy):
        self.t = np.asarray(t, dtype=float)
        self.xy = np.asarray(xy, dtype=float).reshape(-1, 2)

    def at(self, t) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        return np.stack([np.interp(t, self.t, self.xy[:, 0]), np.interp(t, self.t, self.xy[:, 1])], axis=1)


class WaypointTrack:
    """Random waypoint: legs drawn one after the other as far as a query needs, so the legs
    (and every position) do not depend on the order of queries."""

    def __init__(self, start, area, speed, pause_s: float, seed):
        self.rng = np.random.default_rng(seed)
        self.area, self.speed, self.pause = area, speed, float(pause_s)
        # waypoint i is reached at arrive[i] and left at leave[i]
        self.pts = [np.asarray(start, dtype=float)]
        self.arrive, self.leave = [0.0], [0.0]

    def _extend(self, until: float) -> None:
        while self.leave[-1] <= until:
            x0, y0, x1, y1 = self.area
            dest = np.array([self.rng.uniform(x0, x1), self.rng.uniform(y0, y1)])
            v = self.rng.uniform(*self.speed)
            go = self.leave[-1] + float(np.hypot(*(dest - self.pts[-1]))) / v
            self.pts.append(dest)
            self.arrive.append(go)
            self.leave.append(go + self.pause)

    def at(self, t) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        self._extend(float(t.max()) if t.size else 0.0)
        # the polyline: each waypoint at its arrival and again at its departure (the pause)
        times = np.repeat(np.array(self.arrive), 2)
        times[1::2] = self.leave
        pts = np.repeat(np.array(self.pts), 2, axis=0)
        return np.stack([np.interp(t, times, pts[:, 0]), np.interp(t, times, pts[:, 1])], axis=1)


class Mobility:
    """Positions of every node over virtual time: a track per moving node, the topology's
    position for the others."""

    def __init__(self, static: dict, tracks: dict):
        self.static = {n: np.asarray(p, dtype=float) for n, p in static.items()}
        self.tracks = tracks

    def moves(self, node) -> bool:
        return node in self.tracks

    def position(self, node, t) -> np.ndarray:
        """(len(t), 2) positions of `node` at times t."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if node in self.tracks:
            return self.tracks[node].at(t)
        return np.broadcast_to(self.static[node], (t.size, 2))

    def distance(self, u, v, t) -> np.ndarray:
        return np.hypot(*(self.position(u, t) - self.position(v, t)).T)


class Distance:
    """The distance between a link's two ends at times t (picklable, for a checkpoint)."""

    def __init__(self, mobility: Mobility, u, v):
        self.mobility, self.u, self.v = mobility, u, v

    def __call__(self, t) -> np.ndarray:
        return self.mobility.distance(self.u, self.v, t)


# ---------------------------------------------------------------------- building it
def _pair(path: str, value, n: int, what: str) -> list[float]:
    if (not isinstance(value, list) or len(value) != n
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in value)):
        raise ChannelConfigError(path, value, what)
    return [float(x) for x in value]


def _waypoints(path: str, rows) -> PathTrack:
    if not isinstance(rows, list) or not rows:
        raise ChannelConfigError(path, rows, "a list of [t, x, y] waypoints")
    pts = [_pair(f"{path}[{i}]", r, 3, "[t, x, y] (seconds, metres)") for i, r in enumerate(rows)]
    for i, (t, _, _) in enumerate(pts):
        if t < 0 or (i and t <= pts[i - 1][0]):
            raise ChannelConfigError(f"{path}[{i}]", rows[i], "times >= 0 and strictly increasing")
    return PathTrack([p[0] for p in pts], [p[1:] for p in pts])


def read_position_trace(path: str) -> dict[str, PathTrack]:
    """The CSV of the `trace` model (module doc) -> a path per node."""
    key = "network.mobility.file"
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ChannelConfigError(key, path, f"a readable CSV file ({e.strerror})") from None
    header, rows = None, {}
    for lineno, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [c.strip() for c in row]
            if header[:4] != ["time_s", "node", "x_m", "y_m"]:
                raise ChannelConfigError(f"{path}:{lineno}", ",".join(row), "the header time_s,node,x_m,y_m")
            continue
        try:
            t, node, x, y = float(row[0]), row[1].strip(), float(row[2]), float(row[3])
        except (ValueError, IndexError):
            raise ChannelConfigError(f"{path}:{lineno}", ",".join(row), "time_s,node,x_m,y_m (numbers, a node name)") from None
        rows.setdefault(node, []).append([t, x, y])
    if not rows:
        raise ChannelConfigError(key, path, "at least one position row")
    return {node: _waypoints(f"{path}: node {node}", pts) for node, pts in rows.items()}


def build_mobility(table: dict, graph, seed) -> Mobility:
    """The validated `[network.mobility]` table over the topology `graph`."""
    model = table["model"]
    if model == "path":
        paths = table.get("paths") or {}
        if not isinstance(paths, dict) or not paths:
            raise ChannelConfigError("network.mobility.paths", paths, "a table NODE = [[t, x, y], ...]")
        tracks = {str(n): _waypoints(f"network.mobility.paths.{n}", rows) for n, rows in paths.items()}
    elif model == "trace":
        if not table.get("file"):
            raise ChannelConfigError("network.mobility.file", None, 'a CSV of positions when model = "trace"')
        tracks = read_position_trace(table["file"])
    elif model == "away":
        tracks = _away(table, graph, seed)
    else:
        names = table.get("nodes")
        names = [n for n, a in graph.nodes(data=True) if a.get("role") == "worker"] if names is None else names
        area = _pair("network.mobility.area_m", table["area_m"], 4, "[xmin, ymin, xmax, ymax] in metres")
        speed = _pair("network.mobility.speed_mps", table["speed_mps"], 2, "[min, max] metres per second")
        if area[2] < area[0] or area[3] < area[1]:
            raise ChannelConfigError("network.mobility.area_m", table["area_m"], "xmin <= xmax and ymin <= ymax")
        if not 0 < speed[0] <= speed[1]:
            raise ChannelConfigError("network.mobility.speed_mps", table["speed_mps"], "0 < min <= max")
        tracks = {}
        for n in names:
            pos = graph.nodes[n].get("pos") if n in graph else None
            if pos is None:
                raise ChannelConfigError("network.mobility.nodes", n, "nodes of the topology with a position")
            tracks[str(n)] = WaypointTrack(pos, area, speed, table["pause_s"],
                                           [int(seed), 0x30B1, zlib.crc32(str(n).encode())])
    for n in tracks:
        if n not in graph:
            raise ChannelConfigError(f"network.mobility ({model})", n,
                                     f"a node of the topology ({', '.join(map(str, graph.nodes))})")
    static = {n: a["pos"] for n, a in graph.nodes(data=True) if a.get("pos") is not None}
    return Mobility(static, tracks)


def _movers(table: dict, graph) -> list:
    names = table.get("nodes")
    names = [n for n, a in graph.nodes(data=True) if a.get("role") == "worker"] if names is None else names
    for n in names:
        if n not in graph or graph.nodes[n].get("pos") is None:
            raise ChannelConfigError("network.mobility.nodes", n, "nodes of the topology with a position")
    return names


def _away(table: dict, graph, seed) -> dict:
    speed = _pair("network.mobility.speed_mps", table["speed_mps"], 2, "[min, max] metres per second")
    if not 0 < speed[0] <= speed[1]:
        raise ChannelConfigError("network.mobility.speed_mps", table["speed_mps"], "0 < min <= max")
    until = table.get("until_m")
    if until is None:
        raise ChannelConfigError("network.mobility.until_m", None, 'a distance in metres when model = "away"')
    hub = next((n for n, a in graph.nodes(data=True) if a.get("role") == "server"), None)
    if hub is None or graph.nodes[hub].get("pos") is None:
        raise ChannelConfigError("network.mobility.model", "away", "a topology with a server that has a position")
    centre = np.asarray(graph.nodes[hub]["pos"], dtype=float)
    tracks = {}
    for n in _movers(table, graph):
        start = np.asarray(graph.nodes[n]["pos"], dtype=float)
        v = np.random.default_rng([int(seed), 0x30B1, zlib.crc32(str(n).encode())]).uniform(*speed)
        r0 = float(np.hypot(*(start - centre)))
        if r0 <= 0:
            raise ChannelConfigError("network.mobility.nodes", n, "nodes away from the server's position")
        if until <= r0:
            tracks[str(n)] = PathTrack([0.0], [start])
            continue
        end = centre + (start - centre) * (until / r0)
        tracks[str(n)] = PathTrack([0.0, (until - r0) / v], [start, end])
    return tracks


def link_distance(mobility: Mobility | None, u, v) -> Distance | None:
    """The distance function of link u-v when one of its ends moves, else None."""
    if mobility is None or not (mobility.moves(u) or mobility.moves(v)):
        return None
    for n in (u, v):
        if not mobility.moves(n) and n not in mobility.static:
            raise ChannelConfigError("network.mobility", n, f"a position for {n} (it has a link to a moving node)")
    return Distance(mobility, u, v)
