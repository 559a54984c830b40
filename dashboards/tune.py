"""The Tune view: the trials of one `testbed tune` study (runs whose `trial` is set, grouped by
the study's name in `sweep`; the study's objectives, constraints and target from its row of
`sweeps`), each trial's value computed from its runs' rows as the tune command computes it
(testbed/records/objectives.py).

Three figures: the objective by trial in the order the trials were asked for (pruned trials
marked, at the value their rows had when pruned; the best so far as a line), a parameter
against the objective, and for two objectives the front with its dominated points. Every point
carries its trial's first run id (`customdata`): a click opens that run in the live view.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.style import axis, base_layout, empty_figure, make_figure, placeholder_note
from testbed.records.objectives import METRICS, pareto_front, trial_value

COMPLETED, INFEASIBLE, PRUNED, BEST = "#1f77b4", "#ff7f0e", "#9ca3af", "#2ca02c"


def studies(runs: Sequence[dict], specs: dict[str, dict]) -> dict[str, dict]:
    """The tune studies of a store: {name: {"spec": its recorded spec ({} if none), "runs":
    its runs in run order}}; `runs`: `Store.runs()`, `specs`: `Store.sweep_specs()`."""
    by_name: dict[str, list] = defaultdict(list)
    for run in runs:
        if run.get("trial") is not None and run.get("sweep") is not None:
            by_name[run["sweep"]].append(run)
    recorded = {s["name"]: s["spec"] for s in specs.values() if s["spec"].get("kind") == "tune"}
    return {name: {"spec": recorded.get(name, {}), "runs": members}
            for name, members in by_name.items()}


def status_of(statuses: set[str]) -> str:
    """A trial's state from its runs' statuses (as the tune command tells the study)."""
    for s in ("running", "stopped", "failed", "pruned"):
        if s in statuses:
            return s
    return "completed"


def trials(spec: dict, runs: Sequence[dict], metrics: dict[int, dict]) -> list[dict]:
    """One dict per trial, in trial order: "trial", "status", "runs" (ids), "params" ({full
    key: value}), "values" ({objective or constrained name: value}), "feasible"."""
    labels = spec.get("labels") or {}
    keys = {short: key for key, short in labels.items()}
    groups: dict[int, list] = defaultdict(list)
    for r in runs:
        groups[r["trial"]].append(r)
    names = ([n for n, _ in spec.get("objectives", [])]
             + [c[0] for c in spec.get("constraints", [])])
    out = []
    for number in sorted(groups):
        members = groups[number]
        params = {keys.get(k, k): v for k, v in (members[0].get("sweep_params") or {}).items()
                  if k != "seed" or "seed" in keys}
        ms = [metrics[r["id"]] for r in members if r["id"] in metrics]
        values = {n: trial_value(n, ms, params) for n in names}
        feasible = True
        for name, op, bound in spec.get("constraints", []):
            v = values.get(name)
            missed = name.endswith("_to_target") and any(m.get("reached") is False for m in ms)
            feasible = feasible and v is not None and not missed and (
                v <= bound if op == "<=" else v >= bound)
        out.append({"trial": number, "status": status_of({r["status"] for r in members}),
                    "runs": [r["id"] for r in members], "params": params, "values": values,
                    "feasible": feasible, "last_iteration": max(
                        (r.get("last_iteration") or 0) for r in members)})
    return out


def title_of(name: str) -> str:
    unit = METRICS[name].unit if name in METRICS else ""
    return f"{name} ({unit})" if unit else name


def _hover(t: dict) -> str:
    params = "<br>".join(f"{k} = {_fmt(v)}" for k, v in t["params"].items())
    values = "<br>".join(f"{k} = {_fmt(v)}" for k, v in t["values"].items() if k not in t["params"])
    state = t["status"] + ("" if t["status"] != "pruned" else f" at iteration {t['last_iteration']}")
    feasible = "" if t["status"] != "completed" or t["feasible"] else " (constraints not met)"
    return (f"trial {t['trial']}: {state}{feasible}<br>{values + '<br>' if values else ''}{params}"
            f"<br>runs {', '.join(map(str, t['runs']))} (click: open in the live view)")


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def _groups(ts: Sequence[dict], name: str):
    """The trials with a value of `name`, as (label, colour, symbol, trials)."""
    have = [t for t in ts if t["values"].get(name) is not None]
    return [("completed", COMPLETED, "circle",
             [t for t in have if t["status"] == "completed" and t["feasible"]]),
            ("constraints not met", INFEASIBLE, "circle-open",
             [t for t in have if t["status"] == "completed" and not t["feasible"]]),
            ("pruned (value when pruned)", PRUNED, "x",
             [t for t in have if t["status"] == "pruned"])]


def _scatter(uid: str, label: str, color: str, symbol: str, xs, ys, ts, **kw) -> dict:
    return {"type": "scatter", "mode": "markers", "uid": uid, "name": f"{label} ({len(ts)})",
            "x": list(xs), "y": list(ys),
            "marker": dict(color=color, symbol=symbol, size=9, line=dict(width=1.5, color=color)),
            "customdata": [t["runs"][0] for t in ts], "text": [_hover(t) for t in ts],
            "hovertemplate": "%{text}<extra></extra>", **kw}


def history_figure(ts: Sequence[dict], name: str | None, direction: str = "min",
                   title: str = "", as_dict: bool = False) -> go.Figure | dict:
    """The objective by trial number (the order the sampler asked for them), pruned trials
    marked, and the best feasible value so far."""
    layout = base_layout(title or "Objective by trial", 380, name, hovermode="closest",
                         xaxis=axis(title=dict(text="trial (in the order asked for)")),
                         yaxis=axis(title=dict(text=title_of(name) if name else "")))
    if not ts or name is None:
        layout["annotations"].append(placeholder_note(
            "No tune study in this store: `testbed tune FILE --param KEY=LOW:HIGH --objective "
            "NAME --trials N --name STUDY` makes one."))
        return make_figure([], layout, as_dict)
    traces = [_scatter(f"tune_history_{i}", label, color, symbol, [t["trial"] for t in group],
                       [t["values"][name] for t in group], group)
              for i, (label, color, symbol, group) in enumerate(_groups(ts, name)) if group]
    best, xs, ys = None, [], []
    for t in ts:
        v = t["values"].get(name)
        if t["status"] == "completed" and t["feasible"] and v is not None:
            if best is None or (v < best if direction == "min" else v > best):
                best = v
        if best is not None:
            xs.append(t["trial"])
            ys.append(best)
    if xs:
        traces.append(dict(type="scatter", mode="lines", uid="tune_best", name="best so far",
                           x=xs, y=ys, line=dict(color=BEST, shape="hv", width=2),
                           hoverinfo="skip"))
    return make_figure(traces, layout, as_dict)


def param_figure(ts: Sequence[dict], key: str | None, name: str | None, log: bool = False,
                 categorical: bool = False, as_dict: bool = False) -> go.Figure | dict:
    """A searched parameter against the objective, trial by trial."""
    layout = base_layout(f"{key or 'parameter'} against {name or 'the objective'}", 380,
                         f"{key}-{name}", hovermode="closest",
                         xaxis=axis(title=dict(text=key or ""),
                                    type="category" if categorical else "log" if log else "linear"),
                         yaxis=axis(title=dict(text=title_of(name) if name else "")))
    if not ts or key is None or name is None:
        layout["annotations"].append(placeholder_note("No trial to show."))
        return make_figure([], layout, as_dict)
    traces = []
    for i, (label, color, symbol, group) in enumerate(_groups(ts, name)):
        group = [t for t in group if t["params"].get(key) is not None]
        if group:
            xs = [str(t["params"][key]) if categorical else t["params"][key] for t in group]
            traces.append(_scatter(f"tune_param_{i}", label, color, symbol, xs,
                                   [t["values"][name] for t in group], group))
    return make_figure(traces, layout, as_dict)


def front_figure(ts: Sequence[dict], objectives: Sequence[Sequence[str]],
                 as_dict: bool = False) -> go.Figure | dict:
    """For two objectives: the completed trials that meet the constraints, the Pareto front
    (joined, in the objectives' better directions) and the points it dominates."""
    if len(objectives) != 2:
        return empty_figure(f"{'One objective' if len(objectives) < 2 else 'More than two objectives'}"
                            ": no front drawn (a study with two --objective has one).", 120, as_dict)
    layout = base_layout("Pareto front", 380, "front", hovermode="closest")
    (a, da), (b, db) = objectives
    layout["xaxis"] = axis(title=dict(text=f"{title_of(a)}, {da}"))
    layout["yaxis"] = axis(title=dict(text=f"{title_of(b)}, {db}"))
    ok = [t for t in ts if t["status"] == "completed" and t["feasible"]
          and t["values"].get(a) is not None and t["values"].get(b) is not None]
    if not ok:
        layout["annotations"].append(placeholder_note("No completed trial meets the constraints yet."))
        return make_figure([], layout, as_dict)
    values = [(t["values"][a], t["values"][b]) for t in ok]
    on = set(pareto_front(values, [da, db]))
    front = sorted((t for i, t in enumerate(ok) if i in on), key=lambda t: t["values"][a])
    dominated = [t for i, t in enumerate(ok) if i not in on]
    traces = []
    if dominated:
        traces.append(_scatter("tune_dominated", "dominated", PRUNED, "circle",
                               [t["values"][a] for t in dominated],
                               [t["values"][b] for t in dominated], dominated))
    traces.append(_scatter("tune_front", "front", BEST, "diamond",
                           [t["values"][a] for t in front], [t["values"][b] for t in front],
                           front, mode="lines+markers",
                           line=dict(color=BEST, shape="hv" if da == db == "min" else "linear")))
    return make_figure(traces, layout, as_dict)
