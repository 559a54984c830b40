"""The dashboard's drawing kit, shared by every figure: the style (palette, template, axes,
layout, legends right of the plot), the named series, event marks and smoothing, and the
helpers that read bits and node names from store rows.

Every figure is built from plain dicts (`line_trace`, `base_layout`; plotly's object
validation is what makes big figures slow to build, so the tests validate instead), and every
time-series figure is made of named series: `*_series(rows)` returns {uid: (x, y)} and the
matching `*_figure(rows)` draws exactly those series as traces with the same `uid`, in a fixed
order. The live dashboard appends only new points to each trace (Dash `Patch`) by calling the
series function on the new rows, and rebuilds a figure only when a new series appears.

Noisy series (a panel's `noisy`, kept in `NOISY`) can be smoothed with an exponential moving
average (`smooth`), whose last value carries over to the points appended later. Compression
stages (the `stage` events) are drawn as shaded bands behind the time series that reach the
newest point; controls and other events as vertical lines.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative

Series = dict[str, tuple[list, list]]
X_AXES = {"iteration": "iteration", "virtual_time_s": "virtual time (s)"}
PALETTE = qualitative.Plotly
GRID = "#e5ecf6"
# A small template (the full plotly_white one costs more to copy than the data).
TEMPLATE = {"layout": {"paper_bgcolor": "white", "plot_bgcolor": "white", "colorway": PALETTE,
                       "font": {"color": "#2a3f5f"}, "hoverlabel": {"align": "left"}}}
# Event kinds drawn as vertical marks on the time-series figures: colour, dash. Stages are
# bands (STAGE_COLOURS), not marks.
MARKS = {"control": ("#d62728", "dash"), "target_reached": ("#2ca02c", "dashdot"),
         "error": ("#000000", "solid")}
# Band colours of the compression stages the registered methods report (others: the palette).
STAGE_COLOURS = {"dense": "#9ca3af", "warmup": "#f59e0b", "sparse": "#60a5fa",
                 "ae_train": "#a855f7", "lgc": "#10b981"}
# The series of each figure that are noisy from one iteration to the next (smoothable): {figure:
# uids, or uid prefixes ending in "_"}, filled by each panel (dashboards/panels/) with its `noisy`.
NOISY: dict[str, tuple[str, ...]] = {}
PLACEHOLDER = "placeholder"  # the name of a "no data yet" note (kept when marks are redrawn)


def series_uid(kind: str, name: str) -> str:
    """The trace uid of a per-node / per-link / per-run series. plotly.js puts uids into CSS
    class names, so they must be CSS-safe whatever the node is called: hex-encode the name."""
    return f"{kind}_{str(name).encode().hex()}"


def check_x(x: str) -> str:
    if x not in X_AXES:
        raise ValueError(f"x axis {x!r} is unknown; allowed: {', '.join(X_AXES)}")
    return x


def points(rows: Iterable[dict], xkey: str, ykey, scale: float = 1.0) -> tuple[list, list]:
    """(x, y) of the rows whose x and y are both known; `ykey` is a column or a function."""
    xs, ys = [], []
    for r in rows:
        xv = r.get(xkey)
        yv = ykey(r) if callable(ykey) else r.get(ykey)
        if xv is None or yv is None:
            continue
        xs.append(xv)
        ys.append(yv * scale if scale != 1.0 else yv)
    return xs, ys


def line_trace(uid: str, name: str, xy: tuple[list, list], row: int = 1, **kw) -> dict:
    """A scatter trace as a plain dict (plotly's object validation is what makes big figures
    slow to build; these dicts are checked by the tests instead)."""
    kw.setdefault("mode", "lines")
    axis = "" if row == 1 else str(row)
    return dict(type="scatter", uid=uid, name=name, x=list(xy[0]), y=list(xy[1]),
                xaxis=f"x{axis}", yaxis=f"y{axis}", **kw)


def axis(**kw) -> dict:
    return dict(gridcolor=GRID, zerolinecolor=GRID, automargin=True, **kw)


def grid2(top: float = 0.55, gap: float = 0.08, x_title: str = "") -> dict:
    """Two stacked subplots sharing one x axis (what make_subplots would write, cheaper)."""
    bottom = 1 - top - gap
    return {"xaxis": axis(anchor="y", domain=[0, 1], matches="x2", showticklabels=False),
            "xaxis2": axis(anchor="y2", domain=[0, 1], title=dict(text=x_title)),
            "yaxis": axis(anchor="x", domain=[bottom + gap, 1]),
            "yaxis2": axis(anchor="x2", domain=[0, bottom])}


def grid(rows: int, gap: float = 0.06, x_title: str = "") -> dict:
    """`rows` equal stacked subplots sharing the bottom one's x axis (row 1 on top)."""
    h = (1 - gap * (rows - 1)) / rows
    out = {}
    for r in range(1, rows + 1):
        a = "" if r == 1 else str(r)
        top = 1 - (r - 1) * (h + gap)
        last = r == rows
        out[f"xaxis{a}"] = axis(anchor=f"y{a}", domain=[0, 1], showticklabels=last,
                                 **({"title": dict(text=x_title)} if last else {"matches": f"x{rows}"}))
        out[f"yaxis{a}"] = axis(anchor=f"x{a}", domain=[max(0.0, top - h), top])
    return out


