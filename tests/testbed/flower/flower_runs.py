"""Helpers of the Flower tests: apps, experiment files and runs without the CLI."""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

from flwr.app import Context, RecordDict

from testbed.flower.app import load_app
from testbed.flower.driver import FlowerDriver, flower_identity, seed_everything
from testbed.flower.grid import LocalGrid
from testbed.flower.world import flower_config, flower_world
from testbed.run.loop import Loop

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "experiments" / "flower_app"
ECHO = Path(__file__).resolve().parent / "echo"


def write_file(folder: Path, text: str, trace: dict | None = None) -> str:
    if trace is not None:
        (folder / "trace.json").write_text(json.dumps(trace))
    path = folder / "edge.toml"
    path.write_text(text)
    return str(path)


def driver(app_dir, network: str | None = None, *, run_config=(), overrides=(), codec=None,
           store=None):
    app = load_app(app_dir, list(run_config))
    cfg = flower_config(network, list(overrides), app.num_nodes, name="test")
    world = flower_world(cfg, store, app.num_nodes)
    return FlowerDriver(app, world, codec=codec)


def loop_run(d: FlowerDriver) -> int:
    """`d`'s rounds through the one loop into its world's store; the run id."""
    loop = Loop(d.world, d)
    loop.start()
    return loop.run()


def plain_run(app_dir, *, run_config=(), seed: int = 0, record=None) -> LocalGrid:
    """The app over the plain in-process grid (no network); `record(messages, replies)`
    sees every round."""
    app = load_app(app_dir, list(run_config))
    grid = LocalGrid(app.client_app, app.num_nodes, app.run_config)
    if record is not None:
        round_trip = grid.round_trip

        def recorded(messages, timeout):
            replies = round_trip(messages, timeout)
            record(messages, replies)
            return replies
        grid.round_trip = recorded
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                      run_config=dict(app.run_config))
    seed_everything(seed)
    with flower_identity(1):
        app.server_app(grid, context)
    return grid


def arrays_of(messages) -> list[dict]:
    """Each message's arrays as {name: numpy}, in order (empty for messages without)."""
    out = []
    for m in messages:
        d = {}
        for key, rec in m.content.array_records.items():
            for name, arr in rec.items():
                d[f"{key}.{name}"] = arr.numpy()
        out.append(d)
    return out


def simulation_run(app_dir, *, run_config=(), seed: int = 0) -> None:
    """The app under Flower's own simulation runtime (`run_simulation`'s Ray backend, one CPU
    per ClientApp actor), in this process as `flwr run` on a local simulation runs it."""
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.simulation.run_simulation import _run_simulation
    from flwr.supercore.constant import NOOP_FEDERATION_ID
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity

    app = load_app(app_dir, list(run_config))
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                      run_config=dict(app.run_config))
    run = Run.create_empty(1)
    run.override_config = dict(app.run_config)    # the nodes' run config (pyproject's, fused)
    run.primary_task_id, run.federation_id = 1, NOOP_FEDERATION_ID   # as run_simulation sets
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, SUPERLINK_NODE_ID
    seed_everything(seed)
    _run_simulation(app.num_nodes, exit_event=None, client_app=app.client_app,
                    server_app=app.server_app, backend_name="ray",
                    backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}},
                    server_app_context=context, app_dir=str(app_dir), run=run, is_app=True)


def _counts(replies) -> tuple[int, int]:
    return sum(not m.has_error() for m in replies), sum(m.has_error() for m in replies)


@contextlib.contextmanager
def aggregates_of(strategy: type):
    """What each aggregate of `strategy` (a flwr strategy class) receives and returns while the
    block runs: (kind, server round, replies with content, error replies, the train arrays
    it made as {name: numpy})."""
    seen = []
    train, evaluate = strategy.aggregate_train, strategy.aggregate_evaluate

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        arrays, metrics = train(self, server_round, replies)
        made = None if arrays is None else {k: v.numpy() for k, v in arrays.items()}
        seen.append(("train", server_round, *_counts(replies), made))
        return arrays, metrics

    def aggregate_evaluate(self, server_round, replies):
        replies = list(replies)
        seen.append(("evaluate", server_round, *_counts(replies), None))
        return evaluate(self, server_round, replies)

    strategy.aggregate_train, strategy.aggregate_evaluate = aggregate_train, aggregate_evaluate
    try:
        yield seen
    finally:
        strategy.aggregate_train, strategy.aggregate_evaluate = train, evaluate


def _simulation_child(app_dir: str, run_config: list[str], strategy: str, out: str) -> None:
    import logging

    import flwr.serverapp.strategy as strategies

    logging.getLogger("flwr").setLevel(logging.WARNING)
    with aggregates_of(getattr(strategies, strategy)) as seen:
        simulation_run(app_dir, run_config=run_config)
    Path(out).write_bytes(pickle.dumps(seen))


