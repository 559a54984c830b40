"""Dashboard views over a real store file: append-only live updates, binning, steering, compare,
and the messages for an empty store, a failed run and a run with no eval."""
import os

import pytest
from dash import no_update

from dashboards.callbacks import LIVE_FIGURES, Dashboard
from testbed.records.store import Store

GRAPH = {"nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"}],
         "edges": [{"source": "w0", "target": "server", "bandwidth_mbps": 10.0}]}


def write_iterations(store, rid, first, last, bits_up=800):
    for i in range(first, last + 1):
        store.append_iteration(
            rid, {"iteration": i, "virtual_time_s": float(i + 1), "train_loss": 1.0,
                  "bits_up": bits_up, "bits_down": 200, "compute_s": 0.1, "uplink_s": float(i),
                  "aggregation_s": 0.0, "downlink_s": 0.1},
            nodes=[{"iteration": i, "node": "w0", "bits_up": bits_up, "bits_down": 200}],
            links=[{"iteration": i, "src": "w0", "dst": "server", "bytes": 100, "packets": 1,
                    "lost": i % 2, "retransmitted": i % 2}])
    store.flush()


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.db") as s:
        yield s


def new_run(store, name="live", method="topk", **kw):
    # pid = this process: the run counts as alive (a dead writer's run is marked failed).
    return store.create_run(name, {}, method=method, topology="star", workers=1, graph=GRAPH,
                            pid=os.getpid(), **kw)


def ops(patch):
    return [(o["operation"], o["location"], o["params"].get("value"))
            for o in patch.to_plotly_json()["operations"]]


def test_empty_store_says_so(tmp_path):
    board = Dashboard(tmp_path / "empty.db")
    rows, options, value, message = board.runs_view(None)
    assert rows == [] and options == [] and value is None
    assert "has no runs yet" in message and "testbed run" in message
    figs, state, message, level = board.live_view(None, "iteration", None)
    assert state is None and level == "warn" and len(figs) == len(LIVE_FIGURES)
    board.close()


def test_live_view_appends_only_new_points(store):
    rid = new_run(store)
    write_iterations(store, rid, 0, 2)
    store.append_eval(rid, {"iteration": 2, "virtual_time_s": 3.0, "test_loss": 0.5, "test_accuracy": 0.4})
    store.flush()
    board = Dashboard(store.path)
    figs, state, message, level = board.live_view(rid, "iteration", None)
    acc = dict(zip(LIVE_FIGURES, figs))["accuracy"]
    assert [t["x"] for t in acc["data"]] == [[2], [0, 1, 2], [2]]
    assert state["iter"] == 2 and state["stride"] == 1 and "running: iteration 2" in message

    # Nothing new: nothing is sent.
    figs, state2, _, _ = board.live_view(rid, "iteration", state)
    assert all(f is no_update for f in figs[:4]) and state2["iter"] == 2

    # Two more iterations, one eval and a control event: only those points travel.
    write_iterations(store, rid, 3, 4)
    store.append_eval(rid, {"iteration": 4, "virtual_time_s": 5.0, "test_loss": 0.4, "test_accuracy": 0.6})
    store.append_event(rid, "control", {"target": "*", "changes": {"bandwidth_mbps": 2.0}},
                       iteration=3, virtual_time_s=4.0)
    store.flush()
    figs, state3, _, _ = board.live_view(rid, "iteration", state2)
    live = dict(zip(LIVE_FIGURES, figs))
    acc_ops = ops(live["accuracy"])
    assert ("Extend", ["data", 0, "x"], [4]) in acc_ops and ("Extend", ["data", 0, "y"], [0.6]) in acc_ops
    assert ("Extend", ["data", 1, "x"], [3, 4]) in acc_ops
    shapes = [v for op, loc, v in acc_ops if loc == ["layout", "shapes"]][0]
    assert [s["x0"] for s in shapes] == [3]
    rate_ops = ops(live["rate"])
    # cumulative bytes continue from 3 x 100 bytes up (800 bits) and 3 x 25 down (200 bits).
    cum_up = state["uids"]["rate"].index("cum_up")
    cum_down = state["uids"]["rate"].index("cum_down")
    assert ("Extend", ["data", cum_up, "y"], [400.0, 500.0]) in rate_ops
    assert ("Extend", ["data", cum_down, "y"], [100.0, 125.0]) in rate_ops
    lat_ops = ops(live["latency"])
    assert ("Extend", ["data", 1, "y"], [3.0, 4.0]) in lat_ops  # uplink_s of iterations 3, 4
    assert isinstance(live["topology"], dict)  # small: redrawn whole with the new window
    assert state3["iter"] == 4 and state3["eval"] == 4 and state3["event"] >= 1
    board.close()


