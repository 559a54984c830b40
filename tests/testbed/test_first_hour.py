"""What a new user meets first, as faults with one line and a stated exit code: a dashboard
port another program holds, an output folder that is not there, a reader that closes the
pipe, a completed run's checkpoint, the store's files beside a git checkout; and the one
wording of a run's headline figures (MB on the wire, final and best accuracy) that the CLI,
the dashboard and the export share."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.cli import CLOSED_PIPE, COMMANDS, main
from testbed.records.store import Store
from testbed.run import checkpoint

ROOT = Path(__file__).resolve().parents[2]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def busy_port():
    """A port some other program listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


# ------------------------------------------------------------------ a busy port
@pytest.mark.parametrize("command", ["demo", "dashboard"])
def test_a_busy_port_is_one_line_exit_2_before_any_training(tiny_experiment, tmp_path, capsys,
                                                            busy_port, command):
    path = tiny_experiment(iterations=2)
    db = tmp_path / "runs.db"
    argv = [command, *([str(path)] if command == "demo" else []), "--store", str(db),
            "--port", str(busy_port), *(["--exit"] if command == "demo" else [])]
    code = main(argv)
    out, err = capsys.readouterr()
    line = one_line(err)
    assert code == 2
    assert line.startswith(f"testbed: error: --port {busy_port}: 127.0.0.1:{busy_port} is in use "
                           "by another program; allowed: a free port (e.g. --port "), line
    assert out == ""                      # no address printed, nothing served, nothing trained
    if db.exists():
        with Store(db, readonly=True) as s:
            assert s.runs() == []


# ------------------------------------------------------------------ output files
@pytest.fixture
def finished_run(tmp_path):
    """A store with one completed run of three iterations and two evaluations."""
    db = tmp_path / "runs.db"
    with Store(db) as s:
        rid = s.create_run("done", {}, method="none", workers=2)
        for i in range(3):
            s.append_iteration(rid, {"iteration": i, "virtual_time_s": i + 1.0, "train_loss": 1.0,
                                     "bits_up": 4_000_000 + i, "bits_down": 1_000_000})
        s.append_eval(rid, {"iteration": 1, "virtual_time_s": 2.0, "test_accuracy": 0.875})
        s.append_eval(rid, {"iteration": 2, "virtual_time_s": 3.0, "test_accuracy": 0.8125})
        s.finish_run(rid, "completed")
    return db


