"""The page: runs table on top, then a live view of one run, a compare view, a sweep view and
a tune view in tabs.

Component ids here are the contract with dashboards/callbacks.py and the browser tests.
"""
from __future__ import annotations

from dash import dash_table, dcc, html
from dash.dash_table.Format import Format, Scheme

from dashboards import panels

# plotly's toolbar only while the pointer is over a figure: it would lie over the titles
GRAPH_CONFIG = {"displaylogo": False, "displayModeBar": "hover"}


def _num(precision: int, scheme=Scheme.fixed) -> dict:
    return {"type": "numeric", "format": Format(precision=precision, scheme=scheme)}


RUN_COLUMNS = [
    {"name": "id", "id": "id", "type": "numeric"},
    {"name": "name", "id": "name"},
    {"name": "method", "id": "method"},
    {"name": "topology", "id": "topology"},
    {"name": "workers", "id": "workers"},
    {"name": "Mb/s", "id": "bandwidth_mbps", **_num(1)},
    {"name": "status", "id": "status"},
    {"name": "iterations", "id": "iterations"},
    {"name": "final accuracy", "id": "final_accuracy", **_num(2, Scheme.percentage)},
    {"name": "best accuracy", "id": "best_accuracy", **_num(2, Scheme.percentage)},
    {"name": "MB on the wire", "id": "total_mb", **_num(3)},
    {"name": "virtual s", "id": "virtual_time_s", **_num(2)},
]

COMPARE_COLUMNS = [
    {"name": "id", "id": "id", "type": "numeric"},
    {"name": "name", "id": "name"},
    {"name": "method", "id": "method"},
    {"name": "status", "id": "status"},
    {"name": "final accuracy", "id": "final_accuracy", **_num(2, Scheme.percentage)},
    {"name": "best accuracy", "id": "best_accuracy", **_num(2, Scheme.percentage)},
    {"name": "MB on the wire", "id": "total_mb", **_num(3)},
    {"name": "bits / iteration", "id": "bits_per_iteration", **_num(3, Scheme.exponent)},
    {"name": "compression ×", "id": "compression_ratio", **_num(1)},
    {"name": "iterations to target", "id": "iterations_to_target", "type": "numeric"},
    {"name": "virtual time to target (s)", "id": "time_to_target_s", **_num(2)},
    {"name": "energy to target (J, all workers)", "id": "energy_to_target_j", **_num(1)},
]

CONTROL_COLUMNS = [{"name": n, "id": i} for n, i in (
    ("#", "id"), ("target", "target"), ("changes", "changes"), ("status", "status"),
    ("applied at iteration", "iteration"), ("message", "message"))]

TABLE_STYLE = dict(
    style_table={"overflowX": "auto"},
    style_cell={"fontFamily": "inherit", "fontSize": 13, "padding": "4px 8px", "textAlign": "left"},
    style_header={"fontWeight": "600", "backgroundColor": "#f3f4f6"},
)
X_OPTIONS = [{"label": " iteration", "value": "iteration"},
             {"label": " virtual time", "value": "virtual_time_s"}]
SCALE_OPTIONS = [{"label": " log", "value": "log"}, {"label": " linear", "value": "linear"}]
# EMA weights of the "smoothing" control (TensorBoard's convention: 0 is raw). On by default at
# TensorBoard's default weight: it applies to the spiky series only (the bands over workers and
# links, the loss, latency), never to the totals' steps or to a picked worker's own line.
DEFAULT_SMOOTHING = 0.6
SMOOTHING_OPTIONS = [{"label": "off", "value": 0}] + [{"label": f"{a:g}", "value": a}
                                                      for a in (0.6, 0.8, 0.9, 0.95, 0.99)]


def _graph(name: str) -> dcc.Graph:
    return dcc.Graph(id=f"{name}-graph", config=GRAPH_CONFIG, className="graph")


