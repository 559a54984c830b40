"""The sweep engine: the points of a grid run one at a time, N at once (`--jobs N`: N worker
processes, each running one point after another) or as Ray tasks (`--ray`), each point into a
store of its own; this process, the one writer of the sweep's store, copies each point's run in
(`Store.import_run`: one transaction, ids renumbered, sweep membership set) as soon as the
point ends.

- `run_point` is the one place a point is run: the entry `testbed run` uses
  (`testbed.api.run_spec` with a `RunSpec`), into the store it is given.
- `run_points` is the engine under `run_sweep` and `testbed tune` (testbed/tune/): it pulls
  points from an iterable only as a place frees, so a sampler can pick each point after the
  ones before it ended, and copies each run in as it ends.
- A sweep is identified by `sweep_key` (its file's content, grid, overrides and seeds), recorded
  in the store with its members: running the same sweep again skips the points that completed
  and runs the failed, stopped and missing ones again.
- A point's store lives beside the sweep's store (`STORE.points/`) while it runs; a Ray task
  writes it in a folder of its own on its node and returns the file's bytes. A point whose
  process is killed leaves no rows in the sweep's store unless its store holds a run, which is
  then recorded as failed; a Ray task whose worker dies is retried by Ray, afresh.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import signal
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from testbed import api
from testbed.errors import UserError, exit_code, one_line, stop_on_sigterm
from testbed.processes.lifeline import die_with_parent
from testbed.records.progress import summary_line
from testbed.records.store import Store
from testbed.run.wall_split import WallSplit
from testbed.runspec import RunSpec

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUNNER = "testbed.sweeps:run_point"
RAY_INSTALL = "pip install 'lgc-testbed[cluster]'"
RAY_RETRIES = 3          # a Ray task whose worker or node dies is run again, up to this often


@dataclass
class Point:
    """One run of a sweep: its file, its name, its grid values and every override it gets."""
    index: int                                   # 1-based, in grid order
    name: str                                    # BASE[key=value,...]
    file: str                                    # absolute (in --ray-working-dir: relative)
    overrides: list[str] = field(default_factory=list)   # the sweep's --set, then the grid's
    params: dict[str, str] = field(default_factory=dict)  # {short key: value}, the membership
    threads: int = 1                             # run.threads as the point's config says (0 -> 1)
    device: str = "cpu"                          # run.device: a Ray task of "cuda" gets a GPU
    runner: str = DEFAULT_RUNNER                 # module:function that runs it (run_point's shape)
    extra: dict = field(default_factory=dict)    # what another runner needs (JSON)
    trial: int | None = None                     # `testbed tune`: the study's trial it runs
    timed: bool = False                          # the run's wall seconds by piece come back ("wall")


def sweep_key(file: str, grid: list[tuple[str, list[str]]], overrides: list[str],
              seeds: str | None) -> str:
    """The identity of a sweep command: its file's content, grid, overrides and seeds."""
    content = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    spec = {"file": content, "grid": [[k, list(v)] for k, v in grid],
            "overrides": list(overrides), "seeds": seeds}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def run_point(point: Point, store: str, quiet: bool = True, watch=None) -> dict:
    """Run `point` into the store at `store` through `testbed run`'s entry
    (testbed.api.run_spec); never raises for a run that fails or is refused.

    Returns:
        {"status": completed | failed | refused, "line": one line}, and for a `timed` point
        "wall": the run's wall seconds by piece (`testbed.run.wall_split.WallSplit.as_dict`).
        `watch`: run_spec's, called with each round's progress.
    """
    out = io.StringIO()
    split = WallSplit() if point.timed else None
    try:
        with contextlib.redirect_stdout(out):   # its summary names the point's store: ours says it
            api.run_spec(RunSpec(store=store, file=point.file, name=point.name,
                                overrides=tuple(point.overrides), quiet=quiet),
                         watch=watch, timer=split)
    except Exception as e:  # what the CLI turns into exit 1 or 2; anything else is a bug
        code = exit_code(e)
        if code is None:
            raise
        result = {"status": "refused" if code == 2 else "failed", "line": one_line(e)}
    else:
        lines = out.getvalue().strip().splitlines()
        result = {"status": "completed", "line": lines[-1] if lines else "completed"}
    if split is not None:
        result["wall"] = split.as_dict()
    return result


