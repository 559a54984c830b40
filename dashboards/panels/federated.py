"""A federated run (testbed/federated.py): the clients whose updates counted, per round (sync)
or per server step (FedBuff), and for FedBuff the mean staleness of a step's updates and a
histogram of every counted update's staleness (node_iterations.staleness: one per update, so
the counts are exact; binned rows carry each bin's values in `staleness_each`). A run without
`[federated]` does not show the panel (`applies`).
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel, Rows, federated_mode
from dashboards.style import (PALETTE, Series, add_marks, axis, base_layout, grid2, last_x,
                              line_trace, make_figure, placeholder_note, points, smooth,
                              smooth_note, titled)


def staleness_values(nodes: Sequence[dict]) -> list[int]:
    """The staleness of every counted update in these node rows (raw or binned)."""
    out = []
    for r in nodes:
        if "staleness_each" in r:   # binned: every value of the bin
            out += [int(v) for v in (r["staleness_each"] or "").split(",") if v]
        elif r.get("staleness") is not None:
            out.append(int(r["staleness"]))
    return out


def federated_series(iterations: Sequence[dict], nodes: Sequence[dict], mode: str | None) -> Series:
    """Participants per round (federated runs) and, in FedBuff, each step's mean staleness and
    the new updates' staleness for the histogram (x the values, y ones: it sums them)."""
    if mode is None:
        return {}
    out = {"participants": points(iterations, "iteration", "participants")}
    if mode == "fedbuff":
        out["staleness"] = points(iterations, "iteration", "staleness")
        values = staleness_values(nodes)
        out["staleness_hist"] = (values, [1] * len(values))
    return out


def federated_figure(rows: Rows, uirevision=None, note: str = "", smoothing: float = 0.0,
                     as_dict: bool = False) -> go.Figure | dict:
    """Participants per round (top) and, for FedBuff, the mean staleness (server versions)
    of each step's updates (bottom)."""
    mode, its = federated_mode(rows.run), rows.iterations
    if mode is None:
        layout = base_layout("Federated rounds", 200, uirevision, xaxis=axis(visible=False),
                             yaxis=axis(visible=False))
        layout["annotations"].append(placeholder_note("Not a federated run."))
        return make_figure([], layout, as_dict)
    s, _ = smooth(federated_series(its, rows.nodes, mode), "federated", smoothing)
    traces = [line_trace("participants", "participants", s["participants"], mode="lines+markers",
                         line=dict(color=PALETTE[0], shape="hv"))]
    if mode == "fedbuff":
        traces.append(line_trace("staleness", "mean staleness", s["staleness"], row=2,
                                 mode="lines+markers", line=dict(color=PALETTE[1])))
        xs, ys = s["staleness_hist"]
        # a sum of ones in bins of width 1 centred on the integers: a count per staleness
        traces.append(dict(type="histogram", uid="staleness_hist", name="updates by staleness",
                           x=list(xs), y=list(ys), histfunc="sum", xbins=dict(start=-0.5, size=1),
                           xaxis="x3", yaxis="y3", marker=dict(color=PALETTE[2])))
        left = dict(domain=[0, 0.62])   # the step series; the histogram on the right
        layout = base_layout(
            titled("FedBuff: participants and mean staleness per server step; every update's "
                   "staleness", smooth_note(note, smoothing)), 400, uirevision,
            grid=grid2(top=0.5, x_title="iteration"), xaxis=left, xaxis2=left,
            yaxis=dict(title=dict(text="participants"), rangemode="tozero"),
            yaxis2=dict(title=dict(text="mean staleness (versions)"), rangemode="tozero"),
            xaxis3=axis(anchor="y3", domain=[0.72, 1], dtick=1,
                        title=dict(text="staleness (versions)")),
            yaxis3=axis(anchor="x3", domain=[0, 1], title=dict(text="updates"),
                        rangemode="tozero"))
    else:
        layout = base_layout(titled("Federated: participants per round", smooth_note(note, smoothing)),
                             300, uirevision, xaxis=axis(title=dict(text="iteration")),
                             yaxis=axis(title=dict(text="participants"), rangemode="tozero"))
    if not its:
        layout["annotations"].append(placeholder_note("No rounds yet."))
    return make_figure(traces, add_marks(layout, rows.events, "iteration", last_x(its, "iteration")),
                       as_dict)


PANEL = Panel(
    name="federated",
    figure=lambda rows, view, as_dict: federated_figure(
        rows, uirevision=view.uirevision, note=view.note, smoothing=view.smoothing, as_dict=as_dict),
    series=lambda rows, view, totals: federated_series(rows.iterations, rows.nodes,
                                                       federated_mode(rows.run)),
    noisy=("staleness",),
    applies=lambda run: federated_mode(run) is not None)
