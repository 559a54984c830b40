"""A federated run (testbed/federated.py): the clients whose updates counted, per round (sync)
or per server step (FedBuff), and for FedBuff the mean staleness of a step's updates.

The store holds one staleness per step, the mean over its updates (testbed/store.py), not each
update's: the panel draws that mean over the steps, not a histogram of single updates. A run
without `[federated]` shows a one-line note instead.
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel, Rows
from dashboards.style import (PALETTE, Series, add_marks, axis, base_layout, grid2, last_x,
                              line_trace, make_figure, placeholder_note, points, smooth,
                              smooth_note, titled)


def federated_mode(run: dict) -> str | None:
    """"sync" or "fedbuff" for a federated run (its config's `[federated] mode`), else None."""
    fed = (run.get("config") or {}).get("federated")
    return fed.get("mode", "sync") if isinstance(fed, dict) else None


def federated_series(iterations: Sequence[dict], mode: str | None) -> Series:
    """Participants per round (federated runs) and, in FedBuff, each step's mean staleness."""
    if mode is None:
        return {}
    out = {"participants": points(iterations, "iteration", "participants")}
    if mode == "fedbuff":
        out["staleness"] = points(iterations, "iteration", "staleness")
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
    s, _ = smooth(federated_series(its, mode), "federated", smoothing)
    traces = [line_trace("participants", "participants", s["participants"], mode="lines+markers",
                         line=dict(color=PALETTE[0], shape="hv"))]
    if mode == "fedbuff":
        traces.append(line_trace("staleness", "mean staleness", s["staleness"], row=2,
                                 mode="lines+markers", line=dict(color=PALETTE[1])))
        layout = base_layout(
            titled("FedBuff: participants and mean staleness per server step (the store holds "
                   "each step's mean)", smooth_note(note, smoothing)), 400, uirevision,
            grid=grid2(top=0.5, x_title="server step"),
            yaxis=dict(title=dict(text="participants"), rangemode="tozero"),
            yaxis2=dict(title=dict(text="staleness (versions)"), rangemode="tozero"))
    else:
        layout = base_layout(titled("Federated: participants per round", smooth_note(note, smoothing)),
                             300, uirevision, xaxis=axis(title=dict(text="round")),
                             yaxis=axis(title=dict(text="participants"), rangemode="tozero"))
    if not its:
        layout["annotations"].append(placeholder_note("No rounds yet."))
    return make_figure(traces, add_marks(layout, rows.events, "iteration", last_x(its, "iteration")),
                       as_dict)


PANEL = Panel(
    name="federated",
    figure=lambda rows, view, as_dict: federated_figure(
        rows, uirevision=view.uirevision, note=view.note, smoothing=view.smoothing, as_dict=as_dict),
    series=lambda rows, view, totals: federated_series(rows.iterations, federated_mode(rows.run)),
    noisy=("staleness",))