def test_json_export_into_a_missing_folder_makes_it(finished_run, tmp_path, capsys):
    out = tmp_path / "missing" / "dir" / "q.json"
    assert main(["export", "done", "--store", str(finished_run), "--format", "json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["run"]["name"] == "done"
    assert capsys.readouterr().err == f"wrote {out}\n"


def test_csv_export_to_a_csv_name_writes_files_not_a_folder(finished_run, tmp_path, capsys):
    out = tmp_path / "sub" / "quickstart.csv"
    assert main(["export", "done", "--store", str(finished_run), "--format", "csv", "--out", str(out)]) == 0
    assert out.is_file()
    lines = out.read_text().splitlines()
    assert lines[0].split(",")[0] == "iteration" and len(lines) == 4  # the iterations: header + 3 rows
    beside = sorted(p.name for p in out.parent.iterdir())
    assert beside == ["quickstart.csv", "quickstart.evals.csv", "quickstart.events.csv",
                      "quickstart.links.csv", "quickstart.nodes.csv"]
    assert capsys.readouterr().err.count("wrote ") == 5


# ------------------------------------------------------------------ a closed pipe
class ClosedPipe:
    """A stdout whose reader has gone away: every write (and flush) raises BrokenPipeError."""

    encoding = "utf-8"

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self):
        return False

    def fileno(self):
        raise ValueError("no file")


@pytest.fixture
def stopped_run(tiny_experiment, tmp_path, monkeypatch, capsys):
    """(experiment file, store) with run 1 stopped after iteration 3, a checkpoint at 2."""
    import testbed.api as run_cmd

    path = tiny_experiment(iterations=50)
    db = tmp_path / "runs.db"
    real = run_cmd.progress_printer

    def stopping(total, quiet, unit="iteration"):
        def update(p):
            if p.iteration >= 4:
                raise KeyboardInterrupt
        return update, lambda: None
    monkeypatch.setattr(run_cmd, "progress_printer", stopping)
    assert main(["run", str(path), "--store", str(db), "--set", "run.checkpoint_every=2"]) == 130
    monkeypatch.setattr(run_cmd, "progress_printer", real)
    capsys.readouterr()
    return path, db


class FakeDashboard:
    """`testbed demo`'s dashboard process: listens on the port it is given, serves nothing,
    and keeps the command line it was started with."""
    started: list = []

    def __init__(self, cmd, **kw):
        FakeDashboard.started.append(cmd)
        port = int(cmd[cmd.index("--port") + 1])
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(1)
        self.returncode = None

    def poll(self):
        return self.returncode

    def terminate(self):
        self.sock.close()
        self.returncode = 0

    wait = kill = lambda self, timeout=None: 0


def test_the_demo_prints_its_address_once_and_the_page_waits_for_its_run(tiny_experiment, tmp_path,
                                                                        monkeypatch, capsys):
    import testbed.commands.demo as demo_cmd

    monkeypatch.setattr(demo_cmd.subprocess, "Popen", FakeDashboard)
    FakeDashboard.started.clear()
    path, port = tiny_experiment(iterations=2), free_port()
    assert main(["demo", str(path), "--store", str(tmp_path / "r.db"), "--port", str(port), "--exit",
                 "--set", "run.eval_every=1"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"http://127.0.0.1:{port}") == 1 and out.startswith("dashboard: http://")
    (cmd,) = FakeDashboard.started
    assert "--quiet" in cmd and cmd[cmd.index("--starting") + 1] == str(path)   # it prints nothing


def test_every_subcommand_into_a_closed_pipe_ends_quietly(stopped_run, tmp_path, monkeypatch, capsys):
    """Each subcommand with its stdout closed by its reader (`testbed ... | head -0`): no
    traceback, nothing on stderr, the exit status of a process that SIGPIPE ended."""
    import testbed.commands.demo as demo_cmd

    path, db = stopped_run
    with Store(db) as s:   # a running run to steer, with a link graph
        live = s.create_run("live", {}, method="none", graph={
            "nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"}],
            "edges": [{"source": "w0", "target": "server", "bandwidth_mbps": 5.0}]})

    monkeypatch.setattr(demo_cmd.subprocess, "Popen", FakeDashboard)
    store = ["--store", str(db)]
    cases = {
        "run": ["run", str(path), *store, "--quiet", "--set", "run.iterations=2"],
        "resume": ["resume", "1", *store, "--quiet"],
        "runs": ["runs", *store],
        "export": ["export", "1", *store],
        "sweep": ["sweep", str(path), *store, "--quiet", "--grid", "run.iterations=1", "--jobs", "1"],
        "demo": ["demo", str(path), *store, "--port", str(free_port()), "--exit"],
        "probe": ["probe", str(path), "--payload-bytes", "1000", "--json"],
        "dashboard": ["dashboard", *store, "--port", str(free_port())],
        "control": ["control", str(live), *store, "--bandwidth-mbps", "2", "--wait", "0"],
        "methods": ["methods"],
        "keys": ["keys"],
        "tune": ["tune", str(path), *store, "--name", "pipe", "--param", "optim.lr=0.01:0.1",
                 "--objective", "final_accuracy", "--trials", "1", "--quiet",
                 "--set", "run.iterations=2"],
        "flower": ["flower", "run", str(ROOT / "tests" / "testbed" / "flower" / "echo"), *store,
                   "--quiet", "--run-config", "timeout=5"],
    }
    assert set(COMMANDS) <= set(cases), "a subcommand without a closed-pipe case"
    for name, argv in cases.items():
        monkeypatch.setattr(sys, "stdout", ClosedPipe())
        code = main(argv)
        monkeypatch.undo()
        monkeypatch.setattr(demo_cmd.subprocess, "Popen", FakeDashboard)
        err = capsys.readouterr().err
        assert (name, code) == (name, CLOSED_PIPE)
        assert "Traceback" not in err and "Error" not in err, (name, err)


