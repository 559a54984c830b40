"""ClientApps on Ray actors, as Flower's simulation runs them: the federation's Ray options read
as flwr 1.42 spells them, the rows of a serial run on a local Ray and on a cluster of two Ray
nodes, an actor that dies answering as Flower's simulation answers for it, and the mistakes
refused in one line each. Every test leaves no Ray process behind."""
from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from testbed import cli
from testbed.flower.app import AppError, load_app
from testbed.records.store import Store
from tests.testbed.flower.flower_runs import (
    EXAMPLE,
    app_whose_node_exits,
    app_whose_ray_node_is_lost,
    errors_of,
    free_port,
    gpu_share_run,
    ray_children,
    ray_cluster,
    simulation_errors,
)
from tests.testbed.flower.test_flower_pool import LOSSY, app_with_federations, rows

ray = pytest.importorskip("ray")
LOCAL = "init-args-num-cpus=2 client-resources-num-cpus=1"   # a local Ray of 2 CPUs, 2 actors


@pytest.fixture(autouse=True)
def _no_ray_left(monkeypatch):
    """Each test's Ray keeps its files in a folder of its own (RAY_TMPDIR, removed after) and
    leaves nothing running: not initialized here, no Ray process under this one."""
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")   # Ray's socket paths must stay short
    monkeypatch.setenv("RAY_TMPDIR", temp)
    try:
        yield
        assert not ray.is_initialized()
        deadline = time.monotonic() + 10
        while ray_children() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not ray_children()
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def ray_table(tmp_path, name: str) -> dict:
    with Store(tmp_path / f"{name}.db", readonly=True) as s:
        return s.run(1)["config"]["flower"]


def refusal(tmp_path, capsys, *options: str) -> str:
    """The one line `testbed flower run` exits 2 with, given these --federation-config items."""
    code = cli.main(["flower", "run", str(EXAMPLE), "--store", str(tmp_path / "r.db"), "--quiet",
                     "--run-config", "num-server-rounds=1",
                     *sum((["--federation-config", o] for o in options), [])])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


# ------------------------------------------------------------------ options (no Ray started)
def test_the_ray_options_as_flwr_reads_them(tmp_path):
    """A federation's `options.backend.init-args.*` and `client-resources.*` (fractions of a
    CPU and of a GPU), and the same as `--federation-config` items, flwr's spelling: Ray's
    init arguments as ray.init takes them; without any, the ClientApps stay off Ray."""
    app_dir = app_with_federations(tmp_path)
    table = app_dir / "pyproject.toml"
    table.write_text(table.read_text().replace(
        "options.backend.client-resources.num-gpus = 0.0",
        "options.backend.client-resources.num-gpus = 0.25\n"
        "options.backend.init-args.address = \"127.0.0.1:6379\"\n"
        "options.backend.init-args.log-to-driver = false"))
    app = load_app(app_dir)
    assert (app.num_cpus, app.num_gpus, app.uses_ray) == (0.5, 0.25, True)
    assert app.ray_init == {"address": "127.0.0.1:6379", "log_to_driver": False}
    assert app.said["init-args-address"] == \
        "tool.flwr.federations.local.options.backend.init-args.address"
    app = load_app(app_dir, federation_config=[
        'init-args-address="10.0.0.1:6380" client-resources-num-gpus=0.5 '
        'init-args-logging-level="ERROR" init-args-num-cpus=4 client-resources-num-cpus=1.5'])
    assert (app.num_cpus, app.num_gpus) == (1.5, 0.5)
    assert app.ray_init == {"address": "10.0.0.1:6380", "log_to_driver": False,
                            "logging_level": "ERROR", "num_cpus": 4}
    assert app.said["init-args-address"] == "--federation-config init-args-address"
    plain = load_app(EXAMPLE, federation_config=["client-resources-num-cpus=0.5"])
    assert (plain.uses_ray, plain.ray_init, plain.num_gpus) == (False, {}, 0.0)
    assert load_app(EXAMPLE, federation_config=["client-resources-num-gpus=0.5"]).uses_ray
    for item, says in [
        ("init-args-num-cpus=1.5", "init-args-num-cpus = 1.5: must be an integer >= 0"),
        ("init-args-address=3", "init-args-address = 3: must be a Ray cluster's address"),
        ("init-args-logging-level=\"LOUD\"",
         "init-args-logging-level = 'LOUD': must be one of DEBUG, INFO, WARNING"),
        ("client-resources-num-gpus=-1", "client-resources-num-gpus = -1: must be a number >= 0"),
    ]:
        with pytest.raises(AppError, match="^--federation-config " + re.escape(says)):
            load_app(EXAMPLE, federation_config=[item])