def simulation_aggregates(app_dir, run_config, strategy: str, folder: Path) -> list:
    """`aggregates_of` the strategy class named `strategy` in the app under Flower's own
    simulation, run in a fresh process (as `flwr run` starts one; Ray's actors and global
    state stay out of the test's process)."""
    out = folder / "aggregates.pkl"
    code = ("from tests.testbed.flower.flower_runs import _simulation_child; "
            f"_simulation_child({str(app_dir)!r}, {list(run_config)!r}, {strategy!r}, {str(out)!r})")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return pickle.loads(out.read_bytes())


@contextlib.contextmanager
def errors_of(strategy: type):
    """The error replies each aggregate of `strategy` (a flwr strategy class) receives while the
    block runs: [(kind, server round, [(code, reason), ...])], one entry per aggregate."""
    seen = []
    train, evaluate = strategy.aggregate_train, strategy.aggregate_evaluate

    def tap(kind, aggregate):
        def tapped(self, server_round, replies):
            replies = list(replies)
            seen.append((kind, server_round, [(m.error.code, m.error.reason) for m in replies
                                              if m.has_error()]))
            return aggregate(self, server_round, replies)
        return tapped

    strategy.aggregate_train = tap("train", train)
    strategy.aggregate_evaluate = tap("evaluate", evaluate)
    try:
        yield seen
    finally:
        strategy.aggregate_train, strategy.aggregate_evaluate = train, evaluate


def _simulation_errors_child(app_dir: str, run_config: list[str], strategy: str, out: str) -> None:
    import logging

    import flwr.serverapp.strategy as strategies

    logging.getLogger("flwr").setLevel(logging.CRITICAL)
    with errors_of(getattr(strategies, strategy)) as seen:
        simulation_run(app_dir, run_config=run_config)
    Path(out).write_bytes(pickle.dumps(seen))


def simulation_errors(app_dir, run_config, strategy: str, folder: Path) -> list:
    """`errors_of` the strategy class named `strategy` in the app under Flower's own simulation,
    run in a fresh process that starts a Ray of its own (RAY_ADDRESS=local: never one found on
    this machine)."""
    out = folder / "errors.pkl"
    code = ("from tests.testbed.flower.flower_runs import _simulation_errors_child; "
            f"_simulation_errors_child({str(app_dir)!r}, {list(run_config)!r}, {strategy!r}, "
            f"{str(out)!r})")
    env = {**os.environ, "RAY_ADDRESS": "local",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return pickle.loads(out.read_bytes())


def app_whose_node_exits(folder: Path) -> Path:
    """The example app, copied, whose `fail-partition` node ends its process (`os._exit(1)`)
    in every train call instead of raising."""
    import shutil

    app = folder / "exiting_app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("__pycache__"))
    client = app / "flower_app" / "client_app.py"
    text = client.read_text()
    line = '        raise RuntimeError(f"node of partition {pid} fails every train call")'
    assert line in text
    client.write_text(text.replace(line, "        import os\n        os._exit(1)"))
    return app


def app_whose_ray_node_is_lost(folder: Path) -> Path:
    """The example app, copied, whose train calls on a Ray node other than the head end that
    node (SIGKILL to its raylet: the node is lost with its actors, mid-call) when
    `fail-partition` is 0 or more; no call raises."""
    import shutil

    app = folder / "node_losing_app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("__pycache__"))
    client = app / "flower_app" / "client_app.py"
    text = client.read_text()
    line = '        raise RuntimeError(f"node of partition {pid} fails every train call")'
    assert line in text
    client.write_text(text.replace(
        "    if pid == int(cfg[\"fail-partition\"]):", "    if int(cfg[\"fail-partition\"]) >= 0:"
    ).replace(line, """        import os, signal, time
        proc = os.getpid()
        while proc > 1:   # up to this actor's raylet
            cmd = open(f"/proc/{proc}/cmdline", "rb").read().split(b"\\0")
            if cmd[0].endswith(b"/raylet"):
                if b"--head" not in cmd:
                    os.kill(proc, signal.SIGKILL)
                    time.sleep(120)
                break
            proc = int(open(f"/proc/{proc}/stat").read().rsplit(")", 1)[1].split()[1])"""))
    return app


# ------------------------------------------------------------------ Ray processes of a test
def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process of this machine."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out[int(entry.name)] = (parent, cmd)
    return out


def descendants(roots: set[int], table: dict | None = None) -> set[int]:
    """`roots` and every process under them."""
    table = processes() if table is None else table
    found, grew = set(roots), True
    while grew:
        grew = False
        for pid, (parent, _) in table.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def is_ray(cmd: str) -> bool:
    """Whether a command line is a Ray process's: its GCS, a raylet, a worker or agent
    (`ray::...`), or one of Ray's Python scripts and modules (not a process that merely has
    Ray's folders on its module path, as a forkserver started after `import ray` does)."""
    args = cmd.split(" ")
    return (Path(args[0]).name in ("gcs_server", "raylet") or args[0].startswith("ray::")
            or any(a.endswith(".py") and f"{os.sep}ray{os.sep}" in a for a in args[:4])
            or any(a.startswith("ray.") for a in args[1:4]))


def ray_children() -> set[int]:
    """The Ray processes (a local Ray's GCS, raylet, workers) under this process."""
    table = processes()
    return {pid for pid in descendants({os.getpid()}, table) - {os.getpid()}
            if running(pid) and is_ray(table[pid][1])}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def ray_cluster(nodes: int = 2, cpus: int = 1):
    """A Ray cluster of `nodes` nodes of `cpus` CPUs each on this machine, as a user starts one
    (`ray start --head --num-cpus 1 --port P`, then `ray start --address 127.0.0.1:P --num-cpus
    1`), its own temporary folder and ports so that it meets no other Ray here; yields its
    address. Stopped after by ending its processes (found by that folder and port, and those
    under them), not with `ray stop`, which would end every Ray of this machine."""
    import tempfile
    import time

    ray_bin = str(Path(sys.executable).parent / "ray")
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")   # Ray's socket paths must stay short
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(ROOT), os.environ.get("PYTHONPATH")])), "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus", str(cpus), "--temp-dir", temp, "--disable-usage-stats",
              "--dashboard-agent-listen-port"]
    head = [ray_bin, "start", "--head", "--port", str(port), "--include-dashboard=false",
            "--dashboard-port", str(free_port()), "--ray-client-server-port",
            str(free_port()), *common, str(free_port())]
    try:
        for cmd in [head] + [[ray_bin, "start", "--address", f"127.0.0.1:{port}", *common,
                              str(free_port())] for _ in range(nodes - 1)]:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        deadline = time.monotonic() + 60
        while _alive_nodes(f"127.0.0.1:{port}", env) < nodes:
            assert time.monotonic() < deadline, "the cluster's nodes did not come up"
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        stop_cluster(temp, port)


