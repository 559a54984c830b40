"""The store survives a kill -9 mid-run, and another process can read while a run writes."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from testbed.records.store import Store

WRITER = textwrap.dedent("""
    import sys, time
    from testbed.records.store import Store
    s = Store(sys.argv[1])
    run = s.create_run("victim", {"k": 1}, method="none")
    i = 0
    while True:
        s.append_iteration(run, {"iteration": i, "virtual_time_s": i * 0.5, "bits_up": 8 * i,
                                 "bits_down": 0}, nodes=[{"iteration": i, "node": "w0", "bits_up": 8 * i}])
        if i % 5 == 4:
            s.flush()
            print(i, flush=True)
        i += 1
        time.sleep(0.002)
""")


def start_writer(path):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)


def test_kill_minus_9_keeps_committed_rows_and_marks_run_failed(tmp_path):
    path = tmp_path / "runs.db"
    proc = start_writer(path)
    last = -1
    for line in proc.stdout:  # wait for a few committed batches
        last = int(line)
        if last >= 49:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store(path) as store:
        (run,) = store.runs()
        assert run["status"] == "failed" and "killed or crashed" in store.run(run["id"])["error"]
        rows = store.iterations(run["id"])
        # Every committed batch is whole: iterations 0..k*5-1 contiguous, at least the 50 we saw.
        its = [r["iteration"] for r in rows]
        assert its == list(range(len(its))) and len(its) >= last + 1 and len(its) % 5 == 0
        assert all(r["virtual_time_s"] == r["iteration"] * 0.5 for r in rows)
        assert len(store.node_iterations(run["id"])) == len(its)
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_reader_in_another_process_sees_rows_while_the_run_writes(tmp_path):
    path = tmp_path / "runs.db"
    proc = start_writer(path)
    try:
        proc.stdout.readline()
        reader = Store(path, readonly=True)
        seen = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen) < 5:
            rows = reader.iterations(1)
            if not seen or len(rows) > seen[-1]:
                seen.append(len(rows))
            time.sleep(0.05)
        reader.close()
        assert len(seen) >= 5 and seen == sorted(seen) and seen[0] >= 5
        assert proc.poll() is None  # the writer was never blocked out
    finally:
        proc.kill()
        proc.wait()


def test_controls_round_trip_and_export_shape(tmp_path):
    with Store(tmp_path / "s.db") as s:
        run = s.create_run("r", {"a": 1}, method="topk")
        cid = s.request_control(run, "*", {"bandwidth_mbps": 5.0})
        assert [c["id"] for c in s.pending_controls(run)] == [cid]
        s.resolve_control(cid, "applied", 3, "ok")
        assert s.pending_controls(run) == []
        s.append_iteration(run, {"iteration": 0, "virtual_time_s": 1.0, "wall_time_s": 0.1,
                                 "train_loss": 2.0, "bits_up": 10, "bits_down": 5,
                                 "compute_s": 0.1, "uplink_s": 0.5, "downlink_s": 0.4})
        s.append_eval(run, {"iteration": 0, "virtual_time_s": 1.0, "test_loss": 1.0, "test_accuracy": 0.5})
        s.flush()
        data = s.export("r")
        assert data["run"]["id"] == run and data["run"]["config"] == {"a": 1}
        assert set(data["iterations"][0]) >= {"iteration", "virtual_time_s", "wall_time_s", "train_loss",
                                              "bits_up", "bits_down", "compute_s", "uplink_s", "downlink_s"}
        assert data["evals"][0]["test_accuracy"] == 0.5
        assert data["controls"][0]["status"] == "applied"


def test_run_summaries_follow_the_rows_they_summarise(tmp_path):
    with Store(tmp_path / "s.db") as s:
        run = s.create_run("r", {}, method="none")
        for i in range(7):
            s.append_iteration(run, {"iteration": i, "virtual_time_s": 0.5 * (i + 1),
                                     "bits_up": 100 * i, "bits_down": 10})
            if i in (2, 5):
                s.append_eval(run, {"iteration": i, "test_accuracy": 0.3 if i == 5 else 0.4})
            if i % 3 == 0:
                s.flush()  # batches with and without evals
        s.flush()
        (row,) = s.runs()
        assert row["last_iteration"] == 6 and row["virtual_time_s"] == 3.5
        assert row["total_bits"] == sum(100 * i + 10 for i in range(7)) == 2170
        assert row["best_accuracy"] == 0.4
        # The same figures straight from the rows.
        assert row["total_bits"] == sum(r["bits_up"] + r["bits_down"] for r in s.iterations(run))


def test_link_collisions_and_retries_round_trip_and_old_stores_migrate(tmp_path):
    import sqlite3
    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)          # a store written before the CSMA columns existed
    db.executescript("""
        CREATE TABLE links (run_id INTEGER NOT NULL, iteration INTEGER NOT NULL, src TEXT NOT NULL,
            dst TEXT NOT NULL, bytes INTEGER, packets INTEGER, lost INTEGER, retransmitted INTEGER,
            busy_s REAL, PRIMARY KEY (run_id, iteration, src, dst));
        INSERT INTO links VALUES (99, 0, 'w0', 'server', 1500, 1, 0, 0, 0.0012);
    """)
    db.commit()
    db.close()
    with Store(old, readonly=True) as s:            # read as it is: the new columns read 0
        assert s.links(99) == [{"iteration": 0, "src": "w0", "dst": "server", "bytes": 1500, "packets": 1,
                               "lost": 0, "retransmitted": 0, "busy_s": 0.0012, "snr_db": None,
                               "collisions": 0, "retries": 0}]
    with Store(old) as s:                           # opened for writing: migrated in place
        run = s.create_run("csma", {}, method="none")
        s.append_iteration(run, {"iteration": 0}, links=[
            {"iteration": 0, "src": "w1", "dst": "server", "bytes": 3000, "packets": 5, "lost": 0,
             "retransmitted": 0, "busy_s": 0.002, "collisions": 2, "retries": 2},
            {"iteration": 0, "src": "server", "dst": "w1", "bytes": 42, "packets": 0, "lost": 0,
             "retransmitted": 0, "busy_s": 0.0}])
        s.flush()
        rows = s.links(run)
        assert [(r["src"], r["collisions"], r["retries"]) for r in rows] == [("server", 0, 0), ("w1", 2, 2)]
        assert s.links(99)[0]["collisions"] == 0


def test_lgc_in_use_columns_round_trip_export_and_old_stores_migrate(tmp_path):
    import sqlite3
    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)          # a store written before the lgc_ columns of evals
    db.executescript("""
        CREATE TABLE evals (run_id INTEGER NOT NULL, iteration INTEGER NOT NULL,
            virtual_time_s REAL, test_loss REAL, test_accuracy REAL, PRIMARY KEY (run_id, iteration));
        INSERT INTO evals VALUES (99, 4, 2.0, 0.7, 0.8);
    """)
    db.commit()
    db.close()
    with Store(old, readonly=True) as s:            # read as it is: the new columns read NULL
        assert s.evals(99) == [{"iteration": 4, "virtual_time_s": 2.0, "test_loss": 0.7,
                                "test_accuracy": 0.8, "lgc_beta": None, "lgc_scalar_error": None,
                                "lgc_coder_error": None}]
    with Store(old) as s:                           # opened for writing: migrated in place
        run = s.create_run("lgc", {}, method="lgc_ps")
        s.append_eval(run, {"iteration": 9, "virtual_time_s": 1.0, "test_accuracy": 0.5,
                            "lgc_beta": 0.125, "lgc_scalar_error": 0.79, "lgc_coder_error": 0.8})
        s.append_eval(run, {"iteration": 19, "virtual_time_s": 2.0, "test_accuracy": 0.6})
        s.flush()
        got = s.export(run)["evals"]
        assert [(e["lgc_beta"], e["lgc_scalar_error"], e["lgc_coder_error"]) for e in got] == [
            (0.125, 0.79, 0.8), (None, None, None)]
        assert s.evals(99)[0]["lgc_beta"] is None