def resolve(runner: str) -> Callable:
    module, _, name = runner.partition(":")
    return getattr(importlib.import_module(module), name)


# ----------------------------------------------------------------------------- the driver
@dataclass
class Outcome:
    point: Point
    status: str          # completed | failed | refused | stopped | skipped
    line: str = ""
    run_id: int | None = None    # in the sweep's store
    merge_s: float = 0.0         # wall seconds this process spent copying the run in
    result: dict = field(default_factory=dict)   # what the runner returned


def make_pool(jobs: int = 1, ray: str | None = None, ray_env: dict | None = None,
              quiet: bool = False):
    """Where points run: Ray tasks (`ray`: "local", "auto" or an address; without Ray this is
    refused here, before anything is written), `jobs` worker processes, or this process."""
    return (RayPool(ray, jobs, ray_env) if ray is not None else LocalPool(jobs) if jobs > 1
            else InlinePool(quiet))


def run_points(pool, points: Iterable[Point], store: str, *, sweep: str, key: str,
               landed: Callable[[Outcome], None]) -> None:
    """Run `points` on `pool` and copy each run into `store` as sweep `sweep`'s member (key
    `key`; a point's `trial`, if any, with it) as soon as it ends, then call `landed(outcome)`.
    Points are taken from `points` one at a time as a place frees (an iterator may make each
    when asked: `testbed tune` asks its sampler then). A Ctrl-C or SIGTERM stops the points
    running (their runs are kept, marked stopped, and landed) and is raised again."""
    work = Path(f"{store}.points")

    def land(point: Point, result: dict, point_store: Path | None) -> None:
        outcome = Outcome(point, result.get("status", "failed"), result.get("line", ""),
                          result=result)
        if point_store is not None and _holds_run(point_store):
            t0 = time.perf_counter()
            with Store(store) as db:   # opened per run: a reader of the store never waits long
                outcome.run_id = db.import_run(point_store, sweep=sweep, params=point.params,
                                               sweep_key=key, trial=point.trial)
                outcome.merge_s = time.perf_counter() - t0
                if outcome.status in ("completed", "pruned"):
                    outcome.line = summary_line(db, outcome.run_id, point.name)
        if point_store is not None:   # copied, or it holds no run
            _remove_store(point_store)
        landed(outcome)

    try:
        for finished in pool.run(points, work):
            land(*finished)
    except KeyboardInterrupt:
        for finished in pool.stop():
            land(*finished)
        raise
    finally:
        with contextlib.suppress(OSError):
            work.rmdir()  # only when empty: what a point left that could not be copied stays