def test_left_out_markers_appended_live_name_who_was_left_out(store):
    """An iteration that went without w0 (a deadline) arrives after the first drawing: its
    marker travels with its hover text, as a fresh drawing has it."""
    rid = new_run(store)
    write_iterations(store, rid, 0, 1)
    board = Dashboard(store.path)
    _, state, _, _ = board.live_view(rid, "iteration", None)
    store.append_iteration(
        rid, {"iteration": 2, "virtual_time_s": 3.0, "train_loss": 1.0, "bits_up": 0,
              "bits_down": 200, "compute_s": 0.1, "uplink_s": 0.4, "aggregation_s": 0.0,
              "downlink_s": 0.1, "left_out": 1},
        nodes=[{"iteration": 2, "node": "w0", "bits_up": 0, "bits_down": 200, "left_out": "deadline"}])
    store.flush()
    figs, state, _, _ = board.live_view(rid, "iteration", state)
    i = state["uids"]["latency"].index("left_out")
    lat_ops = ops(dict(zip(LIVE_FIGURES, figs))["latency"])
    assert ("Extend", ["data", i, "x"], [2]) in lat_ops
    assert ("Extend", ["data", i, "y"], [0.6]) in lat_ops
    assert ("Extend", ["data", i, "text"], ["left out: w0 (deadline)"]) in lat_ops
    fresh, _, _, _ = board.live_view(rid, "iteration", None)
    assert dict(zip(LIVE_FIGURES, fresh))["latency"]["data"][i]["text"] == ["left out: w0 (deadline)"]
    board.close()


def test_long_runs_are_drawn_in_complete_bins(store):
    rid = new_run(store)
    write_iterations(store, rid, 0, 6)  # 7 iterations
    board = Dashboard(store.path, max_points=3)  # stride ceil(7 / 3) = 3
    figs, state, _, _ = board.live_view(rid, "iteration", None)
    lat = dict(zip(LIVE_FIGURES, figs))["latency"]
    uplink = lat["data"][1]
    # Bins 0-2 and 3-5 are complete; 6 waits for 7 and 8 while the run goes on.
    assert uplink["x"] == [2, 5] and uplink["y"] == [1.0, 4.0]  # means of 0,1,2 and 3,4,5
    assert state["stride"] == 3 and state["iter"] == 5
    write_iterations(store, rid, 7, 8)
    figs, state, _, _ = board.live_view(rid, "iteration", state)
    assert ("Extend", ["data", 1, "y"], [7.0]) in ops(dict(zip(LIVE_FIGURES, figs))["latency"])
    board.close()


def test_failed_run_and_run_without_eval_show_messages(store):
    rid = new_run(store)
    write_iterations(store, rid, 0, 1)
    board = Dashboard(store.path)
    _, _, message, level = board.live_view(rid, "iteration", None)
    assert "No evaluation yet" in message and level == "info"
    store.finish_run(rid, "failed", "ExperimentError: gradient is NaN at iteration 1")
    _, _, message, level = board.live_view(rid, "iteration", None)
    assert level == "error" and "failed: ExperimentError: gradient is NaN at iteration 1" in message
    _, _, message, level = board.live_view(999, "iteration", None)
    assert "Run 999 is not in the store" in message
    board.close()


def test_switching_x_redraws_only_the_accuracy_figure(store):
    rid = new_run(store)
    write_iterations(store, rid, 0, 2)
    board = Dashboard(store.path)
    _, state, _, _ = board.live_view(rid, "iteration", None)
    figs, state, _, _ = board.live_view(rid, "virtual_time_s", state)
    assert figs[0]["data"][1]["x"] == [1.0, 2.0, 3.0]
    assert all(f is no_update for f in figs[1:]) and state["x"] == "virtual_time_s"
    board.close()


