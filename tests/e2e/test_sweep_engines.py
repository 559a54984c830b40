"""`testbed sweep` through its three engines: one point at a time, `--jobs 2` (two worker
processes) and a local Ray cluster of two 1-CPU nodes. The serial store is the reference: the
other two must hold the same runs with the same rows (every column but wall time and the
ids, pids and clocks of the process that ran them) and the same sweep membership. A Ray worker
killed mid-run is retried and leaves whole rows equal to an undisturbed in-process run's; a
sweep stopped after 2 of 4 points runs only the other 2 when the command is given again."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.records.store import Store

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "experiments" / "quickstart.toml"
TINY = ["run.iterations=3", "run.eval_every=1", "run.device=cpu", "model.name=mlp",
        "network.workers=2"]
GRID = ["--grid", "compression.method=none,topk", "--seeds", "0,1"]
PROCESS_COLUMNS = {"id", "pid", "host", "started_at", "ended_at"}


def sweep_args(store, *more, sets=TINY, grid=GRID):
    return ["sweep", str(QUICK), "--store", str(store), "--quiet", *grid,
            *sum((["--set", s] for s in sets), []), *more]


def content(store_path) -> dict:
    """Per run name: the run's row but its process's columns, and its rows but wall time."""
    out = {}
    with Store(store_path, readonly=True) as s:
        for run in s.runs():
            rid = run["id"]
            full = s.run(rid)
            data = s.export(rid)
            for row in data["iterations"]:
                row.pop("wall_time_s")
            for e in data["events"]:
                e.pop("id")
            data["run"] = {k: v for k, v in full.items() if k not in PROCESS_COLUMNS}
            out[run["name"]] = data
    return out


def membership(store_path) -> dict:
    with Store(store_path, readonly=True) as s:
        return {r["name"]: (r["sweep"], r["sweep_params"], r["status"]) for r in s.runs()}


def test_serial_jobs_and_a_two_node_ray_cluster_make_the_same_store(tmp_path):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    serial, jobs, on_ray = tmp_path / "serial.db", tmp_path / "jobs.db", tmp_path / "ray.db"
    assert main(sweep_args(serial, "--jobs", "1")) == 0
    assert main(sweep_args(jobs, "--jobs", "2")) == 0
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        assert main(sweep_args(on_ray, "--ray", cluster.address)) == 0
    finally:
        ray.shutdown()
        cluster.shutdown()
    reference = content(serial)
    assert sorted(reference) == sorted(f"quickstart[method={m},seed={s}]"
                                       for m in ("none", "topk") for s in (0, 1))
    assert all(len(run["iterations"]) == 3 and len(run["evals"]) == 3 for run in reference.values())
    assert content(jobs) == reference
    assert content(on_ray) == reference
    assert membership(jobs) == membership(on_ray) == membership(serial) == {
        name: ("quickstart", {"method": name.split("method=")[1].split(",")[0],
                              "seed": name[-2]}, "completed") for name in reference}
    assert not any(p.name.endswith(".points") for p in tmp_path.iterdir())  # nothing left behind


def processes_with(text: str) -> dict[int, str]:
    """pid -> command line of the processes whose command line contains `text`."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                out[int(entry.name)] = cmd
    return out


def test_a_ray_worker_killed_mid_run_is_retried_and_leaves_whole_rows(tmp_path):
    pytest.importorskip("ray")
    sets = [s for s in TINY if not s.startswith(("run.iterations", "run.eval_every"))] + [
        "run.iterations=300", "run.eval_every=100", "run.flush_every=5"]
    grid = ["--grid", "compression.method=topk", "--seeds", "0"]
    store = tmp_path / "ray.db"
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")   # Ray's socket paths must stay short
    # the task's own store goes to TMPDIR on its node: here, where this test can watch it
    env = dict(os.environ, RAY_TMPDIR=ray_tmp, TMPDIR=ray_tmp, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "testbed.cli", "sweep", str(QUICK), "--store", str(store), "--quiet",
           *grid, *sum((["--set", s] for s in sets), []), "--ray", "--jobs", "1"]
    driver = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = None
    deadline = time.monotonic() + 240
    while killed is None and driver.poll() is None and time.monotonic() < deadline:
        for point in Path(ray_tmp).glob("testbed-point-*/point.db"):
            try:
                with Store(point, readonly=True) as s:
                    run = s.runs()[0] if s.runs() else None
            except Exception:  # being made
                continue
            if run and run["status"] == "running" and (run["last_iteration"] or 0) >= 20:
                killed = run["pid"]                 # the Ray worker running the task, mid-run
                os.kill(killed, signal.SIGKILL)
                break
        time.sleep(0.05)
    out, _ = driver.communicate(timeout=300)
    assert killed is not None, out
    assert driver.returncode == 0, out
    assert "1 of 1 runs completed" in out
    reference = tmp_path / "reference.db"  # the same point, undisturbed, in this process
    assert main(["run", str(QUICK), "--store", str(reference), "--quiet", "--name", "quickstart[method=topk,seed=0]",
                 *sum((["--set", s] for s in sets + ["compression.method=topk", "run.seed=0"]), [])]) == 0
    got, want = content(store), content(reference)
    assert len(got) == 1 and len(got["quickstart[method=topk,seed=0]"]["iterations"]) == 300
    for part in ("iterations", "nodes", "links", "evals"):
        assert got["quickstart[method=topk,seed=0]"][part] == want["quickstart[method=topk,seed=0]"][part]
    time.sleep(2)
    assert processes_with(ray_tmp) == {}   # no Ray process of this sweep outlives it
    assert killed not in processes_with("")
    shutil.rmtree(ray_tmp, ignore_errors=True)   # Ray's session files, the killed try's folder


def test_a_sweep_stopped_after_two_points_runs_only_the_other_two_again(tmp_path, capsys):
    store = tmp_path / "s.db"
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    # points 1 and 2 are 3 iterations, 3 and 4 are 2,000 (about 6 s each on an idle machine):
    # the stop, sent when the sweep reports its second point done, lands in point 3
    sets = [s for s in TINY if not s.startswith(("run.iterations", "run.eval_every"))] + ["run.eval_every=500"]
    args = sweep_args(store, "--jobs", "1", sets=sets, grid=["--grid", "run.iterations=3,2000", "--seeds", "0,1"])
    # Ctrl-C's signal as at a terminal: a job started in the background (`make test &`, a CI
    # runner) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler
    driver = subprocess.Popen([sys.executable, "-m", "testbed.cli", *args],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in driver.stdout:   # the sweep's own progress lines, as a user sees them
        seen.append(line)
        if line.startswith("[2/4 done]"):
            driver.send_signal(signal.SIGINT)
            break
    out = "".join(seen) + driver.communicate(timeout=120)[0]
    assert driver.returncode == 130, out
    first = membership(store)
    completed = {name for name, (_, _, status) in first.items() if status == "completed"}
    assert len(completed) == 2, out
    assert main(args) == 0
    log = capsys.readouterr().out
    assert "2 of 4 points completed before; running the other 2" in log
    ran = [line.split("(", 1)[1].split(")", 1)[0] for line in log.splitlines() if " done] run " in line]
    assert sorted(ran) == sorted(set(content(store)) - completed)
    assert len(ran) == 2
    after = membership(store)
    assert {name: m for name, m in after.items() if name in completed} == {
        name: m for name, m in first.items() if name in completed}
    with Store(store, readonly=True) as s:
        members = [r for r in s.runs() if r["sweep"] is not None]
    assert len(members) == 4 and all(r["status"] == "completed" for r in members)
