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
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPORT_DIR_ENV = "TESTBED_LAUNCH_REPORT_DIR"
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


def rank_arguments(file: str, store: str, overrides: list[str], *, name: str | None = None,
                   timeout_s: float | None = None, quiet: bool = False,
                   check_replicas: bool = True) -> list[str]:
    """The arguments of `python -m testbed.launch` (what every rank gets)."""
    out = [str(file), "--store", str(store)]
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


def torchrun_command(nproc: int, port: int, rank_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
            "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--max-restarts", "0",
            "-m", "testbed.launch", *rank_args]


def _timeout(args) -> float | None:
    value = getattr(args, "timeout", None) or os.environ.get(TIMEOUT_ENV)
    return None if value in (None, "") else float(value)


def launch_torchrun(args, cfg) -> int:
    """Run the experiment with one process per worker on this host; the exit code."""
    from testbed.commands import fail

    try:
        workers = count_workers(cfg)
    except Exception as e:  # a network the validator let through but the topology refuses
        return fail(f"{cfg.source}: {e}", 2)
    nproc = args.nproc or workers
    if nproc != workers:
        return fail(f"--nproc = {nproc}: the file's network has {workers} workers and every worker is "
                    f"one process; use --nproc {workers} (for several hosts, start torchrun -m "
                    "testbed.launch on each, see docs/distributed.md)", 2)
    report_dir = Path(tempfile.mkdtemp(prefix="testbed-launch-"))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # N processes on one host: one thread each
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env[REPORT_DIR_ENV] = str(report_dir)
    cmd = torchrun_command(nproc, free_port(), rank_arguments(
        args.file, args.store, list(args.overrides), name=getattr(args, "name", None),
        timeout_s=_timeout(args), quiet=getattr(args, "quiet", False)))
    wall = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:  # torchrun got the SIGINT too and ends its workers
        rc = proc.wait()
        print(f"stopped; rows so far are in {args.store}", file=sys.stderr)
        return 130
    reports = read_reports(report_dir, nproc)
    for p in report_dir.glob("*.json"):
        p.unlink()
    report_dir.rmdir()
    wall = time.perf_counter() - wall
    zero = reports.get(0) or {}
    if rc == 0 and zero.get("status") == "completed":
        print(f"{zero['summary']}, {nproc} processes, wall time {wall:.1f} s -> {args.store}")
        return 0
    reason = failure_reason(reports, nproc)
    run_id = zero.get("run_id")
    if run_id is None:  # no run in the store: refused set-up (2) or lost before it began
        refused = len(reports) == nproc and all(
            rep.get("status") == "failed" and rep.get("primary") for rep in reports.values())
        return fail(f"{reason} (torchrun exit code {rc})", 2 if refused else 1)
    _mark_failed(args.store, run_id, reason)
    return fail(f"run {run_id} failed: {reason} (torchrun exit code {rc}); rows so far are in "
                f"{args.store}", 1)


def read_reports(folder: Path, nproc: int) -> dict[int, dict]:
    out = {}
    for r in range(nproc):
        p = folder / f"rank{r}.json"
        try:
            out[r] = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
    return out


def failure_reason(reports: dict[int, dict], nproc: int) -> str:
    """One sentence naming the rank that failed: a rank that raised an error of its own wins,
    then what rank 0 saw (it names ranks that never reached a collective), then ranks that
    vanished without a final report."""
    finished = {r: rep for r, rep in reports.items() if rep.get("status") != "running"}
    own = {r: rep["error"] for r, rep in sorted(finished.items())
           if rep.get("status") == "failed" and rep.get("primary")}
    parts = []
    if own and len(own) == nproc and len(set(own.values())) == 1:  # e.g. a setup error
        parts.append(f"every rank failed: {next(iter(own.values()))}")
    else:
        parts += [f"rank {r} (worker w{r}) failed: {e}" for r, e in own.items()]
    vanished = [r for r in range(nproc) if r not in finished]
    if not parts and finished.get(0, {}).get("error"):
        parts.append(finished[0]["error"])
    if vanished:
        parts.append("rank(s) " + ", ".join(map(str, vanished)) + " ended without a report "
                     "(crashed, killed or hung)")
    if not parts:
        parts = [next((rep["error"] for rep in finished.values() if rep.get("error")),
                      "torchrun reported a failure; see its output above")]
    return "; ".join(parts)


def _mark_failed(store_path: str, run_id: int, reason: str) -> None:
    """If rank 0 died before it could, mark the run failed (rows written so far stay)."""
    from testbed.store import Store

    try:
        with Store(store_path) as store:  # opening it also marks runs of dead processes
            run = store.run(run_id)
            if run["status"] == "running" or (run["status"] == "failed" and not run.get("error")):
                store.finish_run(run_id, "failed", reason)
            elif run["status"] == "failed" and "the run's process ended" in (run.get("error") or ""):
                store.finish_run(run_id, "failed", reason)
    except Exception as e:  # the store is the lead's; say so rather than hide the run's error
        print(f"testbed: warning: could not mark run {run_id} failed in {store_path}: {e}",
              file=sys.stderr)


# ====================================================================== every rank
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m testbed.launch",
                                description="one rank of a torchrun run (rank r = worker r)")
    p.add_argument("file", help="experiment TOML file (the same on every host)")
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
        tmp.write_text(json.dumps(fields, default=str))
        tmp.replace(self.path)  # whole file or nothing: the launcher may read it any time


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
    reporter = _Reporter(rank)
    reporter.write(status="running", rank=rank)

    from testbed.config import ConfigError, load_config

    overrides = list(args.overrides)
    if args.name:
        overrides.append(f"run.name={json.dumps(args.name)}")
    try:
        cfg = load_config(args.file, overrides)
    except ConfigError as e:
        reporter.write(status="failed", primary=True, rank=rank, error=str(e))
        print(f"testbed: error: {who}: {e}", file=sys.stderr)
        return 2

    import torch

    from nodes.device import resolve_device
    from testbed.distributed import Comm, DistributedExperiment, WorkerFailure, install_sigterm
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
    install_sigterm(comm)

    store = Store(args.store) if rank == 0 else None
    exp = None
    try:
        try:
            exp = DistributedExperiment(cfg, store, comm, check_replicas=args.check_replicas)
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
            exp.start()
            reporter.write(status="running", rank=rank, run_id=exp.run_id)
            exp.run()
        except KeyboardInterrupt:
            close()
            reporter.write(status="stopped", rank=rank, run_id=exp.run_id)
            return 130
        except BaseException as e:  # the store (rank 0) already marked the run failed
            close()
            comm.failing = True
            comm.report_failure(e)
            primary = not isinstance(e, WorkerFailure)
            text = f"{type(e).__name__}: {e}" if primary else str(e)
            reporter.write(status="failed", primary=primary, rank=rank, run_id=exp.run_id,
                           error=text)
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
