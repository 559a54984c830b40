"""One process per worker with torchrun.

Two halves:
- `launch_torchrun(args, cfg)` is what `testbed run FILE --launcher torchrun` calls: it starts
  `python -m torch.distributed.run` on this host with one process per worker (rendezvous c10d on
  127.0.0.1 at a free port), waits, and reports the run, or the rank that failed, in one line.
- `python -m testbed.launch FILE [--store ...] [--set k=v ...]` is what every rank runs (torchrun
  sets RANK, WORLD_SIZE, LOCAL_RANK); use it directly with torchrun's own rendezvous arguments
  to run across several hosts (docs/distributed.md).

Each rank writes a small JSON report (run id, status, error) into the folder named by
TESTBED_LAUNCH_REPORT_DIR when the launcher set it; the launcher reads them to say which rank
failed and marks the run failed in the store if rank 0 could not.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.errors import ConfigError, RunFailed, SetupError
from testbed.lifeline import die_with_parent

REPORT_DIR_ENV = "TESTBED_LAUNCH_REPORT_DIR"
LAUNCHER_PID_ENV = "TESTBED_LAUNCHER_PID"
STOP_FILE = "stop"        # in the report folder: the launcher was told to stop (not a failure)
ORPHAN_GRACE_S = 8.0      # a rank whose launcher died ends within this (after its clean-up)
TIMEOUT_ENV = "TESTBED_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0
REPO_ROOT = Path(__file__).resolve().parent.parent


# ====================================================================== the launcher
def count_workers(cfg) -> int:
    """Worker nodes of the file's network (what torchrun must start one process for)."""
    from testbed.network import build_network

    return len(build_network(cfg.network, cfg.run.seed).workers)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def rank_arguments(file: str | None, store: str, overrides: list[str], *, name: str | None = None,
                   timeout_s: float | None = None, quiet: bool = False,
                   check_replicas: bool = True, resume: int | None = None) -> list[str]:
    """The arguments of `python -m testbed.launch` (what every rank gets)."""
    out = ([str(file)] if file is not None else []) + ["--store", str(store)]
    if resume is not None:
        out += ["--resume", str(resume)]
    for item in overrides:
        out += ["--set", item]
    if name:
        out += ["--name", name]
    if timeout_s is not None:
        out += ["--timeout", str(timeout_s)]
    if quiet:
        out.append("--quiet")
    if not check_replicas:
        out.append("--no-check-replicas")
    return out


def torchrun_command(nproc: int, port: int, rank_args: list[str],
                     log_dir: Path | None = None) -> list[str]:
    """`log_dir`: torchrun's own folder (else a torchelastic_* folder in the temp directory,
    left behind when torchrun is killed)."""
    logs = ["--log-dir", str(log_dir)] if log_dir is not None else []
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
            "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--max-restarts", "0", *logs,
            "-m", "testbed.launch", *rank_args]


def _timeout(args) -> float | None:
    value = getattr(args, "timeout", None) or os.environ.get(TIMEOUT_ENV)
    return None if value in (None, "") else float(value)


