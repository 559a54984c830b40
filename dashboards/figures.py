"""Pure figure builders: store rows (lists of dicts, as `testbed.store.Store` returns them) in,
plotly Figures out. No Dash, no store access, so `testbed export` reuses them.

Every time-series figure is made of named series: `*_series(rows)` returns {uid: (x, y)} and the
matching `*_figure(rows)` draws exactly those series as traces with the same `uid`, in a fixed
order. The live dashboard appends only new points to each trace (Dash `Patch`) by calling the
series function on the new rows, and rebuilds a figure only when a new series appears.

Noisy series (`NOISY`) can be smoothed with an exponential moving average (`smooth`), whose
last value carries over to the points appended later. Compression stages (the `stage` events)
are drawn as shaded bands behind the time series; controls and other events as vertical lines.
Legends sit right of the plot (vertical, scrolling when long) so they never cover an axis title.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Iterable, Sequence

import plotly.graph_objects as go
from plotly.colors import get_colorscale, qualitative, sample_colorscale

from testbed.graph_json import graph_edges, graph_nodes

Series = dict[str, tuple[list, list]]

X_AXES = {"iteration": "iteration", "virtual_time_s": "virtual time (s)"}
LATENCY_PARTS = [("compute_s", "compute"), ("uplink_s", "uplink"),
                 ("aggregation_s", "aggregation"), ("downlink_s", "downlink")]
PALETTE = qualitative.Plotly
# An explicit list, not the name: plotly.js defines its named "YlOrRd" in the reverse order
# of Python's, which left the colour bar saying the opposite of the link colours.
LOAD_SCALE = get_colorscale("YlOrRd")
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
SCALES = ("log", "linear")
# The series of each figure that are noisy from one iteration to the next (smoothable).
NOISY = {"accuracy": ("train_loss",), "rate": ("bits_up", "bits_down", "node_"),
         "latency": tuple(k for k, _ in LATENCY_PARTS), "channel": ("rate_", "loss_", "retx_", "coll_", "snr_")}


def series_uid(kind: str, name: str) -> str:
    """The trace uid of a per-node / per-link / per-run series. plotly.js puts uids into CSS
    class names, so they must be CSS-safe whatever the node is called: hex-encode the name."""
    return f"{kind}_{str(name).encode().hex()}"


def _check_x(x: str) -> str:
    if x not in X_AXES:
        raise ValueError(f"x axis {x!r} is unknown; allowed: {', '.join(X_AXES)}")
    return x


def _points(rows: Iterable[dict], xkey: str, ykey, scale: float = 1.0) -> tuple[list, list]:
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


def _line(uid: str, name: str, xy: tuple[list, list], row: int = 1, **kw) -> dict:
    """A scatter trace as a plain dict (plotly's object validation is what makes big figures
    slow to build; these dicts are checked by the tests instead)."""
    kw.setdefault("mode", "lines")
    axis = "" if row == 1 else str(row)
    return dict(type="scatter", uid=uid, name=name, x=list(xy[0]), y=list(xy[1]),
                xaxis=f"x{axis}", yaxis=f"y{axis}", **kw)


def _axis(**kw) -> dict:
    return dict(gridcolor=GRID, zerolinecolor=GRID, automargin=True, **kw)


def _grid2(top: float = 0.55, gap: float = 0.08, x_title: str = "") -> dict:
    """Two stacked subplots sharing one x axis (what make_subplots would write, cheaper)."""
    bottom = 1 - top - gap
    return {"xaxis": _axis(anchor="y", domain=[0, 1], matches="x2", showticklabels=False),
            "xaxis2": _axis(anchor="y2", domain=[0, 1], title=dict(text=x_title)),
            "yaxis": _axis(anchor="x", domain=[bottom + gap, 1]),
            "yaxis2": _axis(anchor="x2", domain=[0, bottom])}


def _grid(rows: int, gap: float = 0.06, x_title: str = "") -> dict:
    """`rows` equal stacked subplots sharing the bottom one's x axis (row 1 on top)."""
    h = (1 - gap * (rows - 1)) / rows
    out = {}
    for r in range(1, rows + 1):
        a = "" if r == 1 else str(r)
        top = 1 - (r - 1) * (h + gap)
        last = r == rows
        out[f"xaxis{a}"] = _axis(anchor=f"y{a}", domain=[0, 1], showticklabels=last,
                                 **({"title": dict(text=x_title)} if last else {"matches": f"x{rows}"}))
        out[f"yaxis{a}"] = _axis(anchor=f"x{a}", domain=[max(0.0, top - h), top])
    return out


def _layout(title: str, height: int, uirevision, grid: dict | None = None, **kw) -> dict:
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


