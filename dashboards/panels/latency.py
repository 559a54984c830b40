"""Virtual seconds per iteration, stacked by part, with the iterations that left workers out."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel
from dashboards.style import (PALETTE, Series, add_marks, axis, base_layout, last_x, line_trace,
                              make_figure, placeholder_note, points, smooth, smooth_note, titled)

LATENCY_PARTS = [("compute_s", "compute"), ("uplink_s", "uplink"),
                 ("aggregation_s", "aggregation"), ("downlink_s", "downlink")]


def latency_series(iterations: Sequence[dict]) -> Series:
    out = {key: points(iterations, "iteration", lambda r, k=key: r.get(k) or 0.0)
           for key, _ in LATENCY_PARTS}
    out.update(left_out_series(iterations))
    return out


def left_out_series(iterations: Sequence[dict]) -> Series:
    """Iterations whose aggregate went without some workers (run.deadline_s, a device trace):
    a marker on top of the iteration's stacked latency."""
    rows = [r for r in iterations if r.get("left_out")]
    return {"left_out": points(rows, "iteration", lambda r: sum(r.get(k) or 0.0 for k, _ in LATENCY_PARTS))}


def left_out_text(iterations: Sequence[dict], nodes: Sequence[dict]) -> list[str]:
    """Hover text of the left-out markers: who, and why ("deadline" | "unavailable")."""
    who: dict = defaultdict(list)
    for r in nodes:
        if r.get("left_out"):
            who[r["iteration"]].append(f"{r['node']} ({r['left_out']})")
    return [f"left out: {', '.join(who[r['iteration']]) or r['left_out']}"
            for r in iterations if r.get("left_out")]


def latency_figure(iterations: Sequence[dict], events: Sequence[dict] = (), uirevision=None,
                   note: str = "", smoothing: float = 0.0, as_dict: bool = False,
                   nodes: Sequence[dict] = ()) -> go.Figure | dict:
    """Virtual seconds per iteration split into compute / uplink / aggregation / downlink, and
    a marker on each iteration that left workers out (`nodes` rows name them; the marker sits
    at the iteration's unsmoothed total)."""
    s, _ = smooth(latency_series(iterations), "latency", smoothing)
    traces = [line_trace(key, label, s[key], stackgroup="latency", line=dict(width=0.5, color=PALETTE[i]))
              for i, (key, label) in enumerate(LATENCY_PARTS)]
    traces.append(line_trace("left_out", "workers left out", s["left_out"], mode="markers",
                        marker=dict(symbol="x", size=7, color="#d62728"),
                        text=left_out_text(iterations, nodes), hoverinfo="x+text"))
    layout = base_layout(titled("Latency per iteration (virtual time, stacked)", smooth_note(note, smoothing)),
                     440, uirevision, xaxis=axis(title=dict(text="iteration")),
                     yaxis=axis(title=dict(text="virtual time"), rangemode="tozero", ticksuffix=" s"))
    if not iterations:
        layout["annotations"].append(placeholder_note("No iterations yet."))
    return make_figure(traces, add_marks(layout, events, "iteration", last_x(iterations, "iteration")),
                   as_dict)



PANEL = Panel(
    name="latency",
    figure=lambda rows, view, as_dict: latency_figure(
        rows.iterations, rows.events, uirevision=view.uirevision, note=view.note,
        smoothing=view.smoothing, as_dict=as_dict, nodes=rows.nodes),
    series=lambda rows, view, totals: latency_series(rows.iterations),
    noisy=tuple(k for k, _ in LATENCY_PARTS),
    hover=lambda rows: {"left_out": left_out_text(rows.iterations, rows.nodes)})
