"""A page read at a glance: units on the tick labels, many workers or links as one band with a
way to pick one, smoothing on for spiky series, panels that do not apply hidden, and a page
that waits for the run `testbed demo` is starting instead of saying the store is empty."""
import math

import pytest

from dashboards.callbacks import Dashboard
from dashboards.layout import DEFAULT_SMOOTHING, build_layout
from dashboards.panels import PANELS
from dashboards.panels.energy import energy_figure
from dashboards.panels.rate import rate_figure
from dashboards.style import log_ticks, series_uid, si_label, spread
from testbed.records.store import Store

GRAPH = {"nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"},
                   {"id": "w1", "role": "worker"}],
         "edges": [{"source": "w0", "target": "server", "bandwidth_mbps": 20.0},
                   {"source": "w1", "target": "server", "bandwidth_mbps": 20.0}]}


def test_si_labels_carry_the_unit_with_its_prefix():
    assert [si_label(v, "bit") for v in (1, 500, 1000, 20_000, 1_066_680, 3e9)] == [
        "1 bit", "500 bit", "1 kbit", "20 kbit", "1.06668 Mbit", "3 Gbit"]
    assert si_label(14_360_000, "B") == "14.36 MB"


def test_log_ticks_are_major_only_labelled_and_in_range_however_narrow():
    wide = log_ticks([6_388, 1_066_680], "bit")     # LGC's cut: 2.2 decades -> 1, 2, 5 per decade
    shown = [t for v, t in zip(wide["tickvals"], wide["ticktext"]) if 6_388 <= v <= 1_066_680]
    assert shown == ["10 kbit", "20 kbit", "50 kbit", "100 kbit", "200 kbit", "500 kbit", "1 Mbit"]
    very_wide = log_ticks([10, 1e9], "B")          # 8 decades: powers of ten only
    assert all(math.log10(v).is_integer() for v in very_wide["tickvals"])
    narrow = log_ticks([5_000, 9_000], "bit")        # inside one decade: still a label
    assert [t for v, t in zip(narrow["tickvals"], narrow["ticktext"]) if 5_000 <= v <= 9_000] == ["5 kbit"]


def test_the_rate_panels_log_axes_label_bits_and_bytes_linear_ones_too():
    its = [{"iteration": i, "virtual_time_s": i + 1.0, "bits_up": 800_000, "bits_down": 8_000}
           for i in range(3)]
    fig = rate_figure(its, [], as_dict=True)
    y, y2 = fig["layout"]["yaxis"], fig["layout"]["yaxis2"]
    assert y["type"] == "log" and "100 kbit" in y["ticktext"] and "1 Mbit" in y["ticktext"]
    assert y2["type"] == "log" and "1 MB" in y2["ticktext"] and "100 kB" in y2["ticktext"]
    lin = rate_figure(its, [], scale="linear", as_dict=True)["layout"]
    assert (lin["yaxis"]["tickformat"], lin["yaxis"]["ticksuffix"]) == ("~s", "bit")
    assert lin["yaxis2"]["ticksuffix"] == "B"


def test_many_workers_are_one_band_and_a_picked_one_is_drawn_alone():
    """Four workers' joules per iteration at one time: 1, 2, 3, 6 J -> mean 3, band 1..6; their
    cumulative joules after two such iterations 2, 4, 6, 12 -> mean 6, band 2..12."""
    nodes = [{"iteration": i, "node": f"w{k}", "energy_j": j} for i in range(2)
             for k, j in enumerate((1.0, 2.0, 3.0, 6.0))]
    fig = energy_figure(nodes, {0: 0.5, 1: 1.0}, as_dict=True)
    t = {tr["uid"]: tr for tr in fig["data"]}
    assert (t["energy_mean"]["y"], t["energy_lo"]["y"], t["energy_hi"]["y"]) == ([3.0, 3.0], [1.0, 1.0], [6.0, 6.0])
    assert (t["cumj_mean"]["y"][-1], t["cumj_lo"]["y"][-1], t["cumj_hi"]["y"][-1]) == (6.0, 2.0, 12.0)
    legend = [tr["name"] for tr in fig["data"] if tr.get("showlegend", True)]
    assert legend == ["mean, min-max of 4 workers"]
    picked = energy_figure(nodes, {0: 0.5, 1: 1.0}, focus="w3", as_dict=True)
    drawn = [tr["name"] for tr in picked["data"] if tr.get("visible", True) and tr.get("showlegend", True)]
    assert drawn == ["mean, min-max of 4 workers", "w3"]
    assert spread({"a": ([0, 1], [1, 3]), "b": ([1], [5])}) == (([0, 1], [1.0, 4.0]), ([0, 1], [1, 3]),
                                                              ([0, 1], [1, 5]))


def test_smoothing_is_on_by_default_for_spiky_series_only():
    assert DEFAULT_SMOOTHING == pytest.approx(0.6)
    ids = {}

    def walk(c):
        if getattr(c, "id", None):
            ids[c.id] = c
        for child in (c.children if isinstance(getattr(c, "children", None), list) else
                      [c.children] if hasattr(getattr(c, "children", None), "children") else []):
            walk(child)
    walk(build_layout("x.db"))
    assert ids["smoothing"].value == DEFAULT_SMOOTHING and ids["focus-select"].value == ""
    from dashboards.style import is_noisy

    assert is_noisy("rate", "wk_mean") and not is_noisy("rate", "bits_up")
    assert is_noisy("channel", "loss_mean") and not is_noisy("channel", series_uid("loss", "w0->server"))
    assert not is_noisy("channel", "rate_mean")   # a steered rate is a step, not noise


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.db") as s:
        yield s