def test_an_address_nothing_answers_fails_at_once_in_one_line(tmp_path, capsys):
    """No Ray at the address: one line saying what was tried, within a few seconds, not after
    Ray's retries: a port nobody listens on (refused at once), an address of the documentation
    range (nobody answers: the connection times out after 3 s, or, where a proxy takes every
    connection, Ray's first call is not answered as Ray answers it); nothing started."""
    port = free_port()
    for address in (f"127.0.0.1:{port}", "203.0.113.1:6379"):
        t = time.monotonic()
        err = refusal(tmp_path, capsys, f'init-args-address="{address}"')
        assert time.monotonic() - t < 8.0, err
        assert (f"--federation-config init-args-address = '{address}': no Ray cluster answers "
                f"there (a TCP connection to {address} ") in err, err
        assert any(f"{how} within 3 s: " in err for how in (
            "failed", "did not answer Ray's first call (GetClusterId) as Ray's GCS does")), err
        assert f"start one with `ray start --head --port {address.split(':')[1]}`" in err
    err = refusal(tmp_path, capsys, 'init-args-address="no-port-here"')
    assert "init-args-address = 'no-port-here': must be HOST:PORT" in err
    err = refusal(tmp_path, capsys, "init-args-num-cpus=2 init-args-no-such-argument=1")
    assert "init-args-no-such-argument = 1: not a keyword of ray.init" in err


def test_without_ray_installed_a_ray_option_is_refused_in_one_line(tmp_path, capsys,
                                                                  monkeypatch):
    """Ray is an extra (`lgc-testbed[cluster]`): a Ray option without it says how to install
    it; the forked pool needs none."""
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)          # `import ray` fails
    monkeypatch.delitem(sys.modules, "testbed.flower.ray_pool", raising=False)
    err = refusal(tmp_path, capsys, "client-resources-num-gpus=0.5")
    assert ("--federation-config client-resources-num-gpus: runs the ClientApps on Ray actors, "
            "and Ray is not installed; install it with pip install 'lgc-testbed[cluster]'") in err


# ------------------------------------------------------------------ a local Ray
@pytest.mark.slow
def test_rows_on_a_local_ray_equal_a_serial_runs_and_the_process_pools(tmp_path, monkeypatch):
    """The example app (a failing node, a lossy link: calls whose message is lost made and
    dropped) serially, in two forked processes and on two Ray actors of a local Ray: every row
    but wall time equal. The forked pool stays the default without a Ray option."""
    from testbed.flower.pool import ProcessPool
    from testbed.flower.ray_pool import RayPool

    seen = []
    for cls in (ProcessPool, RayPool):
        submit = cls.submit
        monkeypatch.setattr(cls, "submit", lambda self, calls, submit=submit, cls=cls: seen.append(
            (cls.__name__, self.size, len(calls))) or submit(self, calls))
    serial = rows(tmp_path, "serial", *LOSSY)
    forked = rows(tmp_path, "forked", "--set", "run.threads=2",
                  "--federation-config", "client-resources-num-cpus=1", *LOSSY)
    on_ray = rows(tmp_path, "ray", "--federation-config", LOCAL, *LOSSY)
    assert sum(r["replies_failed"] for r in serial["iterations"]) >= 1
    assert sum(r["replies_lost"] for r in serial["iterations"]) >= 2
    assert forked == serial
    assert on_ray == serial
    assert [s for s in seen if s[0] == "ProcessPool"] == [("ProcessPool", 2, n) for n in (5, 3) * 2]
    assert [s for s in seen if s[0] == "RayPool"] == [("RayPool", 2, n) for n in (5, 3) * 2]
    assert ray_table(tmp_path, "ray")["ray"] == {"address": "local", "actors": 2, "nodes": 1,
                                                 "client_resources_num_gpus": 0.0}
    assert "ray" not in ray_table(tmp_path, "forked")