def base_layout(title: str, height: int, uirevision, grid: dict | None = None, **kw) -> dict:
    """Common layout; `grid` axes first, then `kw` (axis dicts merge into the grid's)."""
    layout = dict(title=dict(text=title, x=0.01, font=dict(size=15)), template=TEMPLATE,
                  height=height, margin=dict(l=60, r=20, t=45, b=40),
                  legend=dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top",
                              font=dict(size=11), tracegroupgap=2),
                  uirevision=uirevision,
                  hovermode="x unified", shapes=[], annotations=[], **(grid or {}))
    for key, value in kw.items():  # merge axis settings into the grid's axes
        if isinstance(value, dict) and isinstance(layout.get(key), dict):
            layout[key] = {**layout[key], **value}
        else:
            layout[key] = value
    return layout


def make_figure(traces: list[dict], layout: dict, as_dict: bool = False) -> go.Figure | dict:
    """A Figure, or with `as_dict` the same figure as the plain dict Dash sends (no copy)."""
    if as_dict:
        return {"data": traces, "layout": layout}
    return go.Figure(data=traces, layout=layout, _validate=False)


def placeholder_note(text: str) -> dict:
    """A layout annotation that writes `text` in the middle of a figure."""
    return dict(name=PLACEHOLDER, text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                font=dict(size=14, color="#666"))


def placeholder(fig: go.Figure, text: str) -> go.Figure:
    """Write `text` in the middle of an empty figure (no data is not an error)."""
    fig.layout.annotations = tuple(fig.layout.annotations or ()) + (placeholder_note(text),)
    return fig


def empty_figure(text: str, height: int = 300, as_dict: bool = False) -> go.Figure | dict:
    return make_figure([], base_layout("", height, None, annotations=[placeholder_note(text)],
                               xaxis=axis(visible=False), yaxis=axis(visible=False)), as_dict)


def event_label(event: dict) -> str:
    detail = event.get("detail") or {}
    kind = event.get("kind", "")
    if kind == "control":
        parts = []
        changes = detail.get("changes") or {}
        if "bandwidth_mbps" in changes:
            parts.append(f"bw {changes['bandwidth_mbps']:g} Mb/s")
        if "delay_ms" in changes:
            parts.append(f"delay {changes['delay_ms']:g} ms")
        if "loss_p" in changes:
            parts.append(f"loss {100 * changes['loss_p']:g}%")
        target = detail.get("target", "*")
        where = "all links" if target == "*" else target
        return f"{where}: {', '.join(parts)}" if parts else where
    if kind == "stage":
        return f"stage {detail.get('stage', '?')}"
    if kind == "target_reached":
        acc = detail.get("accuracy")
        return f"target reached {100 * acc:.1f}%" if isinstance(acc, (int, float)) else "target reached"
    return kind


def stage_colour(stage: str) -> str:
    if stage in STAGE_COLOURS:
        return STAGE_COLOURS[stage]
    return PALETTE[sum(map(ord, stage)) % len(PALETTE)]


def stage_bands(events: Sequence[dict], x: str = "iteration", end=None) -> list[tuple]:
    """(stage, start, end) of each stage a run went through, in order, from its `stage` events:
    a stage lasts until the next one starts; the last until `end` (the last x drawn) or, when
    `end` is None, until its own start. One stage only (fp32, top-k...) is no band at all."""
    check_x(x)
    starts = [(e.get(x), (e.get("detail") or {}).get("stage", "?")) for e in events
              if e.get("kind") == "stage" and e.get(x) is not None]
    if len({name for _, name in starts}) < 2:
        return []
    out = []
    for i, (x0, name) in enumerate(starts):
        x1 = starts[i + 1][0] if i + 1 < len(starts) else (x0 if end is None else max(x0, end))
        out.append((name, x0, x1))
    return out