def _figure(traces: list[dict], layout: dict, as_dict: bool = False) -> go.Figure | dict:
    """A Figure, or with `as_dict` the same figure as the plain dict Dash sends (no copy)."""
    if as_dict:
        return {"data": traces, "layout": layout}
    return go.Figure(data=traces, layout=layout, _validate=False)


def placeholder_note(text: str) -> dict:
    """A layout annotation that writes `text` in the middle of a figure."""
    return dict(text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                font=dict(size=14, color="#666"))


def placeholder(fig: go.Figure, text: str) -> go.Figure:
    """Write `text` in the middle of an empty figure (no data is not an error)."""
    fig.layout.annotations = tuple(fig.layout.annotations or ()) + (placeholder_note(text),)
    return fig


def empty_figure(text: str, height: int = 300, as_dict: bool = False) -> go.Figure | dict:
    return _figure([], _layout("", height, None, annotations=[placeholder_note(text)],
                               xaxis=_axis(visible=False), yaxis=_axis(visible=False)), as_dict)


# ------------------------------------------------------------------ event marks
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
    _check_x(x)
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
    _check_x(x)
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


def _last_x(rows: Sequence[dict], x: str):
    return next((r[x] for r in reversed(rows) if r.get(x) is not None), None)


def _add_marks(layout: dict, events: Sequence[dict], x: str, end=None) -> dict:
    shapes, notes = event_marks(events, x, end)
    layout["shapes"] = list(layout.get("shapes") or []) + shapes
    layout["annotations"] = list(layout.get("annotations") or []) + notes
    return layout


def _title(text: str, note: str) -> str:
    return f"{text} · {note}" if note else text


# ------------------------------------------------------------------ smoothing
def _noisy(figure: str, uid: str) -> bool:
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
        if not _noisy(figure, uid):
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
            if t.get("uid") and _noisy(figure, t["uid"]) and len(t.get("y") or [])}


def _smooth_note(note: str, alpha: float) -> str:
    return note if not alpha else ", ".join(filter(None, [note, f"smoothed {alpha:g}"]))


# ------------------------------------------------------------------ accuracy and loss
def accuracy_series(iterations: Sequence[dict], evals: Sequence[dict],
                    x: str = "iteration") -> Series:
    _check_x(x)
    return {"test_accuracy": _points(evals, x, "test_accuracy"),
            "train_loss": _points(iterations, x, "train_loss"),
            "test_loss": _points(evals, x, "test_loss"),
            "lgc_coder_error": _points(evals, x, "lgc_coder_error")}


def accuracy_figure(iterations: Sequence[dict], evals: Sequence[dict], events: Sequence[dict] = (),
                    x: str = "iteration", uirevision=None, note: str = "", smoothing: float = 0.0,
                    as_dict: bool = False) -> go.Figure | dict:
    """Test accuracy (top) and train/test loss (bottom) against iteration or virtual time; with
    LGC in its LGC stage, the coder's in-use relative error (testbed.store's lgc_coder_error)
    on the bottom axis too."""
    s, _ = smooth(accuracy_series(iterations, evals, x), "accuracy", smoothing)
    traces = [
        _line("test_accuracy", "test accuracy", s["test_accuracy"], mode="lines+markers",
              line=dict(color=PALETTE[0])),
        _line("train_loss", "train loss", s["train_loss"], row=2, line=dict(color=PALETTE[1], width=1)),
        _line("test_loss", "test loss", s["test_loss"], row=2, mode="lines+markers",
              line=dict(color=PALETTE[2])),
    ]
    if s["lgc_coder_error"][0]:  # LGC's stage only: the coder's in-use relative error
        traces.append(_line("lgc_coder_error", "LGC coder in-use rel. error", s["lgc_coder_error"],
                            row=2, mode="lines+markers", line=dict(color=PALETTE[3], dash="dot")))
    grid = _grid2(x_title=X_AXES[x])
    layout = _layout(_title(f"Accuracy and loss vs {X_AXES[x]}", _smooth_note(note, smoothing)), 440,
                     uirevision, grid=grid,
                     yaxis=dict(title=dict(text="test accuracy"), tickformat=".0%", rangemode="tozero"),
                     yaxis2=dict(title=dict(text="loss"), rangemode="tozero"))
    if not iterations:
        layout["annotations"].append(placeholder_note("No iterations yet: the run has not written its first step."))
    elif not evals:
        layout["annotations"].append(placeholder_note("No evaluation yet: accuracy appears after the first test pass."))
    return _figure(traces, _add_marks(layout, events, x, _last_x(iterations, x)), as_dict)


# ------------------------------------------------------------------ rate
def _bits(r: dict) -> int | None:
    up, down = r.get("bits_up"), r.get("bits_down")
    if up is None and down is None:
        return None
    return (up or 0) + (down or 0)