@pytest.mark.slow
def test_an_actor_that_dies_answers_as_in_flowers_simulation_and_the_run_goes_on(tmp_path):
    """Node 3's ClientApp ends its actor's process (os._exit) in each of its train calls, every
    node sampled every round. Its calls come back as the error reply Flower's run_simulation
    gives for the same app and fault (code UNKNOWN, reason Ray's ActorDiedError), the actor is
    replaced, the run completes and the store counts one failed reply per train round. (Flower
    keeps the dead actor in its pool, so there the later calls sent to it fail too: ours
    fail only the call that died.)"""
    from flwr.common.constant import ErrorCode
    from flwr.serverapp.strategy import FedAdam

    from testbed.flower.ray_pool import RayPool

    app = app_whose_node_exits(tmp_path)
    config = ["num-server-rounds=2", "fraction-train=1.0", "fraction-evaluate=1.0",
              "fail-partition=3"]
    started = []
    start = RayPool._start_actor
    RayPool._start_actor = lambda self: started.append(1) or start(self)
    store = tmp_path / "runs.db"
    try:
        with errors_of(FedAdam) as ours:
            assert cli.main(["flower", "run", str(app), "--store", str(store), "--quiet",
                             *sum((["--run-config", c] for c in config), []),
                             "--federation-config", LOCAL]) == 0
    finally:
        RayPool._start_actor = start
    died = "<class 'ray.exceptions.ActorDiedError'>:<'The actor died unexpectedly before " \
           "finishing this task."
    assert [(k, r, len(e)) for k, r, e in ours] == [("train", 1, 1), ("evaluate", 1, 0),
                                                    ("train", 2, 1), ("evaluate", 2, 0)]
    for _, _, errors in ours[0::2]:
        (code, reason), = errors
        assert code == ErrorCode.UNKNOWN and reason.startswith(died), reason
    assert len(started) == 2 + 2     # two actors, and one in place of each that died
    with Store(store, readonly=True) as s:
        assert s.run(1)["status"] == "completed"
        assert [r["replies_failed"] for r in s.iterations(1)] == [1, 0, 1, 0]
        assert [r["replies_ok"] for r in s.iterations(1)] == [9, 10, 9, 10]
        left = [(n["iteration"], n["node"], n["left_out"]) for n in s.export(1)["nodes"]
                if n.get("left_out")]
        assert left == [(0, "w3", "failed"), (2, "w3", "failed")]
    flower = simulation_errors(app, config, "FedAdam", tmp_path)
    assert [(k, r) for k, r, _ in flower] == [(k, r) for k, r, _ in ours]
    code, reason = flower[0][2][0]           # the first call that died there
    assert code == ErrorCode.UNKNOWN and reason.startswith(died), reason


@pytest.mark.slow
def test_half_a_gpu_each_two_actors_share_the_gpu_ray_gives_them(tmp_path, monkeypatch):
    """`client-resources-num-gpus = 0.5` on a local Ray told of one GPU (`init-args-num-gpus=1`;
    there is none here, so the ClientApps train on the CPU; tests/gpu/test_flower_gpu.py runs
    the same on a real one under `make gpu-check`): two actors, each call seeing
    CUDA_VISIBLE_DEVICES as Ray set it (the GPU it gave the actor), the rows a serial run's."""
    if Path("/dev/nvidia0").exists():
        pytest.skip("this machine has a GPU: tests/gpu/test_flower_gpu.py (make gpu-check)")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")   # what Ray is told of: GPU 0
    calls, on_ray, serial, table = gpu_share_run(
        tmp_path, "init-args-num-gpus=1 client-resources-num-gpus=0.5 "
        "client-resources-num-cpus=1 init-args-num-cpus=2")
    assert table == {"address": "local", "actors": 2, "nodes": 1,
                     "client_resources_num_gpus": 0.5}
    assert len(calls) == 8 and len({c["process"] for c in calls}) == 2
    assert all(c["ray_gpu_ids"] == ["0"] and c["cuda_visible_devices"] == "0" for c in calls)
    assert on_ray == serial


