"""`testbed sweep` records each run's membership in the store's sweep columns, and a store made
before those columns gets them from its runs' names once, when opened for writing."""
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.records.store import Store
from testbed.sweeps import Point, run_sweep, start_worker_server

QUICK = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"
TINY = ["run.iterations=1", "run.eval_every=1", "run.device=cpu", "model.name=mlp",
        "data.dataset=digits", "network.workers=2"]


def test_sweep_records_each_run_as_a_member_at_its_grid_values(tmp_path, capsys):
    db = tmp_path / "sweep.db"
    with Store(db) as s:  # a run named as a sweep's would be, made by `testbed run`: no member
        s.create_run("qs[seed=0]", {}, method="topk")
    code = main(["sweep", str(QUICK), "--store", str(db), "--quiet", "--seeds", "3", "--jobs", "1",
                 "--grid", "compression.method=none,topk", *sum((["--set", s] for s in TINY), [])])
    assert code == 0, capsys.readouterr().err
    with Store(db, readonly=True) as s:
        runs = s.runs()
    assert [(r["name"], r["sweep"], r["sweep_params"]) for r in runs] == [
        ("qs[seed=0]", None, None),
        ("quickstart[method=none,seed=3]", "quickstart", {"method": "none", "seed": "3"}),
        ("quickstart[method=topk,seed=3]", "quickstart", {"method": "topk", "seed": "3"})]


def test_a_store_made_before_the_sweep_columns_migrates_them_from_the_names(tmp_path):
    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)          # the runs table as stores had it before the columns
    db.executescript("""
        CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, method TEXT,
            topology TEXT, workers INTEGER, bandwidth_mbps REAL, status TEXT NOT NULL,
            config_json TEXT NOT NULL, graph_json TEXT, started_at REAL, ended_at REAL,
            pid INTEGER, host TEXT, error TEXT, last_iteration INTEGER, virtual_time_s REAL,
            total_bits INTEGER NOT NULL DEFAULT 0, best_accuracy REAL);
        INSERT INTO runs (name, status, config_json) VALUES
            ('qs[bandwidth_mbps=2,seed=0]', 'completed', '{}'), ('plain', 'completed', '{}'),
            ('odd[no-equals]', 'completed', '{}'), ('a[b]c[ratio=0.1]', 'completed', '{}');
    """)
    db.commit()
    db.close()
    with Store(old, readonly=True) as s:   # read as it is: no column, no sweep
        assert [r["sweep"] for r in s.runs()] == [None] * 4
    with Store(old) as s:                  # opened for writing: migrated in place, once
        assert [(r["sweep"], r["sweep_params"]) for r in s.runs()] == [
            ("qs", {"bandwidth_mbps": "2", "seed": "0"}), (None, None), (None, None),
            ("a[b]c", {"ratio": "0.1"})]
        s.set_sweep(2, "other", {"k": "v"})
    with Store(old) as s:                  # a second open leaves the recorded values alone
        assert s.run(2)["sweep"] == "other" and s.run(2)["sweep_params"] == {"k": "v"}
        assert s.run(1)["sweep_params"] == {"bandwidth_mbps": "2", "seed": "0"}