def run_sweep(points: list[Point], store: str, *, sweep: str, key: str, spec: dict | None = None,
              jobs: int = 1, ray: str | None = None, ray_env: dict | None = None,
              quiet: bool = False, log: Callable[[str], None] = print,
              each: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run the points not yet completed in sweep `key` of `store`, `jobs` at once (or on Ray
    when `ray` is given: "local", "auto" or an address, with Ray's runtime environment
    `ray_env`), and copy each into `store` as it ends (then `each(outcome)` is called). One
    Outcome per point, in grid order. A Ctrl-C or SIGTERM stops the points running (their runs
    are kept, marked stopped) and is raised again."""
    pool = make_pool(jobs, ray, ray_env, quiet)   # first: without Ray, --ray is refused here
    with Store(store) as db:
        db.record_sweep(key, sweep, spec or {})
        members = db.sweep_members(key)
    outcomes = {p.index: Outcome(p, "skipped", "completed before", members[p.name]["id"])
                for p in points if members.get(p.name, {}).get("status") == "completed"}
    todo = [p for p in points if p.index not in outcomes]
    if outcomes:
        log(f"sweep {sweep}: {len(outcomes)} of {len(points)} points completed before; "
            f"running the other {len(todo)}")
    done = len(outcomes)

    def landed(outcome: Outcome) -> None:
        nonlocal done
        outcomes[outcome.point.index] = outcome
        done += outcome.status == "completed"
        line = (outcome.line if outcome.status == "completed"
                else f"{outcome.point.name} {outcome.status}: {outcome.line}")
        log(f"[{done}/{len(points)} done] {line}")
        if each is not None:
            each(outcome)

    run_points(pool, todo, store, sweep=sweep, key=key, landed=landed)
    return [outcomes.get(p.index) or Outcome(p, "stopped") for p in points]


def _holds_run(path: Path) -> bool:
    """Whether a point's store holds its run (a point stopped while it opened the store
    leaves a file without tables)."""
    if not path.exists():
        return False
    try:
        with Store(path, readonly=True) as s:
            return bool(s.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    except (UserError, sqlite3.Error):
        return False


def _remove_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# ----------------------------------------------------------------------------- local processes
class InlinePool:
    """One point at a time, in this process (`--jobs 1`), with its progress bar."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.current: tuple[Point, Path] | None = None

    def run(self, points: Iterable[Point], work: Path) -> Iterator[tuple[Point, dict, Path | None]]:
        work.mkdir(parents=True, exist_ok=True)
        for point in points:
            path = work / f"{point.index:04d}.db"
            _remove_store(path)
            self.current = (point, path)
            result = resolve(point.runner)(point, str(path), quiet=self.quiet)
            self.current = None
            yield point, result, path

    def stop(self) -> Iterator[tuple[Point, dict, Path | None]]:
        """The point that was running when the stop came: its run is marked stopped."""
        if self.current is not None:
            point, path = self.current
            self.current = None
            yield point, {"status": "stopped", "line": "stopped"}, path


class LocalPool:
    """`jobs` worker processes, each running the points handed to it one after another with
    `run.threads` CPU threads. The workers are forks of one server process (`start_worker_server`)
    that imported what a point runs once, so a worker costs a fork, not an interpreter's
    start-up and imports, and pays nothing per point beyond the point. A worker that dies takes
    only its own point with it (recorded as failed) and is replaced; workers die with this
    process (PR_SET_PDEATHSIG on the server, which ends with this process, and on the worker)."""

    def __init__(self, jobs: int):
        self.jobs = max(1, jobs)
        self.workers: list[_Worker] = []

    def run(self, points: Iterable[Point], work: Path) -> Iterator[tuple[Point, dict, Path | None]]:
        """A list's points are handed out in order, its workers all at the largest run.threads;
        any other iterable's points are taken one at a time when a worker is free (a new
        worker at its first point's run.threads)."""
        work.mkdir(parents=True, exist_ok=True)
        threads = (max((p.threads for p in points), default=1) if isinstance(points, Sequence)
                   else None)
        source = iter(points)
        exhausted = False

        def pull() -> Point | None:
            nonlocal exhausted
            point = None if exhausted else next(source, None)
            exhausted = point is None
            return point

        context = worker_context()
        try:
            while True:
                for w in self.workers:
                    if w.current is None and w.alive():
                        point = pull()
                        if point is None:
                            break
                        w.give(point, work)
                while len(self.workers) < self.jobs and (point := pull()) is not None:
                    w = _Worker(context, work, len(self.workers), threads or point.threads)
                    self.workers.append(w)
                    w.give(point, work)
                if exhausted and not any(w.current for w in self.workers):
                    return
                time.sleep(0.1)
                for w in self.workers:
                    if w.current is not None and (w.done() or not w.alive()):
                        yield w.take()
                self.workers = [w for w in self.workers if w.alive()]
        finally:
            for w in self.workers:
                w.close()

    def stop(self) -> Iterator[tuple[Point, dict, Path | None]]:
        """Stop the workers (SIGTERM: a run is marked stopped) and hand back their points."""
        for w in self.workers:
            w.end()
        for w in self.workers:
            if w.current is not None:
                yield w.take(stopped=True)
        self.workers = []


