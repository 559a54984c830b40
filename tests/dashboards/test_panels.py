"""The live panels' contract (dashboards/panel.py), checked on every registered panel: the page
shows each, each figure draws exactly the series its ticks append to, and a figure's "no data
yet" note stays when its event marks are redrawn; a new panel is one module plus its registry
line (done here inside one test)."""
import os

from dashboards import panels
from dashboards.callbacks import LIVE_FIGURES, Dashboard
from dashboards.export import run_figures
from dashboards.layout import build_layout
from dashboards.panel import Panel, Rows, View
from dashboards.panels import PANELS
from dashboards.style import base_layout, line_trace, make_figure, points
from testbed.records.store import Store

GRAPH = {"nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"},
                   {"id": "w1", "role": "worker"}],
         "edges": [{"source": "w0", "target": "server"}, {"source": "w1", "target": "server"}]}


def every_kind_of_row() -> Rows:
    """Rows with something in every series any panel draws (two workers, a left-out worker,
    a fading CSMA link, LGC's coder error, two stages)."""
    its = [{"iteration": i, "virtual_time_s": 1.0 + i, "train_loss": 1.0, "bits_up": 16,
            "bits_down": 8, "compute_s": 0.1, "uplink_s": 0.2, "aggregation_s": 0.0,
            "downlink_s": 0.1, "left_out": i % 2} for i in range(3)]
    nodes = [{"iteration": i, "node": w, "bits_up": 8, "energy_j": 1.0,
              "left_out": "deadline" if (i % 2 and w == "w1") else None}
             for i in range(3) for w in ("w0", "w1")]
    links = [{"iteration": i, "src": s, "dst": d, "bytes": 100, "packets": 2, "lost": 1,
              "retransmitted": 1, "busy_s": 0.01, "snr_db": 20.0, "collisions": 1, "retries": 1}
             for i in range(3) for s, d in (("w0", "server"), ("server", "w0"))]
    evals = [{"iteration": 2, "virtual_time_s": 3.0, "test_loss": 0.5, "test_accuracy": 0.8,
              "lgc_coder_error": 0.1}]
    events = [{"id": 1, "iteration": 0, "virtual_time_s": 0.0, "kind": "stage", "detail": {"stage": "dense"}},
              {"id": 2, "iteration": 1, "virtual_time_s": 2.0, "kind": "stage", "detail": {"stage": "lgc"}}]
    return Rows({"id": 1, "graph": GRAPH}, its, nodes, links, evals, events,
                window=links, window_label="over iterations 0-2")


def graph_ids(component) -> list[str]:
    ids = []

    def walk(c):
        ids.append(getattr(c, "id", None))
        children = getattr(c, "children", None)
        for child in children if isinstance(children, list) else [children] if children is not None else []:
            walk(child)
    walk(component)
    return [i for i in ids if isinstance(i, str) and i.endswith("-graph")]


def test_every_panel_is_on_the_page_in_the_registry_order():
    assert LIVE_FIGURES == [p.name for p in PANELS]
    assert graph_ids(build_layout("x.db"))[:len(PANELS)] == [f"{p.name}-graph" for p in PANELS]


def test_a_new_panel_is_its_module_and_its_line_in_the_registry(tmp_path, monkeypatch):
    """What dashboards/panels/NAME.py would hold (a figure, its series, its PANEL), and its line
    in PANELS: the page shows it, the live view draws it and then appends to it, the offline
    export draws it; no other file knows of it."""
    def loss_series(rows, view, totals):
        return {"loss": points(rows.iterations, "iteration", "train_loss")}

    def loss_figure(rows, view, as_dict):
        trace = line_trace("loss", "train loss", loss_series(rows, view, {})["loss"])
        return make_figure([trace], base_layout("Train loss", 300, view.uirevision), as_dict)

    toy = Panel(name="toy_loss", figure=loss_figure, series=loss_series)
    monkeypatch.setattr(panels, "PANELS", panels.PANELS + (toy,))   # the registry line

    assert graph_ids(build_layout("x.db"))[len(PANELS)] == "toy_loss-graph"
    with Store(tmp_path / "runs.db") as store:
        rid = store.create_run("toy", {}, method="none", topology="star", workers=2, graph=GRAPH,
                               pid=os.getpid())
        for i in range(3):
            store.append_iteration(rid, {"iteration": i, "virtual_time_s": 1.0 + i, "train_loss": 1.0 / (i + 1)})
        store.flush()
        board = Dashboard(store.path)
        figs, state, _, _ = board.live_view(rid, "iteration", None)
        assert len(figs) == len(PANELS) + 1 and figs[-1]["data"][0]["y"] == [1.0, 0.5, 1 / 3]
        store.append_iteration(rid, {"iteration": 3, "virtual_time_s": 4.0, "train_loss": 0.25})
        store.flush()
        figs, state, _, _ = board.live_view(rid, "iteration", state)
        board.close()
        (extend,) = [o for o in figs[-1].to_plotly_json()["operations"] if o["location"] == ["data", 0, "y"]]
        assert extend["params"]["value"] == [0.25]
        run, exported = run_figures(store, rid)
    assert len(exported) == sum(len(p.exports) for p in PANELS if p.applies_to(run)) + 1
    assert list(exported[-1].data[0].y) == [1.0, 0.5, 1 / 3, 0.25]