def _bits_sum(r: dict) -> int | None:
    """Total bits a row stands for: a binned row (dashboards.queries) carries `bits_sum`."""
    return r["bits_sum"] if "bits_sum" in r else _bits(r)


def _bits_part(r: dict, part: str):
    """Uplink or downlink bits a row stands for (a binned row: `bits_up_sum`/`bits_down_sum`)."""
    return r[f"{part}_sum"] if f"{part}_sum" in r else r.get(part)


def _node_order(names) -> list[str]:
    return sorted(names, key=lambda n: (len(n), n))  # w2 before w10


def rate_series(iterations: Sequence[dict], nodes: Sequence[dict], start_bytes: float | dict = 0.0) -> Series:
    """Bits per iteration, uplink (what the workers sent) and downlink (what they received)
    apart, each worker's uplink, and cumulative bytes up and down from `start_bytes` on
    ({"up": bytes, "down": bytes}, or one number for both)."""
    out: Series = {"bits_up": _points(iterations, "iteration", "bits_up"),
                   "bits_down": _points(iterations, "iteration", "bits_down")}
    per_node: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for r in nodes:
        if r.get("bits_up") is not None:
            xs, ys = per_node[str(r["node"])]
            xs.append(r["iteration"])
            ys.append(r["bits_up"])
    for name in _node_order(per_node):
        out[series_uid("node", name)] = per_node[name]
    start = start_bytes if isinstance(start_bytes, dict) else {"up": start_bytes, "down": start_bytes}
    for part in ("up", "down"):
        total, cum_x, cum_y = start.get(part, 0.0), [], []
        for r in iterations:
            b = _bits_part(r, f"bits_{part}")
            if b is None:
                continue
            total += b / 8
            cum_x.append(r["iteration"])
            cum_y.append(total)
        out[f"cum_{part}"] = (cum_x, cum_y)
    return out


def rate_figure(iterations: Sequence[dict], nodes: Sequence[dict], events: Sequence[dict] = (),
                uirevision=None, note: str = "", scale: str = "log", smoothing: float = 0.0,
                as_dict: bool = False) -> go.Figure | dict:
    """Bits per iteration (top; log scale by default, so a 100x cut is a step down, not a
    line at zero) uplink and downlink apart, and cumulative bytes (bottom)."""
    if scale not in SCALES:
        raise ValueError(f"rate scale {scale!r} is unknown; allowed: {', '.join(SCALES)}")
    s, _ = smooth(rate_series(iterations, nodes), "rate", smoothing)
    traces = [_line("bits_up", "uplink (all workers)", s["bits_up"], legendgroup="total",
                    line=dict(color="#111827", width=2)),
              _line("bits_down", "downlink (all workers)", s["bits_down"], legendgroup="total",
                    line=dict(color="#111827", width=2, dash="dash"))]
    for i, name in enumerate(_node_order({str(r["node"]) for r in nodes if r.get("bits_up") is not None})):
        traces.append(_line(series_uid("node", name), f"{name} uplink", s[series_uid("node", name)],
                            legendgroup="nodes", line=dict(color=PALETTE[i % len(PALETTE)], width=1)))
    traces.append(_line("cum_up", "cumulative up", s["cum_up"], row=2, legendgroup="cum",
                        line=dict(color=PALETTE[0])))
    traces.append(_line("cum_down", "cumulative down", s["cum_down"], row=2, legendgroup="cum",
                        line=dict(color=PALETTE[0], dash="dash")))
    zero = {} if scale == "log" else {"rangemode": "tozero"}
    layout = _layout(_title(f"Rate: bits per iteration, up and down ({scale})",
                            _smooth_note(note, smoothing)), 440,
                     uirevision, grid=_grid2(top=0.5, x_title="iteration"),
                     yaxis=dict(title=dict(text="bits / iteration"), type=scale, **zero),
                     yaxis2=dict(title=dict(text="cumulative bytes"), type=scale, **zero))
    if not iterations:
        layout["annotations"].append(placeholder_note("No iterations yet."))
    return _figure(traces, _add_marks(layout, events, "iteration", _last_x(iterations, "iteration")),
                   as_dict)


# ------------------------------------------------------------------ latency
def latency_series(iterations: Sequence[dict]) -> Series:
    out = {key: _points(iterations, "iteration", lambda r, k=key: r.get(k) or 0.0)
           for key, _ in LATENCY_PARTS}
    out.update(left_out_series(iterations))
    return out


