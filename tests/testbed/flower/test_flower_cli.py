"""`testbed flower run`: a run end to end, and each fault in one line with its exit code, the
rows of the rounds before it kept."""
from __future__ import annotations

import pytest

from testbed import cli
from testbed.records.store import Store
from tests.testbed.flower.flower_runs import ECHO, write_file

CELL = """
[run]
name = "the file's name"

[network]
workers = 5
medium = "dedicated"
"""


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["flower", "run", *map(str, argv), "--quiet"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_run_writes_a_round_per_send_and_receive(tmp_path, capsys):
    store = tmp_path / "runs.db"
    code, out, err = run(capsys, ECHO, "--store", store, "--name", "echo",
                         "--network", write_file(tmp_path, CELL), "--run-config", "timeout=5")
    assert code == 0, err
    assert out.startswith("run 1 (echo) completed: 3 iterations")
    with Store(store, readonly=True) as s:
        run_ = s.run(1)
        assert run_["status"] == "completed" and run_["workers"] == 5
        its = s.iterations(1)
        assert [r["participants"] for r in its] == [5, 4, 1] and its[0]["bits_up"] > 0
        assert len(s.node_iterations(1)) == 15 and s.links(1)
    assert cli.main(["export", "1", "--store", str(store), "--format", "csv",
                     "--out", str(tmp_path / "csv")]) == 0
    assert (tmp_path / "csv" / "iterations.csv").read_text().count("\n") == 4


def test_a_clientapp_that_raises_answers_with_an_error_and_the_run_goes_on(tmp_path, capsys):
    """Node 3's ClientApp raises in round 1: the ServerApp gets its error reply (Flower's code
    and reason) beside the three others, the run completes, and the store counts the round's
    replies: 3 ok, 1 failed; the failed node's row says so and carries the error reply's
    bytes up, and its compute time is what it spent (here nothing: it raised first)."""
    store = tmp_path / "runs.db"
    code, out, err = run(capsys, ECHO, "--store", store, "--network", write_file(tmp_path, CELL),
                         "--run-config", "timeout=5", "--run-config", "raise-on=3")
    assert code == 0, err
    with Store(store, readonly=True) as s:
        its = s.iterations(1)
        counts = [(r["replies_ok"], r["replies_failed"], r["replies_lost"], r["replies_late"])
                  for r in its]
        assert counts == [(5, 0, 0, 0), (3, 1, 0, 0), (1, 0, 0, 0)]
        assert [r["participants"] for r in its] == [5, 3, 1] and its[1]["left_out"] == 1
        # an error reply is a reply: the round ends with the last one, not at the timeout
        assert its[1]["virtual_time_s"] - its[0]["virtual_time_s"] < 1.0
        w3 = next(n for n in s.node_iterations(1) if n["iteration"] == 1 and n["node"] == "w3")
        assert w3["left_out"] == "failed" and w3["compute_s"] == 0.0
        assert 0 < w3["bits_up"] < 8 * 200 and w3["bits_down"] > 8 * 4000
        event = next(e for e in s.events(1) if e["kind"] == "flower_round" and e["iteration"] == 1)
        assert event["detail"]["errors"] == {
            "1003": "<class 'ValueError'>:<'this node's data is corrupt'>"}
    from echo_app import (
        SEEN,  # this run's three rounds are the last three the ServerApp saw
    )
    assert [len(r) for r in SEEN["server"][-3:]] == [5, 4, 1]   # the error reply reached it


def broken_app(tmp_path, components: str) -> str:
    app = tmp_path / "broken"
    (app / "broken_pkg").mkdir(parents=True)
    (app / "broken_pkg" / "__init__.py").write_text("")
    (app / "broken_pkg" / "mod.py").write_text("import not_a_module_anywhere\n")
    (app / "broken_pkg" / "plain.py").write_text("app = object()\n")
    (app / "pyproject.toml").write_text(f"[tool.flwr.app.components]\n{components}\n")
    return str(app)


@pytest.mark.parametrize("components, says", [
    ('serverapp = "broken_pkg.mod:app"\nclientapp = "broken_pkg.mod:app"',
     "tool.flwr.app.components.serverapp = 'broken_pkg.mod:app': does not import "
     "(ModuleNotFoundError"),
    ('serverapp = "broken_pkg.plain:app"\nclientapp = "broken_pkg.plain:app"',
     "tool.flwr.app.components.serverapp = 'broken_pkg.plain:app': is a object, must be a flwr "
     "ServerApp"),
])
def test_an_app_that_does_not_load_is_refused_in_one_line(tmp_path, capsys, components, says):
    store = tmp_path / "runs.db"
    code, _, err = run(capsys, broken_app(tmp_path, components), "--store", store)
    assert code == 2 and err.count("\n") == 1 and says in err, err
    assert not store.exists()        # nothing began: no store left behind


@pytest.mark.parametrize("extra, says, rows", [
    (["--set", "network.link.queue_packets=2"], "is 4,", 0),
    (["--set", "run.iterations=1"], "the ServerApp was still sending after 1 rounds", 1),
    (["--run-config", "server-raises-after=1"], "the ServerApp raised RuntimeError: the strategy "
     "lost its state", 2),
])
def test_a_run_that_fails_says_why_in_one_line_and_keeps_its_rows(tmp_path, capsys, extra, says, rows):
    store = tmp_path / "runs.db"
    code, _, err = run(capsys, ECHO, "--store", store, "--network", write_file(tmp_path, CELL),
                       "--run-config", "timeout=5", *extra)
    assert code == 1 and err.count("\n") == 1 and says in err, err
    with Store(store, readonly=True) as s:
        assert s.run(1)["status"] == "failed"
        assert len(s.iterations(1)) == rows


def test_a_failed_flower_run_is_not_resumed_but_started_again(tmp_path, capsys):
    """Its stored config holds the app's [flower] table (app, run config, federation options),
    and `testbed resume` says in one line to start it again."""
    store = tmp_path / "runs.db"
    code, _, _ = run(capsys, ECHO, "--store", store, "--network", write_file(tmp_path, CELL),
                     "--run-config", "server-raises-after=0")
    assert code == 1
    with Store(store, readonly=True) as s:
        table = s.run(1)["config"]["flower"]
    assert table["app"] == str(ECHO) and table["run_config"]["server-raises-after"] == 0
    assert (table["nodes"], table["processes"], table["federation"]) == (5, 1, "local")
    assert cli.main(["resume", "1", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a Flower run, which keeps no checkpoint; start it " \
        "again with testbed flower run" in err, err