def test_each_figure_draws_exactly_the_series_its_ticks_append_to():
    rows = every_kind_of_row()
    for p in PANELS:
        fig = p.figure(rows, View(), True)
        if p.series is None:
            continue
        series = p.series(rows, View(), {})  # the running totals before the first row: none
        uids = [t["uid"] for t in fig["data"]]
        assert len(set(uids)) == len(uids) and set(uids) == set(series), p.name
        for t in fig["data"]:  # the same points, drawn or appended
            assert (list(t["x"]), list(t["y"])) == tuple(map(list, series[t["uid"]])), (p.name, t["uid"])


def test_a_no_data_note_stays_when_the_marks_are_redrawn(tmp_path):
    """A run without energy figures: when a control arrives, the energy panel's marks are
    redrawn and its "No energy recorded yet." stays (so does the accuracy's "no evaluation")."""
    with Store(tmp_path / "runs.db") as store:
        rid = store.create_run("e", {}, method="none", topology="star", workers=2, graph=GRAPH,
                               pid=os.getpid())
        store.append_iteration(rid, {"iteration": 0, "virtual_time_s": 1.0, "bits_up": 8},
                               nodes=[{"iteration": 0, "node": "w0", "bits_up": 8}])
        store.flush()
        board = Dashboard(store.path)
        _, state, _, _ = board.live_view(rid, "iteration", None)
        store.append_event(rid, "control", {"target": "*", "changes": {"bandwidth_mbps": 5.0}},
                           iteration=0, virtual_time_s=1.0)
        store.flush()
        figs, state, _, _ = board.live_view(rid, "iteration", state)
        board.close()
    for name, note in (("energy", "No energy recorded yet."),
                       ("accuracy", "No evaluation yet: accuracy appears after the first test pass.")):
        ops = figs[LIVE_FIGURES.index(name)].to_plotly_json()["operations"]
        (notes,) = [o["params"]["value"] for o in ops if o["location"] == ["layout", "annotations"]]
        assert [a["text"] for a in notes][0] == note and "all links: bw 5 Mb/s" in [a["text"] for a in notes]


def x_titles(fig) -> dict:
    layout = fig["layout"] if isinstance(fig, dict) else fig.layout.to_plotly_json()
    return {k: (v.get("title") or {}).get("text") for k, v in layout.items() if k.startswith("xaxis")}


def test_a_federated_runs_iteration_axes_are_titled_round_or_server_step():
    """The same rows drawn for a data-parallel run and for federated ones: every x axis the
    data-parallel figures title "iteration" reads "round" (sync) or "server step" (FedBuff),
    as a dict (the live view) and as a Figure (the export); no other title changes."""
    rows = every_kind_of_row()
    plain = {p.name: x_titles(p.draw(rows, View(), True)) for p in PANELS}
    drawn = [name for name, titles in plain.items() if "iteration" in titles.values()]
    assert {"accuracy", "rate", "latency"} <= set(drawn)   # the panels drawn against iterations
    for mode, unit in (("sync", "round"), ("fedbuff", "server step")):
        fed = Rows({**rows.run, "config": {"federated": {"mode": mode}}}, rows.iterations,
                   rows.nodes, rows.links, rows.evals, rows.events, window=rows.window,
                   window_label=rows.window_label)
        for as_dict in (True, False):
            for p in PANELS:
                want = {k: unit if t == "iteration" else t for k, t in plain[p.name].items()}
                if p.name == "federated":   # a data-parallel run draws it without axes
                    continue
                assert x_titles(p.draw(fed, View(), as_dict)) == want, (mode, as_dict, p.name)
        titles = x_titles(panels.BY_NAME["federated"].draw(fed, View(), True))
        assert "iteration" not in titles.values() and unit in titles.values()
