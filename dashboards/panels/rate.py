"""Bits per iteration, uplink and downlink apart; the workers' uplink as a mean with its
min-max band (one worker drawn on its own when picked); and cumulative bytes. Tick labels carry
the unit (bit, B)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel, Rows
from dashboards.style import (PALETTE, Series, add_marks, band_series, band_traces, base_layout,
                              bits_part, grid2, last_x, line_trace, make_figure, member_trace,
                              node_order, placeholder_note, points, series_uid, smooth,
                              smooth_note, titled, unit_axis)

SCALES = ("log", "linear")


def rate_series(iterations: Sequence[dict], nodes: Sequence[dict], start_bytes: float | dict = 0.0) -> Series:
    """Bits per iteration, uplink (what the workers sent) and downlink (what they received)
    apart, each worker's uplink, and cumulative bytes up and down from `start_bytes` on
    ({"up": bytes, "down": bytes}, or one number for both)."""
    out: Series = {"bits_up": points(iterations, "iteration", "bits_up"),
                   "bits_down": points(iterations, "iteration", "bits_down")}
    per_node: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for r in nodes:
        if r.get("bits_up") is not None:
            xs, ys = per_node[str(r["node"])]
            xs.append(r["iteration"])
            ys.append(r["bits_up"])
    for name in node_order(per_node):
        out[series_uid("node", name)] = per_node[name]
    out.update(band_series("wk", per_node))
    start = start_bytes if isinstance(start_bytes, dict) else {"up": start_bytes, "down": start_bytes}
    for part in ("up", "down"):
        total, cum_x, cum_y = start.get(part, 0.0), [], []
        for r in iterations:
            b = bits_part(r, f"bits_{part}")
            if b is None:
                continue
            total += b / 8
            cum_x.append(r["iteration"])
            cum_y.append(total)
        out[f"cum_{part}"] = (cum_x, cum_y)
    return out


def rate_figure(iterations: Sequence[dict], nodes: Sequence[dict], events: Sequence[dict] = (),
                uirevision=None, note: str = "", scale: str = "log", smoothing: float = 0.0,
                as_dict: bool = False, focus: str | None = None) -> go.Figure | dict:
    """Bits per iteration (top; log scale by default, so a 100x cut is a step down, not a
    line at zero) uplink and downlink apart, the workers' uplink as a mean and min-max band
    (`focus`: that worker's own line too), and cumulative bytes (bottom)."""
    if scale not in SCALES:
        raise ValueError(f"rate scale {scale!r} is unknown; allowed: {', '.join(SCALES)}")
    raw = rate_series(iterations, nodes)
    s, _ = smooth(raw, "rate", smoothing)
    names = node_order({str(r["node"]) for r in nodes if r.get("bits_up") is not None})
    traces = [line_trace("bits_up", "uplink (all workers)", s["bits_up"], legendgroup="total",
                         line=dict(color="#111827", width=2)),
              line_trace("bits_down", "downlink (all workers)", s["bits_down"], legendgroup="total",
                         line=dict(color="#111827", width=2, dash="dash"))]
    traces += band_traces("wk", s, f"uplink per worker: mean, range of {len(names)}", PALETTE[1])
    for i, name in enumerate(names):
        traces.append(member_trace(series_uid("node", name), f"{name} uplink", s[series_uid("node", name)],
                                   name == focus, PALETTE[(i + 2) % len(PALETTE)], legendgroup="nodes"))
    traces.append(line_trace("cum_up", "cumulative up", s["cum_up"], row=2, legendgroup="cum",
                             line=dict(color=PALETTE[0])))
    traces.append(line_trace("cum_down", "cumulative down", s["cum_down"], row=2, legendgroup="cum",
                             line=dict(color=PALETTE[0], dash="dash")))
    bits = [y for k in ("bits_up", "bits_down", "wk_lo", "wk_hi") for y in raw[k][1]]
    cum = [y for k in ("cum_up", "cum_down") for y in raw[k][1]]
    layout = base_layout(titled(f"Rate: bits per iteration, up and down ({scale})",
                                smooth_note(note, smoothing)), 440,
                         uirevision, grid=grid2(top=0.5, x_title="iteration"),
                         yaxis=dict(title=dict(text="per iteration"), **unit_axis(scale, bits, "bit")),
                         yaxis2=dict(title=dict(text="cumulative"), **unit_axis(scale, cum, "B")))
    if not iterations:
        layout["annotations"].append(placeholder_note("No iterations yet."))
    return make_figure(traces, add_marks(layout, events, "iteration", last_x(iterations, "iteration")),
                       as_dict)


def rate_totals(rows: Rows, start: dict) -> dict:
    """Cumulative bytes up and down after these rows (from `start`, the totals before)."""
    cum = rate_series(rows.iterations, (), start_bytes=start or 0.0)
    return {part: (cum[f"cum_{part}"][1] or [(start or {}).get(part, 0.0)])[-1] for part in ("up", "down")}


PANEL = Panel(
    name="rate",
    figure=lambda rows, view, as_dict: rate_figure(
        rows.iterations, rows.nodes, rows.events, uirevision=view.uirevision, note=view.note,
        scale=view.scale, smoothing=view.smoothing, as_dict=as_dict, focus=view.focus),
    series=lambda rows, view, totals: rate_series(rows.iterations, rows.nodes, start_bytes=totals),
    # the workers' band is what smoothing is for; the totals are steps (the stages' cut) and a
    # picked worker's own line is drawn as it was
    noisy=("wk_",), totals=rate_totals)