# ------------------------------------------------------------------ a cluster of two nodes
@pytest.fixture(scope="module")
def cluster():
    with ray_cluster(nodes=2, cpus=1) as address:
        yield address


@pytest.mark.e2e
@pytest.mark.slow
def test_rows_on_a_two_node_cluster_equal_a_serial_runs(tmp_path, cluster):
    """Two Ray nodes of one CPU each (`ray start`), joined with `init-args-address`: one actor
    on each, every row but wall time a serial run's."""
    serial = rows(tmp_path, "serial")
    joined = rows(tmp_path, "cluster", "--federation-config",
                  f'init-args-address="{cluster}" client-resources-num-cpus=1')
    assert joined == serial
    assert ray_table(tmp_path, "cluster")["ray"] == {
        "address": cluster, "actors": 2, "nodes": 2, "client_resources_num_gpus": 0.0}


@pytest.mark.e2e
@pytest.mark.slow
def test_what_no_node_of_the_cluster_can_hold_is_refused_in_one_line(tmp_path, capsys, cluster):
    """A GPU share on a cluster without a GPU, and an actor of 2 CPUs on nodes of 1 (2 CPUs in
    all, but Flower places each actor on one node): one line each, exit 2."""
    at = f'init-args-address="{cluster}"'
    err = refusal(tmp_path, capsys, f"{at} client-resources-num-gpus=0.5")
    assert ("--federation-config client-resources-num-gpus = 0.5: a share of a GPU for each "
            f"ClientApp, but the Ray cluster at {cluster} has 2 node(s) of 1, 1 CPUs and 0 GPUs"
            ) in err, err
    err = refusal(tmp_path, capsys, f"{at} client-resources-num-cpus=2")
    assert ("--federation-config client-resources-num-cpus = 2, client-resources-num-gpus "
            "(flwr's default) = 0: no node can hold one ClientApp actor (the Ray cluster at "
            f"{cluster} has 2 node(s) of 1, 1 CPUs and 0 GPUs") in err, err


@pytest.mark.e2e
@pytest.mark.slow
def test_a_ray_node_lost_mid_run_fails_its_call_and_the_run_goes_on(tmp_path, cluster):
    """The second node's raylet killed by the first train call it runs: that call comes back
    as an error reply (Ray's error for an actor gone with its node), the strategy aggregates
    the others, the later rounds run on the head node's actor. Last in this module: the
    cluster has one node after it."""
    from testbed.flower.ray_pool import RayPool

    app = app_whose_ray_node_is_lost(tmp_path)
    store = tmp_path / "runs.db"
    pools = []
    close = RayPool.close
    RayPool.close = lambda self: pools.append(self) or close(self)
    t = time.monotonic()
    try:
        assert cli.main(["flower", "run", str(app), "--store", str(store), "--quiet",
                         "--run-config", "num-server-rounds=2", "--run-config", "fail-partition=0",
                         "--run-config", "fraction-train=1.0", "--run-config",
                         "fraction-evaluate=1.0", "--federation-config",
                         f'init-args-address="{cluster}" client-resources-num-cpus=1']) == 0
    finally:
        RayPool.close = close
    assert time.monotonic() - t < 60
    assert pools[0].lost == 1 and pools[0].nodes == 2 and len(pools[0].actors) == 1
    with Store(store, readonly=True) as s:
        its = s.iterations(1)
        assert [r["replies_failed"] for r in its] == [1, 0, 0, 0]
        assert [r["replies_ok"] for r in its] == [9, 10, 10, 10]
        (left,) = [n for n in s.export(1)["nodes"] if n.get("left_out")]
        assert (left["iteration"], left["left_out"]) == (0, "failed")
        (event,) = [e for e in s.export(1)["events"]
                    if e["kind"] == "flower_round" and "errors" in e["detail"]]
    (reason,) = event["detail"]["errors"].values()
    assert reason.startswith(("<class 'ray.exceptions.ActorUnavailableError'>",
                              "<class 'ray.exceptions.ActorDiedError'>")), reason
