"""The federated panel (dashboards/panels/federated.py) on real federated runs: what it draws,
first load and appended ticks, equals the store's own participants and staleness rows; a sync
run draws participants only; a data-parallel run shows a one-line note. FedBuff's histogram of
single updates' staleness counts what the buffer order gives by hand, binned or not."""
import os
from collections import Counter

from dashboards.callbacks import LIVE_FIGURES, Dashboard
from dashboards.export import run_figures
from dashboards.panels import BY_NAME
from tests.testbed.test_federated_driver import make, start

FEDBUFF = ("clients = 4\nclients_per_round = 2\nlocal_steps = 1\nmode = 'fedbuff'\n"
           "concurrency = 3\nbuffer_size = 2")
PANEL = LIVE_FIGURES.index("federated")


def traces(fig) -> dict:
    data = fig["data"] if isinstance(fig, dict) else [t.to_plotly_json() for t in fig.data]
    return {t["uid"]: (list(t["x"]), list(t["y"])) for t in data}


def column(rows, key) -> tuple[list, list]:
    return [r["iteration"] for r in rows], [r[key] for r in rows]


def test_a_fedbuff_run_is_drawn_from_its_participants_and_staleness_rows(tmp_path):
    exp, store = start(make(tmp_path, FEDBUFF, iterations=4), tmp_path)
    exp.run()
    rows = store.iterations(exp.run_id)
    assert any(r["staleness"] for r in rows)   # three in flight, two per step: some are stale
    board = Dashboard(store.path)
    figs, _, _, _ = board.live_view(exp.run_id, "iteration", None)
    board.close()
    drawn = traces(figs[PANEL])
    stale = [n["staleness"] for n in store.node_iterations(exp.run_id) if n["staleness"] is not None]
    assert drawn == {"participants": column(rows, "participants"),
                     "staleness": column(rows, "staleness"),
                     "staleness_hist": (stale, [1] * len(stale))}
    assert "mean staleness per server step" in figs[PANEL]["layout"]["title"]["text"]
    assert figs[PANEL]["layout"]["xaxis2"]["title"]["text"] == "server step"
    assert figs[LIVE_FIGURES.index("rate")]["layout"]["xaxis2"]["title"]["text"] == "server step"
    _, exported = run_figures(store, exp.run_id)
    assert traces(exported[sum(len(p.exports) for p in BY_NAME.values()
                               if LIVE_FIGURES.index(p.name) < PANEL)]) == drawn
    store.close()


def test_the_live_view_appends_the_new_rounds(tmp_path):
    """The real run's rows written again, into a run of the same config, in two halves: the
    tick appends the second half's values to the traces the first load drew."""
    exp, store = start(make(tmp_path, FEDBUFF, iterations=4), tmp_path)
    exp.run()
    rows, run = store.iterations(exp.run_id), store.run(exp.run_id)
    nodes = store.node_iterations(exp.run_id)
    rid = store.create_run("copy", run["config"], method="none", pid=os.getpid())

    def copy(part):
        for r in part:
            store.append_iteration(rid, r, nodes=[n for n in nodes if n["iteration"] == r["iteration"]])
        store.flush()
        return [n["staleness"] for r in part for n in nodes
                if n["iteration"] == r["iteration"] and n["staleness"] is not None]

    stale = copy(rows[:2])
    board = Dashboard(store.path)
    figs, state, _, _ = board.live_view(rid, "iteration", None)
    assert traces(figs[PANEL]) == {"participants": column(rows[:2], "participants"),
                                   "staleness": column(rows[:2], "staleness"),
                                   "staleness_hist": (stale, [1] * len(stale))}
    stale = copy(rows[2:])
    figs, state, _, _ = board.live_view(rid, "iteration", state)
    board.close()
    ops = figs[PANEL].to_plotly_json()["operations"]
    appended = {(o["location"][1], o["location"][2]): o["params"]["value"] for o in ops
                if o["location"][0] == "data"}
    assert appended == {(0, "x"): column(rows[2:], "participants")[0],
                        (0, "y"): column(rows[2:], "participants")[1],
                        (1, "x"): column(rows[2:], "staleness")[0],
                        (1, "y"): column(rows[2:], "staleness")[1],
                        (2, "x"): stale, (2, "y"): [1] * len(stale)}
    store.close()