def left_out_series(iterations: Sequence[dict]) -> Series:
    """Iterations whose aggregate went without some workers (run.deadline_s, a device trace):
    a marker on top of the iteration's stacked latency."""
    rows = [r for r in iterations if r.get("left_out")]
    return {"left_out": _points(rows, "iteration", lambda r: sum(r.get(k) or 0.0 for k, _ in LATENCY_PARTS))}


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
    traces = [_line(key, label, s[key], stackgroup="latency", line=dict(width=0.5, color=PALETTE[i]))
              for i, (key, label) in enumerate(LATENCY_PARTS)]
    traces.append(_line("left_out", "workers left out", s["left_out"], mode="markers",
                        marker=dict(symbol="x", size=7, color="#d62728"),
                        text=left_out_text(iterations, nodes), hoverinfo="x+text"))
    layout = _layout(_title("Latency per iteration (virtual time, stacked)", _smooth_note(note, smoothing)),
                     340, uirevision, xaxis=_axis(title=dict(text="iteration")),
                     yaxis=_axis(title=dict(text="virtual seconds"), rangemode="tozero"))
    if not iterations:
        layout["annotations"].append(placeholder_note("No iterations yet."))
    return _figure(traces, _add_marks(layout, events, "iteration", _last_x(iterations, "iteration")),
                   as_dict)


# ------------------------------------------------------------------ channel (per link)
def _link_name(r: dict) -> str:
    return f"{r['src']}->{r['dst']}"


CHANNEL_ROWS = [("rate", "Mb/s while sending"), ("loss", "lost (% of sent)"),
                ("retx", "retransmissions"), ("coll", "MAC collisions"), ("retry", "MAC retries"),
                ("snr", "SNR (dB)")]
# Rows drawn only when some link reports them: collisions and MAC retries exist on CSMA cells,
# SNR on fading links.
OPTIONAL_CHANNEL_ROWS = {"coll": lambda r: bool(r.get("collisions")),
                         "retry": lambda r: bool(r.get("retries")),
                         "snr": lambda r: r.get("snr_db") is not None}


def channel_rows_present(links: Sequence[dict]) -> frozenset:
    """The optional channel rows these link rows call for (a new one means a full redraw)."""
    return frozenset(k for k, has in OPTIONAL_CHANNEL_ROWS.items() if any(has(r) for r in links))


def _rate_mbps(r: dict):
    """Bits on the wire over airtime: the rate the link ran at while it sent (its capacity on
    a fixed link, the chosen MCS/Shannon rate on a fading one, the trace's on a trace link,
    its share of the cell on a shared medium). Binned rows hold means, and a ratio of means
    is the ratio of the bin's sums."""
    busy, size = r.get("busy_s"), r.get("bytes")
    return 8 * size / busy / 1e6 if busy and size else None


def _loss_pct(r: dict):
    sent, lost = r.get("packets"), r.get("lost")
    return 100.0 * lost / sent if sent and lost is not None else None


def channel_series(links: Sequence[dict], times: dict | None = None) -> Series:
    """Per one-way link: rate while sending, lost share, retransmissions and (fading links)
    mean SNR, against virtual time. A row carries its `virtual_time_s` (binned queries) or
    takes it from `times` {iteration: virtual time at its end}."""
    by_link: dict[str, list[dict]] = defaultdict(list)
    for r in links:
        vt = r.get("virtual_time_s", (times or {}).get(r["iteration"]))
        by_link[_link_name(r)].append({**r, "virtual_time_s": vt})
    names = sorted(by_link)
    getters = {"rate": _rate_mbps, "loss": _loss_pct, "retx": lambda r: r.get("retransmitted"),
               "coll": lambda r: r.get("collisions"), "retry": lambda r: r.get("retries"),
               "snr": lambda r: r.get("snr_db")}
    out: Series = {}
    for kind, _ in CHANNEL_ROWS:
        for name in names:
            out[series_uid(kind, name)] = _points(by_link[name], "virtual_time_s", getters[kind])
    return out