def test_steering_writes_validated_requests(store):
    rid = new_run(store)
    board = Dashboard(store.path)
    rows, options, disabled, hint = board.controls_view(rid)
    assert [o["value"] for o in options] == ["*", "w0-server", "w0->server", "server->w0"]
    assert disabled is False
    message, level = board.submit_control(rid, "w0->server", 2.5, None, 0.1)
    assert level == "ok" and "next iteration" in message
    (pending,) = store.pending_controls(rid)
    assert pending["target"] == "w0->server" and pending["changes"] == {"bandwidth_mbps": 2.5, "loss_p": 0.1}
    message, level = board.submit_control(rid, "w9->server", 2.5, None, None)
    assert level == "error" and "'w9->server' is not a link" in message
    message, level = board.submit_control(rid, "*", -1, None, None)
    assert level == "error" and "bandwidth_mbps=-1.0 is out of range" in message
    message, level = board.submit_control(rid, "*", None, None, None)
    assert level == "warn"
    store.finish_run(rid, "completed")
    message, level = board.submit_control(rid, "*", 5, None, None)
    assert level == "error" and "controls apply only to a running run" in message
    assert board.controls_view(rid)[2] is True  # Apply disabled once the run ended
    assert len(store.controls(rid)) == 1
    board.close()


def test_compare_view_against_the_fp32_run(store):
    fp32 = new_run(store, "fp32", method="none")
    write_iterations(store, fp32, 0, 3, bits_up=800)  # 1000 bits per iteration
    store.append_eval(fp32, {"iteration": 3, "virtual_time_s": 4.0, "test_accuracy": 0.9})
    topk = new_run(store, "topk", method="topk")
    write_iterations(store, topk, 0, 1, bits_up=50)  # 250 bits per iteration
    store.flush()
    board = Dashboard(store.path)
    fig, rows, message = board.compare_view([topk], 0.8, "virtual_time_s")
    # The fp32 run is not chosen but is in the store: it is still the baseline.
    assert rows[0]["compression_ratio"] == 4.0 and "fp32 run #1" in message
    fig, rows, message = board.compare_view([fp32, topk], 0.8, "iteration")
    assert [r["name"] for r in rows] == ["fp32", "topk"]
    assert rows[0]["iterations_to_target"] == 3 and rows[1]["time_to_target_s"] is None
    assert len(fig["data"]) == 4
    _, rows, message = board.compare_view([], 0.8, "iteration")
    assert rows == [] and "Tick one or more runs" in message
    _, _, message = board.compare_view([fp32], 1.5, "iteration")
    assert "out of range" in message
    board.close()


def noisy_iterations(store, rid, first, last):
    """Iterations whose bits alternate 1000/100 (a noisy curve) with one link row each."""
    for i in range(first, last + 1):
        up = 1000 if i % 2 == 0 else 100
        store.append_iteration(
            rid, {"iteration": i, "virtual_time_s": 0.5 * (i + 1), "train_loss": float(up),
                  "bits_up": up, "bits_down": 10, "compute_s": 0.1, "uplink_s": 0.01 * up,
                  "aggregation_s": 0.0, "downlink_s": 0.1},
            nodes=[{"iteration": i, "node": "w0", "bits_up": up, "bits_down": 10}],
            links=[{"iteration": i, "src": "w0", "dst": "server", "bytes": up // 8, "packets": 1,
                    "lost": 0, "retransmitted": 0, "busy_s": up / 1e6}])
    store.flush()


