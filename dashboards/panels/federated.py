"""A federated run (testbed/drivers/federated.py): the clients whose updates counted, per round (sync)
or per server step (FedBuff), and for FedBuff the mean staleness of a step's updates and a
histogram of every counted update's staleness (node_iterations.staleness: one per update, so
the counts are exact; binned rows carry each bin's values in `staleness_each`). A Flower run
(its config's `[flower]` table): the replies of each send_and_receive by outcome, ok, failed
(an error reply), lost and late (the iterations' `replies_*`; binned rows sum them). Any other
run does not show the panel (`applies`).
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel, Rows, federated_mode
from dashboards.style import (
    PALETTE,
    Series,
    add_marks,
    axis,
    base_layout,
    grid2,
    last_x,
    line_trace,
    make_figure,
    placeholder_note,
    points,
    smooth,
    smooth_note,
    titled,
)


def staleness_values(nodes: Sequence[dict]) -> list[int]:
    """The staleness of every counted update in these node rows (raw or binned)."""
    out = []
    for r in nodes:
        if "staleness_each" in r:   # binned: every value of the bin
            out += [int(v) for v in (r["staleness_each"] or "").split(",") if v]
        elif r.get("staleness") is not None:
            out.append(int(r["staleness"]))
    return out


REPLIES = ("ok", "failed", "lost", "late")


def panel_mode(run: dict) -> str | None:
    """"sync" or "fedbuff" (a federated run), "flower" (a Flower run), else None."""
    flower = "flower" in (run.get("config") or {})
    return federated_mode(run) or ("flower" if flower else None)


def federated_series(iterations: Sequence[dict], nodes: Sequence[dict], mode: str | None) -> Series:
    """Participants per round (federated runs) and, in FedBuff, each step's mean staleness and
    the new updates' staleness for the histogram (x the values, y ones: it sums them); a
    Flower run's replies per round by outcome."""
    if mode is None:
        return {}
    if mode == "flower":
        return {f"replies_{k}": points(iterations, "iteration", f"replies_{k}") for k in REPLIES}
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
    mode, its = panel_mode(rows.run), rows.iterations
    if mode is None:
        layout = base_layout("Federated rounds", 200, uirevision, xaxis=axis(visible=False),
                             yaxis=axis(visible=False))
        layout["annotations"].append(placeholder_note("Not a federated run."))
        return make_figure([], layout, as_dict)
    s, _ = smooth(federated_series(its, rows.nodes, mode), "federated", smoothing)
    if mode == "flower":
        return flower_figure(rows, s, uirevision, note, smoothing, as_dict)
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


def flower_figure(rows: Rows, s: Series, uirevision, note: str, smoothing: float,
                  as_dict: bool) -> go.Figure | dict:
    """A Flower run's replies per round, one line per outcome."""
    its = rows.iterations
    traces = [line_trace(f"replies_{k}", k, s[f"replies_{k}"], mode="lines+markers",
                         line=dict(color=PALETTE[i], shape="hv")) for i, k in enumerate(REPLIES)]
    layout = base_layout(titled("Flower: replies per round, ok, failed (an error reply), lost "
                                "and late", smooth_note(note, smoothing)), 300, uirevision,
                         xaxis=axis(title=dict(text="iteration")),
                         yaxis=axis(title=dict(text="replies"), rangemode="tozero"))
    if not its:
        layout["annotations"].append(placeholder_note("No rounds yet."))
    return make_figure(traces, add_marks(layout, rows.events, "iteration", last_x(its, "iteration")),
                       as_dict)


PANEL = Panel(
    name="federated",
    figure=lambda rows, view, as_dict: federated_figure(
        rows, uirevision=view.uirevision, note=view.note, smoothing=view.smoothing, as_dict=as_dict),
    series=lambda rows, view, totals: federated_series(rows.iterations, rows.nodes,
                                                       panel_mode(rows.run)),
    noisy=("staleness",),
    applies=lambda run: panel_mode(run) is not None)
