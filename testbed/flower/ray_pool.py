"""A round's ClientApp calls on Ray actors, as Flower's simulation runs them (its Ray backend),
the emulation, the strategy and the store staying in this process.

Ray is started as Flower's backend starts it, from the federation's options
(testbed/flower/app.py): `init-args-*` are `ray.init`'s keywords (`init-args-address` joins a
running cluster; without it a local Ray of `init-args-num-cpus` CPUs, all of this machine's if
none, is started for the run and stopped after it), with Flower's defaults (no dashboard,
Ray's logging at WARNING, the actors' output sent to this terminal). An address is first
tried with a TCP connection of a few seconds, so one that nothing answers fails at once in one
line rather than after Ray's minute of retries.

Each actor asks for `client-resources-num-cpus` CPUs and `client-resources-num-gpus` of a GPU
(fractions allowed: Ray shares the GPU and sets the actor's CUDA_VISIBLE_DEVICES, on which a
ClientApp that picks "cuda" runs). The pool holds as many actors as fit the cluster node by
node (Flower's `pool_size_from_resources`: a node holds int(its CPUs / num-cpus) actors, and
no more than int(its GPUs / num-gpus) when a GPU share is asked), at most one per Flower node;
none fitting is the user's mistake, said in one line: a GPU share on a cluster without a GPU,
or an actor larger than any node. Each actor imports the app's ClientApp once (this
checkout's modules on its PYTHONPATH; the app folder must be at the same path on every node).

A round's calls go out as `testbed.flower.pool.ProcessPool`'s do, each the bytes serialized
for its node's link and its context, and come back as `call_client_app`'s tuples, which the
grid settles in node order, so the rows are a serial run's. A thread of this process feeds them
to the actors while the grid emulates the downlink, one call at a time to each actor, as
Flower's pool does: so the call an actor dies under is the one it was running (calls queued
behind it would fail with it, and under load which one it was running could not be told from
Ray's answers: a call that had just returned came back failed too). An actor that
dies (its process killed or ended by a ClientApp, its node lost) answers for that call as
Flower's simulation does: an error reply of code UNKNOWN whose reason is Ray's error
(`ray.exceptions.ActorDiedError`: the strategy counts it among its failures, the store as a
failed reply), charged no compute (what it computed died with it). The dead actor leaves the
pool and a new one starts where the cluster has room (Flower's pool keeps the dead actor and
sends it later calls, which fail in turn); it takes calls once it is up. A run whose every
actor is gone, none starting again within two minutes, fails in one line.
"""
from __future__ import annotations

import inspect
import logging
import os
import socket
import threading
import time
import warnings
from pathlib import Path

import ray
import torch
from flwr.app import Context

from testbed.errors import RunFailed, UserError, one_line
from testbed.flower.app import AppError, load_client_app
from testbed.flower.pool import Pool, call_client_app, died

try:   # what the address probe asks Ray's GCS with; without them ray.init tells
    import grpc
    from ray._private.services import canonicalize_bootstrap_address
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
except ImportError:
    grpc = canonicalize_bootstrap_address = gcs_service_pb2 = gcs_service_pb2_grpc = None

ROOT = Path(__file__).resolve().parents[2]   # this checkout: what the actors import
PROBE_S = 3.0      # seconds a cluster's address has to accept a TCP connection
READY_S = 120.0    # seconds the actors have to start (import torch, flwr and the ClientApp)
FLOWER_INIT = {"include_dashboard": False, "logging_level": "WARNING", "log_to_driver": True}


class ClientAppActor:
    """One actor: the app's ClientApp, imported once, run on each call sent to it."""

    def __init__(self, app_dir: str, run_id: int, threads: int):
        torch.set_num_threads(threads)
        logging.getLogger("flwr").setLevel(logging.WARNING)
        self.run_id, self.error, self.client_app = run_id, None, None
        try:
            self.client_app = load_client_app(app_dir)
        except Exception as e:  # noqa: BLE001 (said by `where`, in one line)
            self.error = one_line(e)

    def where(self) -> dict:
        """Where the actor runs: its process, node, GPUs (as Ray assigned them); or the error
        that kept its ClientApp from loading."""
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "gpus": [str(g) for g in ray.get_gpu_ids()],
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "error": self.error}

    def call(self, msg_bytes: bytes, context: Context, count: bool) -> tuple:
        return call_client_app(self.client_app, self.run_id, msg_bytes, context, count)


