"""The network drawn by role, each link coloured by its load over the newest iterations."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import networkx as nx
import plotly.graph_objects as go
from plotly.colors import get_colorscale, sample_colorscale

from dashboards.panel import Panel
from dashboards.style import axis, base_layout, make_figure, placeholder_note
from testbed.records.graph_json import graph_edges, graph_nodes

# An explicit list, not the name: plotly.js defines its named "YlOrRd" in the reverse order
# of Python's, which left the colour bar saying the opposite of the link colours.
LOAD_SCALE = get_colorscale("YlOrRd")


def _positions(nodes: list[dict], edges: list[dict]) -> dict[str, tuple[float, float]]:
    """Recorded positions when every node has one; otherwise a star or a seeded spring layout."""
    if nodes and all(n.get("pos") is not None for n in nodes):
        return {str(n["id"]): (float(n["pos"][0]), float(n["pos"][1])) for n in nodes}
    servers = [str(n["id"]) for n in nodes if n.get("role") == "server"]
    if len(servers) == 1 and all(servers[0] in (str(e["source"]), str(e["target"])) for e in edges):
        # A star: the server in the middle, the others on a circle.
        others = [str(n["id"]) for n in nodes if str(n["id"]) != servers[0]]
        pos = {servers[0]: (0.0, 0.0)}
        for i, n in enumerate(others):
            a = 2 * math.pi * i / max(1, len(others)) + math.pi / 2
            pos[n] = (math.cos(a), math.sin(a))
        return pos
    g = nx.Graph()
    g.add_nodes_from(str(n["id"]) for n in nodes)
    g.add_edges_from((str(e["source"]), str(e["target"])) for e in edges)
    return {n: (float(p[0]), float(p[1])) for n, p in nx.spring_layout(g, seed=7).items()}


def link_loads(links: Sequence[dict]) -> dict[frozenset, float]:
    """Bytes carried per undirected edge (both directions) over the given link rows."""
    load: dict[frozenset, float] = defaultdict(float)
    for r in links:
        load[frozenset((str(r["src"]), str(r["dst"])))] += r.get("bytes") or 0
    return dict(load)


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def label_box(text: str, x: float, y: float, xshift: float = 0, yshift: float = 0,
              bold: bool = False) -> dict:
    """A label on a white box at (x, y) shifted by pixels: drawn above the edges, which it hides."""
    return dict(text=f"<b>{text}</b>" if bold else text, x=x, y=y, xref="x", yref="y",
                xshift=xshift, yshift=yshift, showarrow=False, bgcolor="rgba(255,255,255,0.9)",
                borderpad=2, font=dict(size=11, color="#111827"))


def topology_figure(graph: dict | None, links: Sequence[dict] = (), window: str = "",
                    uirevision=None, as_dict: bool = False) -> go.Figure | dict:
    """The network: every link coloured by its load in `links` (the latest window of link
    rows) and labelled with its bandwidth; nodes drawn by role."""
    nodes, edges = graph_nodes(graph), graph_edges(graph)
    layout = base_layout(f"Topology: link load{' ' + window if window else ''}", 440, uirevision,
                     hovermode="closest", showlegend=False, xaxis=axis(visible=False),
                     yaxis=axis(visible=False, scaleanchor="x", scaleratio=1))
    if not nodes:
        layout["annotations"].append(placeholder_note("No topology recorded for this run."))
        return make_figure([], layout, as_dict)
    pos = _positions(nodes, edges)
    loads = link_loads(links)
    peak = max(loads.values(), default=0)
    traces: list[dict] = []
    mid_x, mid_y, mid_load, labels, hovers = [], [], [], [], []
    for e in edges:
        u, v = str(e["source"]), str(e["target"])
        if u not in pos or v not in pos:
            continue
        load = loads.get(frozenset((u, v)), 0)
        frac = load / peak if peak else 0.0
        color = sample_colorscale(LOAD_SCALE, [0.15 + 0.85 * frac])[0] if peak else "#bbbbbb"
        (x0, y0), (x1, y1) = pos[u], pos[v]
        traces.append(dict(type="scatter", x=[x0, x1], y=[y0, y1], mode="lines", hoverinfo="skip",
                           line=dict(color=color, width=2 + 6 * frac)))
        bw = e.get("bandwidth_mbps")
        label = f"{bw:g} Mb/s" if isinstance(bw, (int, float)) else ""
        mid_x.append((x0 + x1) / 2)
        mid_y.append((y0 + y1) / 2)
        mid_load.append(load)
        labels.append(label)
        delay = e.get("delay_ms")
        hovers.append(f"{u} – {v}<br>{label or 'bandwidth unknown'}"
                      + (f", {delay:g} ms" if isinstance(delay, (int, float)) else "")
                      + f"<br>load {_fmt_bytes(load)}")
    # The bandwidth: in the title when every link has the same, else a label on each link, on a
    # white box so that no edge crosses it; the link's marker keeps its hover and the colour bar.
    same = len(set(labels)) == 1
    if same and labels[0]:
        layout["title"]["text"] += f" · every link {labels[0]}"
    traces.append(dict(
        type="scatter", uid="link_labels", x=mid_x, y=mid_y, mode="markers",
        hovertext=hovers, hoverinfo="text",
        marker=dict(size=9, color=mid_load, colorscale=LOAD_SCALE, cmin=0, cmax=max(peak, 1),
                    showscale=True, colorbar=dict(title=dict(text="bytes"), thickness=12))))
    if not same:
        layout["annotations"] += [label_box(text, x, y, yshift=14)
                                  for text, x, y in zip(labels, mid_x, mid_y) if text]
    symbols = {"server": "square", "relay": "diamond", "worker": "circle"}
    traces.append(dict(
        type="scatter", uid="nodes", x=[pos[str(n["id"])][0] for n in nodes],
        y=[pos[str(n["id"])][1] for n in nodes], mode="markers",
        hovertext=[f"{n['id']} ({n.get('role', 'node')})" for n in nodes], hoverinfo="text",
        marker=dict(size=18, color=["#444" if n.get("role") == "server" else "#1f77b4" for n in nodes],
                    symbol=[symbols.get(n.get("role"), "circle") for n in nodes],
                    line=dict(color="white", width=1))))
    # Node names away from the middle of the drawing (where the edges go), on white boxes
    cx = sum(p[0] for p in pos.values()) / len(pos)
    cy = sum(p[1] for p in pos.values()) / len(pos)
    for n in nodes:
        x, y = pos[str(n["id"])]
        dx, dy = x - cx, y - cy
        norm = math.hypot(dx, dy)
        ux, uy = (dx / norm, dy / norm) if norm > 1e-9 else (0.0, 1.0)
        layout["annotations"].append(label_box(str(n["id"]), x, y, xshift=26 * ux, yshift=22 * uy,
                                               bold=True))
    return make_figure(traces, layout, as_dict)



PANEL = Panel(
    name="topology",
    figure=lambda rows, view, as_dict: topology_figure(
        rows.run.get("graph"), rows.window, rows.window_label, uirevision=view.uirevision,
        as_dict=as_dict))