def channel_figure(links: Sequence[dict], times: dict | None = None, events: Sequence[dict] = (),
                   uirevision=None, note: str = "", smoothing: float = 0.0,
                   as_dict: bool = False) -> go.Figure | dict:
    """The channel, per link, over virtual time: rate while sending, lost share,
    retransmissions, MAC collisions and retries on a CSMA cell and the SNR of fading links
    (those three rows only when a link reports them)."""
    s, _ = smooth(channel_series(links, times), "channel", smoothing)
    names = sorted({_link_name(r) for r in links})
    color = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    present = channel_rows_present(links)
    kinds = [k for k in CHANNEL_ROWS if k[0] not in OPTIONAL_CHANNEL_ROWS or k[0] in present]
    # Trace order equals the series order: every link's rate, then loss, retx, collisions,
    # retries, SNR; optional traces exist (empty) when no link has them, so the order never changes.
    traces = []
    for kind, _ in CHANNEL_ROWS:
        row = next((i for i, (k, _) in enumerate(kinds, 1) if k == kind), len(kinds))
        for n in names:
            traces.append(_line(series_uid(kind, n), n.replace("->", "→"), s[series_uid(kind, n)],
                                row=row, legendgroup=n, showlegend=kind == "rate",
                                line=dict(color=color[n], width=1)))
    axes = {f"yaxis{'' if i == 1 else i}": dict(title=dict(text=label, font=dict(size=11)),
                                                **({} if k == "snr" else {"rangemode": "tozero"}))
            for i, (k, label) in enumerate(kinds, 1)}
    layout = _layout(_title("Channel per link (virtual time)", _smooth_note(note, smoothing)),
                     150 + 150 * len(kinds), uirevision,
                     grid=_grid(len(kinds), x_title=X_AXES["virtual_time_s"]), **axes)
    if not links:
        layout["annotations"].append(placeholder_note("No link traffic recorded yet."))
    end = max((p for xs, _ in s.values() for p in xs[-1:]), default=None)
    return _figure(traces, _add_marks(layout, events, "virtual_time_s", end), as_dict)


# ------------------------------------------------------------------ topology
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
    import networkx as nx

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


def topology_figure(graph: dict | None, links: Sequence[dict] = (), window: str = "",
                    uirevision=None, as_dict: bool = False) -> go.Figure | dict:
    """The network: every link coloured by its load in `links` (the latest window of link
    rows) and labelled with its bandwidth; nodes drawn by role."""
    nodes, edges = graph_nodes(graph), graph_edges(graph)
    layout = _layout(f"Topology: link load{' ' + window if window else ''}", 440, uirevision,
                     hovermode="closest", showlegend=False, xaxis=_axis(visible=False),
                     yaxis=_axis(visible=False, scaleanchor="x", scaleratio=1))
    if not nodes:
        layout["annotations"].append(placeholder_note("No topology recorded for this run."))
        return _figure([], layout, as_dict)
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
    traces.append(dict(
        type="scatter", uid="link_labels", x=mid_x, y=mid_y, mode="markers+text", text=labels,
        textposition="top center", hovertext=hovers, hoverinfo="text", textfont=dict(size=11),
        marker=dict(size=9, color=mid_load, colorscale=LOAD_SCALE, cmin=0, cmax=max(peak, 1),
                    showscale=True, colorbar=dict(title=dict(text="bytes"), thickness=12))))
    symbols = {"server": "square", "relay": "diamond", "worker": "circle"}
    traces.append(dict(
        type="scatter", uid="nodes", x=[pos[str(n["id"])][0] for n in nodes],
        y=[pos[str(n["id"])][1] for n in nodes], mode="markers+text",
        text=[str(n["id"]) for n in nodes], textposition="bottom center",
        hovertext=[f"{n['id']} ({n.get('role', 'node')})" for n in nodes], hoverinfo="text",
        marker=dict(size=18, color=["#444" if n.get("role") == "server" else "#1f77b4" for n in nodes],
                    symbol=[symbols.get(n.get("role"), "circle") for n in nodes],
                    line=dict(color="white", width=1))))
    return _figure(traces, layout, as_dict)


# ------------------------------------------------------------------ compare
def _run_label(run: dict) -> str:
    return f"{run.get('name')} #{run.get('id')} ({run.get('method') or '?'})"


def compare_figure(entries: Sequence[dict], x: str = "virtual_time_s", target: float | None = None,
                   as_dict: bool = False) -> go.Figure | dict:
    """Chosen runs overlaid: test accuracy (top) and cumulative bits (bottom, log) vs `x`.

    `entries`: dicts with `run` (a run dict), `iterations` (raw or binned rows) and `evals`.
    """
    _check_x(x)
    traces = []
    for i, entry in enumerate(entries):
        run, color = entry["run"], PALETTE[i % len(PALETTE)]
        label = _run_label(run)
        traces.append(_line(series_uid("acc", run["id"]), label, _points(entry["evals"], x, "test_accuracy"),
                            mode="lines+markers", legendgroup=str(run["id"]), line=dict(color=color)))
        cum_x, cum_y, total = [], [], 0
        for r in entry["iterations"]:
            b = _bits_sum(r)
            if b is None or r.get(x) is None:
                continue
            total += b
            cum_x.append(r[x])
            cum_y.append(total)
        traces.append(_line(series_uid("bits", run["id"]), label, (cum_x, cum_y), row=2,
                            legendgroup=str(run["id"]), showlegend=False, line=dict(color=color)))
    layout = _layout(f"Compare: accuracy and bits vs {X_AXES[x]}", 520, None,
                     grid=_grid2(top=0.6, x_title=X_AXES[x]),
                     yaxis=dict(title=dict(text="test accuracy"), tickformat=".0%", rangemode="tozero"),
                     yaxis2=dict(title=dict(text="cumulative bits"), type="log"))
    if target is not None:
        layout["shapes"].append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=target,
                                     y1=target, line=dict(color="#999", dash="dash", width=1)))
    if not entries:
        layout["annotations"].append(placeholder_note("Tick runs in the table above to compare them."))
    return _figure(traces, layout, as_dict)