def launch_torchrun(args, cfg, resume: int | None = None) -> int:
    """Run the experiment with one process per worker on this host; the exit code.

    torchrun's and the ranks' output go to a log file beside the store (its path is printed);
    the terminal gets a progress bar read from the store and, at the end, one line. torchrun
    dies with this process (PR_SET_PDEATHSIG) and its ranks with it (testbed.lifeline)."""
    from schema import OptionError

    from testbed.store import Store

    try:
        workers = count_workers(cfg)
    except ValueError as e:  # a network the validator let through but the topology refuses
        raise SetupError(f"{cfg.source}: {e}") from e
    nproc = args.nproc or workers
    if nproc != workers:
        raise OptionError("--nproc", nproc, f"{workers}, the file's number of workers: every worker "
                          "is one process (for several hosts, start torchrun -m testbed.launch on "
                          "each, see docs/distributed.md)")
    Store(args.store).close()  # a bad --store is refused here, before any process starts
    log = log_path(args.store)
    report_dir = Path(tempfile.mkdtemp(prefix="testbed-launch-"))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # N processes on one host: one thread each
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env[REPORT_DIR_ENV] = str(report_dir)
    env[LAUNCHER_PID_ENV] = str(os.getpid())
    cmd = torchrun_command(nproc, free_port(), rank_arguments(
        None if resume is not None else args.file, args.store, list(getattr(args, "overrides", [])),
        name=getattr(args, "name", None), timeout_s=_timeout(args), quiet=True, resume=resume),
        log_dir=report_dir / "torchrun")
    wall = time.perf_counter()
    print(f"torchrun: {nproc} processes; their output goes to {log}", file=sys.stderr, flush=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_torchrun_preexec)
    stop = None
    try:
        follow(proc, report_dir, args.store, quiet=getattr(args, "quiet", False))
    except KeyboardInterrupt as e:  # SIGINT or SIGTERM (testbed.errors.Stopped)
        stop = e
        (report_dir / STOP_FILE).touch()  # the ranks' SIGTERM handler reads it: a stop, no failure
        _end(proc)
    reports = read_reports(report_dir, nproc)
    shutil.rmtree(report_dir, ignore_errors=True)
    wall = time.perf_counter() - wall
    zero = reports.get(0) or {}
    run_id = zero.get("run_id")
    if stop is not None:
        if run_id is not None:
            _mark(args.store, run_id, "stopped", f"stopped by {_signal_name(stop)}")
        print(f"run {run_id} stopped; rows so far are in {args.store}; torchrun's and the ranks' "
              f"output: {log}", file=sys.stderr)
        raise stop
    if proc.returncode == 0 and zero.get("status") == "completed":
        print(f"{zero['summary']}, {nproc} processes, wall time {wall:.1f} s -> {args.store}")
        return 0
    reason = failure_reason(reports, nproc, log.read_text(errors="replace") if log.exists() else "")
    where = f"torchrun's and the ranks' output: {log}"
    if run_id is None:  # no run in the store: refused set-up (2) or lost before it began
        refused = len(reports) == nproc and all(
            rep.get("status") == "failed" and rep.get("primary") for rep in reports.values())
        raise (SetupError if refused else RunFailed)(f"{reason}; {where}")
    _mark(args.store, run_id, "failed", reason)
    raise RunFailed(f"run {run_id} failed: {reason}; rows so far are in {args.store}; {where}")


def log_path(store: str) -> Path:
    """A new log file in the folder beside the store (`runs.db` -> `runs.db.logs/`)."""
    folder = Path(f"{store}.logs")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"torchrun-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def _torchrun_preexec() -> None:
    """In torchrun's process, before it starts: die with the launcher, however it dies."""
    die_with_parent(signal.SIGTERM)


def _end(proc: subprocess.Popen) -> None:
    """Stop torchrun (it sends SIGTERM to the ranks and waits for them); a second Ctrl-C or
    SIGTERM while waiting kills it."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    except (KeyboardInterrupt, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def _signal_name(stop: BaseException) -> str:
    return signal.Signals(getattr(stop, "signum", signal.SIGINT)).name


def follow(proc: subprocess.Popen, report_dir: Path, store_path: str, *, quiet: bool) -> None:
    """Wait for torchrun; meanwhile draw rank 0's progress from the store it writes."""
    bar = store = None
    try:
        while proc.poll() is None:
            time.sleep(0.5)
            if quiet:
                continue
            zero = read_reports(report_dir, 1).get(0) or {}
            if zero.get("run_id") is None:
                continue
            if store is None:
                from tqdm import tqdm

                from testbed.store import Store

                store = Store(store_path, readonly=True)
                bar = tqdm(total=zero.get("iterations"), unit="it", dynamic_ncols=True,
                           file=sys.stderr)
            row = store.db.execute("SELECT last_iteration, virtual_time_s, best_accuracy FROM runs "
                                   "WHERE id=?", (zero["run_id"],)).fetchone()
            if row and row[0] is not None:
                bar.n = row[0] + 1
                acc = "-" if row[2] is None else f"{100 * row[2]:.1f}%"
                bar.set_postfix_str(f"acc {acc} | vt {row[1]:.2f}s", refresh=False)
                bar.update(0)
    finally:
        if bar is not None:
            bar.close()
        if store is not None:
            store.close()


def read_reports(folder: Path, nproc: int) -> dict[int, dict]:
    out = {}
    for r in range(nproc):
        p = folder / f"rank{r}.json"
        try:
            out[r] = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
    return out


def exit_codes_in_log(text: str) -> dict[int, str]:
    """What torchrun's own failure summary says each failed rank exited with."""
    out = {}
    for m in re.finditer(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)", text):
        code = int(m.group(2))
        out[int(m.group(1))] = (f"killed by {signal.Signals(-code).name}" if code < 0 and
                                -code in signal.valid_signals() else f"exit code {code}")
    return out