def test_smoothed_points_appended_live_equal_a_fresh_drawing(store):
    """The EMA of points appended tick by tick continues from the last drawn value: after the
    ticks, every smoothed trace equals what a fresh page would draw from all the rows."""
    rid = new_run(store)
    noisy_iterations(store, rid, 0, 4)
    board = Dashboard(store.path)
    figs, state, _, _ = board.live_view(rid, "iteration", None, "log", 0.8)
    drawn = {name: [[list(t["x"]), list(t["y"])] for t in fig["data"]]
             for name, fig in zip(LIVE_FIGURES, figs) if name != "topology"}
    rate_up = state["uids"]["rate"].index("wk_mean")   # the workers' uplink band: smoothed
    assert drawn["rate"][rate_up][1][:2] == [1000, 0.8 * 1000 + 0.2 * 100]
    total = state["uids"]["rate"].index("bits_up")      # the total's steps: never smoothed
    assert drawn["rate"][total][1][:2] == [1000, 100]
    for last in (6, 9):
        noisy_iterations(store, rid, state["iter"] + 1, last)
        figs, state, _, _ = board.live_view(rid, "iteration", state, "log", 0.8)
        for name, patch in zip(LIVE_FIGURES, figs):
            for op, loc, value in ops(patch) if name in drawn and patch is not no_update else []:
                if op == "Extend":
                    drawn[name][loc[1]][0 if loc[2] == "x" else 1] += value
    fresh, _, _, _ = board.live_view(rid, "iteration", None, "log", 0.8)
    for name, fig in zip(LIVE_FIGURES, fresh):
        if name in drawn:
            for (xs, ys), t in zip(drawn[name], fig["data"]):
                assert xs == list(t["x"]), (name, t["uid"])
                assert ys == pytest.approx(list(t["y"])), (name, t["uid"])
    assert len(drawn["rate"][rate_up][0]) == 10
    board.close()


def test_changing_the_rate_scale_or_smoothing_redraws_the_figures(store):
    rid = new_run(store)
    noisy_iterations(store, rid, 0, 3)
    board = Dashboard(store.path)
    figs, state, _, _ = board.live_view(rid, "iteration", None)
    rate = dict(zip(LIVE_FIGURES, figs))["rate"]
    assert rate["layout"]["yaxis"]["type"] == "log" and state["smoothing"] == 0.0
    figs, state, _, _ = board.live_view(rid, "iteration", state, "linear", 0.0)
    rate = dict(zip(LIVE_FIGURES, figs))["rate"]
    assert rate["layout"]["yaxis"]["type"] == "linear" and state["scale"] == "linear"
    figs, state, _, _ = board.live_view(rid, "iteration", state, "linear", 0.5)
    lat = dict(zip(LIVE_FIGURES, figs))["latency"]
    assert lat["data"][1]["y"][:2] == [10.0, 0.5 * 10.0 + 0.5 * 1.0]  # uplink_s smoothed
    board.close()


def test_stage_bands_follow_the_newest_iteration(store):
    rid = new_run(store, method="lgc_ps")
    store.append_event(rid, "stage", {"stage": "warmup"}, iteration=0, virtual_time_s=0.0)
    store.append_event(rid, "stage", {"stage": "lgc"}, iteration=2, virtual_time_s=1.5)
    noisy_iterations(store, rid, 0, 3)
    board = Dashboard(store.path)
    figs, state, _, _ = board.live_view(rid, "iteration", None)
    rects = lambda shapes: [(s["x0"], s["x1"]) for s in shapes if s["type"] == "rect"]  # noqa: E731
    assert rects(dict(zip(LIVE_FIGURES, figs))["rate"]["layout"]["shapes"]) == [(0, 2), (2, 3)]
    channel = dict(zip(LIVE_FIGURES, figs))["channel"]
    assert rects(channel["layout"]["shapes"]) == [(0.0, 1.5), (1.5, 2.0)]  # virtual time
    noisy_iterations(store, rid, 4, 5)
    figs, state, _, _ = board.live_view(rid, "iteration", state)
    live = dict(zip(LIVE_FIGURES, figs))
    shapes = [v for op, loc, v in ops(live["rate"]) if loc == ["layout", "shapes"]][0]
    assert rects(shapes) == [(0, 2), (2, 5)]
    shapes = [v for op, loc, v in ops(live["channel"]) if loc == ["layout", "shapes"]][0]
    assert rects(shapes) == [(0.0, 1.5), (1.5, 3.0)]
    board.close()


