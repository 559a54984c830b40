"""The channel over virtual time: rate while sending, lost share, retransmissions, MAC
collisions and retries (CSMA cells) and SNR (fading links), each as the mean over the one-way
links with their min-max band; a picked worker's links drawn on their own beside it."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel
from dashboards.style import (PALETTE, X_AXES, Series, add_marks, band_series, band_traces,
                              base_layout, grid, make_figure, member_trace, placeholder_note,
                              points, series_uid, smooth, smooth_note, titled)


def _link_name(r: dict) -> str:
    return f"{r['src']}->{r['dst']}"


CHANNEL_ROWS = [("rate", "rate while sending"), ("loss", "lost (% of sent)"),
                ("retx", "retransmissions"), ("coll", "MAC collisions"), ("retry", "MAC retries"),
                ("snr", "SNR (dB)")]
# Units on the tick labels of the rows that have one
TICK_UNITS = {"rate": " Mb/s", "loss": "%", "snr": " dB"}
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
            out[series_uid(kind, name)] = points(by_link[name], "virtual_time_s", getters[kind])
        out.update(band_series(kind, {n: out[series_uid(kind, n)] for n in names}))
    return out


def link_of(name: str, focus: str | None) -> bool:
    """Whether link "u->v" is one of worker `focus`'s (it sends or receives on it)."""
    return focus is not None and focus in name.split("->")


def channel_figure(links: Sequence[dict], times: dict | None = None, events: Sequence[dict] = (),
                   uirevision=None, note: str = "", smoothing: float = 0.0,
                   as_dict: bool = False, focus: str | None = None) -> go.Figure | dict:
    """The channel, per link, over virtual time: rate while sending, lost share,
    retransmissions, MAC collisions and retries on a CSMA cell and the SNR of fading links
    (those three rows only when a link reports them)."""
    s, _ = smooth(channel_series(links, times), "channel", smoothing)
    names = sorted({_link_name(r) for r in links})
    color = {name: PALETTE[(i + 1) % len(PALETTE)] for i, name in enumerate(names)}
    present = channel_rows_present(links)
    kinds = [k for k in CHANNEL_ROWS if k[0] not in OPTIONAL_CHANNEL_ROWS or k[0] in present]
    # Every kind: the band over the links, then each link's own line (hidden unless its worker
    # is picked); optional traces exist (empty) when no link has them, so the order never changes.
    traces = []
    for kind, _ in CHANNEL_ROWS:
        row = next((i for i, (k, _) in enumerate(kinds, 1) if k == kind), len(kinds))
        band = band_traces(kind, s, f"mean, min-max of {len(names)} links", PALETTE[0], row=row,
                           showlegend=kind == "rate")
        if kind not in {k for k, _ in kinds}:   # a row not drawn: its (zero) band is not either
            for t in band:
                t["visible"] = False
        traces += band
        for n in names:
            traces.append(member_trace(series_uid(kind, n), n.replace("->", "→"), s[series_uid(kind, n)],
                                       link_of(n, focus), color[n], row=row, legendgroup=n))
            traces[-1]["showlegend"] = link_of(n, focus) and kind == "rate"
    axes = {f"yaxis{'' if i == 1 else i}": dict(title=dict(text=label, font=dict(size=11)),
                                                **({} if k == "snr" else {"rangemode": "tozero"}),
                                                **({"ticksuffix": TICK_UNITS[k]} if k in TICK_UNITS else {}))
            for i, (k, label) in enumerate(kinds, 1)}
    layout = base_layout(titled("Channel over the links (virtual time)", smooth_note(note, smoothing)),
                     150 + 150 * len(kinds), uirevision,
                     grid=grid(len(kinds), x_title=X_AXES["virtual_time_s"]), **axes)
    if not links:
        layout["annotations"].append(placeholder_note("No link traffic recorded yet."))
    end = max((p for xs, _ in s.values() for p in xs[-1:]), default=None)
    return make_figure(traces, add_marks(layout, events, "virtual_time_s", end), as_dict)



PANEL = Panel(
    name="channel",
    figure=lambda rows, view, as_dict: channel_figure(
        rows.links, rows.times, rows.events, uirevision=view.uirevision, note=view.note, smoothing=view.smoothing,
        as_dict=as_dict, focus=view.focus),
    series=lambda rows, view, totals: channel_series(rows.links, rows.times),
    # the bands (mean, min, max over the links) of the spiky counts and the SNR are smoothed;
    # the rate is a link's setting or its MCS (a step when steered, not noise), and a picked
    # link is drawn as it was
    noisy=tuple(f"{k}_{part}" for k, _ in CHANNEL_ROWS if k != "rate" for part in ("mean", "lo", "hi")),
    mark_x="virtual_time_s",
    parts=lambda rows: channel_rows_present(rows.links))