def failure_reason(reports: dict[int, dict], nproc: int, log_text: str = "") -> str:
    """One sentence naming the rank that failed, the iteration and the cause: a rank that
    raised an error of its own wins, then ranks that vanished without a final report (with the
    exit code torchrun saw), then what the ranks still running saw (rank 0 first)."""
    finished = {r: rep for r, rep in reports.items() if rep.get("status") != "running"}
    own = {r: rep for r, rep in sorted(finished.items())
           if rep.get("status") == "failed" and rep.get("primary")}
    if own and len(own) == nproc and len({rep["error"] for rep in own.values()}) == 1:
        return f"every rank failed: {own[0]['error']}"  # e.g. a set-up error
    if own:
        return "; ".join(f"rank {r} (worker w{r}) failed{_at(rep)}: {rep['error']}"
                         for r, rep in own.items())
    seen = next((rep for _, rep in sorted(finished.items()) if rep.get("error")), None)
    vanished = [r for r in range(nproc) if r not in finished]
    if vanished:
        codes = exit_codes_in_log(log_text)
        return "; ".join(f"rank {r} (worker w{r}) ended{_at(seen)} without a report "
                         f"({codes.get(r, 'crashed, killed or hung')})" for r in vanished)
    if seen:
        return seen["error"]
    return "torchrun reported a failure; see its output"


def _at(report: dict | None) -> str:
    it = (report or {}).get("iteration")
    return "" if it is None else f" at iteration {it}"


def _mark(store_path: str, run_id: int, status: str, reason: str) -> None:
    """Give the run its final status if rank 0 could not (it died, or saw only a peer's
    failure where the launcher knows the run was stopped); rows written so far stay."""
    from testbed.store import Store

    try:
        with Store(store_path) as store:  # opening it also marks runs of dead processes
            run = store.run(run_id)
            generic = not run.get("error") or "the run's process ended" in run["error"]
            if run["status"] == "running" or (run["status"] == "failed" and (
                    status == "stopped" or generic)):
                store.finish_run(run_id, status, reason)
    except Exception as e:  # say so rather than hide the run's own error
        print(f"testbed: warning: could not mark run {run_id} {status} in {store_path}: {e}",
              file=sys.stderr)


# ====================================================================== every rank
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m testbed.launch",
                                description="one rank of a torchrun run (rank r = worker r)")
    p.add_argument("file", nargs="?", help="experiment TOML file (the same on every host)")
    p.add_argument("--resume", type=int, metavar="RUN_ID",
                   help="continue run RUN_ID of --store from its checkpoints instead of a file")
    p.add_argument("--store", default="runs.db", help="SQLite store, written by rank 0 only")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--name", help="run name")
    p.add_argument("--timeout", type=float, default=None,
                   help=f"seconds a collective may wait for a rank before the run fails "
                        f"(default ${TIMEOUT_ENV} or {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--no-check-replicas", dest="check_replicas", action="store_false",
                   help="skip the per-iteration checksum that every replica applied the same update")
    p.add_argument("--quiet", action="store_true", help="no progress bar on rank 0")
    return p


class _Reporter:
    """This rank's JSON report for the launcher (nothing when torchrun was started by hand)."""

    def __init__(self, rank: int):
        folder = os.environ.get(REPORT_DIR_ENV)
        self.path = Path(folder) / f"rank{rank}.json" if folder else None

    def write(self, **fields) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(fields, default=str))
            tmp.replace(self.path)  # whole file or nothing: the launcher may read it any time
        except OSError:  # the folder is gone with a dead launcher: nobody is left to read it
            pass


class _Launcher:
    """This rank's view of `testbed run --launcher torchrun` (the process that started
    torchrun), when it was: did it ask for a stop, is it still alive."""

    def __init__(self):
        self.pid = _env_int(LAUNCHER_PID_ENV)
        folder = os.environ.get(REPORT_DIR_ENV)
        self.folder = Path(folder) if folder else None

    def stop_requested(self) -> bool:
        return self.folder is not None and (self.folder / STOP_FILE).exists()

    def gone(self) -> bool:
        from testbed.lifeline import alive

        return self.pid is not None and not alive(self.pid)

    def why_sigterm(self) -> str | None:
        """'stop' (the user stopped the run), 'orphaned' (the launcher died) or None."""
        return "stop" if self.stop_requested() else "orphaned" if self.gone() else None

    def clean_up(self) -> None:
        """A dead launcher cannot remove its temporary folder: the ranks do."""
        if self.folder is not None and self.gone():
            shutil.rmtree(self.folder, ignore_errors=True)


def tie_to_launcher(launcher: _Launcher) -> None:
    """End this rank with torchrun (PR_SET_PDEATHSIG: SIGTERM, handled as a failure or a stop),
    and within ORPHAN_GRACE_S of its launcher's or torchrun's death in any case (a watchdog
    thread, for a rank stuck in a collective or a system without prctl)."""
    from testbed.lifeline import watch

    die_with_parent(signal.SIGTERM)
    watch([launcher.pid] if launcher.pid else [], ORPHAN_GRACE_S, before_exit=launcher.clean_up)


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    rank, world, local = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK")
    if rank is None or world is None or local is None:
        print("testbed: error: python -m testbed.launch is the per-rank entry of a torchrun run "
              "(RANK, WORLD_SIZE, LOCAL_RANK are not set); use `testbed run FILE --launcher "
              "torchrun` or `torchrun --nproc-per-node N -m testbed.launch FILE`", file=sys.stderr)
        return 2
    who = f"rank {rank}"
    launcher = _Launcher()
    tie_to_launcher(launcher)
    reporter = _Reporter(rank)
    reporter.write(status="running", rank=rank)
    try:
        return _rank_main(args, rank, local, who, reporter, launcher)
    finally:
        launcher.clean_up()


