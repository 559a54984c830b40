"""The ClientApp calls of a round run concurrently, as Flower's simulation runs them in its
actors: `Pool` is what the grid (testbed/flower/grid.py) asks of them, with two kinds: forked
worker processes on this machine (`ProcessPool`, here) and Ray actors on a Ray cluster
(`testbed.flower.ray_pool.RayPool`). Both run a call with `call_client_app` and answer it as
the same tuple, so the grid settles them alike.

The process pool's size is what the app asks each ClientApp for and what the run has:
`processes = run.threads // client-resources num-cpus` (the federation's
`options.backend.client-resources` or `--federation-config client-resources-num-cpus=N`), each
worker with `num-cpus` torch threads; under two processes the grid calls the ClientApps in this
process, one after the other. Workers start once per run, forked from a forkserver: a fresh
single-threaded process that imports torch and flwr once, so a worker starts without paying
those imports and without copying this process's threads (the ServerApp's, torch's pools)
mid-use, as a plain fork would; each worker then imports the app's ClientApp.

A call travels as Flower serializes it: the message's protobuf bytes (sent off before the
downlink is emulated, which runs meanwhile; the call of a node whose message is lost is
dropped) and the node's context (pickled) go out, the reply's bytes (which the link then carries
as they are) and the context it left come back, with the FLOPs and
module trace of testbed/flower/flops.py, whose cache stays in this process: it decides before
the round which calls are counted and settles their figures after, in node order, as the serial
grid does. So the virtual clock, the bytes and every row are those of a serial run (under
`run.compute_time = "flops"`: a measured compute time is a wall time, contention's). What can
differ is an app's draw from a *global* random generator inside a ClientApp (each worker has
its own), as under Flower's simulation; the example app seeds its own generators.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from uuid import uuid4

import torch
from flwr.app import Context
from flwr.common.constant import ErrorCode

from testbed.errors import ConfigError, RunFailed
from testbed.flower.app import load_client_app
from testbed.flower.driver import flower_identity
from testbed.flower.flops import run_measured
from testbed.flower.grid import deserialize, error_reply, run_client_app, serialize

_worker: dict = {}   # in a worker: its ClientApp and run id


def processes(threads: int, num_cpus: float) -> int:
    """Worker processes for `run.threads` and each ClientApp's num-cpus (1: serial)."""
    return max(1, int(threads // max(num_cpus, 1)))


def _start(app_dir: str, run_id: int, num_threads: int) -> None:
    torch.set_num_threads(num_threads)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    _worker["client_app"] = load_client_app(app_dir)
    _worker["run_id"] = run_id


def call_client_app(client_app, run_id: int, msg_bytes: bytes, context: Context,
                    count: bool) -> tuple:
    """One call where a pool runs it: `client_app` on the message of `msg_bytes` with
    `context`, its FLOPs counted if `count`: (reply bytes, context after, ok, FLOPs or None,
    module trace, wall seconds)."""
    with flower_identity(run_id):
        msg = deserialize(msg_bytes)

        def call():
            reply = run_client_app(client_app, msg, context)
            return reply, not reply.has_error()
        c = time.perf_counter()
        reply, ok, flops, trace = run_measured(call, count)
        wall = time.perf_counter() - c
        return serialize(reply), context, ok, flops, trace, wall


def died(run_id: int, msg_bytes: bytes, context: Context, e: Exception) -> tuple:
    """The answer of a call whose process died under it, as Flower's simulation gives it (its
    Ray backend's worker loop): an error reply of code UNKNOWN whose reason is the error's
    class and text, the context as it was sent, no FLOPs (what the call computed died with
    it), an empty trace."""
    with flower_identity(run_id):
        reply = error_reply(deserialize(msg_bytes), e, ErrorCode.UNKNOWN)
        reply.metadata.__dict__["_message_id"] = str(uuid4())
        return serialize(reply), context, False, 0.0, (), 0.0


def _call(msg_bytes: bytes, context: Context, count: bool) -> tuple:
    return call_client_app(_worker["client_app"], _worker["run_id"], msg_bytes, context, count)


def _calls(calls: list[tuple]) -> list[tuple]:
    return [_call(*call) for call in calls]


class Pool:
    """Where a round's ClientApp calls run. `submit(calls)` sends off each (message bytes,
    context, count) and returns the function that waits for them: [(reply bytes, context
    after, ok, FLOPs or None, trace, wall seconds)] in the order given (`call_client_app`'s
    tuples). A round of fewer than `min_calls` calls runs in the grid's process instead.
    `describe()`: what the run's stored config says of it; `close()` may be called twice."""
    size: int = 1
    min_calls: int = 2

    def submit(self, calls: list[tuple[bytes, Context, bool]]):
        raise NotImplementedError

    def describe(self) -> dict:
        return {"processes": self.size}

    def close(self) -> None:
        raise NotImplementedError


class ProcessPool(Pool):
    """`size` worker processes running the app at `app_dir`'s ClientApp, `threads` torch
    threads each."""

    def __init__(self, app_dir: str, run_id: int, size: int, threads: int):
        if size < 2:
            raise ConfigError("run.threads", size, "a pool of at least 2 processes")
        self.size = size
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(["torch", "flwr.app", "testbed.flower.pool"])
        self.executor = ProcessPoolExecutor(size, mp_context=context,
                                            initializer=_start,
                                            initargs=(str(app_dir), run_id, threads))

    def submit(self, calls: list[tuple[bytes, Context, bool]]):
        """`Pool.submit`: the calls go out in one contiguous chunk per worker (one round trip
        each, not one per call)."""
        step = -(-len(calls) // self.size)
        try:
            futures = [self.executor.submit(_calls, calls[i:i + step])
                       for i in range(0, len(calls), step)]
        except BrokenProcessPool as e:
            raise self._died() from e

        def collect() -> list[tuple]:
            try:
                return [out for f in futures for out in f.result()]
            except BrokenProcessPool as e:
                raise self._died() from e
        return collect

    @staticmethod
    def _died() -> RunFailed:
        return RunFailed("a worker process running ClientApps died (killed, out of memory, or "
                         "the ClientApp ended its process); run them in this process "
                         "(run.threads below 2 x client-resources-num-cpus) to see why")

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
