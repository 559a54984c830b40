"""`testbed tune FILE --param KEY=LOW:HIGH ... --objective NAME ... --trials N --name STUDY`:
search an experiment file's keys with Optuna, each trial an ordinary run of the store.

The engine is testbed/tune/ (Optuna is imported only when the command runs): the study lives
beside the store (STORE.optuna.db) and the same command again resumes it; its trials run
through the sweep engine (testbed/sweeps.py: `--jobs N` worker processes, or Ray tasks with
`--ray`) and land in the store as members of the study (`testbed runs`, `testbed export` and
the dashboard's Tune view see them).
"""
from __future__ import annotations

import os
from pathlib import Path

from lgc_schema import OptionError
from testbed.commands import add_store_arg, ray_working_dir
from testbed.errors import UserError
from testbed.records.objectives import MISS_FACTOR, describe
from testbed.sweeps import RAY_INSTALL, start_worker_server
from testbed.tune import space

TUNE_INSTALL = "pip install 'lgc-testbed[tune]'"
PRUNERS = ("median", "halving", "none")   # testbed/tune/trial.py's, without importing Optuna


def register(sub) -> None:
    p = sub.add_parser(
        "tune", help="search an experiment file's keys with Optuna (each trial a run)",
        description="Search an experiment file's keys with Optuna: TPE (seeded) for one "
                    "objective and for several (its multi-objective form), the constraints "
                    "through TPE's constraints_func. Every trial is one run per seed, recorded "
                    "in the store as `testbed run` records it, tagged with the study (runs.sweep) "
                    "and trial number (runs.trial). The study lives in STORE.optuna.db: the same "
                    "command again resumes it. At the end the best trial (or the Pareto front) "
                    "is printed as a table and as the `testbed run --set ...` lines that "
                    "reproduce it. Install: " + TUNE_INSTALL + ".")
    p.add_argument("file", help="experiment TOML file")
    add_store_arg(p)
    p.add_argument("--name", required=True, metavar="STUDY",
                   help="the study's name: its runs are named STUDY[trial=N] (and ,seed=S), and "
                        "the same name again resumes it (refused if its search space, "
                        "objectives, constraints, file, --set, --seeds, target or budget differ)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=LOW:HIGH[:log|:int]",
                   help="a key to search (repeatable): a range LOW:HIGH (uniform; :log on a log "
                        "scale, LOW > 0; :int whole numbers; both: :int:log) or choices a,b,c "
                        "(each read as --set reads a value), e.g. "
                        "--param network.link.bandwidth_mbps=0.5:50:log "
                        "--param compression.method=topk,dgc")
    p.add_argument("--objective", action="append", default=[], metavar="NAME[:min|:max]",
                   help="what to optimise (repeatable: several give a Pareto front), each "
                        "trial's value the mean over its seeds' runs: " + describe()
                        + "; or a searched --param key (its value, e.g. the least bandwidth "
                        "that meets the constraints). Default direction: max for accuracies, "
                        "min for the rest. The figures to target are at the first evaluation at "
                        "or above the target accuracy; a run that never reaches it counts as "
                        f"{MISS_FACTOR:g} times its whole run's virtual seconds (or joules) and "
                        "fails every constraint on a figure to target")
    p.add_argument("--constraint", action="append", default=[], metavar="NAME<=X|NAME>=X",
                   help="a bound a trial must meet to count as best (repeatable), on an "
                        "objective name, e.g. virtual_s_to_target<=30 or final_accuracy>=0.9 "
                        "(units as for --objective)")
    p.add_argument("--trials", type=int, required=True, metavar="N",
                   help="the study's total of trials: completed, pruned and failed ones count, "
                        "a rerun runs only the rest (and again those a stop cut short)")
    p.add_argument("--target", type=float, default=None, metavar="ACC",
                   help="the target test accuracy in (0, 1] of the figures to target (set as "
                        "run.target_accuracy in every run); default: the file's "
                        "run.target_accuracy")
    p.add_argument("--budget-s", type=float, default=None, metavar="SECONDS",
                   help="virtual seconds: a run that has not reached the target accuracy by "
                        "then is ended, pruned (it cannot meet the target within the budget)")
    p.add_argument("--pruner", choices=PRUNERS, default=None,
                   help="ends hopeless runs early, from the test accuracy at each evaluation "
                        "(the step: the evaluation's iteration) against the trials ended "
                        "before: median (below the median of the completed trials at the same "
                        "iteration), halving (successive halving) or none; a pruned run's "
                        "status is 'pruned'. Default: median for one objective, none for "
                        "several (accuracy alone would cut points of the front)")
    p.add_argument("--startup-trials", type=int, default=None, metavar="N",
                   help="trials drawn at random before TPE models the rest, and completed "
                        "before the median pruner prunes (default: a quarter of --trials, 2 to "
                        "10)")
    p.add_argument("--sampler-seed", type=int, default=0, metavar="S",
                   help="seeds TPE (a resumed study adds the number of trials so far)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a fixed key for every trial, as `testbed run --set` (repeatable)")
    p.add_argument("--seeds", default=None, metavar="S1,S2,...",
                   help="run each trial once per seed (run.seed); its value is the mean of its "
                        "runs'")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="runs at once, each in a worker process of its own (default 1: each "
                        "trial is asked for once the one before ended, and a seeded study is "
                        "reproducible); with --ray, the runs in flight (default: this "
                        "machine's CPUs)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run each run as a Ray task: alone, on a Ray started here; 'auto' or an "
                        f"address: on that cluster ({RAY_INSTALL})")
    p.add_argument("--ray-working-dir", default=None, metavar="DIR",
                   help="with --ray: upload DIR (holding FILE and your own modules) to every "
                        "node (Ray's runtime_env working_dir)")
    p.add_argument("--write-best", default=None, metavar="FILE.toml",
                   help="write the experiment file with the best trial's settings applied "
                        "(one objective only)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def check_args(args) -> None:
    """The command's own numbers (the rest: testbed/tune/space.py), before anything runs."""
    if args.trials < 1:
        raise OptionError("--trials", args.trials, "a whole number of trials, 1 or more")
    if args.jobs is not None and args.jobs < 1:
        raise OptionError("--jobs", args.jobs, "a whole number of runs at once, 1 or more")
    if args.startup_trials is not None and args.startup_trials < 0:
        raise OptionError("--startup-trials", args.startup_trials, "a whole number >= 0")
    if args.write_best and len(args.objective) > 1:
        raise UserError(f"--write-best {args.write_best}: with {len(args.objective)} objectives "
                        "the result is a Pareto front, not one best trial; allowed: one "
                        "--objective (or pick a trial of the front and use its --set lines)")
    if not args.name.strip() or any(c in args.name for c in "[]"):
        raise UserError(f"--name {args.name!r}: allowed: a name without [ or ]")


def ray_file(args) -> tuple[dict | None, str | None]:
    """Ray's runtime environment for --ray-working-dir and the file's path inside DIR."""
    if not args.ray_working_dir:
        return None, None
    folder = ray_working_dir(args)
    return {"working_dir": str(folder)}, str(Path(args.file).resolve().relative_to(folder))


def main(args) -> int:
    check_args(args)
    try:
        # deferred: optuna, only when `testbed tune` runs a study (an optional extra)
        from testbed.tune import study
    except ImportError as e:
        if getattr(e, "name", None) == "optuna":
            raise UserError(f"testbed tune: Optuna is not installed; install it with "
                            f"{TUNE_INSTALL}") from None
        raise
    if args.ray is None and (args.jobs or 1) > 1:
        start_worker_server()   # its imports go on while the inputs are checked here
    spec, cfg = space.build(args.file, args.param, args.objective, args.constraint,
                            args.overrides, args.seeds, args.target, args.budget_s)
    env, relative = ray_file(args)
    jobs = args.jobs or (max(1, (os.cpu_count() or 1) // (cfg.run.threads or 1))
                         if args.ray is not None else 1)
    pruner = args.pruner or ("median" if len(spec.objectives) == 1 else "none")
    return study.tune(spec, cfg, name=args.name, store=args.store, trials=args.trials,
                      jobs=jobs, ray=args.ray, ray_env=env, relative_file=relative,
                      pruner=pruner, startup=args.startup_trials,
                      sampler_seed=args.sampler_seed, write_best=args.write_best,
                      quiet=args.quiet)
