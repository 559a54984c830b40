"""`python -m testbed.launch FILE [--store ...] [--set k=v ...]`: one rank of a torchrun run.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK; rank r is worker r (a `[federated]` file: rank r
runs the slots k with k mod WORLD_SIZE = r, testbed/distributed/federated.py). `testbed run FILE --launcher
torchrun` starts it through torchrun (testbed/distributed/launcher.py); use it directly with torchrun's own
rendezvous arguments to run across several hosts (docs/distributed.md). When the launcher
started it, the rank writes its JSON report (run id, status, error) into the launcher's folder
and ends with the launcher.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import torch

from nodes.device import resolve_device
from testbed.configuration.loading import config_from_stored, load_config
from testbed.distributed.comm import Comm, WorkerFailure, install_sigterm
from testbed.distributed.launcher import (
    LAUNCHER_PID_ENV,
    REPORT_DIR_ENV,
    STOP_FILE,
    TIMEOUT_ENV,
)
from testbed.distributed.rank import rank_experiment
from testbed.errors import ConfigError, ExperimentError
from testbed.processes.lifeline import alive, die_with_parent, watch
from testbed.records.progress import progress_printer, summary_line, unit_of
from testbed.records.store import Store
from testbed.run import checkpoint

ORPHAN_GRACE_S = 8.0      # a rank whose launcher died ends within this (after its clean-up)
DEFAULT_TIMEOUT_S = 300.0


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
    overrides = list(args.overrides)
    if args.name:
        overrides.append(f"run.name={json.dumps(args.name)}")
    try:
        if args.resume is not None:  # the run's own configuration, as stored
            with Store(args.store, readonly=True) as s:
                cfg = config_from_stored(s.run(args.resume)["config"],
                                         source=f"run {args.resume} of {args.store}",
                                         base=Path(args.store).parent)
        elif args.file is None:
            raise ConfigError("", message="give an experiment FILE or --resume RUN_ID")
        else:
            cfg = load_config(args.file, overrides)
    except ConfigError as e:
        reporter.write(status="failed", primary=True, rank=rank, error=str(e))
        print(f"testbed: error: {who}: {e}", file=sys.stderr)
        return 2

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
            exp = rank_experiment(cfg, store, comm, check_replicas=args.check_replicas,
                                 store_path=args.store)
        except (ExperimentError, ValueError, FileNotFoundError, KeyError) as e:
            comm.failing = True
            comm.report_failure(e)
            reporter.write(status="failed", primary=True, rank=rank, error=str(e).strip("'\""))
            print(f"testbed: error: {who}: {str(e).strip(chr(39) + chr(34))}", file=sys.stderr)
            return 2
        close = lambda: None  # noqa: E731
        if rank == 0 and not args.quiet:
            exp.progress, close = progress_printer(exp.iterations, False, unit_of(exp.cfg))
        wall = time.perf_counter()
        try:
            if args.resume is not None:
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
    return f"{summary_line(store, exp.run_id, exp.cfg.run.name)}, rank 0 wall time {wall_s:.1f} s"


if __name__ == "__main__":
    sys.exit(main())
