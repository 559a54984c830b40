"""The Tune view over a real store file: the objective by trial with pruned trials marked and
the best so far, a parameter against the objective, the front of two objectives with its
dominated points; a click on a trial opens its run in the live view; the Sweep view leaves a
study's trials out; and a study made by `testbed tune` itself is drawn."""
from pathlib import Path

import pytest

from dashboards.app import create_app
from dashboards.callbacks import Dashboard
from testbed.records.store import Store

BW = "network.link.bandwidth_mbps"


def spec(objectives, constraints=()):
    return {"kind": "tune", "target": 0.9, "objectives": [list(o) for o in objectives],
            "constraints": [list(c) for c in constraints], "labels": {BW: "bandwidth_mbps"},
            "params": [{"key": BW, "kind": "float", "low": 0.5, "high": 50, "log": True,
                        "choices": []}]}


def trial_run(store, study, number, bw, accs, status="completed", bits=1000):
    """A run of trial `number` at bandwidth `bw`: an evaluation every 10 iterations of 1 s
    each, reaching the accuracies `accs`, `bits` uplink bits per iteration."""
    rid = store.create_run(f"{study}[trial={number}]", {}, method="topk")
    store.set_sweep(rid, study, {"bandwidth_mbps": bw}, trial=number)
    for i in range(10 * len(accs)):
        store.append_iteration(rid, {"iteration": i, "virtual_time_s": i + 1.0, "bits_up": bits,
                                     "bits_down": 0})
        if i % 10 == 9:
            store.append_eval(rid, {"iteration": i, "virtual_time_s": i + 1.0,
                                    "test_accuracy": accs[i // 10]})
    store.finish_run(rid, status)
    return rid


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.db") as s:
        yield s


def traces(fig):
    return {t["uid"]: t for t in fig["data"]}


def test_the_objective_by_trial_marks_pruned_trials_and_the_best_so_far(store):
    store.record_sweep("tune-k", "bw", spec([("virtual_s_to_target", "min")],
                                            [(BW, ">=", 1.0)]))
    ids = [trial_run(store, "bw", 0, 5.0, [0.5, 0.95]),            # 20 s to 90%
           trial_run(store, "bw", 1, 9.0, [0.92]),                 # 10 s
           trial_run(store, "bw", 2, 0.6, [0.1], status="pruned"),
           trial_run(store, "bw", 3, 0.7, [0.95])]                 # 10 s, but bandwidth < 1
    board = Dashboard(store.path)
    hist, param, front, studies, name, objectives, objective, params, key, message = \
        board.tune_view(None, None, None)
    assert studies == [{"label": "bw (4 trials)", "value": "bw"}] and name == "bw"
    assert objective == "virtual_s_to_target" and key == BW
    assert "4 trials of study bw: 3 completed (1 not meeting the constraints), 1 pruned" in message
    t = traces(hist)
    assert t["tune_history_0"]["x"] == [0, 1] and t["tune_history_0"]["y"] == [20.0, 10.0]
    assert t["tune_history_0"]["customdata"] == ids[:2]
    assert t["tune_history_1"]["x"] == [3] and t["tune_history_1"]["marker"]["symbol"] == "circle-open"
    # the pruned trial, at its value when pruned: never reached, twice its 10 s
    assert t["tune_history_2"]["x"] == [2] and t["tune_history_2"]["y"] == [20.0]
    assert t["tune_history_2"]["marker"]["symbol"] == "x"
    assert "pruned at iteration 9" in t["tune_history_2"]["text"][0]
    assert t["tune_best"]["x"] == [0, 1, 2, 3] and t["tune_best"]["y"] == [20.0, 10.0, 10.0, 10.0]
    p = traces(param)
    assert p["tune_param_0"]["x"] == [5.0, 9.0] and param["layout"]["xaxis"]["type"] == "log"
    assert front["data"] == [] and "no front" in front["layout"]["annotations"][0]["text"]
    # the objective is the parameter: the parameter is drawn against the constrained figure
    param = board.tune_view("bw", BW, BW)[1]
    assert param["layout"]["yaxis"]["title"]["text"] == "virtual_s_to_target (s)"
    store.record_sweep("tune-c", "bw2", spec([(BW, "min")], [("virtual_s_to_target", "<=", 15)]))
    trial_run(store, "bw2", 0, 5.0, [0.5, 0.95])
    param = board.tune_view("bw2", None, None)[1]
    assert param["layout"]["yaxis"]["title"]["text"] == "virtual_s_to_target (s)"
    assert traces(param)["tune_param_1"]["y"] == [20.0]     # 20 s > 15 s: not met
    board.close()


def test_two_objectives_draw_the_front_and_the_points_it_dominates(store):
    store.record_sweep("tune-f", "front", spec([("virtual_s_to_target", "min"), ("bits_up", "min")]))
    trial_run(store, "front", 0, 1.0, [0.95], bits=100)          # 10 s, 1,000 bits
    trial_run(store, "front", 1, 2.0, [0.5, 0.95], bits=10)      # 20 s, 200 bits
    trial_run(store, "front", 2, 3.0, [0.5, 0.95], bits=100)     # 20 s, 2,000 bits: dominated
    board = Dashboard(store.path)
    *_, front = board.tune_view("front", "bits_up", None)[:3]
    t = traces(front)
    assert t["tune_front"]["x"] == [10.0, 20.0] and t["tune_front"]["y"] == [1000.0, 200.0]
    assert t["tune_dominated"]["x"] == [20.0] and t["tune_dominated"]["y"] == [2000.0]
    assert front["layout"]["xaxis"]["title"]["text"] == "virtual_s_to_target (s), min"
    board.close()


def test_a_click_on_a_trial_names_its_run_and_the_page_wires_it(store):
    assert Dashboard.open_trial({"points": [{"x": 1, "y": 2, "customdata": 7}]}) == 7
    assert Dashboard.open_trial(None) is None and Dashboard.open_trial({"points": []}) is None
    app = create_app(store.path)
    try:
        opens = [k for k in app.callback_map if "run-select.value@" in k and "view-tabs.value@" in k]
        assert len(opens) == 1 and {i["id"] for i in app.callback_map[opens[0]]["inputs"]} == {
            "tune-history-graph", "tune-param-graph", "tune-front-graph"}
        assert any("tune-history-graph.figure" in k for k in app.callback_map)
    finally:
        app.board.close()


def test_the_sweep_view_leaves_a_studys_trials_out(store):
    store.record_sweep("tune-k", "bw", spec([("final_accuracy", "max")]))
    trial_run(store, "bw", 0, 5.0, [0.5])
    trial_run(store, "bw", 1, 9.0, [0.6])
    board = Dashboard(store.path)
    fig, sweeps, base, *_ = board.sweep_view(None, None, None, 0.9)
    assert sweeps == [] and base is None
    board.close()


def test_a_study_made_by_testbed_tune_is_drawn(tmp_path, capsys):
    pytest.importorskip("optuna")
    from testbed.cli import main

    quick = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"
    db = tmp_path / "t.db"
    sets = ["run.iterations=4", "run.eval_every=2", "run.device=cpu", "model.name=mlp",
            "network.workers=2"]
    assert main(["tune", str(quick), "--store", str(db), "--name", "made", "--trials", "2",
                 "--quiet", "--param", f"{BW}=1:20", "--param", "compression.method=topk,none",
                 "--objective", "bits_up", "--objective", "final_accuracy",
                 *sum((["--set", s] for s in sets), [])]) == 0
    board = Dashboard(db)
    hist, param, front, studies, name, objectives, objective, params, key, message = \
        board.tune_view(None, None, "compression.method")
    assert name == "made" and objective == "bits_up" and key == "compression.method"
    assert [o["value"] for o in objectives] == ["bits_up", "final_accuracy"]
    assert sorted(x for t in hist["data"] if t["uid"].startswith("tune_history_") for x in t["x"]) == [0, 1]
    assert param["layout"]["xaxis"]["type"] == "category"
    xs = [x for t in param["data"] for x in t["x"]]
    assert len(xs) == 2 and set(xs) <= {"topk", "none"}
    assert "tune_front" in traces(front)
    board.close()