def _rank_main(args, rank: int, local: int, who: str, reporter: _Reporter,
               launcher: _Launcher) -> int:

    from testbed.config import load_config

    overrides = list(args.overrides)
    if args.name:
        overrides.append(f"run.name={json.dumps(args.name)}")
    try:
        if args.resume is not None:  # the run's own configuration, as stored
            from testbed.config import config_from_stored
            from testbed.store import Store

            with Store(args.store, readonly=True) as s:
                cfg = config_from_stored(s.run(args.resume)["config"],
                                         source=f"run {args.resume} of {args.store}")
        elif args.file is None:
            raise ConfigError("", message="give an experiment FILE or --resume RUN_ID")
        else:
            cfg = load_config(args.file, overrides)
    except ConfigError as e:
        reporter.write(status="failed", primary=True, rank=rank, error=str(e))
        print(f"testbed: error: {who}: {e}", file=sys.stderr)
        return 2

    import torch

    from nodes.device import resolve_device
    from testbed.comm import Comm, WorkerFailure, install_sigterm
    from testbed.distributed import DistributedExperiment
    from testbed.experiment import ExperimentError
    from testbed.store import Store

    try:
        device = resolve_device(cfg.run.device)
    except ValueError as e:
        reporter.write(status="failed", primary=True, rank=rank, error=str(e))
        print(f"testbed: error: {who}: run.device: {e}", file=sys.stderr)
        return 2
    if device.type == "cuda":  # one GPU per local rank; "cuda" now means this one
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    timeout = args.timeout or float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    comm = Comm.init(device=device, timeout_s=timeout)
    install_sigterm(comm, launcher.why_sigterm)

    store = Store(args.store) if rank == 0 else None
    exp = None
    try:
        try:
            exp = DistributedExperiment(cfg, store, comm, check_replicas=args.check_replicas,
                                        store_path=args.store)
        except (ExperimentError, ValueError, FileNotFoundError, KeyError) as e:
            comm.failing = True
            comm.report_failure(e)
            reporter.write(status="failed", primary=True, rank=rank, error=str(e).strip("'\""))
            print(f"testbed: error: {who}: {str(e).strip(chr(39) + chr(34))}", file=sys.stderr)
            return 2
        close = lambda: None  # noqa: E731
        if rank == 0 and not args.quiet:
            from testbed.progress import progress_printer

            exp.progress, close = progress_printer(exp.iterations, False)
        wall = time.perf_counter()
        try:
            if args.resume is not None:
                from testbed import checkpoint

                exp.resume(args.resume, checkpoint.load(exp.checkpoint_path(args.resume)))
            else:
                exp.start()
            reporter.write(status="running", rank=rank, run_id=exp.run_id,
                           iterations=exp.iterations)
            exp.run()
        except KeyboardInterrupt as e:  # Ctrl-C, or the launcher's SIGTERM (Stopped)
            close()
            reporter.write(status="stopped", rank=rank, run_id=exp.run_id,
                           iteration=comm.iteration)
            return getattr(e, "exit_code", 130)
        except BaseException as e:  # the store (rank 0) already marked the run failed
            close()
            comm.failing = True
            comm.report_failure(e)
            primary = not isinstance(e, WorkerFailure)
            text = f"{type(e).__name__}: {e}" if primary else str(e)
            reporter.write(status="failed", primary=primary, rank=rank, run_id=exp.run_id,
                           error=text, iteration=comm.iteration)
            print(f"testbed: error: {who}: run {exp.run_id} failed: {text}", file=sys.stderr)
            return 1
        close()
        summary = _summary(store, exp, time.perf_counter() - wall) if rank == 0 else ""
        reporter.write(status="completed", rank=rank, run_id=exp.run_id, summary=summary)
        if rank == 0 and reporter.path is None:
            print(summary)
        comm.close()
        return 0
    finally:
        if store is not None:
            store.close()


def _summary(store, exp, wall_s: float) -> str:
    from testbed.progress import summary_line

    return f"{summary_line(store, exp.run_id, exp.cfg.run.name)}, rank 0 wall time {wall_s:.1f} s"


if __name__ == "__main__":
    sys.exit(main())