def event_marks(events: Sequence[dict], x: str = "iteration", end=None) -> tuple[list[dict], list[dict]]:
    """Layout shapes and annotations for the events worth marking: shaded bands for the
    compression stages (up to `end`, see `stage_bands`), vertical lines for the others."""
    check_x(x)
    shapes, notes = [], []
    for name, x0, x1 in stage_bands(events, x, end):
        colour = stage_colour(name)
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1,
                           fillcolor=colour, opacity=0.13, layer="below", line=dict(width=0),
                           name=f"stage {name}"))
        notes.append(dict(x=x0, xref="x", y=1, yref="paper", text=name, showarrow=False,
                          xanchor="left", yanchor="top", font=dict(size=10, color=colour)))
    for e in events:
        style = MARKS.get(e.get("kind"))
        xv = e.get(x)
        if style is None or xv is None:
            continue
        color, dash = style
        shapes.append(dict(type="line", xref="x", yref="paper", x0=xv, x1=xv, y0=0, y1=1,
                           line=dict(color=color, dash=dash, width=1)))
        notes.append(dict(x=xv, xref="x", y=1, yref="paper", text=event_label(e), showarrow=False,
                          xanchor="left", yanchor="top", textangle=-90,
                          font=dict(size=10, color=color)))
    return shapes, notes


def last_x(rows: Sequence[dict], x: str):
    return next((r[x] for r in reversed(rows) if r.get(x) is not None), None)


def add_marks(layout: dict, events: Sequence[dict], x: str, end=None) -> dict:
    shapes, notes = event_marks(events, x, end)
    layout["shapes"] = list(layout.get("shapes") or []) + shapes
    layout["annotations"] = list(layout.get("annotations") or []) + notes
    return layout


def titled(text: str, note: str) -> str:
    return f"{text} · {note}" if note else text


def is_noisy(figure: str, uid: str) -> bool:
    return any(uid == k or (k.endswith("_") and uid.startswith(k)) for k in NOISY.get(figure, ()))


def smooth(series: Series, figure: str, alpha: float, carry: dict | None = None) -> tuple[Series, dict]:
    """Exponential moving average of the figure's noisy series (`NOISY`), TensorBoard-style:
    s = alpha * s_prev + (1 - alpha) * y, starting from the first point (or from `carry`, the
    last smoothed value per uid of the points drawn before). `alpha` 0 leaves them as they are.
    Returns the series and the new carry."""
    if not 0 <= alpha < 1:
        raise ValueError(f"smoothing = {alpha!r}: must be in [0, 1)")
    carry = dict(carry or {})
    if alpha == 0:
        return series, carry
    out: Series = {}
    for uid, (xs, ys) in series.items():
        if not is_noisy(figure, uid):
            out[uid] = (xs, ys)
            continue
        prev, sm = carry.get(uid), []
        for y in ys:
            prev = y if prev is None else alpha * prev + (1 - alpha) * y
            sm.append(prev)
        out[uid] = (xs, sm)
        if prev is not None:
            carry[uid] = prev
    return out, carry


def smoothing_carry(fig: dict, figure: str) -> dict:
    """The carry of a drawn figure (dict form): the last y of each smoothed trace."""
    return {t["uid"]: t["y"][-1] for t in fig["data"]
            if t.get("uid") and is_noisy(figure, t["uid"]) and len(t.get("y") or [])}


def smooth_note(note: str, alpha: float) -> str:
    return note if not alpha else ", ".join(filter(None, [note, f"smoothed {alpha:g}"]))


def bits_of(r: dict) -> int | None:
    up, down = r.get("bits_up"), r.get("bits_down")
    if up is None and down is None:
        return None
    return (up or 0) + (down or 0)


def bits_sum(r: dict) -> int | None:
    """Total bits a row stands for: a binned row (dashboards.queries) carries `bits_sum`."""
    return r["bits_sum"] if "bits_sum" in r else bits_of(r)


def bits_part(r: dict, part: str):
    """Uplink or downlink bits a row stands for (a binned row: `bits_up_sum`/`bits_down_sum`)."""
    return r[f"{part}_sum"] if f"{part}_sum" in r else r.get(part)


