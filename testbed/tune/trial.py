"""A trial's run, in whatever process runs it (this one, a `--jobs` worker, a Ray task): the
sweep engine's `run_point` (`testbed run`'s entry, so its rows are those of `testbed run` with
the same `--set`) with a watcher on the loop's progress hook.

The watcher reports the test accuracy of each evaluation to the pruner, the step being the
evaluation's iteration (evals.iteration, 0-based: the runs of a study evaluate at the same
iterations, whatever their link's speed, so the pruner compares like with like), and ends a
run it judges hopeless by raising `testbed.errors.Pruned` (the run is recorded `pruned`). It
also ends, pruned, a run past `--budget-s` virtual seconds that has not reached the target.

The pruner decides from a snapshot of the study taken when the trial was asked for: the
accuracy curves of its trials that had ended (`history`, in the point's `extra`), rebuilt in an
in-memory Optuna study beside the run. No process but the tune command's touches the study's
storage, so a trial runs the same way in a worker process, on a Ray node of another machine or
in the command's own process; with one trial at a time the snapshot is all the pruner would
see anyway (the median pruner reads completed trials only).
"""
from __future__ import annotations

import optuna

from testbed.errors import Pruned
from testbed.sweeps import Point, run_point

PRUNERS = ("median", "halving", "none")


def make_pruner(name: str, startup: int):
    """Optuna's pruner of `--pruner NAME`; `startup`: completed trials before any is pruned."""
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


def pruning_trial(pruner: str, startup: int, history: list[dict]):
    """A trial of an in-memory study holding `history` ({"state", "steps": [[step, accuracy],
    ...], "attrs"} per ended trial), maximising accuracy, with the pruner `pruner`."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(pruner, startup),
                                sampler=optuna.samplers.RandomSampler(seed=0))
    for h in history:
        steps = {int(s): float(v) for s, v in h["steps"]}
        state = optuna.trial.TrialState[h["state"]]
        last = steps[max(steps)] if steps else 0.0
        study.add_trial(optuna.trial.create_trial(
            state=state, value=last if state == optuna.trial.TrialState.COMPLETE else None,
            intermediate_values=steps, system_attrs=h.get("attrs") or {}))
    return study.ask()


class Watch:
    """The loop's progress hook for one trial's run (see the module's docstring)."""

    def __init__(self, extra: dict):
        self.target = extra.get("target")
        self.budget_s = extra.get("budget_s")
        self.pruner = extra.get("pruner", "none")
        self.steps: list[list] = []
        self.reached = False
        self.reason: str | None = None
        self.trial = (None if self.pruner == "none" else
                      pruning_trial(self.pruner, extra.get("startup", 5), extra.get("history", [])))

    def __call__(self, p) -> None:
        if p.evaluated and p.accuracy is not None:
            step = p.iteration - 1
            self.steps.append([step, p.accuracy])
            self.reached = self.reached or (self.target is not None and p.accuracy >= self.target)
            if self.trial is not None:
                self.trial.report(p.accuracy, step)
                if self.trial.should_prune():
                    self.end(f"pruned by the {self.pruner} pruner at iteration {step}: test "
                             f"accuracy {p.accuracy:.4f} below the study's earlier trials")
        if (self.budget_s is not None and not self.reached
                and p.virtual_time_s > self.budget_s):
            self.end(f"pruned past the virtual-time budget of {self.budget_s:g} s (at "
                     f"{p.virtual_time_s:.2f} s, iteration {p.iteration - 1}) without reaching "
                     f"the target accuracy {self.target:g}")

    def end(self, reason: str) -> None:
        self.reason = reason
        raise Pruned(reason)

    def attrs(self) -> dict:
        """What the pruner kept on the trial (the halving pruner's rungs), for the study."""
        if self.trial is None:
            return {}
        return dict(self.trial.study.trials[self.trial.number].system_attrs)


def run_trial(point: Point, store: str, quiet: bool = True) -> dict:
    """Run one trial's run (`point`) into `store`: `run_point`'s result, with status "pruned"
    where the watcher ended it, and the accuracy it reported at each step and the pruner's
    attributes (for the study)."""
    watch = Watch(point.extra)
    result = run_point(point, store, quiet=quiet, watch=watch)
    if result["status"] == "completed" and watch.reason is not None:
        result.update(status="pruned", line=watch.reason)
    result.update(steps=watch.steps, attrs=watch.attrs())
    return result