def time_to_accuracy(evals: Sequence[dict], target: float) -> tuple[int | None, float | None]:
    """(iteration, virtual seconds) of the first eval at or above `target`; (None, None) if never."""
    for r in evals:
        acc = r.get("test_accuracy")
        if acc is not None and acc >= target:
            return r.get("iteration"), r.get("virtual_time_s")
    return None, None


def compare_summary(entries: Sequence[dict], target: float, baseline: dict | None = None) -> list[dict]:
    """One row per run: final and best accuracy, total bits, bits per iteration, compression
    ratio against the fp32 run (method "none") and virtual time to `target` accuracy.

    The ratio is the baseline's bits per iteration over this run's, so runs of different
    lengths compare fairly. `baseline` is an entry like the others; by default the first
    entry whose method is "none".
    """
    if baseline is None:
        baseline = next((e for e in entries if e["run"].get("method") == "none"), None)

    def totals(entry: dict) -> tuple[int, int]:
        """(total bits, iterations) of an entry's rows, raw or binned."""
        bits = n = 0
        for r in entry["iterations"]:
            b = _bits_sum(r)
            if b is not None:
                bits += b
                n += r.get("n", 1)
        return bits, n

    def bits_per_iteration(entry: dict) -> float | None:
        bits, n = totals(entry)
        return bits / n if n else None

    base_bpi = bits_per_iteration(baseline) if baseline else None
    rows = []
    for entry in entries:
        run, evals = entry["run"], entry["evals"]
        bpi = bits_per_iteration(entry)
        accs = [r["test_accuracy"] for r in evals if r.get("test_accuracy") is not None]
        it_target, vt_target = time_to_accuracy(evals, target)
        rows.append({
            "id": run["id"], "name": run.get("name"), "method": run.get("method"),
            "status": run.get("status"),
            "final_accuracy": accs[-1] if accs else None,
            "best_accuracy": max(accs) if accs else None,
            "total_bits": totals(entry)[0],
            "bits_per_iteration": bpi,
            "compression_ratio": (base_bpi / bpi) if (base_bpi and bpi) else None,
            "iterations_to_target": it_target,
            "time_to_target_s": vt_target,
        })
    return rows


# ------------------------------------------------------------------ sweep
# `testbed sweep` names each run "BASE[key=value,key=value]" (the last part of each grid key).
SWEEP_NAME = re.compile(r"^(?P<base>.+)\[(?P<label>[^\[\]]+)\]$")
ALL = "all"


def sweep_params(name: str | None) -> tuple[str, dict[str, str]] | None:
    """(base, {key: value}) of a run named by `testbed sweep`, or None for any other name."""
    m = SWEEP_NAME.match(name or "")
    if not m:
        return None
    params = {}
    for part in m["label"].split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            return None
        params[key.strip()] = value.strip()
    return m["base"], params


def sweeps(runs: Sequence[dict]) -> dict[str, list[tuple[dict, dict]]]:
    """Runs grouped by sweep base, in run order: {base: [(run, params)]} (two runs or more)."""
    out: dict[str, list] = defaultdict(list)
    for run in runs:
        parsed = sweep_params(run.get("name"))
        if parsed:
            out[parsed[0]].append((run, parsed[1]))
    return {base: members for base, members in out.items() if len(members) > 1}


def sweep_keys(params: Sequence[dict]) -> list[str]:
    """The grid keys of a sweep, those that vary first (seeds last), in the grid's order."""
    keys: list[str] = []
    for p in params:
        keys += [k for k in p if k not in keys]
    varies = [k for k in keys if len({p.get(k) for p in params}) > 1]
    return sorted(keys, key=lambda k: (k not in varies, k == "seed"))


def sweep_values(params: Sequence[dict], key: str | None) -> list[str]:
    if key is None:
        return [ALL]
    out: list[str] = []
    for p in params:
        if p.get(key) not in out:
            out.append(p.get(key))
    return out


