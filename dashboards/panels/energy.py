"""The workers' joules per iteration and cumulative joules over virtual time: the mean over
the workers with its min-max band, a picked worker drawn on its own beside it."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel
from dashboards.style import (PALETTE, X_AXES, Series, add_marks, band_series, band_traces,
                              base_layout, grid2, make_figure, member_trace, node_order,
                              placeholder_note, series_uid, smooth, smooth_note, titled)


def energy_series(nodes: Sequence[dict], times: dict, start: dict | None = None) -> Series:
    """Per worker, against virtual time ({iteration: virtual time at its end}): joules per
    iteration (`energy_<node>`) and cumulative joules from `start` ({node: joules} drawn
    before) on (`cumj_<node>`). Binned rows carry the bin's mean and `energy_j_sum`."""
    per: dict[str, list[dict]] = defaultdict(list)
    for r in nodes:
        if r.get("energy_j") is not None and times.get(r["iteration"]) is not None:
            per[str(r["node"])].append(r)
    out: Series = {}
    for name in node_order(per):
        rows = per[name]
        out[series_uid("energy", name)] = ([times[r["iteration"]] for r in rows], [r["energy_j"] for r in rows])
        total, ys = (start or {}).get(name, 0.0), []
        for r in rows:
            total += r.get("energy_j_sum", r["energy_j"])
            ys.append(total)
        out[series_uid("cumj", name)] = ([times[r["iteration"]] for r in rows], ys)
    for kind in ("energy", "cumj"):
        out.update(band_series(kind, {n: out[series_uid(kind, n)] for n in node_order(per)}))
    return out


def energy_totals(nodes: Sequence[dict], times: dict, start: dict | None = None) -> dict:
    """{node: cumulative joules} after these rows (the live view's carry between ticks)."""
    out = dict(start or {})
    for r in nodes:
        if r.get("energy_j") is not None and times.get(r["iteration"]) is not None:
            out[str(r["node"])] = out.get(str(r["node"]), 0.0) + r.get("energy_j_sum", r["energy_j"])
    return out


def energy_figure(nodes: Sequence[dict], times: dict, events: Sequence[dict] = (), uirevision=None,
                  note: str = "", smoothing: float = 0.0, as_dict: bool = False,
                  focus: str | None = None) -> go.Figure | dict:
    """The workers' energy over virtual time: joules per iteration (radio + compute,
    channels/energy.py; top) and cumulative joules (bottom), each the mean over the workers
    with its min-max band; `focus`: that worker's own lines too."""
    s, _ = smooth(energy_series(nodes, times), "energy", smoothing)
    names = node_order({str(r["node"]) for r in nodes if r.get("energy_j") is not None})
    traces = []
    for row, kind in ((1, "energy"), (2, "cumj")):
        traces += band_traces(kind, s, f"mean, min-max of {len(names)} workers", PALETTE[4], row=row,
                              showlegend=row == 1)
        for i, n in enumerate(names):
            traces.append(member_trace(series_uid(kind, n), n, s[series_uid(kind, n)], n == focus,
                                       PALETTE[(i + 5) % len(PALETTE)], row=row, legendgroup=n))
            traces[-1]["showlegend"] = n == focus and row == 1
    layout = base_layout(titled("Energy per worker (virtual time)", smooth_note(note, smoothing)), 440,
                         uirevision, grid=grid2(top=0.5, x_title=X_AXES["virtual_time_s"]),
                         yaxis=dict(title=dict(text="per iteration"), rangemode="tozero",
                                    tickformat="~s", ticksuffix="J"),
                         yaxis2=dict(title=dict(text="cumulative"), rangemode="tozero",
                                     tickformat="~s", ticksuffix="J"))
    if not names:
        layout["annotations"].append(placeholder_note("No energy recorded yet."))
    end = max((p for xs, _ in s.values() for p in xs[-1:]), default=None)
    return make_figure(traces, add_marks(layout, events, "virtual_time_s", end), as_dict)


PANEL = Panel(
    name="energy",
    figure=lambda rows, view, as_dict: energy_figure(
        rows.nodes, rows.times, rows.events, uirevision=view.uirevision, note=view.note,
        smoothing=view.smoothing, as_dict=as_dict, focus=view.focus),
    series=lambda rows, view, totals: energy_series(rows.nodes, rows.times, start=totals),
    noisy=("energy_mean", "energy_lo", "energy_hi"),  # the band of joules per iteration
    mark_x="virtual_time_s",
    totals=lambda rows, start: energy_totals(rows.nodes, rows.times, start))
