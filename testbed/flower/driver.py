"""A Flower run as a driver of rounds (testbed/run/rounds.py): the ServerApp runs unchanged in a
thread over the emulated grid, and each `send_and_receive` it makes is one `Round`.

The thread runs only while the caller wants a round: `rounds()` lets it carry one round, then
keeps it waiting at its next `send_and_receive` (or its end) until the next round is asked
for, so a stopped run carries no round it does not record. A round is handed over when the
ServerApp makes its next call (or returns), so that what the strategy made of its replies is in
it: the strategy's own MetricRecords, caught around `Strategy.start` while the run lasts
(`aggregate_train`, `aggregate_evaluate` and the centralized `evaluate_fn` results), are the
round's `flower_metrics` events and its evaluation row (`test_loss` / `test_accuracy`: the
centralized evaluation's where there is one, else the federated evaluation's; the first
MetricRecord key holding "loss" / "acc"); a `flower_round` event says what the round was
(train or evaluate, its messages and replies, and the reason of each error reply by node
id). A strategy still sending
after `run.iterations` rounds fails the run (`BudgetExceeded`): the driver's budget is one
more round, which it refuses. The loop (testbed/run/loop.py) writes the rounds' rows.
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import queue
import random
import threading

import numpy as np
import torch
from flwr.app import Context, MetricRecord, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp.strategy import Strategy
from flwr.supercore.task_identity import TaskIdentity

from testbed.errors import RunFailed
from testbed.flower.grid import EmulatedGrid, metric
from testbed.run.rounds import Round


class BudgetExceeded(RunFailed):
    """The ServerApp wanted more rounds than the run's budget."""


class _Stop(BaseException):
    """Unwinds the ServerApp's thread when the caller stops asking for rounds."""


@contextlib.contextmanager
def flower_identity(run_id: int):
    """Flower builds a Message only once its task identity has a run id (its simulation sets
    it): ours for the run, the old one back after."""
    old = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, SUPERLINK_NODE_ID, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = old


START = inspect.signature(Strategy.start)   # flwr's own (a tap's wrapper takes *args)


@contextlib.contextmanager
def strategy_tap(sink):
    """`sink(kind, server_round, record)` for every MetricRecord a strategy makes: "train",
    "evaluate" (its aggregates) and "centralized" (its `evaluate_fn`), while the block runs."""
    original = Strategy.start

    def start(self, *args, **kwargs):
        bound = START.bind(self, *args, **kwargs)
        fn = bound.arguments.get("evaluate_fn")
        if fn is not None:
            def evaluate_fn(server_round, arrays):
                res = fn(server_round, arrays)
                sink("centralized", server_round, res)
                return res
            bound.arguments["evaluate_fn"] = evaluate_fn
        train, evaluate = self.aggregate_train, self.aggregate_evaluate

        def aggregate_train(server_round, replies):
            arrays, metrics = train(server_round, replies)
            sink("train", server_round, metrics)
            return arrays, metrics

        def aggregate_evaluate(server_round, replies):
            metrics = evaluate(server_round, replies)
            sink("evaluate", server_round, metrics)
            return metrics

        names = ("aggregate_train", "aggregate_evaluate")
        before = {k: self.__dict__[k] for k in names if k in self.__dict__}   # an outer tap's
        self.aggregate_train, self.aggregate_evaluate = aggregate_train, aggregate_evaluate
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            for k in names:
                self.__dict__.pop(k, None)
            self.__dict__.update(before)

    Strategy.start = start
    try:
        yield
    finally:
        Strategy.start = original