# What a worker runs, imported once in the server the workers fork from. Not torch._dynamo (a
# second): a run's optimizer and FLOP counter do without it (nodes/sgd.py, nodes/flops.py), and
# the methods that need it (LGC's coder trains with torch.optim.Adam) import it once per worker.
# Not testbed.cli (nor this module, which imports it): multiprocessing runs the sweep's main
# module again in each worker, and runpy warns when it finds that module already imported.
WORKER_PRELOAD = ("testbed.experiment",)


def start_worker_server() -> None:
    """Start the server the workers fork from, unless it runs: a process that imports
    WORKER_PRELOAD and waits. Called early (`testbed sweep` does before it checks the points),
    its imports overlap the sweep's own work. Why forking it is safe with torch: the server is
    single-threaded and only imports, with OMP_NUM_THREADS=1 in its environment, so importing
    numpy and torch starts no thread (no OpenBLAS pool; torch's OpenMP, intra-op and inter-op
    pools start at the first parallel op); a fork inherits no pool and no lock another thread
    held, and each worker sets its thread counts (`apply_threads`) before its first op, as a
    fresh interpreter would. (numpy's OpenBLAS reads its count once, at import: one thread in
    every worker.)"""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    with _environment(_thread_variables(1)):   # the server's environment, at its start
        multiprocessing.forkserver.ensure_running()


def worker_context():
    """multiprocessing's forkserver context, its server started (`start_worker_server`)."""
    start_worker_server()
    return multiprocessing.get_context("forkserver")


def _thread_variables(threads: int) -> dict[str, str]:
    return {var: str(threads or 1) for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Worker:
    """One worker process, forked from `worker_context`'s server: a point's JSON file's path
    sent down its pipe runs that point into STEM.db and writes STEM.result.json; its output
    goes to worker-N.log in the points' folder."""

    def __init__(self, context, work: Path, number: int, threads: int):
        self.log = work / f"worker-{number}.log"
        inbox, self.outbox = context.Pipe(duplex=False)
        setting = {"environ": {**os.environ, **_thread_variables(threads)}, "threads": threads}
        self.proc = context.Process(target=_worker_process, args=(inbox, str(self.log), setting),
                                    name=f"testbed-sweep-worker-{number}")
        self.proc.start()
        inbox.close()
        self.current: tuple[Point, Path] | None = None

    def alive(self) -> bool:
        return self.proc.exitcode is None

    def give(self, point: Point, work: Path) -> None:
        stem = work / f"{point.index:04d}"
        for old in (f"{stem}.db", f"{stem}.db-wal", f"{stem}.db-shm", f"{stem}.result.json"):
            Path(old).unlink(missing_ok=True)  # what a stopped or killed earlier try left
        Path(f"{stem}.json").write_text(json.dumps(asdict(point)))
        self.current = (point, stem)
        try:
            self.outbox.send(str(stem.resolve()) + ".json")
        except OSError:       # it died: `take` says so
            pass

    def done(self) -> bool:
        return self.current is not None and Path(f"{self.current[1]}.result.json").exists()

    def take(self, stopped: bool = False) -> tuple[Point, dict, Path]:
        point, stem = self.current
        self.current = None
        try:
            result = json.loads(Path(f"{stem}.result.json").read_text())
        except (OSError, ValueError):
            self.proc.join(timeout=5)   # its exit code, once it is gone
            code = self.proc.exitcode
            how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
                   else f"exit code {code}")
            result = {"status": "stopped" if stopped else "failed",
                      "line": f"its process ended without a result ({how}); its output: {self.log}"}
        for suffix in (".json", ".result.json"):
            Path(f"{stem}{suffix}").unlink(missing_ok=True)
        return point, result, Path(f"{stem}.db")

    def end(self) -> None:
        """SIGTERM (its run is marked stopped) and wait; a second Ctrl-C or SIGTERM while
        waiting, or a minute gone, kills it."""
        try:
            if self.alive():
                self.proc.terminate()
            self.proc.join(timeout=60)
        except KeyboardInterrupt:
            pass
        if self.alive():
            self.proc.kill()
            self.proc.join()

    def close(self) -> None:
        """No more points: the worker ends at the end of its pipe."""
        with contextlib.suppress(OSError):
            self.outbox.close()
        self.proc.join(timeout=30)
        if self.alive():
            self.end()
        if self.proc.exitcode == 0:
            self.log.unlink(missing_ok=True)