def node_order(names) -> list[str]:
    return sorted(names, key=lambda n: (len(n), n))  # w2 before w10


# ---------------------------------------------------------------- units on the axes
# SI prefixes for tick labels: (power of ten, prefix)
SI_PREFIXES = ((12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""))


def si_label(value: float, unit: str) -> str:
    """`value` with an SI prefix and its unit, as a tick reads: 20000 bits -> "20 kbit"."""
    for power, prefix in SI_PREFIXES:
        if abs(value) >= 10 ** power:
            return f"{value / 10 ** power:g} {prefix}{unit}"
    return f"{value:g} {unit}"


def log_ticks(values: Iterable[float], unit: str) -> dict:
    """Tick values and labels of a log axis in `unit` ("bit", "B"): every power of ten from 1 to
    10^15 ("1 kbit", "10 kbit", "100 kbit", "1 Mbit"), and 2 and 5 times each too when the drawn
    values span three decades or fewer, so a narrow range still has labels. Labels only: plotly
    shows those within the axis range, as it grows with appended points."""
    positive = [v for v in values if v and v > 0]
    span = max(positive) / min(positive) if positive else 1.0
    steps = (1, 2, 5) if span <= 1e3 else (1,)
    ticks = [m * 10 ** p for p in range(0, 16) for m in steps]
    return dict(tickmode="array", tickvals=ticks, ticktext=[si_label(t, unit) for t in ticks])


def unit_axis(scale: str, values: Iterable[float], unit: str) -> dict:
    """Axis settings whose tick labels carry `unit`: explicit labels on a log axis (see
    `log_ticks`), SI-prefixed ones ("200kbit") on a linear one."""
    if scale == "log":
        return dict(type="log", **log_ticks(values, unit))
    return dict(type="linear", tickformat="~s", ticksuffix=unit, rangemode="tozero")


# ---------------------------------------------------------------- many series as one band
def spread(groups: dict[str, tuple[list, list]]) -> tuple[tuple[list, list], tuple[list, list],
                                                          tuple[list, list]]:
    """Mean, minimum and maximum over the series of `groups` ({name: (x, y)}) at each x that
    any of them has: ((x, mean), (x, min), (x, max)), x in order."""
    at: dict = {}
    for xs, ys in groups.values():
        for x, y in zip(xs, ys):
            if y is not None:
                at.setdefault(x, []).append(y)
    xs = sorted(at)
    return ((xs, [sum(at[x]) / len(at[x]) for x in xs]), (xs, [min(at[x]) for x in xs]),
            (xs, [max(at[x]) for x in xs]))


def band_series(prefix: str, groups: dict[str, tuple[list, list]]) -> Series:
    """{prefix_mean, prefix_lo, prefix_hi} of `groups` (see `spread`)."""
    mean, lo, hi = spread(groups)
    return {f"{prefix}_mean": mean, f"{prefix}_lo": lo, f"{prefix}_hi": hi}


def band_traces(prefix: str, s: Series, label: str, color: str, row: int = 1,
                showlegend: bool = True) -> list[dict]:
    """Three traces for `band_series`: the min-max band (a filled area between two lines with
    no width) and the mean over it; one legend entry for the three."""
    fill = _rgba(color, 0.18)
    edge = dict(width=0, color=fill)
    return [line_trace(f"{prefix}_lo", f"{label}: min", s[f"{prefix}_lo"], row=row, legendgroup=prefix,
                       showlegend=False, line=edge, hoverinfo="skip"),
            line_trace(f"{prefix}_hi", f"{label}: min-max", s[f"{prefix}_hi"], row=row,
                       legendgroup=prefix, showlegend=False, line=edge, fill="tonexty",
                       fillcolor=fill, hoverinfo="skip"),
            line_trace(f"{prefix}_mean", label, s[f"{prefix}_mean"], row=row, legendgroup=prefix,
                       showlegend=showlegend, line=dict(color=color, width=2))]


def _rgba(color: str, alpha: float) -> str:
    c = color.lstrip("#")
    r, g, b = (int(c[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def member_trace(uid: str, name: str, xy: tuple[list, list], focus: bool, color: str,
                 row: int = 1, **kw) -> dict:
    """One worker's or link's own series: drawn (and in the legend) only when it is the one
    picked (`focus`); otherwise kept, hidden, so that picking it shows it at once."""
    return line_trace(uid, name, xy, row=row, visible=True if focus else False,
                      showlegend=focus, line=dict(color=color, width=1.5), **kw)