def test_a_real_closed_pipe_leaves_stderr_empty():
    """`testbed methods | head -0` in a real process: the reader is gone before the first line."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "testbed.cli", "methods"], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (CLOSED_PIPE, "")


# ------------------------------------------------------------------ checkpoints and git
def test_a_completed_runs_checkpoint_is_removed_a_stopped_ones_kept(stopped_run, capsys):
    path, db = stopped_run
    assert checkpoint.path_for(db, 1).exists()        # stopped: resume needs it
    assert main(["run", str(path), "--store", str(db), "--quiet", "--set", "run.iterations=5",
                 "--set", "run.checkpoint_every=2"]) == 0
    assert not checkpoint.path_for(db, 2).exists()    # completed: resume refuses it anyway
    assert checkpoint.path_for(db, 1).exists()        # another run's stays
    assert main(["resume", "1", "--store", str(db), "--quiet"]) == 0
    assert not checkpoint.path_for(db, 1).parent.exists()   # the last one gone: the folder too
    capsys.readouterr()


def test_a_completed_torchrun_run_loses_every_ranks_checkpoint(tmp_path):
    folder = checkpoint.path_for(tmp_path / "r.db", 3).parent
    folder.mkdir()
    for name in ("run-3.rank-0.pt", "run-3.rank-1.pt", "run-3.pt", "run-30.pt", "run-4.rank-0.pt"):
        (folder / name).write_bytes(b"x")
    removed = checkpoint.remove_run(tmp_path / "r.db", 3)
    assert sorted(p.name for p in removed) == ["run-3.pt", "run-3.rank-0.pt", "run-3.rank-1.pt"]
    assert sorted(p.name for p in folder.iterdir()) == ["run-30.pt", "run-4.rank-0.pt"]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="not a git checkout")
@pytest.mark.parametrize("store", ["runs.db", "results.db", "sub/x.db"])
def test_every_store_artefact_is_ignored_by_git(store):
    names = [store, f"{store}-wal", f"{store}-shm", f"{store}-journal",
             f"{store}.checkpoints/run-1.pt", f"{store}.logs/torchrun-1.log"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT,
                          capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(names)


# ------------------------------------------------------------------ one headline, three views
def test_cli_dashboard_and_export_print_the_same_bytes_and_accuracies(finished_run, tmp_path, capsys):
    """The run sent 3 * 5,000,000 + 3 bits: 1.875 MB (10^6 bytes) on the wire; its evaluations
    87.5% then 81.25%: final 81.25%, best 87.50%. The CLI's summary line, `testbed runs`, the
    JSON and HTML export and the dashboard's runs table and live message say the same."""
    from testbed.records.progress import summary_line

    with Store(finished_run) as s:
        line = summary_line(s, 1, "done")
    assert line == ("run 1 (done) completed: 3 iterations, test accuracy final 81.25% (best 87.50%), "
                    "virtual time 3.00 s, 1.875 MB on the wire")
    assert main(["runs", "--store", str(finished_run)]) == 0
    header, _, row = capsys.readouterr().out.splitlines()
    cells = dict(zip(re.split(r"\s{2,}", header.strip()), re.split(r"\s{2,}", row.strip())))
    assert (cells["MB on the wire"], cells["final acc %"], cells["best acc %"]) == ("1.875", "81.25", "87.50")
    out = tmp_path / "e.json"
    assert main(["export", "done", "--store", str(finished_run), "--out", str(out)]) == 0
    summary = json.loads(out.read_text())["summary"]
    assert (summary["megabytes"], summary["final_accuracy"], summary["best_accuracy"]) == (
        "1.875 MB", 0.8125, 0.875)
    from dashboards.callbacks import Dashboard
    from dashboards.export import export_html
    from dashboards.layout import RUN_COLUMNS

    html = export_html(finished_run, 1, tmp_path / "e.html").read_text()
    assert "final 81.25% (best 87.50%)" in html and "1.875 MB on the wire" in html
    board = Dashboard(finished_run)
    try:
        rows, *_ = board.runs_view(None)
        *_, message, _level = board.live_view(1, "iteration", None)
    finally:
        board.close()
    assert "final 81.25% (best 87.50%)" in message and "1.875 MB on the wire" in message
    cols = {c["id"]: c for c in RUN_COLUMNS}
    assert cols["total_mb"]["name"] == "MB on the wire" and rows[0]["total_mb"] == 1.875
    assert cols["total_mb"]["format"].to_plotly_json()["specifier"] == ".3f"
    assert (rows[0]["final_accuracy"], rows[0]["best_accuracy"]) == (0.8125, 0.875)


