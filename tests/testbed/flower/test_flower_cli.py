"""`testbed flower run`: a run end to end, and each fault in one line with its exit code, the
rows of the rounds before it kept."""
from __future__ import annotations

import pytest

from testbed import cli
from testbed.store import Store
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
    (["--run-config", "raise-on=3"], "the ClientApp raised on node 1003 (train message of round 1): "
     "ValueError: this node's data is corrupt", 1),
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