def sweep_grid(cells: Sequence[dict], x_key: str, y_key: str | None) -> dict:
    """Mean final accuracy, mean virtual time to the target and mean joules to it (all workers,
    `energy_to_target_j`, None where not recorded) of the runs in each (x, y) cell (`cells`:
    {"params", "final_accuracy", "time_to_target_s", "energy_to_target_j"} per run); the other
    grid keys (seeds, ...) are averaged over. Time and energy are over the runs that reached the
    target; `reached` counts them ("2/3")."""
    params = [c["params"] for c in cells]
    xs, ys = sweep_values(params, x_key), sweep_values(params, y_key)
    acc = [[None] * len(xs) for _ in ys]
    ttt = [[None] * len(xs) for _ in ys]
    etj = [[None] * len(xs) for _ in ys]
    reached = [[""] * len(xs) for _ in ys]
    for j, yv in enumerate(ys):
        for i, xv in enumerate(xs):
            here = [c for c in cells if c["params"].get(x_key) == xv
                    and (y_key is None or c["params"].get(y_key) == yv)]
            if not here:
                continue
            accs = [c["final_accuracy"] for c in here if c["final_accuracy"] is not None]
            times = [c["time_to_target_s"] for c in here if c["time_to_target_s"] is not None]
            joules = [c["energy_to_target_j"] for c in here
                      if c["time_to_target_s"] is not None and c.get("energy_to_target_j") is not None]
            acc[j][i] = sum(accs) / len(accs) if accs else None
            ttt[j][i] = sum(times) / len(times) if times else None
            etj[j][i] = sum(joules) / len(joules) if joules else None
            reached[j][i] = f"{len(times)}/{len(here)}"
    return {"x": xs, "y": ys, "accuracy": acc, "time_to_target_s": ttt, "energy_to_target_j": etj,
            "reached": reached}


def sweep_figure(cells: Sequence[dict], x_key: str | None, y_key: str | None = None,
                 target: float | None = None, title: str = "", as_dict: bool = False) -> go.Figure | dict:
    """Three heat maps over the sweep's grid: final test accuracy, virtual time to `target` and
    joules to it (all workers' energy up to the evaluation that reached it)."""
    layout = _layout(title or "Sweep", 460, None, hovermode="closest",
                     xaxis=_axis(domain=[0, 0.26], type="category", title=dict(text=x_key or "")),
                     xaxis2=_axis(domain=[0.37, 0.63], type="category", anchor="y2",
                                  title=dict(text=x_key or "")),
                     xaxis3=_axis(domain=[0.74, 0.98], type="category", anchor="y3",
                                  title=dict(text=x_key or "")),
                     yaxis=_axis(type="category", title=dict(text=y_key or "")),
                     yaxis2=_axis(type="category", anchor="x2", matches="y", showticklabels=True),
                     yaxis3=_axis(type="category", anchor="x3", matches="y", showticklabels=True))
    if not cells or x_key is None:
        layout["annotations"].append(placeholder_note(
            "No sweep in this store: `testbed sweep FILE --grid key=v1,v2` names its runs BASE[key=value]."))
        return _figure([], layout, as_dict)
    g = sweep_grid(cells, x_key, y_key)
    pct = "" if target is None else f"{100 * target:g}%"
    acc_text = [[("" if v is None else f"{100 * v:.1f}%") for v in row] for row in g["accuracy"]]
    ttt_text = [[("never" if v is None and r else "" if v is None else f"{v:.2f} s ({r})")
                 for v, r in zip(row, rrow)] for row, rrow in zip(g["time_to_target_s"], g["reached"])]
    etj_text = [[("" if v is None else f"{v:.4g} J") for v in row] for row in g["energy_to_target_j"]]
    traces = [
        dict(type="heatmap", uid="sweep_accuracy", x=g["x"], y=g["y"], z=g["accuracy"],
             text=acc_text, texttemplate="%{text}", colorscale="Viridis",
             colorbar=dict(x=0.27, thickness=10, title=dict(text="final acc."), tickformat=".0%"),
             hovertemplate=f"{x_key}=%{{x}}<br>{y_key or ''}=%{{y}}<br>final accuracy %{{text}}<extra></extra>"),
        dict(type="heatmap", uid="sweep_time", x=g["x"], y=g["y"], z=g["time_to_target_s"],
             text=ttt_text, texttemplate="%{text}", colorscale="Viridis", reversescale=True,
             xaxis="x2", yaxis="y2", colorbar=dict(x=0.64, thickness=10, title=dict(text="s")),
             hovertemplate=f"{x_key}=%{{x}}<br>{y_key or ''}=%{{y}}<br>to {pct}: %{{text}}<extra></extra>"),
        dict(type="heatmap", uid="sweep_energy", x=g["x"], y=g["y"], z=g["energy_to_target_j"],
             text=etj_text, texttemplate="%{text}", colorscale="Viridis", reversescale=True,
             xaxis="x3", yaxis="y3", colorbar=dict(x=0.99, thickness=10, title=dict(text="J")),
             hovertemplate=f"{x_key}=%{{x}}<br>{y_key or ''}=%{{y}}<br>energy to {pct}: %{{text}}<extra></extra>"),
    ]
    for text, x in (("final test accuracy", 0.0), (f"virtual time to {pct} (reached/runs)", 0.37),
                    (f"energy to {pct}, all workers", 0.74)):
        layout["annotations"].append(dict(text=text, xref="paper", yref="paper", x=x, y=1.0,
                                          xanchor="left", yanchor="bottom", showarrow=False,
                                          font=dict(size=12)))
    return _figure(traces, layout, as_dict)