def seed_everything(seed: int) -> None:
    """Python's, numpy's and torch's global generators (Flower samples nodes with `random`)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class FlowerDriver:
    """The rounds of one Flower app over a `World` (testbed/flower/world.py)."""

    def __init__(self, app, world, *, codec=None, run_id: int = 1, quiet_flower: bool = True,
                 pool=None):
        self.app, self.world, self.codec = app, world, codec
        self.run_id = run_id      # Flower's run id in its messages and contexts
        self.quiet_flower = quiet_flower
        self.grid = EmulatedGrid(app.client_app, app.num_nodes, app.run_config, world,
                                 run_id=run_id, codec=codec, on_round=self._carried, pool=pool)
        self._pending: tuple | None = None   # (round, message type, group id, messages)
        self.initial: list[dict] = []        # MetricRecords made before the first round
        self._out: queue.Queue = queue.Queue()
        self._go = threading.Semaphore(0)
        self._stop = False
        self._limit = world.cfg.run.iterations

    # ---------------------------------------------------------------- Driver
    def budget(self) -> int:
        return self._limit + 1    # the one past the budget is refused (BudgetExceeded)

    def describe(self) -> dict:
        return {"flower_app": str(self.app.app_dir), "nodes": self.app.num_nodes,
                "run_config": self.app.run_config,
                "compression": None if self.codec is None else self.codec.method}

    def config_tables(self) -> dict:
        """The run's `[flower]` table in its stored config: the app, its run config and its
        federation's options (what marks a Flower run for the dashboard)."""
        app = self.app
        return {"flower": {"app": str(app.app_dir), "run_config": dict(app.run_config),
                           "federation": app.federation, "nodes": app.num_nodes,
                           "client_resources_num_cpus": app.num_cpus,
                           "processes": 1, **({} if self.grid.pool is None
                                              else self.grid.pool.describe())}}

    def evaluate(self):
        return None   # the strategy reports its own (Round.evaluations)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def rounds(self, first: int = 0):
        thread = threading.Thread(target=self._serve, name="flower-serverapp", daemon=True)
        thread.start()
        try:
            while True:
                kind, item = self._out.get()
                if kind == "round":
                    yield item
                    self._go.release()
                elif kind == "done":
                    return
                else:
                    raise item
        finally:
            self._stop = True
            self._go.release()
            thread.join()

    # ---------------------------------------------------------------- the thread
    def _serve(self) -> None:
        context = Context(run_id=self.run_id, node_id=SUPERLINK_NODE_ID, node_config={},
                          state=RecordDict(), run_config=dict(self.app.run_config))
        flwr_log = logging.getLogger("flwr")
        level = flwr_log.level
        if self.quiet_flower:
            flwr_log.setLevel(logging.WARNING)
        grid_round_trip = self.grid.round_trip

        def round_trip(messages, timeout):
            self._hand_over()
            if self.grid.index >= self._limit:
                raise BudgetExceeded(f"the ServerApp was still sending after {self._limit} rounds "
                                     "(run.iterations, the run's budget of send_and_receive "
                                     "calls): raise it, or lower the app's number of rounds")
            return grid_round_trip(messages, timeout)

        self.grid.round_trip = round_trip
        try:
            seed_everything(self.world.cfg.run.seed)
            if self.codec is not None:
                self.codec.activate()
            with flower_identity(self.run_id), strategy_tap(self._record):
                self.app.server_app(self.grid, context)
            self._hand_over(last=True)
            self._out.put(("done", None))
        except _Stop:
            pass
        except BaseException as e:  # noqa: BLE001 (the caller raises it)
            self._hand_over(last=True)   # a round carried before the ServerApp failed is kept
            self._out.put(("error", e))
        finally:
            if self.codec is not None:
                self.codec.deactivate()
            if self.grid.pool is not None:
                self.grid.pool.close()
            flwr_log.setLevel(level)

    def _carried(self, rnd: Round, kind: str, replies) -> None:
        errors = {str(m.metadata.src_node_id): m.error.reason for m in replies if m.has_error()}
        self._pending = (rnd, [], {"kind": kind, "replies": len(replies),
                                   "messages": rnd.participants + len(rnd.left_out),
                                   **({"errors": errors} if errors else {})})

    def _hand_over(self, last: bool = False) -> None:
        """The round carried last, with what the strategy made of it, to the caller; then wait
        until the next one is wanted."""
        if self._pending is None:
            return
        (rnd, records, what), self._pending = self._pending, None
        rnd.evaluations = evaluation_rows(records)
        store, run_id, at = self.world.store, self.world.run_id, rnd.report.clock
        if store is not None and run_id is not None:
            for entry in self.initial:
                store.append_event(run_id, "flower_metrics", entry, iteration=0, virtual_time_s=0.0)
            self.initial = []
            store.append_event(run_id, "flower_round", what, iteration=rnd.index, virtual_time_s=at)
            for entry in records:
                store.append_event(run_id, "flower_metrics", entry, iteration=rnd.index,
                                   virtual_time_s=at)
        self._out.put(("round", rnd))
        if last:
            return
        self._go.acquire()
        if self._stop:
            raise _Stop

    def _record(self, kind: str, server_round: int, record) -> None:
        if record is None:
            return
        entry = {"kind": kind, "server_round": int(server_round), "metrics": dict(record)}
        if self._pending is None:
            self.initial.append(entry)
        else:
            self._pending[1].append(entry)


def evaluation_rows(records: list[dict]) -> list[dict]:
    """A round's evaluation row from the strategy's records (module doc), or none."""
    by_kind = {e["kind"]: e["metrics"] for e in records}
    record = by_kind.get("centralized") or by_kind.get("evaluate")
    if record is None:
        return []
    content = RecordDict()
    content["m"] = MetricRecord({k: v for k, v in record.items() if isinstance(v, (int, float))})
    loss, acc = metric(content, "loss"), metric(content, "acc")
    if loss is None and acc is None:
        return []
    return [{"test_loss": loss, "test_accuracy": acc}]