def _alive_nodes(address: str, env: dict) -> int:
    code = (f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
            "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else 0


def cluster_processes(temp: str, port: int) -> set[int]:
    """The processes of the cluster started in `temp` with GCS port `port`, and those under them."""
    table = processes()
    roots = {pid for pid, (_, cmd) in table.items() if pid != os.getpid() and (
        temp in cmd or (is_ray(cmd) and f":{port} " in cmd + " "))}
    return {pid for pid in descendants(roots, table) if running(pid)}


def stop_cluster(temp: str, port: int) -> None:
    import shutil
    import signal
    import time

    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        left = cluster_processes(temp, port)
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while cluster_processes(temp, port) and time.monotonic() < deadline:
            time.sleep(0.2)
    assert not cluster_processes(temp, port), "a process of the test's Ray cluster outlived it"
    shutil.rmtree(temp, ignore_errors=True)


# ------------------------------------------------------------------ GPU shares
GPU_APP = ROOT / "tests" / "gpu" / "flower_gpu"


def store_rows(store) -> dict:
    """Run 1's rows in `store`, every column but wall time."""
    from testbed.records.store import Store

    with Store(store, readonly=True) as s:
        out = s.export(1)
    out["iterations"] = [{k: v for k, v in r.items() if k != "wall_time_s"}
                         for r in out["iterations"]]
    return {k: out[k] for k in ("iterations", "nodes", "links", "evals")}


def gpu_share_run(folder: Path, options: str) -> tuple[list[dict], dict, dict, dict]:
    """tests/gpu/flower_gpu (4 nodes, 2 rounds, each call training an MLP on the GPU its
    process sees) with `--federation-config options`, then serially in this process: (what
    each call of the first saw, its rows, the serial run's rows, its stored `ray` table)."""
    import json

    from testbed import cli
    from testbed.records.store import Store

    seen = folder / "seen"
    seen.mkdir()
    on_ray, serial = folder / "ray.db", folder / "serial.db"
    assert cli.main(["flower", "run", str(GPU_APP), "--store", str(on_ray), "--quiet",
                     "--run-config", f'report-dir="{seen}"',
                     "--federation-config", options]) == 0
    calls = [json.loads(line) for f in sorted(seen.iterdir()) for line in f.read_text().split("\n")
             if line]
    assert cli.main(["flower", "run", str(GPU_APP), "--store", str(serial), "--quiet"]) == 0
    with Store(on_ray, readonly=True) as s:
        table = s.run(1)["config"]["flower"]["ray"]
    return calls, store_rows(on_ray), store_rows(serial), table