def test_a_panel_that_does_not_apply_is_hidden_and_the_worker_picker_lists_the_workers(store):
    dp = store.create_run("dp", {}, method="none", graph=GRAPH)
    fed = store.create_run("fed", {"federated": {"mode": "sync"}}, method="none", graph=GRAPH)
    board = Dashboard(store.path)
    try:
        styles, options = board.panels_view(dp)
        by_name = dict(zip([p.name for p in PANELS], styles))
        assert by_name["federated"] == {"display": "none"}
        assert [n for n, st in by_name.items() if st.get("display") == "none"] == ["federated"]
        assert by_name["channel"]["gridColumn"] == "1 / -1"       # the tall one across the page
        assert [o["value"] for o in options] == ["", "w0", "w1"]
        styles, _ = board.panels_view(fed)
        assert dict(zip([p.name for p in PANELS], styles))["federated"] == {}
    finally:
        board.close()


def test_the_cards_side_by_side_are_as_tall_as_each_other(store):
    """Pairs in the page's two columns: no card half empty beside a taller one."""
    rid = store.create_run("dp", {}, method="none", graph=GRAPH)
    store.append_iteration(rid, {"iteration": 0, "virtual_time_s": 1.0, "bits_up": 8, "bits_down": 8},
                           nodes=[{"iteration": 0, "node": "w0", "bits_up": 8, "energy_j": 1.0}])
    store.flush()
    board = Dashboard(store.path)
    try:
        figs, *_ = board.live_view(rid, "iteration", None)
    finally:
        board.close()
    heights = {p.name: f["layout"]["height"] for p, f in zip(PANELS, figs)}
    names = [p.name for p in PANELS if p.name not in ("channel", "federated")]
    assert names == ["accuracy", "rate", "latency", "energy", "topology"]
    assert heights["accuracy"] == heights["rate"] and heights["latency"] == heights["energy"]


def test_the_page_waits_for_the_run_a_demo_is_starting(tmp_path):
    board = Dashboard(tmp_path / "runs.db", starting="experiments/quickstart.toml")
    plain = Dashboard(tmp_path / "runs.db")
    try:
        *_, message = board.runs_view(None)
        assert message.startswith("Waiting for the first run (experiments/quickstart.toml) to start")
        figs, _, text, level = board.live_view(None, "iteration", None)
        assert level == "info" and text.startswith("Waiting for the first run")
        notes = {a["text"] for f in figs for a in f["layout"]["annotations"]}
        assert notes == {"Waiting for the first run."}
        *_, message = plain.runs_view(None)
        assert "has no runs yet" in message
    finally:
        board.close()
        plain.close()


def test_a_blank_sweep_heat_map_says_why():
    from dashboards.sweep import sweep_figure

    cells = [{"params": {"bw": "2"}, "final_accuracy": 0.9, "time_to_target_s": 3.0,
              "energy_to_target_j": None}]
    notes = [a["text"] for a in sweep_figure(cells, "bw", None, 0.8, as_dict=True)["layout"]["annotations"]]
    assert "No energy to show:<br>these runs recorded no energy." in notes
    cells[0]["energy_to_target_j"] = 4.0
    notes = [a["text"] for a in sweep_figure(cells, "bw", None, 0.8, as_dict=True)["layout"]["annotations"]]
    assert not [n for n in notes if n.startswith("No energy")]


def test_the_compare_views_log_axis_is_labelled_in_bits():
    from dashboards.compare import compare_figure

    its = [{"iteration": i, "virtual_time_s": i + 1.0, "bits_up": 4_000_000, "bits_down": 0} for i in range(30)]
    entry = {"run": {"id": 1, "name": "a", "method": "none"}, "iterations": its, "evals": []}
    y2 = compare_figure([entry], as_dict=True)["layout"]["yaxis2"]
    shown = [t for v, t in zip(y2["tickvals"], y2["ticktext"]) if 4e6 <= v <= 1.2e8]
    assert y2["type"] == "log" and shown == ["5 Mbit", "10 Mbit", "20 Mbit", "50 Mbit", "100 Mbit"]


@pytest.mark.parametrize("mode,unit", [("sync", "round"), ("fedbuff", "server step")])
def test_a_federated_runs_figures_speak_of_rounds(mode, unit):
    """Every x axis of the store's iterations and every "per iteration" of a title or a y axis
    says the run's unit, in both forms a figure is drawn (the live page's dict, the export's Figure)."""
    from dashboards.panel import Rows, View

    run = {"id": 1, "name": "fed", "config": {"federated": {"mode": mode}}}
    its = [{"iteration": i, "virtual_time_s": i + 1.0, "bits_up": 8, "bits_down": 8} for i in range(3)]
    nodes = [{"iteration": i, "node": "w0", "bits_up": 8, "energy_j": 1.0} for i in range(3)]
    rows = Rows(run, iterations=its, nodes=nodes)
    for as_dict in (True, False):
        for panel in PANELS:
            fig = panel.draw(rows, View(), as_dict)
            layout = fig["layout"] if as_dict else fig.to_plotly_json()["layout"]
            texts = [layout.get("title", {}).get("text", "")] + [
                (v.get("title") or {}).get("text", "") for k, v in layout.items()
                if k.startswith(("xaxis", "yaxis")) and isinstance(v, dict)]
            assert not [t for t in texts if "iteration" in (t or "")], (panel.name, texts)
    rate = next(p for p in PANELS if p.name == "rate").draw(rows, View(), True)["layout"]
    assert rate["title"]["text"].startswith(f"Rate: bits per {unit}")
    assert rate["yaxis"]["title"]["text"] == f"per {unit}" and rate["xaxis2"]["title"]["text"] == unit