def test_a_sync_run_shows_participants_per_round_and_a_data_parallel_run_a_note(tmp_path):
    exp, store = start(make(tmp_path, "clients = 3\nclients_per_round = 2\nlocal_steps = 1",
                            iterations=2), tmp_path)
    exp.run()
    plain = store.create_run("dp", {"federated": None}, method="none", pid=os.getpid())
    store.append_iteration(plain, {"iteration": 0, "virtual_time_s": 1.0, "train_loss": 1.0})
    store.flush()
    board = Dashboard(store.path)
    sync, _, _, _ = board.live_view(exp.run_id, "iteration", None)
    dp, _, _, _ = board.live_view(plain, "iteration", None)
    board.close()
    assert traces(sync[PANEL]) == {"participants": column(store.iterations(exp.run_id), "participants")}
    assert sync[PANEL]["layout"]["xaxis"]["title"]["text"] == "round"
    assert dp[PANEL]["data"] == [] and [a["text"] for a in dp[PANEL]["layout"]["annotations"]] == [
        "Not a federated run."]
    store.close()


def test_the_staleness_histogram_counts_each_update_as_the_buffer_order_gives_it(tmp_path):
    """Three slots in flight, two updates per step, no download, equal compute: every refilled
    client ends its compute together, after those still in flight, ties going to the lower slot.
    Step 0 takes slots 0, 1 (version 0, staleness 0, 0); they are refilled at version 1, so
    step 1 takes slot 2 (from version 0: staleness 1) and slot 0 (0); then slot 1 (version 1 at
    step 2: 1) and slot 0 (0); slot 2 (version 2 at step 3: 1) and slot 0; slot 1 and slot 0.
    The store holds each update's staleness on its slot's row; the histogram counts 6 updates
    at 0 and 4 at 1, on the first load and in the long-run view (bins of 3 steps)."""
    fed = ("clients = 4\nclients_per_round = 2\nlocal_steps = 1\nmode = 'fedbuff'\n"
           "concurrency = 3\nbuffer_size = 2\ndownload_model = false")
    exp, store = start(make(tmp_path, fed, iterations=5), tmp_path)
    exp.run()
    w = exp.driver.workers
    by_hand = [{w[0]: 0, w[1]: 0}, {w[2]: 1, w[0]: 0}, {w[1]: 1, w[0]: 0}, {w[2]: 1, w[0]: 0},
               {w[1]: 1, w[0]: 0}]
    nodes = store.node_iterations(exp.run_id)
    assert [{n["node"]: n["staleness"] for n in nodes if n["iteration"] == it and n["staleness"] is not None}
            for it in range(5)] == by_hand
    assert [r["staleness"] for r in store.iterations(exp.run_id)] == [0.0] + [0.5] * 4
    for max_points in (600, 2):   # stride 1, then 3
        board = Dashboard(store.path, max_points=max_points)
        figs, state, _, _ = board.live_view(exp.run_id, "iteration", None)
        board.close()
        assert state["stride"] == (1 if max_points == 600 else 3)
        (hist,) = [t for t in figs[PANEL]["data"] if t["uid"] == "staleness_hist"]
        assert hist["histfunc"] == "sum" and set(hist["y"]) == {1}
        assert Counter(hist["x"]) == {0: 6, 1: 4}
    store.close()


def test_a_flower_run_shows_its_replies_per_round_by_outcome(tmp_path):
    """A Flower run (node 3 of the echo app raises in round 1) draws the store's replies_ok,
    _failed, _lost and _late per round, and its page shows the panel."""
    from testbed import cli
    from testbed.records.store import Store
    from tests.testbed.flower.flower_runs import ECHO

    db = tmp_path / "runs.db"
    assert cli.main(["flower", "run", str(ECHO), "--store", str(db), "--quiet",
                     "--run-config", "timeout=5", "--run-config", "raise-on=3"]) == 0
    with Store(db, readonly=True) as store:
        rows = store.iterations(1)
    board = Dashboard(db)
    figs, _, _, _ = board.live_view(1, "iteration", None)
    styles, _ = board.panels_view(1)
    board.close()
    assert traces(figs[PANEL]) == {f"replies_{k}": column(rows, f"replies_{k}")
                                   for k in ("ok", "failed", "lost", "late")}
    assert traces(figs[PANEL])["replies_failed"] == ([0, 1, 2], [0, 1, 0])
    assert "replies per round" in figs[PANEL]["layout"]["title"]["text"]
    assert styles[PANEL].get("display") != "none"