def capacity(nodes: list[dict], num_cpus: float, num_gpus: float) -> int:
    """Actors of `num_cpus` CPUs and `num_gpus` of a GPU that fit the live `nodes` (ray.nodes()),
    node by node, as Flower's pool_size_from_resources counts them."""
    total = 0
    for node in nodes:
        res = node.get("Resources") or {}
        if not node.get("Alive", True) or not res:
            continue
        fit = int(res.get("CPU", 0) / num_cpus + 1e-9)
        if num_gpus > 0:
            fit = min(fit, int(res.get("GPU", 0) / num_gpus + 1e-9))
        total += fit
    return total


def probe(address: str, said: str, timeout: float = PROBE_S) -> None:
    """The cluster at `address` ("auto": the one Ray finds on this machine) takes a TCP
    connection and answers Ray's first call within `timeout` seconds, or one line saying what
    was tried (UserError)."""
    target = address
    if address == "auto":
        if canonicalize_bootstrap_address is None:
            return   # a Ray without this helper: ray.init finds it
        try:
            target = canonicalize_bootstrap_address("auto")
        except Exception as e:  # noqa: BLE001 (Ray's ConnectionError: none found)
            raise UserError(f"{said} = 'auto': no Ray cluster found on this machine "
                            f"({one_line(e)}); start one with `ray start --head`, or give "
                            "its address") from None
        if target is None:
            return
    host, _, port = target.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"{said} = {address!r}: must be HOST:PORT, the address `ray start "
                        "--head` printed (e.g. \"127.0.0.1:6379\"), or \"auto\"")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        tried = f"a TCP connection to {host}:{port} failed within {timeout:g} s: " + (
            e.strerror or type(e).__name__)
    else:
        why = None if address.startswith("ray://") else gcs_silent(f"{host}:{port}", timeout)
        if why is None:
            return
        tried = (f"a TCP connection to {host}:{port} opened, but it did not answer Ray's "
                 f"first call (GetClusterId) as Ray's GCS does within {timeout:g} s: {why}")
    raise UserError(f"{said} = {address!r}: no Ray cluster answers there ({tried}); start one "
                    f"with `ray start --head --port {port}`, or give the address it printed")


def gcs_silent(address: str, timeout: float) -> str | None:
    """None if the Ray GCS at `address` answers the call ray.init makes first (GetClusterId)
    within `timeout` seconds, else why not (the gRPC status). None also where it cannot be
    asked (a Ray without these modules, or with TLS): ray.init then tells."""
    if grpc is None or os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return None
    with grpc.insecure_channel(address) as channel:
        try:
            gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
                gcs_service_pb2.GetClusterIdRequest(), timeout=timeout)
        except grpc.RpcError as e:
            return f"{e.code().name}, {e.details()}"
    return None


class _Slot:
    """An actor of the pool: its handle and where it runs."""

    def __init__(self, handle, ready):
        self.handle, self.ready, self.where = handle, ready, None