def _worker_process(inbox, log: str, setting: dict) -> None:
    """A worker, in the forked process (multiprocessing has set this sweep's working directory
    and module path): this sweep's environment and thread policy, output to `log`; then
    `worker_main` over the paths received."""
    die_with_parent(signal.SIGTERM)   # its parent is the server, which ends with the sweep
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd in (1, 2):
        os.dup2(out, fd)
    os.close(out)
    os.environ.clear()
    os.environ.update(setting["environ"])
    _thread_policy()(setting["threads"])   # preloaded by the server: no import here
    sys.exit(worker_main(_received(inbox)))


def _thread_policy():
    """testbed.experiment.apply_threads, for a forked worker or a Ray task (`run.threads`)."""
    # deferred: torch; the fork server preloads it (WORKER_PRELOAD), a Ray worker imports it here
    from testbed.experiment import apply_threads
    return apply_threads


def _received(inbox) -> Iterator[str]:
    while True:
        try:
            yield inbox.recv()
        except EOFError:   # the sweep closed its end: no more points
            return


def worker_main(paths: Iterable[str]) -> int:
    """Run the point of each JSON file in `paths`, into STEM.db beside it, and write its result
    to STEM.result.json; end at the end of `paths` or on SIGTERM (a run going on is marked
    stopped)."""
    stop_on_sigterm()
    try:
        for line in paths:
            path = Path(line.strip())
            point = Point(**json.loads(path.read_text()))
            stem = path.with_suffix("")
            try:
                result = resolve(point.runner)(point, f"{stem}.db", quiet=True)
            except KeyboardInterrupt:
                _write_result(stem, {"status": "stopped", "line": "stopped"})
                return 130
            _write_result(stem, result)
    except KeyboardInterrupt:
        return 130
    return 0


def _write_result(stem: Path, result: dict) -> None:
    tmp = Path(f"{stem}.result.tmp")
    tmp.write_text(json.dumps(result, default=str))
    tmp.replace(Path(f"{stem}.result.json"))   # whole or not at all



# ----------------------------------------------------------------------------- Ray
def import_ray():
    """Ray, or the one line saying how to install it (exit 2)."""
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray: Ray is not installed; install it with {RAY_INSTALL}") from None
    return ray


def check_cluster(address: str, env_address: str | None, timeout_s: float = 3.0) -> None:
    """A Ray cluster answers at `address` ("auto": RAY_ADDRESS, else the one `ray start` last
    started on this machine), or one line says what was tried (exit 2), within `timeout_s`,
    instead of Ray's own minute of retries or a traceback."""
    target = address
    if address == "auto":
        target = env_address or _last_started_cluster()
        if not target:
            raise UserError("--ray auto: no Ray cluster runs on this machine (none in RAY_ADDRESS, "
                            "none started by `ray start`); start one with `ray start --head`, give "
                            "its address, or use --ray alone for a Ray of this run's own")
    host, _, port = target.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray {address}: {target!r} is not a cluster address; allowed: HOST:PORT "
                        "(e.g. 127.0.0.1:6379), ray://HOST:PORT, 'auto', or --ray alone")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise UserError(f"--ray {address}: nothing answers at {host}:{port} ({e.strerror or e}); "
                        f"start a cluster there (`ray start --head --port {port}`) or give the "
                        "address `ray start` printed") from None


