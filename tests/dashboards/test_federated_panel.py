"""The federated panel (dashboards/panels/federated.py) on real federated runs: what it draws,
first load and appended ticks, equals the store's own participants and staleness rows; a sync
run draws participants only; a data-parallel run shows a one-line note."""
import os

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
    assert drawn == {"participants": column(rows, "participants"),
                     "staleness": column(rows, "staleness")}
    assert "mean staleness per server step" in figs[PANEL]["layout"]["title"]["text"]
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
    rid = store.create_run("copy", run["config"], method="none", pid=os.getpid())
    for r in rows[:2]:
        store.append_iteration(rid, r)
    store.flush()
    board = Dashboard(store.path)
    figs, state, _, _ = board.live_view(rid, "iteration", None)
    assert traces(figs[PANEL]) == {"participants": column(rows[:2], "participants"),
                                   "staleness": column(rows[:2], "staleness")}
    for r in rows[2:]:
        store.append_iteration(rid, r)
    store.flush()
    figs, state, _, _ = board.live_view(rid, "iteration", state)
    board.close()
    ops = figs[PANEL].to_plotly_json()["operations"]
    appended = {o["location"][1]: o["params"]["value"] for o in ops if o["location"][0] == "data" and o["location"][2] == "y"}
    assert appended == {0: column(rows[2:], "participants")[1], 1: column(rows[2:], "staleness")[1]}
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
