"""A `testbed tune` study: Optuna's sampler asks for trials, the sweep engine runs them, the
store records them, and the recorded rows give each trial's values.

- The study lives beside the store, in Optuna's SQLite storage `STORE.optuna.db`, under its
  name (`--name`); its identity (file content, search space, objectives, constraints, --set,
  seeds, target, budget) is kept with it, and the same command again resumes it: `--trials N`
  is the study's total, completed, pruned and failed trials are not run again, and a trial
  whose process was stopped or killed is run again with the same parameters (Optuna's RUNNING
  trials left by a process that is gone are failed, then enqueued again; a stopped trial is
  failed at once and enqueued on the next start). Another search space under the same name is
  refused.
- Samplers: Optuna's TPE, seeded (`--sampler-seed`, plus the number of trials so far, so that
  a resumed study does not draw its first trials' random points again), for one objective and
  for several (TPE's multi-objective form: NSGA-II needs a population of 50 a generation before
  it improves on random search, more trials than a testbed study runs); the constraints through
  its `constraints_func`.
- Each trial asked for becomes one run per seed (`Point`s of the sweep engine, pulled as a
  place frees: `--jobs 1` asks for a trial once the one before ended, so a seeded study is
  reproducible); its runs land in the store as members of the study (runs.sweep = the study's
  name, sweep_params = its parameters, trial = its number), with the rows and provenance of
  `testbed run` with the same `--set`.
- A trial's value is the mean over its runs of each objective (testbed/records/objectives.py);
  a trial with a pruned run is pruned, one with a failed run failed.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from testbed.api import toml_literal
from testbed.configuration.loading import load_config, load_raw
from testbed.configuration.method_policy import switch_to_known_good
from testbed.configuration.overrides import apply_overrides, parse_override
from testbed.errors import UserError
from testbed.processes.lifeline import alive
from testbed.processes.signals import stops_deferred
from testbed.records.objectives import METRICS, pareto_front, run_metrics, trial_value, violation
from testbed.records.store import Store
from testbed.sweeps import Outcome, Point, make_pool, run_points
from testbed.tune.space import TuneSpec, difference, quietly

RUNNER = "testbed.tune.trial:run_trial"
SPEC = "testbed:spec"                  # the study's identity (study user attribute)
OWNER_PID, OWNER_HOST = "testbed:pid", "testbed:host"   # the process running a trial
INTERRUPTED = "testbed:interrupted"    # a trial failed because its process stopped: run again
RETRY_OF = "testbed:retry_of"          # the trial an enqueued one runs again
CONSTRAINTS = "testbed:constraints"    # each constraint's value (<= 0: met)
RUNS = "testbed:runs"                  # the trial's run ids in the store
ERROR = "testbed:error"                # why a trial failed
MAX_VIOLATION = 1e12                   # a constraint no run could tell, as a finite number


def storage_path(store: str) -> Path:
    """The study's storage: Optuna's SQLite file beside the store."""
    return Path(f"{store}.optuna.db")


def distributions(spec: TuneSpec) -> dict:
    out = {}
    for p in spec.params:
        if p.kind == "float":
            out[p.key] = FloatDistribution(p.low, p.high, log=p.log)
        elif p.kind == "int":
            out[p.key] = IntDistribution(int(p.low), int(p.high), log=p.log)
        else:
            out[p.key] = CategoricalDistribution(list(p.choices))
    return out


@dataclass
class OpenTrial:
    trial: object                      # optuna.trial.Trial, asked for and not yet told
    expected: int                      # its runs: one per seed
    outcomes: list[Outcome] = field(default_factory=list)


def default_startup(trials: int) -> int:
    """Trials drawn at random before TPE models the others (and completed before the pruner
    prunes one): a quarter of the study, 2 to 10."""
    return max(2, min(10, trials // 4))


class Tuner:
    """One `testbed tune` command over its study (see the module's docstring)."""

    def __init__(self, spec: TuneSpec, cfg, *, name: str, store: str, trials: int,
                 pruner: str = "median", startup: int | None = None, sampler_seed: int = 0,
                 jobs: int = 1, relative_file: str | None = None, log=print):
        self.spec, self.cfg, self.name, self.store = spec, cfg, name, store
        self.trials, self.pruner, self.jobs, self.log = trials, pruner, jobs, log
        self.startup = default_startup(trials) if startup is None else startup
        self.sampler_seed = sampler_seed
        self.file = relative_file or spec.file     # a Ray working dir's relative path
        self.dists = distributions(spec)
        self.directions = [d for _, d in spec.objectives]
        self.open: dict[int, OpenTrial] = {}
        self.ran: list[int] = []                   # trials told in this command
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        self.storage = optuna.storages.RDBStorage(
            f"sqlite:///{storage_path(store).resolve()}",
            engine_kwargs={"connect_args": {"timeout": 30}})
        self.study = self._open_study()

    # ------------------------------------------------------------------ the study
    def _sampler(self, done: int):
        n = len(self.spec.constraints)
        return optuna.samplers.TPESampler(
            seed=self.sampler_seed + done, n_startup_trials=self.startup, multivariate=True,
            constant_liar=self.jobs > 1,
            constraints_func=(lambda t: t.user_attrs.get(CONSTRAINTS, [0.0] * n)) if n else None)

    def _open_study(self):
        identity = self.spec.identity()
        names = {s.study_name for s in optuna.get_all_study_summaries(self.storage)}
        if self.name in names:
            study = optuna.load_study(study_name=self.name, storage=self.storage)
            stored = study.user_attrs.get(SPEC) or {}
            differs = difference(stored, identity)
            if differs:
                raise UserError(f"--name {self.name}: study {self.name!r} in "
                                f"{storage_path(self.store)} was made with {differs}; allowed: "
                                "the same command as then (it resumes), or another --name")
        else:
            study = optuna.create_study(study_name=self.name, storage=self.storage, directions=[
                "minimize" if d == "min" else "maximize" for d in self.directions])
            study.set_user_attr(SPEC, identity)
        study.sampler = self._sampler(len(study.trials))
        return study

    def recover(self) -> None:
        """Fail the trials left running by a process that is gone, and enqueue again, with
        their parameters, every trial failed by a stop that has not been run again."""
        host = os.uname().nodename
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            pid, where = t.system_attrs.get(OWNER_PID), t.system_attrs.get(OWNER_HOST)
            if where not in (None, host) or (pid and pid != os.getpid() and alive(pid)):
                continue   # another command runs it
            with stops_deferred():
                self.storage.set_trial_user_attr(t._trial_id, INTERRUPTED,
                                                 "its process ended without telling the study")
                self.study.tell(t.number, state=TrialState.FAIL)
            self.log(f"trial {t.number}: its process ended mid-run; it runs again")
        trials = self.study.get_trials(deepcopy=False)
        retried = {t.user_attrs.get(RETRY_OF) for t in trials}
        for t in trials:
            if t.state == TrialState.FAIL and INTERRUPTED in t.user_attrs and t.number not in retried:
                self.study.enqueue_trial(t.params, user_attrs={RETRY_OF: t.number})

    def counts(self) -> tuple[int, int]:
        """(trials that count as done, trials another live command runs)."""
        trials = self.study.get_trials(deepcopy=False)
        done = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
            t.state == TrialState.FAIL and INTERRUPTED not in t.user_attrs) for t in trials)
        running = sum(t.state == TrialState.RUNNING for t in trials)
        return done, running

    # ------------------------------------------------------------------ asking
    def history(self) -> list[dict]:
        """The ended trials' accuracy curves, for the pruner beside each run (testbed/tune/trial.py)."""
        return [{"state": t.state.name, "steps": sorted(t.intermediate_values.items()),
                 "attrs": {k: v for k, v in t.system_attrs.items() if k.startswith("completed_rung")}}
                for t in self.study.get_trials(deepcopy=False,
                                               states=(TrialState.COMPLETE, TrialState.PRUNED))]

    def points(self, budget: int):
        """One Point per run of each trial asked for, `budget` trials at most; a trial is
        asked for only when the engine has a place for its first run."""
        index = 0
        for _ in range(budget):
            seeds = self.spec.seeds or [None]
            with stops_deferred():   # asked for, claimed and remembered together
                trial = self.study.ask(self.dists)
                self.storage.set_trial_system_attr(trial._trial_id, OWNER_PID, os.getpid())
                self.storage.set_trial_system_attr(trial._trial_id, OWNER_HOST, os.uname().nodename)
                self.open[trial.number] = OpenTrial(trial, len(seeds))
            extra = {"target": self.spec.target, "budget_s": self.spec.budget_s,
                     "pruner": self.pruner, "startup": self.startup, "history": self.history()}
            for seed in seeds:
                index += 1
                yield self.point(index, trial, seed, extra)

    def point(self, index: int, trial, seed: int | None, extra: dict) -> Point:
        labels = self.spec.labels
        params = {labels[k]: v for k, v in trial.params.items()}
        sets = [p.setting(trial.params[p.key]) for p in self.spec.params]
        label = f"trial={trial.number}" + ("" if seed is None else f",seed={seed}")
        if seed is not None:
            params["seed"] = seed
            sets.append(f"run.seed={seed}")
        return Point(index=index, name=f"{self.name}[{label}]", file=self.file,
                     overrides=[*self.spec.overrides, *sets], params=params,
                     threads=self.cfg.run.threads or 1, device=self.cfg.run.device,
                     runner=RUNNER, extra=extra, trial=trial.number)

    # ------------------------------------------------------------------ telling
    def landed(self, outcome: Outcome) -> None:
        """A run of a trial ended and is in the store; once all of the trial's have, tell the
        study how the trial went."""
        t = self.open.get(outcome.point.trial)
        if t is None:
            return
        t.outcomes.append(outcome)
        if outcome.status != "stopped" and len(t.outcomes) < t.expected:
            return
        with stops_deferred():   # told and forgotten together, whatever signal comes
            line = self.tell(t)
            del self.open[t.trial.number]
            self.ran.append(t.trial.number)
        done, _ = self.counts()
        self.log(f"[{done}/{self.trials} trials] trial {t.trial.number} {line}")

    def tell(self, t: OpenTrial) -> str:
        trial, outcomes = t.trial, t.outcomes
        tid = trial._trial_id
        ids = [o.run_id for o in outcomes if o.run_id is not None]
        self.storage.set_trial_user_attr(tid, RUNS, ids)
        statuses = {o.status for o in outcomes}
        if "stopped" in statuses:
            self.storage.set_trial_user_attr(tid, INTERRUPTED, "stopped")
            self.study.tell(trial, state=TrialState.FAIL)
            return "stopped: it runs again when the same command is given again"
        bad = next((o for o in outcomes if o.status not in ("completed", "pruned")), None)
        if bad is not None:
            self.storage.set_trial_user_attr(tid, ERROR, f"{bad.status}: {bad.line}")
            self.study.tell(trial, state=TrialState.FAIL)
            return f"failed: {bad.point.name} {bad.status}: {bad.line}"
        self._intermediate(tid, outcomes)
        with Store(self.store, readonly=True) as s:
            metrics = [run_metrics(s, rid, self.spec.target) for rid in ids]
        values = [trial_value(n, metrics, trial.params) for n, _ in self.spec.objectives]
        cons = [min(violation(n, op, b, trial_value(n, metrics, trial.params), metrics),
                    MAX_VIOLATION) for n, op, b in self.spec.constraints]
        self.storage.set_trial_user_attr(tid, CONSTRAINTS, cons)
        self.storage.set_trial_user_attr(tid, "testbed:metrics", metrics)
        params = ", ".join(f"{self.spec.labels[k]}={_fmt(v)}" for k, v in trial.params.items())
        if "pruned" in statuses:
            self.study.tell(trial, state=TrialState.PRUNED)
            why = next(o.result.get("line") or o.line for o in outcomes if o.status == "pruned")
            return f"pruned ({params}): {why}"
        missing = next((n for (n, _), v in zip(self.spec.objectives, values) if v is None), None)
        if missing is not None:
            self.storage.set_trial_user_attr(tid, ERROR, f"{missing}: the runs recorded none")
            self.study.tell(trial, state=TrialState.FAIL)
            return f"failed ({params}): {missing}: its runs recorded no value for it"
        self.study.tell(trial, values)
        shown = [f"{n}={_fmt(v)}{_unit(n)}" for (n, _), v in zip(self.spec.objectives, values)
                 if n in METRICS]
        missed = any(m.get("reached") is False for m in metrics)
        for (n, op, b), c in zip(self.spec.constraints, cons):
            v = trial_value(n, metrics, trial.params)
            mark = "met" if c <= 0 else ("not met: the target was missed" if missed
                                         and n.endswith("_to_target") else "not met")
            shown.append(f"{n}={_fmt(v)}{_unit(n)} ({op} {b:g}: {mark})")
        return f"completed ({params})" + (f": {'; '.join(shown)}" if shown else "")

    def _intermediate(self, tid: int, outcomes: list[Outcome]) -> None:
        """The trial's accuracy at each step: the mean over its runs that reported it."""
        per_step: dict[int, list[float]] = {}
        for o in outcomes:
            for step, acc in o.result.get("steps", []):
                per_step.setdefault(int(step), []).append(float(acc))
        for step, accs in sorted(per_step.items()):
            if len(accs) == len(outcomes):
                self.storage.set_trial_intermediate_value(tid, step, sum(accs) / len(accs))
        for key, value in (outcomes[0].result.get("attrs") or {}).items():
            if key.startswith("completed_rung"):
                self.storage.set_trial_system_attr(tid, key, value)

    # ------------------------------------------------------------------ the command
    def run(self, pool) -> None:
        """Run the study's remaining trials on `pool` (testbed.sweeps.make_pool)."""
        with Store(self.store) as db:
            db.record_sweep(self.spec.key(), self.name, {
                "kind": "tune", "file": self.spec.file, **self.spec.identity(),
                "labels": self.spec.labels, "objectives": [list(o) for o in self.spec.objectives]})
        self.recover()
        done, running = self.counts()
        budget = max(0, self.trials - done - running)
        if done or running:
            self.log(f"study {self.name}: {done} of {self.trials} trials done before"
                     + (f", {running} running elsewhere" if running else "")
                     + (f"; running {budget} more" if budget else "; nothing left to run"))
        if not budget:
            return
        try:
            run_points(pool, self.points(budget), self.store, sweep=self.name,
                       key=self.spec.key(), landed=self.landed)
        except KeyboardInterrupt:
            with stops_deferred():   # asked for, not yet told: each runs again next time
                for t in list(self.open.values()):
                    self.storage.set_trial_user_attr(t.trial._trial_id, INTERRUPTED, "stopped")
                    self.study.tell(t.trial, state=TrialState.FAIL)
                self.open.clear()
            raise

    # ------------------------------------------------------------------ the result
    def feasible(self) -> list:
        trials = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        return [t for t in trials if all(c <= 0 for c in t.user_attrs.get(CONSTRAINTS, []))]

    def best(self) -> list:
        """The best feasible trial (one objective) or the Pareto front (several)."""
        ok = self.feasible()
        if not ok:
            return []
        if len(self.directions) == 1:
            sign = 1 if self.directions[0] == "min" else -1
            return [min(ok, key=lambda t: (sign * t.values[0], t.number))]
        front = pareto_front([t.values for t in ok], self.directions)
        return sorted((ok[i] for i in front), key=lambda t: t.values)

    def report(self) -> list:
        """Print the best trial (or the front) as a table and as the commands that reproduce
        it; returns those trials."""
        best = self.best()
        trials = self.study.get_trials(deepcopy=False)
        states = {s: sum(t.state == s for t in trials) for s in TrialState}
        self.log(f"study {self.name}: {len(trials)} trials ({states[TrialState.COMPLETE]} "
                 f"completed, {states[TrialState.PRUNED]} pruned, {states[TrialState.FAIL]} "
                 f"failed); storage {storage_path(self.store)}")
        if not best:
            self.log("no completed trial meets the constraints" if self.spec.constraints
                     else "no trial completed")
            return []
        goals = ", ".join(f"{d} {n}" for n, d in self.spec.objectives)
        title = "best trial" if len(self.directions) == 1 else f"Pareto front ({len(best)} trials)"
        met = "; constraints met" if self.spec.constraints else ""
        self.log(f"{title} ({goals}{met}):")
        self.log(self.table(best))
        self.log("reproduce with:")
        for t in best:
            for line in self.commands(t):
                self.log(f"  {line}")
        return best

    def table(self, trials: list) -> str:
        """trial, its parameters, each objective and constrained figure that is not a
        parameter (the mean over its runs, with its unit), its runs' ids."""
        labels = self.spec.labels
        keys = {p.key for p in self.spec.params}
        figures = []
        for n in [n for n, _ in self.spec.objectives] + [c[0] for c in self.spec.constraints]:
            if n not in keys and n not in figures:
                figures.append(n)
        head = (["trial"] + [labels[p.key] for p in self.spec.params]
                + [f"{n} ({METRICS[n].unit})" for n in figures] + ["runs"])
        rows = [[str(t.number)] + [_fmt(t.params[p.key]) for p in self.spec.params]
                + [_fmt(trial_value(n, t.user_attrs.get("testbed:metrics", []), t.params))
                   for n in figures]
                + [",".join(map(str, t.user_attrs.get(RUNS, [])))] for t in trials]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def settings(self, trial) -> list[str]:
        """The `--set` values of `trial` beyond the file: the study's, then its parameters."""
        return [*self.spec.overrides, *(p.setting(trial.params[p.key]) for p in self.spec.params)]

    def commands(self, trial) -> list[str]:
        sets = " ".join(f"--set {_quote(s)}" for s in self.settings(trial))
        seeds = self.spec.seeds or [None]
        return [f"testbed run {_quote(str(_shown_path(self.spec.file)))} {sets}"
                + ("" if seed is None else f" --set run.seed={seed}") for seed in seeds]

    def write_best(self, path: str, trial) -> Path:
        """The experiment file with `trial`'s settings applied, as TOML at `path`."""
        file = self.spec.file
        raw = load_raw(file)
        method = (raw.get("compression") or {}).get("method", "none")
        sets = self.settings(trial)
        raw = apply_overrides(raw, sets)
        raw = switch_to_known_good(raw, method, {".".join(parse_override(o)[0]) for o in sets},
                                   notes=[])   # its notes unprinted (a run prints them)
        head = (f"# {Path(file).name} with trial {trial.number} of study {self.name} applied "
                f"(testbed tune):\n# " + " ".join(f"--set {s}" for s in sets) + "\n")
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(head + dump_toml(raw))
        quietly(load_config, out)          # what it wrote is an experiment file
        return out


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _unit(name: str) -> str:
    unit = METRICS[name].unit if name in METRICS else ""
    return f" {unit}" if unit and not unit.startswith("[") else ""


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w.,:=/+@%-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def _shown_path(file: str) -> str:
    """A file as a command line gives it: relative to here where it lies below."""
    path = Path(file)
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd()))
    return str(path)


BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def dump_toml(tables: dict) -> str:
    """Tables as TOML: each table's values, then its sub-tables under [a.b] headers; arrays and
    tables inside arrays inline."""
    lines: list[str] = []

    def key(k: str) -> str:
        return k if BARE_KEY.match(k) else json.dumps(k)

    def emit(prefix: str, table: dict) -> None:
        values = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
        subs = [(k, v) for k, v in table.items() if isinstance(v, dict)]
        if prefix and (values or not subs):
            lines.append(f"[{prefix}]")
        for k, v in values:
            lines.append(f"{key(k)} = {toml_literal(v)}")
        if values:
            lines.append("")
        for k, v in subs:
            emit(f"{prefix}.{key(k)}" if prefix else key(k), v)

    emit("", tables)
    return "\n".join(lines).rstrip() + "\n"


def tune(spec: TuneSpec, cfg, *, name: str, store: str, trials: int, jobs: int = 1,
         ray: str | None = None, ray_env: dict | None = None, relative_file: str | None = None,
         pruner: str = "median", startup: int | None = None, sampler_seed: int = 0,
         write_best: str | None = None, quiet: bool = False, log=print) -> int:
    """Run study `name` to `trials` trials and print its result; the exit code (0: a best
    trial or a front; 1: no trial completed or none meets the constraints)."""
    pool = make_pool(jobs, ray, ray_env, quiet)   # first: without Ray, --ray is refused here
    t0 = time.perf_counter()
    tuner = Tuner(spec, cfg, name=name, store=store, trials=trials, pruner=pruner,
                  startup=startup, sampler_seed=sampler_seed, jobs=jobs,
                  relative_file=relative_file, log=log)
    tuner.run(pool)
    best = tuner.report()
    log(f"wall time {time.perf_counter() - t0:.1f} s -> {store}")
    if best and write_best:
        path = tuner.write_best(write_best, best[0])
        log(f"best settings written to {path}")
    return 0 if best else 1
