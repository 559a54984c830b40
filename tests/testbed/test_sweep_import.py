"""`Store.import_run`: a sweep point's run copied into the sweep's store whole, in one
transaction, with new ids, and with its sweep membership; a point run again replaces the
earlier member that did not complete."""
import pytest

from testbed.records.store import Store


def write_point(path, name="p[seed=0]", *, finish="completed", iterations=3):
    """A point's store written by hand: `iterations` rows of every kind, two events."""
    with Store(path) as s:
        rid = s.create_run(name, {"run": {"name": name}}, method="topk", workers=2)
        for i in range(iterations):
            s.append_iteration(rid, {"iteration": i, "virtual_time_s": 0.5 * (i + 1), "wall_time_s": 0.01,
                                     "bits_up": 100 * (i + 1), "bits_down": 10, "stage": "x"},
                               nodes=[{"iteration": i, "node": n, "bits_up": 50 * (i + 1)} for n in ("w0", "w1")],
                               links=[{"iteration": i, "src": "w0", "dst": "server", "bytes": 7 + i}])
            s.append_event(rid, "tick", {"i": i}, iteration=i)
        s.append_eval(rid, {"iteration": 2, "virtual_time_s": 1.5, "test_accuracy": 0.75})
        s.flush()
        if finish:
            s.finish_run(rid, finish, None if finish == "completed" else "boom")
        # else: left `running` by its writer, this very process (so no open of the store marks
        # it dead): the caller of import_run says the writer has ended


def rows(store, run_id):
    out = store.export(run_id)
    for e in out["events"]:
        e.pop("id")
    return {k: out[k] for k in ("iterations", "nodes", "evals", "links", "events")}


def test_a_point_run_arrives_whole_with_a_new_id_and_its_membership(tmp_path):
    point, sweep = tmp_path / "p.db", tmp_path / "sweep.db"
    write_point(point)
    with Store(sweep) as s:           # the sweep's store already holds two runs and an event
        for name in ("a", "b"):
            rid = s.create_run(name, {})
            s.append_event(rid, "other")
        s.flush()
        new = s.import_run(point, sweep="p", params={"seed": "0"}, sweep_key="k1")
        assert new == 3
        with Store(point, readonly=True) as src:
            assert rows(s, new) == rows(src, 1)
            assert rows(s, new)["iterations"][2]["bits_up"] == 300      # the hand-made figure
            assert [e["detail"] for e in rows(s, new)["events"]] == [{"i": 0}, {"i": 1}, {"i": 2}]
        run = s.run(new)
        assert (run["name"], run["status"], run["sweep"], run["sweep_params"], run["sweep_key"]) == (
            "p[seed=0]", "completed", "p", {"seed": "0"}, "k1")
        # the summary columns come with it: 3 iterations of (100 i + 10) bits, best accuracy
        assert (run["last_iteration"], run["total_bits"], run["best_accuracy"]) == (2, 630, 0.75)
        assert s.sweep_members("k1") == {"p[seed=0]": {"id": 3, "status": "completed"}}
        assert len(s.events(1)) == 1 and s.db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 5


def test_a_run_left_running_arrives_failed_and_a_rerun_replaces_it_as_member(tmp_path):
    sweep = tmp_path / "sweep.db"
    write_point(tmp_path / "killed.db", finish=None)
    write_point(tmp_path / "again.db")
    write_point(tmp_path / "other.db", name="p[seed=1]", finish="failed")
    with Store(sweep) as s:
        first = s.import_run(tmp_path / "killed.db", sweep="p", params={"seed": "0"}, sweep_key="k")
        assert s.run(first)["status"] == "failed" and "ended without finishing" in s.run(first)["error"]
        other = s.import_run(tmp_path / "other.db", sweep="p", params={"seed": "1"}, sweep_key="k")
        second = s.import_run(tmp_path / "again.db", sweep="p", params={"seed": "0"}, sweep_key="k")
        assert s.sweep_members("k") == {"p[seed=1]": {"id": other, "status": "failed"},
                                        "p[seed=0]": {"id": second, "status": "completed"}}
        assert s.run(first)["sweep"] is None and len(s.iterations(first)) == 3  # its rows stay


def test_a_store_of_two_runs_is_refused_and_nothing_is_written(tmp_path):
    point = tmp_path / "two.db"
    write_point(point)
    write_point(point, name="q")
    with Store(tmp_path / "sweep.db") as s:
        with pytest.raises(LookupError, match="holds 2 runs"):
            s.import_run(point, sweep="p", params={}, sweep_key="k")
        assert s.runs() == [] and s.db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0] == 0
        assert [r[1] for r in s.db.execute("PRAGMA database_list")] == ["main"]  # detached again
