"""`testbed resume RUN`: continue a stopped or failed run from its last checkpoint.

The run keeps its id and name; its rows after the checkpoint's iteration are removed and
written again, so from the checkpoint on they are those the uninterrupted run would have
written (same file, same seed). A federated run (testbed/drivers/federated.py) resumes in one process
(`--launcher local`); under torchrun only data-parallel runs do."""
from __future__ import annotations

from pathlib import Path

from testbed.api import build_experiment, run_experiment
from testbed.commands import add_store_arg, open_store
from testbed.configuration.loading import config_from_stored
from testbed.distributed.launcher import launch_torchrun
from testbed.errors import UserError
from testbed.run import checkpoint
from testbed.runspec import RunSpec


class ResumeError(UserError):
    """A run that cannot be resumed: it is not stopped or failed, or it has no checkpoint."""


def register(sub) -> None:
    p = sub.add_parser("resume", help="continue a stopped or failed run from its last checkpoint")
    p.add_argument("run", help="run name (newest of that name) or id")
    add_store_arg(p)
    p.add_argument("--launcher", choices=["local", "torchrun"], default="local",
                   help="as the run was launched: its checkpoints are one file (local) or one "
                        "per rank (torchrun)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args) -> int:
    with open_store(args.store) as store:
        run = store.run(args.run)  # a run left `running` by a dead process is `failed` by now
        rid = run["id"]
        if run["status"] not in ("stopped", "failed"):
            raise ResumeError(f"run {rid} ({run['name']}) is {run['status']}; allowed: a stopped "
                              "or failed run")
        if "flower" in run["config"]:
            raise ResumeError(f"run {rid} ({run['name']}) is a Flower run, which keeps no "
                              "checkpoint; start it again with testbed flower run")
        if args.launcher == "torchrun" and run["config"].get("federated"):
            raise ResumeError(f"run {rid} ({run['name']}) is federated: --launcher torchrun "
                              "resumes data-parallel runs only; allowed: --launcher local")
        ranked = checkpoint.path_for(args.store, rid, rank=0)   # rank 0's, under torchrun
        path = ranked if args.launcher == "torchrun" else checkpoint.path_for(args.store, rid)
        if not path.exists() and args.launcher == "local" and ranked.exists():
            raise ResumeError(f"run {rid} ({run['name']}) ran under torchrun and has one "
                              "checkpoint per rank; allowed: --launcher torchrun")
        if not path.exists():
            every = run["config"].get("run", {}).get("checkpoint_every")
            raise ResumeError(f"run {rid} ({run['name']}) has no checkpoint at {path} "
                              f"(run.checkpoint_every = {every}: it ended before its first one, "
                              "or checkpoints were off); start it again with testbed run")
        cfg = config_from_stored(run["config"], source=f"run {rid} of {args.store}",
                                 base=Path(args.store).parent)
        try:
            state = checkpoint.load(path)
        except (OSError, ValueError, RuntimeError) as e:
            raise ResumeError(f"run {rid}: checkpoint {path} cannot be read ({e})") from e
        print(f"run {rid} ({run['name']}) resumes after iteration {state['loop']['iteration']}", flush=True)
        spec = RunSpec(store=args.store, launcher=args.launcher, quiet=args.quiet, resume=rid)
        if args.launcher == "torchrun":  # every rank loads its own checkpoint
            store.close()  # rank 0 writes it
            return launch_torchrun(spec, cfg)
        exp = build_experiment(cfg, store)
        exp.resume(rid, state)
        return run_experiment(exp, store, spec)