def test_a_federated_run_speaks_of_rounds_and_clients(tmp_path, capsys):
    db = tmp_path / "runs.db"
    with Store(db) as s:
        rid = s.create_run("fed", {"federated": {"clients": 100, "clients_per_round": 10}},
                           method="none", workers=10)
        for i in range(5):
            s.append_iteration(rid, {"iteration": i, "virtual_time_s": i + 1.0, "bits_up": 8, "bits_down": 8})
        s.finish_run(rid, "completed")
        from testbed.records.progress import summary_line

        assert summary_line(s, rid, "fed").startswith("run 1 (fed) completed: 5 rounds, ")
    assert main(["runs", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "100 clients (10 per round)" in out and "5 rounds" in out


def test_federated_rounds_is_named_run_iterations(tiny_experiment, tmp_path, capsys):
    path = tiny_experiment(iterations=2)
    code = main(["run", str(path), "--store", str(tmp_path / "r.db"), "--set", "federated.rounds=5"])
    line = one_line(capsys.readouterr().err)
    assert code == 2 and "unknown key 'federated.rounds': the number of rounds is run.iterations" in line


def test_control_waits_and_prints_the_iteration_the_run_applied_it_at(tmp_path, monkeypatch, capsys):
    """The run is played by the sleep between polls: on the second it applies the request at
    iteration 121, as a running experiment resolves it."""
    import testbed.commands.control as control_cmd

    db = tmp_path / "runs.db"
    with Store(db) as s:
        rid = s.create_run("live", {}, method="none", graph={
            "nodes": [{"id": "server", "role": "server"}, {"id": "w0", "role": "worker"}],
            "edges": [{"source": "w0", "target": "server", "bandwidth_mbps": 5.0}]})
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            with Store(db) as s:
                (c,) = s.pending_controls(rid)
                s.resolve_control(c["id"], "applied", 121, "bandwidth 2 Mb/s on 2 links")
    monkeypatch.setattr(control_cmd.time, "sleep", sleep)
    assert main(["control", "live", "--store", str(db), "--bandwidth-mbps", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "control 1 applied at iteration 121: bandwidth 2 Mb/s on 2 links"
    assert len(sleeps) == 2


# ------------------------------------------------------------------ the README's first steps
README = (ROOT / "README.md").read_text()


def test_the_readme_says_how_to_reach_the_testbed_command():
    """Before its first `testbed` command line, the README says where the command lives."""
    before = README[README.index("## Quickstart"):README.index("\ntestbed ")]
    assert "source .venv/bin/activate" in before
    assert ".venv/bin/testbed" in before


# How the README's opening names each registered method (the ablation is a study, not a method)
README_NAMES = {"none": "fp32", "fp16": "fp16", "topk": "top-k", "randomk": "random-k", "dgc": "DGC",
                "qsgd": "QSGD", "terngrad": "TernGrad", "signsgd": "signSGD-EF", "powersgd": "PowerSGD",
                "lgc_ps": "LGC-PS", "lgc_rar": "LGC-RAR", "scalecom": "ScaleCom", "lgc_ablation": None,
                "lgc_scaled": "lgc_scaled", "lgc_rar_scaled": "lgc_rar_scaled"}


def test_the_readme_lists_every_method_it_ships():
    from nodes.compression.registry import names

    intro = README[:README.index("```")]
    assert set(names()) <= set(README_NAMES), "a method the README's list does not know"
    assert [n for n in names() if README_NAMES[n] and README_NAMES[n] not in intro] == []


def test_the_guides_deadline_probe_leaves_some_workers_out_not_all(capsys):
    """The device-traces guide's example shows what a deadline does: some of the four workers
    miss it, not all."""
    guide = (ROOT / "docs" / "how-to" / "device-traces-and-mobility.md").read_text()
    line = next(ln for ln in guide.splitlines()
                if ln.startswith("testbed probe experiments/edge_deadline_digits.toml"))
    argv = line.split("#")[0].split()[1:]
    argv[1] = str(ROOT / argv[1])
    assert main(argv) == 0
    out = capsys.readouterr().out
    left, total = map(int, re.search(r"deadline 25\.000 ms: (\d+) of (\d+) workers left out", out).groups())
    assert total == 4 and 0 < left < total, out


def test_the_running_terminal_says_when_a_control_was_applied(tiny_experiment, tmp_path, monkeypatch, capsys):
    """A request made while the run goes (after iteration 3, by another connection, as `testbed
    control` makes it) is applied at the run's next iteration (2 workers: 4 one-way links), and
    the run's terminal says so."""
    import testbed.api as run_cmd

    path = tiny_experiment(iterations=8)
    db = tmp_path / "runs.db"

    while_running = []

    def printer(total, quiet, unit="iteration"):
        def update(p):
            if p.iteration == 3:
                with Store(db) as other:
                    other.request_control(1, "*", {"bandwidth_mbps": 2.0})
            if p.iteration == 7:   # what the terminal showed before the run's last iteration
                while_running.append(capsys.readouterr().err)
        return update, lambda: None
    monkeypatch.setattr(run_cmd, "progress_printer", printer)
    assert main(["run", str(path), "--store", str(db)]) == 0
    with Store(db, readonly=True) as s:
        (c,) = s.controls(1)
    assert c["status"] == "applied" and c["applied_iteration"] == 3
    assert "control 1 applied at iteration 3: 4 link(s) changed" in while_running[0].splitlines()
