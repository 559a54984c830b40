"""`testbed run FILE --launcher torchrun`: one process per worker on this host, with torchrun.

`launch_torchrun(spec, cfg)` starts `python -m torch.distributed.run` with one process per
worker (rendezvous c10d on 127.0.0.1 at a free port), each running `python -m testbed.launch`
(testbed/distributed/rank_program.py, the rank's program), waits, and reports the run, or the rank that failed,
in one line. Each rank writes a small JSON report (run id, status, error) into the folder named
by REPORT_DIR_ENV; the launcher reads them to say which rank failed and marks the run failed
in the store if rank 0 could not.
"""
from __future__ import annotations

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

from tqdm import tqdm

from lgc_schema import OptionError
from testbed.errors import RunFailed, SetupError
from testbed.processes.lifeline import die_with_parent
from testbed.records.store import Store
from testbed.run import checkpoint
from testbed.runspec import RunSpec

REPORT_DIR_ENV = "TESTBED_LAUNCH_REPORT_DIR"
LAUNCHER_PID_ENV = "TESTBED_LAUNCHER_PID"
STOP_FILE = "stop"        # in the report folder: the launcher was told to stop (not a failure)
TIMEOUT_ENV = "TESTBED_DIST_TIMEOUT"
REPO_ROOT = Path(__file__).resolve().parent.parent


def count_workers(cfg) -> int:
    """Worker nodes of the file's network (what torchrun must start one process for)."""
    # deferred: it loads numba and networkx, which no other command needs
    from testbed.emulation.edge_network import build_network

    return len(build_network(cfg.network, cfg.run.seed).workers)


def processes(nproc: int | None, workers: int, federated: bool) -> int:
    """How many ranks to start: one per worker; for a `[federated]` file 1 to the clients of
    one exchange (`workers`: rank r runs slots k with k mod N = r), by default one per CPU."""
    if federated:
        nproc = nproc or min(workers, os.cpu_count() or 1)
        if not 1 <= nproc <= workers:
            raise OptionError("--nproc", nproc, f"1 to {workers}, the clients of one exchange "
                              "(rank r runs slots k with k mod nproc = r)")
        return nproc
    if (nproc or workers) != workers:
        raise OptionError("--nproc", nproc, f"{workers}, the file's number of workers: every worker "
                          "is one process (for several hosts, start torchrun -m testbed.launch on "
                          "each, see docs/distributed.md)")
    return workers


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


def _timeout() -> float | None:
    value = os.environ.get(TIMEOUT_ENV)
    return None if value in (None, "") else float(value)


def launch_torchrun(spec: RunSpec, cfg) -> int:
    """Run the experiment with one process per worker on this host; the exit code.

    torchrun's and the ranks' output go to a log file beside the store (its path is printed);
    the terminal gets a progress bar read from the store and, at the end, one line. torchrun
    dies with this process (PR_SET_PDEATHSIG) and its ranks with it (testbed.processes.lifeline)."""
    try:
        workers = count_workers(cfg)
    except ValueError as e:  # a network the validator let through but the topology refuses
        raise SetupError(f"{cfg.source}: {e}") from e
    nproc = processes(spec.nproc, workers, cfg.federated is not None)
    Store(spec.store).close()  # a bad --store is refused here, before any process starts
    log = log_path(spec.store)
    report_dir = Path(tempfile.mkdtemp(prefix="testbed-launch-"))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # N processes on one host: one thread each
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env[REPORT_DIR_ENV] = str(report_dir)
    env[LAUNCHER_PID_ENV] = str(os.getpid())
    cmd = torchrun_command(nproc, free_port(), rank_arguments(
        None if spec.resume is not None else spec.file, spec.store, list(spec.overrides),
        name=spec.name, timeout_s=_timeout(), quiet=True, resume=spec.resume),
        log_dir=report_dir / "torchrun")
    wall = time.perf_counter()
    print(f"torchrun: {nproc} processes; their output goes to {log}", file=sys.stderr, flush=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_torchrun_preexec)
    stop = None
    try:
        follow(proc, report_dir, spec.store, quiet=spec.quiet)
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
            _mark(spec.store, run_id, "stopped", f"stopped by {_signal_name(stop)}")
        print(f"run {run_id} stopped; rows so far are in {spec.store}; torchrun's and the ranks' "
              f"output: {log}", file=sys.stderr)
        raise stop
    if proc.returncode == 0 and zero.get("status") == "completed":
        if run_id is not None:  # every rank's checkpoint: resume refuses a completed run
            checkpoint.remove_run(spec.store, run_id)
        print(f"{zero['summary']}, {nproc} processes, wall time {wall:.1f} s -> {spec.store}")
        return 0
    reason = failure_reason(reports, nproc, log.read_text(errors="replace") if log.exists() else "")
    where = f"torchrun's and the ranks' output: {log}"
    if run_id is None:  # no run in the store: refused set-up (2) or lost before it began
        refused = len(reports) == nproc and all(
            rep.get("status") == "failed" and rep.get("primary") for rep in reports.values())
        raise (SetupError if refused else RunFailed)(f"{reason}; {where}")
    _mark(spec.store, run_id, "failed", reason)
    raise RunFailed(f"run {run_id} failed: {reason}; rows so far are in {spec.store}; {where}")


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