def test_ray_missing_jobs_zero_and_a_working_dir_without_the_file_are_refused_in_one_line(
        tmp_path, capsys, monkeypatch):
    db = tmp_path / "never.db"
    base = ["sweep", str(QUICK), "--store", str(db), "--seeds", "0", *sum((["--set", s] for s in TINY), [])]
    monkeypatch.setitem(sys.modules, "ray", None)          # import ray -> ImportError
    assert main([*base, "--ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("testbed: error: --ray: Ray is not installed; install it with "
                       "pip install 'lgc-testbed[cluster]'")
    assert main([*base, "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err
    assert main([*base, "--ray", "auto", "--ray-working-dir", str(tmp_path)]) == 2
    assert "a folder that holds the experiment file" in capsys.readouterr().err
    assert not db.exists() and not list(tmp_path.iterdir())   # nothing written


def test_a_refused_point_is_one_line_and_the_others_still_run(tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA: run.device = cuda must be refused")
    db = tmp_path / "s.db"
    sets = [s for s in TINY if not s.startswith("run.device")]
    code = main(["sweep", str(QUICK), "--store", str(db), "--quiet", "--jobs", "1",
                 "--grid", "run.device=cuda,cpu", *sum((["--set", s] for s in sets), [])])
    out = capsys.readouterr().out
    assert code == 1, out
    refused = [line for line in out.splitlines() if " refused: " in line]
    assert len(refused) == 1 and refused[0].startswith("[0/2 done] quickstart[device=cuda] refused: ")
    assert "cuda" in refused[0].split("refused: ", 1)[1]
    assert "sweep done: 1 of 2 runs completed" in out
    with Store(db, readonly=True) as s:   # the refused point left no run
        assert [(r["name"], r["status"]) for r in s.runs()] == [("quickstart[device=cpu]", "completed")]


def probe_runner(point, store, quiet=True):
    """A point's runner that reports the process it ran in (or kills it, when asked to)."""
    if point.extra.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(point.extra.get("seconds", 0))
    return {"status": "completed", "line": point.name, "pid": os.getpid(), "cwd": os.getcwd(),
            "dynamo_loaded": "torch._dynamo" in sys.modules,
            "omp": os.environ.get("OMP_NUM_THREADS"), "marker": os.environ.get("SWEEP_TEST_MARK")}


def probe_points(n, die=(), seconds=0.0):
    return [Point(index=i, name=f"p{i}", file=str(QUICK), runner=f"{__name__}:probe_runner",
                  extra={"die": i in die, "seconds": seconds}) for i in range(1, n + 1)]


def test_jobs_workers_start_once_with_the_run_imported_and_the_sweeps_setting(
        tmp_path, monkeypatch):
    """`--jobs 2` over 6 points: two worker processes run them all, in the sweep's working
    directory and environment, with the thread policy's OMP_NUM_THREADS, and without torch's
    compiler stack (a second of imports no run needs)."""
    start_worker_server()      # the server the workers fork from, started here and now
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SWEEP_TEST_MARK", "set after the server started")
    outcomes = run_sweep(probe_points(6), "s.db", sweep="probe", key="k", jobs=2, quiet=True,
                         log=lambda _line: None)
    results = [o.result for o in outcomes]
    assert [o.status for o in outcomes] == ["completed"] * 6
    assert len({r["pid"] for r in results}) == 2 and os.getpid() not in {r["pid"] for r in results}
    assert not any(r["dynamo_loaded"] for r in results)
    assert {(r["cwd"], r["omp"], r["marker"]) for r in results} == {
        (str(tmp_path), "1", "set after the server started")}


def test_a_worker_killed_mid_point_fails_that_point_only_and_is_replaced(tmp_path):
    # points of 0.5 s: the other worker is busy when the replacement starts, so it takes one
    outcomes = run_sweep(probe_points(5, die={2}, seconds=0.5), str(tmp_path / "s.db"), sweep="probe", key="k",
                         jobs=2, quiet=True, log=lambda _line: None)
    assert [o.status for o in outcomes] == ["completed", "failed", "completed", "completed",
                                            "completed"]
    assert "killed by SIGKILL" in outcomes[1].line
    assert len({o.result["pid"] for o in outcomes if o.status == "completed"}) >= 2


# ----------------------------------------------------------------------------- --ray's address
def test_a_ray_address_where_nothing_answers_is_one_line_within_seconds():
    import socket as sk
    import time

    from testbed.errors import UserError
    from testbed.sweeps import check_cluster

    with sk.socket() as s:   # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        check_cluster(f"127.0.0.1:{port}", None)
    assert time.monotonic() - t0 < 5
    assert f"nothing answers at 127.0.0.1:{port}" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UserError, match="not a cluster address"):
        check_cluster("nowhere", None)


def test_ray_auto_without_a_cluster_says_so_and_with_one_checks_it(monkeypatch):
    import socket as sk

    from testbed import sweeps
    from testbed.errors import UserError

    monkeypatch.setattr(sweeps, "_last_started_cluster", lambda: None)
    with pytest.raises(UserError, match="--ray auto: no Ray cluster runs on this machine"):
        sweeps.check_cluster("auto", None)
    with sk.socket() as server:   # something answers: the check lets ray.init take it from there
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        sweeps.check_cluster("auto", f"127.0.0.1:{port}")
        monkeypatch.setattr(sweeps, "_last_started_cluster", lambda: f"127.0.0.1:{port}")
        sweeps.check_cluster("auto", None)
        sweeps.check_cluster(f"ray://127.0.0.1:{port}", None)


def test_a_sweep_on_an_absent_cluster_writes_no_store(tmp_path, capsys):
    from testbed.cli import main

    store = tmp_path / "s.db"
    quickstart = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"
    code = main(["sweep", str(quickstart), "--store", str(store),
                 "--grid", "run.iterations=1", "--ray", "127.0.0.1:1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "nothing answers at 127.0.0.1:1" in err and len(err.strip().splitlines()) == 1
    assert not store.exists()