def live_view() -> html.Div:
    steer = html.Div(className="panel", children=[
        html.H3("Steer the channel"),
        html.Div(className="row", children=[
            html.Label(["link", dcc.Dropdown(id="control-target", value="*", clearable=False,
                                             options=[{"label": "all links", "value": "*"}],
                                             style={"minWidth": 220})]),
            html.Label(["bandwidth (Mb/s)", dcc.Input(id="control-bandwidth", type="number", min=0,
                                                      step="any", placeholder="e.g. 5")]),
            html.Label(["delay (ms)", dcc.Input(id="control-delay", type="number", min=0, step="any",
                                                placeholder="e.g. 10")]),
            html.Label(["loss probability", dcc.Input(id="control-loss", type="number", min=0, max=1,
                                                      step="any", placeholder="0..1")]),
            html.Button("Apply", id="control-apply", n_clicks=0, className="button"),
        ]),
        html.Div(id="steer-hint", className="hint"),
        html.Div(id="control-message", className="message"),
        dash_table.DataTable(id="controls-table", columns=CONTROL_COLUMNS, data=[], page_size=8,
                             **TABLE_STYLE),
    ])
    return html.Div(className="view", children=[
        html.Div(className="row", children=[
            html.Label(["run", dcc.Dropdown(id="run-select", clearable=False, style={"minWidth": 360})]),
            html.Label(["accuracy against", dcc.RadioItems(id="x-mode", options=X_OPTIONS,
                                                           value="iteration", inline=True)]),
            html.Label(["rate axis", dcc.RadioItems(id="rate-scale", options=SCALE_OPTIONS,
                                                    value="log", inline=True)]),
            html.Label(["smoothing", dcc.Dropdown(id="smoothing", options=SMOOTHING_OPTIONS,
                                                  value=DEFAULT_SMOOTHING, clearable=False,
                                                  searchable=False, style={"minWidth": 110})]),
            html.Label(["worker on its own", dcc.Dropdown(id="focus-select", value="", clearable=False,
                                                          options=[{"label": "none: the aggregates",
                                                                    "value": ""}],
                                                          style={"minWidth": 190})]),
        ]),
        html.Div(id="live-message", className="message"),
        html.Div(className="grid", children=[_graph(p.name) for p in panels.PANELS]),
        steer,
    ])


def compare_view() -> html.Div:
    return html.Div(className="view", children=[
        html.Div(className="row", children=[
            html.Label(["target accuracy (%)", dcc.Input(id="target-accuracy", type="number", value=80,
                                                         min=0, max=100, step="any")]),
            html.Label(["against", dcc.RadioItems(id="compare-x", options=X_OPTIONS,
                                                  value="virtual_time_s", inline=True)]),
        ]),
        html.Div(id="compare-message", className="message"),
        _graph("compare"),
        dash_table.DataTable(id="compare-table", columns=COMPARE_COLUMNS, data=[],
                             sort_action="native", **TABLE_STYLE),
    ])


def sweep_view() -> html.Div:
    return html.Div(className="view", children=[
        html.Div(className="row", children=[
            html.Label(["sweep", dcc.Dropdown(id="sweep-select", clearable=False,
                                              style={"minWidth": 300})]),
            html.Label(["across", dcc.Dropdown(id="sweep-x", clearable=False, style={"minWidth": 180})]),
            html.Label(["down", dcc.Dropdown(id="sweep-y", clearable=False, style={"minWidth": 180})]),
            html.Label(["target accuracy (%)", dcc.Input(id="sweep-target", type="number", value=90,
                                                         min=0, max=100, step="any")]),
        ]),
        html.Div(id="sweep-message", className="message"),
        _graph("sweep"),
    ])


def tune_view() -> html.Div:
    return html.Div(className="view", children=[
        html.Div(className="row", children=[
            html.Label(["study", dcc.Dropdown(id="tune-select", clearable=False,
                                              style={"minWidth": 260})]),
            html.Label(["objective", dcc.Dropdown(id="tune-objective", clearable=False,
                                                  style={"minWidth": 220})]),
            html.Label(["parameter", dcc.Dropdown(id="tune-param", clearable=False,
                                                  style={"minWidth": 260})]),
        ]),
        html.Div(id="tune-message", className="message"),
        _graph("tune-history"),
        _graph("tune-param"),
        _graph("tune-front"),
    ])


def build_layout(store_path: str, *, live_interval_ms: int = 1500, runs_interval_ms: int = 3000) -> html.Div:
    return html.Div(className="page", children=[
        html.Header(className="header", children=[
            html.H1("LGC testbed"),
            html.Span(f"store: {store_path}", className="store-path"),
        ]),
        html.Div(id="runs-message", className="message"),
        dash_table.DataTable(id="runs-table", columns=RUN_COLUMNS, data=[], row_selectable="multi",
                             selected_row_ids=[], sort_action="native", page_size=12,
                             style_data_conditional=[
                                 {"if": {"filter_query": '{status} = "running"'}, "color": "#1d4ed8"},
                                 {"if": {"filter_query": '{status} = "failed"'}, "color": "#b91c1c"},
                                 {"if": {"filter_query": '{status} = "pruned"'}, "color": "#6b7280"}],
                             **TABLE_STYLE),
        dcc.Tabs(id="view-tabs", value="live", children=[
            dcc.Tab(label="Live run", value="live", children=live_view()),
            dcc.Tab(label="Compare", value="compare", children=compare_view()),
            dcc.Tab(label="Sweep", value="sweep", children=sweep_view()),
            dcc.Tab(label="Tune", value="tune", children=tune_view()),
        ]),
        dcc.Store(id="live-state"),
        dcc.Interval(id="live-interval", interval=live_interval_ms),
        dcc.Interval(id="runs-interval", interval=runs_interval_ms),
    ])
