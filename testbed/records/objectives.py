"""What `testbed tune` optimises, read from what a run already records: one description, used by
the tune command (its values, its constraints) and by the dashboard's Tune view (its figures),
so both say the same number for the same run.

A metric is a figure of one run, from its rows in the store (`run_metrics`); a trial's value is
the mean over its runs (one per seed, `trial_value`). The figures "to target" are taken at the
first evaluation at or above the target accuracy (run.target_accuracy, or `testbed tune
--target`). A run that never reaches it counts as MISS_FACTOR times the same figure over its
whole run (the virtual seconds or joules it spent without getting there), and is marked
`reached = False`: a constraint on a figure to target is violated by a trial any of whose runs
missed it, whatever the bound. Pruned runs have metrics too (of their rows so far); the tuner
records no value for a pruned trial.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class Metric(NamedTuple):
    unit: str
    direction: str     # the default: "min" or "max"
    meaning: str


# A run that never reaches the target counts as this many times its whole run's figure.
MISS_FACTOR = 2.0

METRICS: dict[str, Metric] = {
    "final_accuracy": Metric("[0, 1]", "max", "test accuracy of the run's last evaluation"),
    "best_accuracy": Metric("[0, 1]", "max", "the highest test accuracy of any evaluation"),
    "virtual_s_to_target": Metric("s", "min", "virtual seconds to the first evaluation at or "
                                              "above the target accuracy"),
    "joules_to_target": Metric("J", "min", "joules a worker spent until then (radio and "
                                           "compute), mean over the workers"),
    "joules_to_target_max": Metric("J", "min", "joules until then of the worker that spent "
                                               "the most"),
    "bits_up": Metric("bit", "min", "bits the workers sent, whole run"),
    "bits_down": Metric("bit", "min", "bits the workers received, whole run"),
    "wall_s": Metric("s", "min", "this machine's seconds the run took (start to end)"),
}
TO_TARGET = ("virtual_s_to_target", "joules_to_target", "joules_to_target_max")


def describe() -> str:
    """The metrics with their units, as `testbed tune --help` lists them."""
    return "; ".join(f"{name} ({m.unit}, {m.meaning})" for name, m in METRICS.items())


def first_crossing(evals: Sequence[dict], target: float) -> dict | None:
    """The first evaluation row at or above `target`, or None."""
    return next((e for e in evals if e.get("test_accuracy") is not None
                 and e["test_accuracy"] >= target), None)


def run_metrics(store, run_id: int, target: float | None) -> dict:
    """Every metric of run `run_id` of `store` (None where the run recorded nothing to tell it,
    or, for the figures to target, where no target is given), and `reached`: whether an
    evaluation reached `target` (None without one)."""
    db = store.db
    run = db.execute("SELECT started_at, ended_at FROM runs WHERE id=?", (run_id,)).fetchone()
    evals = [dict(e) for e in db.execute(
        "SELECT iteration, virtual_time_s, test_accuracy FROM evals WHERE run_id=? AND "
        "test_accuracy IS NOT NULL ORDER BY iteration", (run_id,))]
    its = db.execute("SELECT SUM(bits_up), SUM(bits_down), MAX(virtual_time_s), MAX(wall_time_s) "
                     "FROM iterations WHERE run_id=?", (run_id,)).fetchone()
    accs = [e["test_accuracy"] for e in evals]
    out = {"final_accuracy": accs[-1] if accs else None,
           "best_accuracy": max(accs) if accs else None,
           "bits_up": its[0], "bits_down": its[1],
           "wall_s": (run[1] - run[0]) if run and run[0] is not None and run[1] is not None
           else its[3],
           "reached": None}
    for name in TO_TARGET:
        out[name] = None
    if target is None:
        return out
    hit = first_crossing(evals, target)
    out["reached"] = hit is not None
    upto = hit["iteration"] if hit else None
    factor = 1.0 if hit else MISS_FACTOR
    seconds = hit["virtual_time_s"] if hit else its[2]
    out["virtual_s_to_target"] = None if seconds is None else factor * seconds
    mean_j, max_j = joules(db, run_id, upto)
    out["joules_to_target"] = None if mean_j is None else factor * mean_j
    out["joules_to_target_max"] = None if max_j is None else factor * max_j
    return out


def joules(db, run_id: int, upto: int | None) -> tuple[float | None, float | None]:
    """(mean, max) over the workers of each one's joules up to and including iteration `upto`
    (None: the whole run); (None, None) where the run recorded no energy."""
    sql = "SELECT SUM(energy_j) FROM node_iterations WHERE run_id=?"
    args: list = [run_id]
    if upto is not None:
        sql += " AND iteration <= ?"
        args.append(upto)
    per_node = [r[0] for r in db.execute(sql + " GROUP BY node", args) if r[0] is not None]
    if not per_node:
        return None, None
    return sum(per_node) / len(per_node), max(per_node)


def trial_value(name: str, metrics: Sequence[dict], params: dict | None = None):
    """A trial's value of objective `name`: the mean of its runs' `metrics` (one per seed), or
    for a searched parameter's key its value in `params`; None where a run has none."""
    if name not in METRICS:
        value = (params or {}).get(name)
        return None if value is None else float(value)
    values = [m.get(name) for m in metrics]
    if not values or any(v is None for v in values):
        return None
    return sum(values) / len(values)


def violation(name: str, op: str, bound: float, value: float | None, metrics: Sequence[dict]) -> float:
    """Optuna's constraint value of `name OP bound` for a trial (<= 0: met): how far past the
    bound its value lies; a figure to target that any run missed violates it whatever the bound
    (at least 1e-9, so that it counts), as does a value the runs could not give."""
    if value is None:
        return float("inf")
    over = value - bound if op == "<=" else bound - value
    if name in TO_TARGET and any(m.get("reached") is False for m in metrics):
        over = max(over, 1e-9)
    return over


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """Whether values `a` are at least as good as `b` in every objective and better in one."""
    better = False
    for x, y, d in zip(a, b, directions):
        if d == "max":
            x, y = -x, -y
        if x > y:
            return False
        better = better or x < y
    return better


def pareto_front(values: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """The indices of `values` that no other one dominates (equal values both stay)."""
    return [i for i, v in enumerate(values)
            if not any(dominates(w, v, directions) for j, w in enumerate(values) if j != i)]