class RayPool(Pool):
    """The ClientApp of `app` (a `testbed.flower.app.FlowerApp`: its folder, node count,
    client resources, Ray's init arguments and where each option was given) on Ray actors
    (module doc)."""
    min_calls = 1   # a lone call goes to an actor too (its GPU, its process)

    def __init__(self, app, run_id: int = 1):
        self.said = app.said
        self.ray = ray
        self.app_dir, self.run_id = str(Path(app.app_dir).resolve()), run_id
        self.num_cpus, self.num_gpus = app.num_cpus, app.num_gpus
        self.owns, self.closed = False, False
        self.actors: list[_Slot] = []      # up, taking calls
        self.starting: list[_Slot] = []    # started, not up yet
        self.lost = 0                      # actors that died under a call
        self._start_ray(dict(app.ray_init))
        try:
            self._start_actors(app.num_nodes)
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- start
    def _said(self, key: str) -> str:
        return self.said.get(key, key)

    def _start_ray(self, init: dict) -> None:
        ray = self.ray
        params = inspect.signature(ray.init).parameters
        for key, value in init.items():
            if key not in params or params[key].kind is inspect.Parameter.VAR_KEYWORD:
                raise AppError(f"{self._said('init-args-' + key.replace('_', '-'))} = {value!r}: "
                               "not a keyword of ray.init, to which Flower passes its init-args "
                               "(address, num-cpus, num-gpus, logging-level, log-to-driver, ...)")
        named = [f"{self._said('init-args-' + k.replace('_', '-'))} = {v!r}"
                 for k, v in init.items()]
        self.address = init.pop("address", "local")
        if self.address != "local":
            probe(self.address, self._said("init-args-address"))
        if ray.is_initialized():   # this process's own Ray (a notebook's): used as it is
            return
        path = os.pathsep.join(dict.fromkeys(filter(None, [
            str(ROOT), *os.environ.get("PYTHONPATH", "").split(os.pathsep)])))
        try:
            with warnings.catch_warnings():   # Ray's notice about its future GPU defaults
                warnings.simplefilter("ignore", FutureWarning)
                ray.init(address=self.address, runtime_env={"env_vars": {"PYTHONPATH": path}},
                         **{**FLOWER_INIT, **init})
        except (ValueError, TypeError, ConnectionError, RuntimeError) as e:
            raise UserError(f"{', '.join(named) or 'Ray'}: ray.init refused: "
                            f"{one_line(e)}") from None
        self.owns = True

    def _where(self) -> str:
        return "a local Ray" if self.address == "local" else f"the Ray cluster at {self.address}"

    def _nodes(self) -> list[dict]:
        return [n for n in self.ray.nodes() if n.get("Alive", True) and n.get("Resources")]

    def _room(self) -> int:
        return capacity(self._nodes(), self.num_cpus, self.num_gpus)

    def _start_actors(self, num_nodes: int) -> None:
        nodes = self._nodes()
        fit = capacity(nodes, self.num_cpus, self.num_gpus)
        if fit == 0:
            cpus = ", ".join(f"{n['Resources'].get('CPU', 0):g}" for n in nodes)
            gpus = sum(n["Resources"].get("GPU", 0) for n in nodes)
            seen = f"{self._where()} has {len(nodes)} node(s) of {cpus} CPUs and {gpus:g} GPUs"
            cpu_said = self._said("client-resources-num-cpus")
            gpu_said = self._said("client-resources-num-gpus")
            if self.num_gpus > 0 and gpus == 0:
                raise UserError(f"{gpu_said} = {self.num_gpus:g}: a share of a GPU for each "
                                f"ClientApp, but {seen} (Flower: \"ActorPool is empty\"); give "
                                "0 to run them on CPUs")
            raise UserError(f"{cpu_said} = {self.num_cpus:g}, {gpu_said} = {self.num_gpus:g}: "
                            f"no node can hold one ClientApp actor ({seen}; an actor runs on "
                            "one node); lower them, or give a node more")
        self.want = min(fit, num_nodes)
        self.actor = self.ray.remote(ClientAppActor).options(
            num_cpus=self.num_cpus, num_gpus=self.num_gpus, max_restarts=0, max_task_retries=0)
        for _ in range(self.want):
            self._start_actor()
        self._admit(wait=READY_S, every=True)
        if not self.actors:
            raise RunFailed(f"no ClientApp actor started within {READY_S:g} s on "
                            f"{self._where()} (its CPUs or GPUs held by other jobs? `ray "
                            "status` shows them)")
        self.size = len(self.actors)
        self.nodes = len({s.where["node"] for s in self.actors})

    def _start_actor(self) -> None:
        handle = self.actor.remote(self.app_dir, self.run_id, max(1, int(self.num_cpus)))
        self.starting.append(_Slot(handle, handle.where.remote()))

    def _admit(self, wait: float = 0.0, every: bool = False) -> None:
        """The started actors that are up join the pool: those up now; or, waiting `wait`
        seconds at most, the first one up (`every`: all of them)."""
        ray = self.ray
        deadline = time.monotonic() + wait
        while self.starting:
            refs = [s.ready for s in self.starting]
            left = max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait(refs, num_returns=len(refs) if every or not wait else 1,
                                timeout=left)
            for slot in [s for s in self.starting if s.ready in ready]:
                self.starting.remove(slot)
                try:
                    slot.where = ray.get(slot.ready)
                except ray.exceptions.RayError:
                    continue   # died while starting (its node lost)
                if slot.where["error"]:
                    raise AppError(f"{self.app_dir}: its ClientApp does not load in a Ray "
                                   f"actor: {slot.where['error']}")
                self.actors.append(slot)
            if not wait or not ready or left == 0 or (self.actors and not every):
                return

    # ---------------------------------------------------------------- calls
    def describe(self) -> dict:
        return {"processes": self.size, "ray": {
            "address": self.address, "actors": self.size, "nodes": self.nodes,
            "client_resources_num_gpus": self.num_gpus}}

    def submit(self, calls: list[tuple[bytes, Context, bool]]):
        """`Pool.submit` (module doc): the calls fed to the actors from a thread of this
        process, one at a time to each, while the grid emulates the downlink."""
        self._admit()
        if not self.actors:
            self._revive()
        out: list = [None] * len(calls)
        failed: list = []
        thread = threading.Thread(target=self._feed, args=(calls, out, failed),
                                  name="flower-ray-pool", daemon=True)
        thread.start()

        def collect() -> list[tuple]:
            thread.join()
            if failed:
                raise failed[0]
            return out
        return collect

    def _feed(self, calls: list[tuple], out: list, failed: list) -> None:
        """Each call to the next actor free (its answer into `out`), until all have answered;
        an actor that dies under a call answers for it with Flower's error reply and leaves
        the pool (`_lost`). What stops the feeding goes to `failed`."""
        ray, todo, running = self.ray, list(range(len(calls)))[::-1], {}
        free = list(self.actors)
        try:
            while todo or running:
                while todo and free:
                    slot, i = free.pop(0), todo.pop()
                    running[slot.handle.call.remote(*calls[i])] = slot, i
                if not running:   # every actor lost
                    free.append(self._revive())
                    continue
                (ref,), _ = ray.wait(list(running), num_returns=1)
                slot, i = running.pop(ref)
                try:
                    out[i] = ray.get(ref)
                    free.append(slot)
                except ray.exceptions.RayTaskError:
                    raise   # our call itself raised (a ClientApp's exception is a reply)
                except ray.exceptions.RayError as e:   # the actor, or its node, died
                    msg_bytes, context, _ = calls[i]
                    out[i] = died(self.run_id, msg_bytes, context, e)
                    self._lost(slot)
                if self.starting:   # a replacement up since: it takes calls now
                    known = set(map(id, self.actors))
                    self._admit()
                    free += [s for s in self.actors if id(s) not in known]
        except BaseException as e:  # noqa: BLE001 (raised by collect, in the grid's thread)
            failed.append(e)

    def _lost(self, slot: _Slot) -> None:
        """The actor of `slot` died (or its node): it leaves the pool, and a new one starts
        where the cluster has room for it."""
        self.lost += 1
        if slot in self.actors:
            self.actors.remove(slot)
        try:
            self.ray.kill(slot.handle, no_restart=True)
        except Exception:  # noqa: BLE001 (already gone)
            pass
        if len(self.actors) + len(self.starting) < min(self.want, self._room()):
            self._start_actor()

    def _revive(self) -> _Slot:
        """An actor to run calls on when none is left: one starting, waited for."""
        if not self.starting and self._room():
            self._start_actor()
        self._admit(wait=READY_S)
        if not self.actors:
            raise RunFailed(f"every ClientApp actor died ({self.lost} lost) and none could be "
                            f"started again on {self._where()} within {READY_S:g} s (its "
                            "nodes lost, or no room left for an actor)")
        return self.actors[0]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.owns:
            self.ray.shutdown()   # a local Ray stops; a cluster's actors end with this job
            return
        for slot in self.actors + self.starting:   # a Ray this pool did not start stays up
            try:
                self.ray.kill(slot.handle, no_restart=True)
            except Exception:  # noqa: BLE001 (already gone)
                pass
