"""The energy panel: each worker's joules per iteration and cumulative joules over virtual time,
drawn from node rows, and appended live so that the ticks equal a fresh drawing."""
import os

import pytest
from dash import no_update

from dashboards.callbacks import LIVE_FIGURES, Dashboard
from dashboards.panels.energy import energy_figure
from dashboards.style import series_uid
from testbed.records.store import Store

GRAPH = {"nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"},
                   {"id": "w1", "role": "worker"}],
         "edges": [{"source": "w0", "target": "server"}, {"source": "w1", "target": "server"}]}
JOULES = {"w0": 1.5, "w1": 0.25}   # per iteration; w1's odd iterations cost double


def joules(node, i):
    return JOULES[node] * (2 if node == "w1" and i % 2 else 1)


def write(store, rid, first, last):
    for i in range(first, last + 1):
        nodes = [{"iteration": i, "node": w, "bits_up": 8, "radio_j": joules(w, i) / 2,
                  "compute_j": joules(w, i) / 2, "energy_j": joules(w, i)} for w in JOULES]
        store.append_iteration(rid, {"iteration": i, "virtual_time_s": 0.5 * (i + 1), "bits_up": 16,
                                     "energy_j": sum(n["energy_j"] for n in nodes)}, nodes=nodes)
    store.flush()


def test_the_energy_figure_draws_each_workers_joules_over_virtual_time():
    times = {i: 0.5 * (i + 1) for i in range(4)}
    rows = [{"iteration": i, "node": w, "energy_j": joules(w, i)} for i in range(4) for w in JOULES]
    fig = energy_figure(rows, times, as_dict=True)
    by_uid = {t["uid"]: t for t in fig["data"]}
    w1 = by_uid[series_uid("energy", "w1")]
    assert w1["x"] == [0.5, 1.0, 1.5, 2.0] and w1["y"] == [0.25, 0.5, 0.25, 0.5]
    assert by_uid[series_uid("cumj", "w0")]["y"] == [1.5, 3.0, 4.5, 6.0]
    assert by_uid[series_uid("cumj", "w1")]["yaxis"] == "y2"
    empty = energy_figure([], {}, as_dict=True)
    assert "No energy recorded yet." in [a["text"] for a in empty["layout"]["annotations"]]


@pytest.mark.parametrize("smoothing", [0.0, 0.6])
def test_live_ticks_append_energy_points_equal_to_a_fresh_drawing(tmp_path, smoothing):
    with Store(tmp_path / "runs.db") as store:
        rid = store.create_run("e", {}, method="none", topology="star", workers=2, graph=GRAPH,
                               pid=os.getpid())
        write(store, rid, 0, 3)
        board = Dashboard(store.path)
        figs, state, _, _ = board.live_view(rid, "iteration", None, "log", smoothing)
        fig = dict(zip(LIVE_FIGURES, figs))["energy"]
        drawn = [[list(t["x"]), list(t["y"])] for t in fig["data"]]
        write(store, rid, 4, 6)
        figs, state, _, _ = board.live_view(rid, "iteration", state, "log", smoothing)
        patch = dict(zip(LIVE_FIGURES, figs))["energy"]
        assert patch is not no_update
        for o in patch.to_plotly_json()["operations"]:
            if o["operation"] == "Extend":
                loc = o["location"]
                drawn[loc[1]][0 if loc[2] == "x" else 1] += o["params"]["value"]
        fresh = dict(zip(LIVE_FIGURES, board.live_view(rid, "iteration", None, "log", smoothing)[0]))["energy"]
        for (xs, ys), t in zip(drawn, fresh["data"], strict=True):
            assert xs == list(t["x"]) and ys == pytest.approx(list(t["y"])), t["uid"]
        cum_w0 = next(t for t in fresh["data"] if t["uid"] == series_uid("cumj", "w0"))
        assert cum_w0["y"][-1] == pytest.approx(7 * 1.5)
        board.close()


def test_compare_puts_energy_to_the_target_beside_the_time_to_it(tmp_path):
    with Store(tmp_path / "runs.db") as store:
        rid = store.create_run("e", {}, method="none", topology="star", workers=2, graph=GRAPH,
                               pid=os.getpid())
        write(store, rid, 0, 9)
        for it, acc in ((4, 0.6), (9, 0.9)):
            store.append_eval(rid, {"iteration": it, "virtual_time_s": 0.5 * (it + 1), "test_accuracy": acc})
        store.flush()
        board = Dashboard(store.path)
        _, rows, _ = board.compare_view([rid], 0.85, "virtual_time_s")
        # reached at iteration 9: ten iterations of w0 (1.5 J each) and w1 (0.25, 0.5 alternating)
        assert rows[0]["iterations_to_target"] == 9
        assert rows[0]["energy_to_target_j"] == pytest.approx(10 * 1.5 + 5 * 0.25 + 5 * 0.5)
        _, rows, _ = board.compare_view([rid], 0.95, "virtual_time_s")
        assert rows[0]["energy_to_target_j"] is None
        board.close()
