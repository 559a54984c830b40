"""The contract of a live panel: what the live view (dashboards/callbacks.py), the page
(dashboards/layout.py) and the offline export (dashboards/export.py) know of a figure.

A panel is one module under dashboards/panels/ that ends with `PANEL = Panel(...)`, listed
once in `dashboards.panels.PANELS` (the page's order). Adding a panel touches those two files:
nothing else names a panel. Each panel draws from `Rows` (one run's rows, raw or binned by
dashboards/queries.py) and a `View` (the page's controls); the live view calls `figure` (through
`draw`, which titles iteration axes "round" / "server step" in a federated run) on first load
and `series` on each tick, appending the new points to the traces of the same uid.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from dashboards.style import NOISY, Series
from testbed.records import summary


def federated_mode(run: dict) -> str | None:
    """"sync" or "fedbuff" for a federated run (its config's `[federated] mode`), else None."""
    return summary.federated_mode(run.get("config"))


def iteration_unit(run: dict) -> str:
    """The x-axis title of a panel drawn against the store's iterations: "iteration", or in a
    federated run "round" (sync) or "server step" (FedBuff) (testbed.records.summary, as the CLI)."""
    return summary.iteration_unit(run.get("config"))


def retitle_iterations(fig, unit: str):
    """`fig` (a Figure or its dict) with every x axis titled "iteration" titled `unit`, and
    "per iteration" / "vs iteration" in its title and y axis titles said of `unit`."""
    if unit == "iteration":
        return fig

    def per(text):
        if not isinstance(text, str):
            return text
        return text.replace("per iteration", f"per {unit}").replace("vs iteration", f"vs {unit}")
    if isinstance(fig, dict):
        layout = fig["layout"]
        for key, ax in list(layout.items()):
            title = (ax.get("title") or {}) if isinstance(ax, dict) else {}
            if key.startswith("xaxis") and title.get("text") == "iteration":
                layout[key] = {**ax, "title": {**title, "text": unit}}
            elif key.startswith("yaxis") and title.get("text"):
                layout[key] = {**ax, "title": {**title, "text": per(title["text"])}}
        if isinstance(layout.get("title"), dict):
            layout["title"] = {**layout["title"], "text": per(layout["title"].get("text"))}
        return fig
    fig.for_each_xaxis(lambda ax: ax.update(title_text=unit) if ax.title.text == "iteration" else None)
    fig.for_each_yaxis(lambda ax: ax.update(title_text=per(ax.title.text)) if ax.title.text else None)
    fig.update_layout(title_text=per(fig.layout.title.text))
    return fig


@dataclass
class Rows:
    """One run's rows as a panel reads them: `iterations`, `nodes`, `links` (raw, or binned:
    then they carry the bin's sums), `evals`, `events`; `window` the link rows of the newest
    iterations and `window_label` what they cover (the topology)."""

    run: dict
    iterations: Sequence[dict] = ()
    nodes: Sequence[dict] = ()
    links: Sequence[dict] = ()
    evals: Sequence[dict] = ()
    events: Sequence[dict] = ()
    window: Sequence[dict] = ()
    window_label: str = ""

    @cached_property
    def times(self) -> dict:
        """{iteration: virtual time at its end} of these iteration rows."""
        return {r["iteration"]: r["virtual_time_s"] for r in self.iterations}


@dataclass(frozen=True)
class View:
    """The page's controls: the accuracy panel's x axis, the rate axis scale, the EMA weight,
    a note for every title (the binning), plotly's uirevision (keeps zoom across redraws) and
    the worker picked to be drawn on its own (None: the aggregates only)."""

    x: str = "iteration"
    scale: str = "log"
    smoothing: float = 0.0
    note: str = ""
    uirevision: object = None
    focus: str | None = None   # the one worker picked to be drawn beside the aggregate


@dataclass(frozen=True)
class Panel:
    """One live figure.

    name:    the figure's id on the page (`NAME-graph`) and in the live state.
    figure:  (rows, view, as_dict) -> the whole figure.
    series:  (rows, view, totals) -> {uid: (x, y)} of the new points, for the uids `figure`
             drew; None: the panel is redrawn whole when rows or events arrive (topology).
    noisy:   uids (or prefixes ending in "_") the smoothing applies to.
    mark_x:  the x of its event marks: "iteration", "virtual_time_s" or "view" (the view's x;
             such a panel is redrawn when the x changes, from iterations, evals and events).
    totals:  (rows, totals before) -> running totals carried from tick to tick (cumulative
             bytes, joules), handed to `series`; None when it keeps none.
    hover:   rows -> {uid: [text per new point]} for traces whose points carry hover text.
    parts:   rows -> the optional rows of its layout these rows call for (a new one: redrawn).
    exports: the x axes it is drawn against in the offline export (None: the view's default).
    applies: run -> whether the panel means anything for that run (None: always); a panel that
             does not apply is hidden on the page and left out of the export.
    """

    name: str
    figure: Callable[[Rows, View, bool], object]
    series: Callable[[Rows, View, dict], Series] | None = None
    noisy: tuple[str, ...] = ()
    mark_x: str = "iteration"
    totals: Callable[[Rows, dict], dict] | None = None
    hover: Callable[[Rows], dict[str, list]] | None = None
    parts: Callable[[Rows], frozenset] | None = None
    exports: tuple = (None,)
    applies: Callable[[dict], bool] | None = None

    def draw(self, rows: Rows, view: View, as_dict: bool = False):
        """The whole figure, as every caller draws it: `figure`, its iteration axes titled in
        the run's unit (`iteration_unit`; the one place a federated run's x axis is named)."""
        return retitle_iterations(self.figure(rows, view, as_dict), iteration_unit(rows.run))

    def applies_to(self, run: dict) -> bool:
        return self.applies is None or bool(self.applies(run))

    def __post_init__(self):
        if self.mark_x not in ("iteration", "virtual_time_s", "view"):
            raise ValueError(f"panel {self.name}: mark_x = {self.mark_x!r}: must be iteration, "
                             "virtual_time_s or view")
        NOISY[self.name] = self.noisy  # the smoothing reads it by figure name