# ------------------------------------------------------------------ runs table
def runs_table_rows(runs: Sequence[dict]) -> list[dict]:
    """Rows of `Store.runs()` shaped for the runs table (numbers stay numbers: it sorts)."""
    rows = []
    for r in runs:
        bits = r.get("total_bits")
        rows.append({
            "id": r["id"], "name": r.get("name"), "method": r.get("method"),
            "topology": r.get("topology"), "workers": r.get("workers"),
            "bandwidth_mbps": r.get("bandwidth_mbps"), "status": r.get("status"),
            "last_iteration": r.get("last_iteration"),
            "best_accuracy": r.get("best_accuracy"),
            "total_mbit": None if bits is None else bits / 1e6,
            "virtual_time_s": r.get("virtual_time_s"),
        })
    return rows


# ------------------------------------------------------------------ energy (per node)
NOISY["energy"] = ("energy_",)   # joules per iteration are noisy; the cumulative curve is not


def energy_series(nodes: Sequence[dict], times: dict, start: dict | None = None) -> Series:
    """Per worker, against virtual time ({iteration: virtual time at its end}): joules per
    iteration (`energy_<node>`) and cumulative joules from `start` ({node: joules} drawn
    before) on (`cumj_<node>`). Binned rows carry the bin's mean and `energy_j_sum`."""
    per: dict[str, list[dict]] = defaultdict(list)
    for r in nodes:
        if r.get("energy_j") is not None and times.get(r["iteration"]) is not None:
            per[str(r["node"])].append(r)
    out: Series = {}
    for name in _node_order(per):
        rows = per[name]
        out[series_uid("energy", name)] = ([times[r["iteration"]] for r in rows], [r["energy_j"] for r in rows])
        total, ys = (start or {}).get(name, 0.0), []
        for r in rows:
            total += r.get("energy_j_sum", r["energy_j"])
            ys.append(total)
        out[series_uid("cumj", name)] = ([times[r["iteration"]] for r in rows], ys)
    return out


def energy_totals(nodes: Sequence[dict], times: dict, start: dict | None = None) -> dict:
    """{node: cumulative joules} after these rows (the live view's carry between ticks)."""
    out = dict(start or {})
    for r in nodes:
        if r.get("energy_j") is not None and times.get(r["iteration"]) is not None:
            out[str(r["node"])] = out.get(str(r["node"]), 0.0) + r.get("energy_j_sum", r["energy_j"])
    return out


def energy_figure(nodes: Sequence[dict], times: dict, events: Sequence[dict] = (), uirevision=None,
                  note: str = "", smoothing: float = 0.0, as_dict: bool = False) -> go.Figure | dict:
    """Each worker's energy over virtual time: joules per iteration (radio + compute,
    channels/energy.py; top) and cumulative joules (bottom)."""
    s, _ = smooth(energy_series(nodes, times), "energy", smoothing)
    names = _node_order({str(r["node"]) for r in nodes if r.get("energy_j") is not None})
    traces = []
    for row, kind in ((1, "energy"), (2, "cumj")):
        for i, n in enumerate(names):
            traces.append(_line(series_uid(kind, n), n, s[series_uid(kind, n)], row=row, legendgroup=n,
                                showlegend=row == 1, line=dict(color=PALETTE[i % len(PALETTE)], width=1)))
    layout = _layout(_title("Energy per node (virtual time)", _smooth_note(note, smoothing)), 440,
                     uirevision, grid=_grid2(top=0.5, x_title=X_AXES["virtual_time_s"]),
                     yaxis=dict(title=dict(text="joules / iteration"), rangemode="tozero"),
                     yaxis2=dict(title=dict(text="cumulative joules"), rangemode="tozero"))
    if not names:
        layout["annotations"].append(placeholder_note("No energy recorded yet."))
    end = max((p for xs, _ in s.values() for p in xs[-1:]), default=None)
    return _figure(traces, _add_marks(layout, events, "virtual_time_s", end), as_dict)