def sweep_run(store, params, accuracies, times, joules=None, sweep="qs"):
    """A member of `sweep` at grid values `params` (recorded as `testbed sweep` does), an
    evaluation per iteration; `joules`: every worker's energy in each iteration."""
    label = ",".join(f"{k}={v}" for k, v in params.items())
    rid = store.create_run(f"{sweep}[{label}]", {}, method="topk")
    store.set_sweep(rid, sweep, params)
    for i, (acc, t) in enumerate(zip(accuracies, times)):
        if joules is not None:
            store.append_iteration(rid, {"iteration": i, "virtual_time_s": t, "energy_j": joules[i]})
        store.append_eval(rid, {"iteration": i, "virtual_time_s": t, "test_accuracy": acc})
    store.finish_run(rid, "completed")
    return rid


def test_sweep_view_averages_seeds_over_the_grid(store):
    new_run(store, "not-a-sweep")
    new_run(store, "qs[bandwidth_mbps=5,ratio=0.01,seed=0]")  # named like one, made by `run`
    # accuracy over (bandwidth, ratio, seed); time to 90% only where a run reaches it
    # energy to 90%: the joules of the iterations up to the evaluation that reached it
    sweep_run(store, {"bandwidth_mbps": "2", "ratio": "0.01", "seed": "0"}, [0.5, 0.8], [1.0, 2.0], [5.0, 7.0])
    sweep_run(store, {"bandwidth_mbps": "2", "ratio": "0.01", "seed": "1"}, [0.6, 0.9], [1.0, 3.0], [4.0, 6.0])
    sweep_run(store, {"bandwidth_mbps": "20", "ratio": "0.01", "seed": "0"}, [0.7, 0.95], [0.1, 0.2], [1.0, 2.0])
    sweep_run(store, {"bandwidth_mbps": "20", "ratio": "0.01", "seed": "1"}, [0.91, 0.97], [0.1, 0.2], [3.0, 9.0])
    sweep_run(store, {"bandwidth_mbps": "2", "ratio": "0.1", "seed": "0"}, [0.4], [1.0])
    sweep_run(store, {"bandwidth_mbps": "2", "ratio": "0.1", "seed": "1"}, [0.2], [1.0])
    board = Dashboard(store.path)
    fig, sweeps, base, keys, x, y_options, y, message = board.sweep_view(None, None, None, 0.9)
    assert sweeps == [{"label": "qs (6 runs)", "value": "qs"}] and base == "qs"
    assert [k["value"] for k in keys] == ["bandwidth_mbps", "ratio", "seed"]
    assert (x, y) == ("bandwidth_mbps", "ratio")
    assert "each cell averages over seed" in message
    acc, ttt, energy = fig["data"]
    assert acc["x"] == ["2", "20"] and acc["y"] == ["0.01", "0.1"]
    assert acc["z"][0] == pytest.approx([(0.8 + 0.9) / 2, (0.95 + 0.97) / 2])
    assert acc["z"][1] == pytest.approx([0.3, None])  # bandwidth 20, ratio 0.1: never run
    assert ttt["z"][0] == pytest.approx([3.0, (0.2 + 0.1) / 2])  # seed 0 at 2 Mb/s never got there
    assert ttt["text"][0][0] == "3.00 s (1/2)" and ttt["text"][1][0] == "never"
    # 2 Mb/s: only seed 1 reached 90%, at iteration 1 (4 + 6 J); 20 Mb/s: seed 0 at iteration 1
    # (1 + 2 J), seed 1 at iteration 0 (3 J); ratio 0.1 never reached it: no energy
    assert energy["z"][0] == pytest.approx([10.0, (3.0 + 3.0) / 2])
    assert energy["z"][1] == [None, None] and energy["text"][0][0] == "10 J"
    # seeds across, one row
    fig, *_, y, _ = board.sweep_view("qs", "seed", "-", 0.9)
    assert fig["data"][0]["x"] == ["0", "1"] and fig["data"][0]["y"] == ["all"] and y == "-"
    board.close()


def test_sweep_view_without_a_sweep_says_how_to_make_one(store):
    new_run(store)
    board = Dashboard(store.path)
    fig, sweeps, base, *_, message = board.sweep_view(None, None, None, 0.9)
    assert sweeps == [] and base is None and "testbed sweep FILE --grid" in message
    board.close()
