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
