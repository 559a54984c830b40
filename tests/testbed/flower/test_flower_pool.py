"""ClientApps in worker processes: the rows of a serial run, and the federation's options as
flwr 1.42 spells them, honoured or refused in one line each (on Ray actors:
test_flower_ray.py)."""
from __future__ import annotations

import pytest

from testbed import cli
from testbed.records.store import Store
from tests.testbed.flower.flower_runs import EXAMPLE

APP = ["--run-config", "num-server-rounds=2", "--run-config", "fail-partition=3"]


def rows(tmp_path, name: str, *extra: str) -> dict:
    store = tmp_path / f"{name}.db"
    assert cli.main(["flower", "run", str(EXAMPLE), "--store", str(store), "--quiet",
                     *APP, *extra]) == 0
    with Store(store, readonly=True) as s:
        out = s.export(1)
    out["iterations"] = [{k: v for k, v in r.items() if k != "wall_time_s"}
                         for r in out["iterations"]]
    return {k: out[k] for k in ("iterations", "nodes", "links", "evals")}


LOSSY = ["--set", "network.medium=dedicated", "--set", "network.link.delivery=best_effort",
         "--set", "network.link.loss={model = \"bernoulli\", p = 0.01}"]


@pytest.mark.parametrize("link", ["reliable", "lossy"])
def test_concurrent_clientapps_write_the_rows_of_serial_ones(tmp_path, monkeypatch, link):
    """Two worker processes (run.threads = 2, one CPU per ClientApp) and one process: every
    row but wall time equal, a failing node's error replies included; on a lossy link the
    calls of nodes whose message is lost are made (before the downlink is emulated) and
    dropped, their contexts untouched."""
    from testbed.flower.pool import ProcessPool

    extra = LOSSY if link == "lossy" else []
    serial = rows(tmp_path, "serial", *extra)
    rounds, submit = [], ProcessPool.submit
    monkeypatch.setattr(ProcessPool, "submit", lambda self, calls: rounds.append(
        (self.size, len(calls))) or submit(self, calls))
    pooled = rows(tmp_path, "pooled", "--set", "run.threads=2",
                  "--federation-config", "client-resources-num-cpus=1", *extra)
    assert rounds == [(2, 5), (2, 3)] * 2       # every round's calls went to the two workers
    assert sum(r["replies_failed"] for r in serial["iterations"]) >= 1
    if link == "lossy":
        assert sum(r["replies_lost"] for r in serial["iterations"]) >= 2
    assert pooled == serial


@pytest.mark.parametrize("option, says", [
    ("client-resources-num-gpus=-0.5", "--federation-config client-resources-num-gpus = -0.5: "
     "must be a number >= 0"),
    ("init-args-num-cpus=2.5", "--federation-config init-args-num-cpus = 2.5: must be an "
     "integer >= 0"),
    ("backend=\"dask\"", "--federation-config backend = 'dask': must be \"ray\""),
    ("num-supernode=3", "--federation-config num-supernode = 3: not a simulation option; "
     "allowed: num-supernodes, "),
])
def test_a_federation_option_not_honoured_is_refused_in_one_line(tmp_path, capsys, option, says):
    code = cli.main(["flower", "run", str(EXAMPLE), "--store", str(tmp_path / "r.db"), "--quiet",
                     "--federation-config", option])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and says in err, err


def test_the_node_count_of_the_federation_config(tmp_path):
    """`--federation-config num-supernodes=4` overrides the pyproject's 10."""
    store = tmp_path / "r.db"
    assert cli.main(["flower", "run", str(EXAMPLE), "--store", str(store), "--quiet",
                     "--run-config", "num-server-rounds=1",
                     "--federation-config", "num-supernodes=4"]) == 0
    with Store(store, readonly=True) as s:
        assert s.run(1)["workers"] == 4


FEDERATIONS = """
[tool.flwr.federations]
default = "local"

[tool.flwr.federations.local]
options.num-supernodes = 3
options.verbose = true
options.backend.name = "ray"
options.backend.client-resources.num-cpus = 0.5
options.backend.client-resources.num-gpus = 0.0

[tool.flwr.federations.remote]
address = "127.0.0.1:9093"
insecure = true
"""


def app_with_federations(tmp_path):
    import shutil

    from tests.testbed.flower.flower_runs import ECHO

    app = tmp_path / "echo"
    shutil.copytree(ECHO, app)
    text = (app / "pyproject.toml").read_text()
    (app / "pyproject.toml").write_text(text[:text.index("[tool.flwr.federations]")] + FEDERATIONS)
    return app


def test_the_pyproject_options_table_and_the_federation_config(tmp_path):
    """The options flwr 1.42 reads from a federation's table, as it spells them there, and
    `--federation-config` over them; a deployment federation refused in one line."""
    from testbed.flower.app import AppError, load_app

    app_dir = app_with_federations(tmp_path)
    app = load_app(app_dir)
    assert (app.num_nodes, app.num_cpus, app.verbose, app.federation) == (3, 0.5, True, "local")
    app = load_app(app_dir, federation_config=["num-supernodes=7 client-resources-num-cpus=2"])
    assert (app.num_nodes, app.num_cpus) == (7, 2.0)
    with pytest.raises(AppError, match=r"^tool.flwr.federations.remote.address = "
                       r"'127.0.0.1:9093': not a simulation option; allowed: "):
        load_app(app_dir, federation="remote")


def test_a_worker_process_that_dies_fails_the_run_in_one_line(tmp_path, capsys):
    """A ClientApp that ends its worker process (os._exit): the run fails in one line saying
    how to see why, its rows so far kept."""
    import shutil

    from tests.testbed.flower.flower_runs import ECHO

    app = tmp_path / "echo"
    shutil.copytree(ECHO, app)
    client = app / "echo_app" / "client_app.py"
    client.write_text(client.read_text().replace(
        '        raise ValueError("this node\'s data is corrupt")',
        '        import os\n        os._exit(3)'))
    store = tmp_path / "runs.db"
    code = cli.main(["flower", "run", str(app), "--store", str(store), "--quiet",
                     "--run-config", "raise-on=3", "--run-config", "timeout=5",
                     "--set", "run.threads=2", "--federation-config", "client-resources-num-cpus=1"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert "a worker process running ClientApps died" in err
    with Store(store, readonly=True) as s:
        assert s.run(1)["status"] == "failed" and len(s.iterations(1)) == 1