def _last_started_cluster() -> str | None:
    """The address of the cluster `ray start` last started here (Ray keeps it in its temp folder)."""
    try:
        from ray._private.services import find_bootstrap_address
        return find_bootstrap_address(None)
    except Exception:   # a Ray without that helper: ask Ray itself, in ray.init
        return None


class RayPool:
    """Each point a Ray task with `run.threads` CPUs (and one GPU where `run.device` asks for
    CUDA), on whatever node has them. `address`: "local" starts a Ray of `jobs` CPUs in this
    process's machine, "auto" joins the cluster this machine is part of, else a cluster's
    address. The task runs the point into a store in a temporary folder of its node and
    returns the file's bytes; a task whose worker or node dies is run again by Ray."""

    def __init__(self, address: str, jobs: int, runtime_env: dict | None = None):
        self.ray = import_ray()
        self.address = address
        self.jobs = jobs
        self.runtime_env = dict(runtime_env or {})
        if address != "local":   # before anything is written: a cluster that is not there
            check_cluster(address, os.environ.get("RAY_ADDRESS") or None)

    def run(self, points: Iterable[Point], work: Path) -> Iterator[tuple[Point, dict, Path | None]]:
        ray = self.ray
        local = self.address == "local"
        env = dict(self.runtime_env)
        if local:   # this machine's workers import this checkout, as the --jobs processes do
            env.setdefault("env_vars", {})["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        # "local": always a Ray of this run's own, even where a cluster runs or RAY_ADDRESS is set
        ray.init(address="local" if local else self.address, num_cpus=self.jobs if local else None,
                 include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env=env or None)
        try:
            task = ray.remote(ray_task)
            gpus = ray.cluster_resources().get("GPU", 0)   # "auto" takes one where there are some
            # a list's points all at once (Ray schedules them); another iterable's `jobs` at a
            # time, each taken when one ends
            limit = len(points) if isinstance(points, Sequence) else max(1, self.jobs)
            source = iter(points)
            refs = {}
            work.mkdir(parents=True, exist_ok=True)
            while True:
                while len(refs) < limit and (p := next(source, None)) is not None:
                    refs[task.options(num_cpus=p.threads, num_gpus=1 if p.device == "cuda" or (
                                          p.device == "auto" and gpus) else 0,
                                      max_retries=RAY_RETRIES,
                                      name=f"testbed-point-{p.index}").remote(p)] = p
                if not refs:
                    break
                ready, _ = ray.wait(list(refs), num_returns=1)
                point = refs.pop(ready[0])
                try:
                    result, blob = ray.get(ready[0])
                except ray.exceptions.RayError as e:
                    yield point, {"status": "failed", "line": f"its Ray task failed: {one_line(e)}"}, None
                    continue
                path = None
                if blob:
                    path = work / f"{point.index:04d}.db"
                    _remove_store(path)
                    path.write_bytes(blob)
                yield point, result, path
        finally:
            ray.shutdown()

    def stop(self) -> Iterator[tuple[Point, dict, Path | None]]:
        """End the tasks in flight with this driver's Ray job; their points run again next time."""
        self.ray.shutdown()
        return iter(())


def ray_task(point: Point) -> tuple[dict, bytes | None]:
    """A point on a Ray worker: the thread policy of `run.threads` set here (Ray's worker is
    shared by tasks), the run into a store of its own, that store's bytes returned."""
    apply_threads = _thread_policy()
    os.environ["OMP_NUM_THREADS"] = str(point.threads)
    apply_threads(point.threads)
    folder = tempfile.mkdtemp(prefix="testbed-point-")
    try:
        path = os.path.join(folder, "point.db")
        result = resolve(point.runner)(point, path, quiet=True)
        blob = None
        if os.path.exists(path):
            with Store(path) as s:   # everything in the main file, no -wal beside it
                s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            blob = Path(path).read_bytes()
        return result, blob
    finally:
        shutil.rmtree(folder, ignore_errors=True)
