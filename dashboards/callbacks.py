"""What each part of the page shows, computed from the store, and the Dash wiring.

`Dashboard` holds one store connection (behind a lock: Flask serves callbacks from several
threads) and one method per callback, callable without Dash (tests, benchmarks). `register()`
wires those methods to the page's components.

Live updates append: the live view keeps, per run, the last iteration, eval and event it has
sent (in a dcc.Store on the page) and answers each tick with `Patch` objects that extend each
trace by the new points only. Long runs are drawn in bins of `stride` iterations (at most
`max_points` points per trace on first load, see dashboards/queries.py); the cursor only moves
over complete bins, so a bin is drawn once, when it is full.
"""
from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dash import Input, Output, Patch, State, ctx, no_update

from dashboards import compare as C
from dashboards import panels
from dashboards import queries as Q
from dashboards import sweep as S
from dashboards import tune as T
from dashboards.panel import Rows, View
from dashboards.style import (
    PLACEHOLDER,
    empty_figure,
    event_marks,
    node_order,
    smooth,
    smoothing_carry,
    stage_bands,
)
from testbed.errors import ControlError
from testbed.records.controls import link_targets, validate_control
from testbed.records.objectives import run_metrics
from testbed.records.graph_json import graph_nodes
from testbed.records.store import RunNotFound, Store
from testbed.records.summary import (
    federated_tables,
    final_accuracies,
    run_summary,
    summary_text,
)

LIVE_FIGURES = [p.name for p in panels.PANELS]  # the figures' order in every answer (as imported)
NO_AXIS = "-"   # the sweep view's "no second axis" choice (one row)


def _names() -> list[str]:
    """The live figures, read from the registry when used (a test may add a panel to it)."""
    return [p.name for p in panels.PANELS]


def _uids(fig: dict) -> list[str]:
    return [t["uid"] for t in fig["data"]]


def _placeholders(fig: dict) -> list[dict]:
    """The "no data yet" notes of a drawn figure: they stay when its marks are redrawn."""
    return [a for a in fig["layout"].get("annotations") or [] if a.get("name") == PLACEHOLDER]


class Dashboard:
    def __init__(self, store_path: str | Path, *, max_points: int = 600, topology_window: int = 10,
                 dead_check_s: float = 10.0, starting: str | None = None):
        self.path = Path(store_path)
        self.starting = starting  # a run about to start (testbed demo): waited for, not missing
        self.max_points = max_points
        self.topology_window = topology_window
        self.dead_check_s = dead_check_s
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._last_dead_check = 0.0

    @contextmanager
    def store(self):
        with self._lock:
            if self._store is None:
                self._store = Store(self.path)
            yield self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # ------------------------------------------------------------------ runs table
    def runs_view(self, current_run: int | None):
        """(table rows, run picker options, picker value, message)."""
        with self.store() as store:
            if time.monotonic() - self._last_dead_check > self.dead_check_s:
                store.mark_dead_runs()  # a killed writer's run shows as failed, not running
                self._last_dead_check = time.monotonic()
            runs = store.runs()
            final, federated = final_accuracies(store.db), federated_tables(store.db)
        rows = C.runs_table_rows(runs, final, federated)
        options = [{"label": f"#{r['id']} {r['name']} · {r['method'] or '?'} · {r['status']}",
                    "value": r["id"]} for r in reversed(runs)]
        ids = {r["id"] for r in runs}
        if current_run in ids:
            value = no_update
        else:
            running = [r["id"] for r in runs if r["status"] == "running"]
            value = (running or [r["id"] for r in runs] or [None])[-1]
        if not runs and self.starting:
            message = f"Waiting for the first run ({self.starting}) to start: it appears here within seconds."
        elif not runs:
            message = (f"The store {self.path} has no runs yet. Start one with "
                       f"`testbed run experiments/quickstart.toml --store {self.path}`; "
                       "it appears here within seconds.")
        else:
            n_running = sum(r["status"] == "running" for r in runs)
            message = f"{len(runs)} run(s), {n_running} running. Tick runs to compare them."
        return rows, options, value, message

    # ------------------------------------------------------------------ one run, live
    def _upto(self, store: Store, run: dict, stride: int) -> int:
        """Last iteration to read now: the end of the last complete bin (or the very last
        iteration once the run has ended); -1 when there is none."""
        last = Q.last_iteration(store.db, run["id"])
        if last is None:
            return -1
        if run["status"] == "running":
            return (last + 1) // stride * stride - 1
        return last

    @staticmethod
    def _message(run: dict, has_iter: bool, has_eval: bool, upto: int,
                 summary: dict | None = None) -> tuple[str, str]:
        name = f"Run #{run['id']} {run['name']} ({run.get('method') or '?'})"
        status = run["status"]
        if summary is not None and status not in ("running", "failed") and upto >= 0:
            return f"{name} {status}: {summary_text(summary)}.", "info"
        if status == "failed":
            return f"{name} failed: {run.get('error') or 'no error recorded'}", "error"
        if upto < 0:
            return (f"{name} is {status} and has written no iteration yet.",
                    "info" if status == "running" else "warn")
        tail = "" if has_eval else " No evaluation yet."
        if status == "running":
            return f"{name} is running: iteration {upto}.{tail}", "info"
        return f"{name} {status} after iteration {upto}.{tail}", "info"

    @staticmethod
    def _summary(store: Store, run: dict) -> dict | None:
        """A finished run's headline figures (testbed.records.summary, as the CLI prints them)."""
        return None if run["status"] == "running" else run_summary(store, run["id"])

    def _empty(self, text: str):
        return tuple(empty_figure(text, as_dict=True) for _ in _names())

    def live_view(self, run_id: int | None, x: str | None, state: dict | None,
                  scale: str | None = "log", smoothing: float | None = 0.0, focus: str | None = None):
        """(figures in the registry's order (dashboards.panels.PANELS), new state, message, level). `scale`: the rate
        axis ("log" or "linear"); `smoothing`: the EMA weight of noisy curves (0 = raw); `focus`:
        the worker drawn on its own beside the aggregates (None or "": none)."""
        x, scale, smoothing = x or "iteration", scale or "log", float(smoothing or 0.0)
        focus = focus or None
        if run_id is None:
            if self.starting:
                return (self._empty("Waiting for the first run."), None,
                        f"Waiting for the first run ({self.starting}) to start.", "info")
            return self._empty("No run to show."), None, "No run to show: the store is empty.", "warn"
        with self.store() as store:
            try:
                run = store.run(run_id)
            except RunNotFound:
                return (self._empty("Run not found."), None,
                        f"Run {run_id} is not in the store {self.path}.", "warn")
            view = {"x": x, "scale": scale, "smoothing": smoothing, "focus": focus}
            if (not state or state.get("run_id") != run["id"] or state.get("scale") != scale
                    or state.get("smoothing") != smoothing or state.get("focus") != focus):
                return self._full(store, run, view)
            if state.get("x") != x:
                return self._switch_x(store, run, x, state)
            return self._tick(store, run, view, state)

    def _view(self, run: dict, view: dict, stride: int) -> View:
        note = f"mean per {stride} iterations" if stride > 1 else ""
        return View(x=view["x"], scale=view["scale"], smoothing=view["smoothing"], note=note,
                    uirevision=run["id"], focus=view.get("focus"))

    def _switch_x(self, store: Store, run: dict, x: str, state: dict):
        """Redraw only the panels drawn against the view's x (`mark_x = "view"`), from the
        iterations, evals and events already sent."""
        rid, stride, upto = run["id"], state["stride"], state["iter"]
        rows = Rows(run, iterations=Q.iterations(store.db, rid, -1, upto, stride),
                    evals=[e for e in store.evals(rid) if e["iteration"] <= state["eval"]],
                    events=[e for e in store.events(rid) if e["id"] <= state["event"]])
        view = self._view(run, dict(state, x=x), stride)
        redrawn = {p.name: p.draw(rows, view, True) for p in panels.PANELS if p.mark_x == "view"}
        figs = tuple(redrawn.get(name, no_update) for name in _names())
        state = dict(state, x=x, uids={**state["uids"], **{n: _uids(f) for n, f in redrawn.items()}},
                     carry={**state["carry"], **{n: smoothing_carry(f, n) for n, f in redrawn.items()}},
                     notes={**state["notes"], **{n: _placeholders(f) for n, f in redrawn.items()}})
        msg, level = self._message(run, state["has_iter"], state["has_eval"], upto)
        return figs, state, msg, level

    def _window(self, store: Store, run_id: int, upto: int) -> tuple[list[dict], str]:
        """The link rows of the newest `topology_window` iterations, and what they cover."""
        if upto < 0:
            return [], ""
        rows = store.links(run_id, after=upto - self.topology_window)
        label = f"over iterations {max(0, upto - self.topology_window + 1)}-{upto}"
        return [r for r in rows if r["iteration"] <= upto], label

    def _full(self, store: Store, run: dict, view: dict):
        rid = run["id"]
        last = Q.last_iteration(store.db, rid)
        stride = max(1, math.ceil((last + 1) / self.max_points)) if last is not None else 1
        upto = self._upto(store, run, stride)
        window, label = self._window(store, rid, upto)
        rows = Rows(run, iterations=Q.iterations(store.db, rid, -1, upto, stride),
                    nodes=Q.node_iterations(store.db, rid, -1, upto, stride),
                    links=Q.links(store.db, rid, -1, upto, stride), evals=store.evals(rid),
                    events=store.events(rid), window=window, window_label=label)
        its, evals, events = rows.iterations, rows.evals, rows.events
        figs = {p.name: p.draw(rows, self._view(run, view, stride), True) for p in panels.PANELS}
        live = [p for p in panels.PANELS if p.series]
        state = {
            "run_id": rid, **view, "stride": stride, "iter": upto,
            "end_vt": its[-1]["virtual_time_s"] if its else None,
            "eval": evals[-1]["iteration"] if evals else -1,
            "event": max((e["id"] for e in events), default=0),
            "totals": {p.name: p.totals(rows, {}) for p in panels.PANELS if p.totals},
            "has_iter": bool(its), "has_eval": bool(evals), "has_links": bool(rows.links),
            "parts": {p.name: sorted(p.parts(rows)) for p in panels.PANELS if p.parts},
            "uids": {p.name: _uids(figs[p.name]) for p in live},
            "carry": {p.name: smoothing_carry(figs[p.name], p.name) for p in live},
            "notes": {p.name: _placeholders(figs[p.name]) for p in live},
        }
        msg, level = self._message(run, bool(its), bool(evals), upto, self._summary(store, run))
        return tuple(figs[n] for n in _names()), state, msg, level

    def _tick(self, store: Store, run: dict, view: dict, state: dict):
        rid, stride, after = run["id"], state["stride"], state["iter"]
        upto = max(after, self._upto(store, run, stride))
        new = upto > after
        rows = Rows(run, iterations=Q.iterations(store.db, rid, after, upto, stride) if new else [],
                    nodes=Q.node_iterations(store.db, rid, after, upto, stride) if new else [],
                    links=Q.links(store.db, rid, after, upto, stride) if new else [],
                    evals=store.evals(rid, after=state["eval"]), events=store.events(rid))
        its, evals, events = rows.iterations, rows.evals, rows.events
        new_events = [e for e in events if e["id"] > state["event"]]
        # A figure drawn with a "no data yet" note is redrawn whole when its data arrives, and
        # a panel when its rows call for an optional part of its layout it has not drawn
        # (the channel's first SNR or collision: a row of its own).
        if ((its and not state["has_iter"]) or (evals and not state["has_eval"])
                or (rows.links and not state["has_links"])
                or any(not p.parts(rows) <= set(state["parts"][p.name]) for p in panels.PANELS if p.parts)):
            return self._full(store, run, view)
        v = self._view(run, view, stride)
        live = [p for p in panels.PANELS if p.series]
        series = {p.name: p.series(rows, v, state["totals"].get(p.name)) for p in live}
        for name, s in series.items():
            if any(xy[0] and uid not in state["uids"][name] for uid, xy in s.items()):
                return self._full(store, run, view)  # a new node or link: new traces
        carry = dict(state["carry"])
        for name in series:
            series[name], carry[name] = smooth(series[name], name, view["smoothing"], carry[name])
        end_vt = its[-1]["virtual_time_s"] if its else state["end_vt"]
        # Stage bands stretch to the newest point: redraw the marks when rows or events arrive.
        remark = bool(new_events) or (new and bool(stage_bands(events)))
        ends = {"iteration": upto, "virtual_time_s": end_vt}
        out: dict[str, Any] = {}
        for p in live:
            patch, changed = Patch(), False
            uids = state["uids"][p.name]
            texts = p.hover(rows) if p.hover and new else {}
            for uid, (xs, ys) in series[p.name].items():
                if xs:
                    i = uids.index(uid)
                    patch["data"][i]["x"].extend(xs)
                    patch["data"][i]["y"].extend(ys)
                    if uid in texts:  # the hover text of the new points
                        patch["data"][i]["text"].extend(texts[uid])
                    changed = True
            if remark:
                mark_x = view["x"] if p.mark_x == "view" else p.mark_x
                shapes, notes = event_marks(events, mark_x, ends[mark_x])
                patch["layout"]["shapes"] = shapes
                patch["layout"]["annotations"] = state["notes"][p.name] + notes
                changed = True
            out[p.name] = patch if changed else no_update
        redraw = new or new_events
        if redraw and any(not p.series for p in panels.PANELS):
            window, label = self._window(store, rid, upto)
            rows.window, rows.window_label = window, label
        for p in panels.PANELS:
            if not p.series:  # drawn whole: on new rows or events
                out[p.name] = p.draw(rows, v, True) if redraw else no_update
        state = dict(state, iter=upto, eval=evals[-1]["iteration"] if evals else state["eval"],
                     event=max([state["event"]] + [e["id"] for e in new_events]), end_vt=end_vt,
                     totals={p.name: p.totals(rows, state["totals"][p.name]) for p in panels.PANELS if p.totals},
                     has_eval=state["has_eval"] or bool(evals), carry=carry)
        msg, level = self._message(run, state["has_iter"], state["has_eval"], upto,
                                   self._summary(store, run))
        return tuple(out[n] for n in _names()), state, msg, level

    # ------------------------------------------------------------------ what the run calls for
    def panels_view(self, run_id: int | None):
        """(a style per panel, in the registry's order: hidden when the panel does not apply to
        the run; the worker picker's options). Without a run every panel shows (its note)."""
        run = None
        if run_id is not None:
            with self.store() as store:
                try:
                    run = store.run(run_id)
                except RunNotFound:
                    run = None
        styles = [{} if run is None or p.applies_to(run) else {"display": "none"} for p in panels.PANELS]
        for i, p in enumerate(panels.PANELS):
            if p.name in panels.WIDE:
                styles[i] = {**styles[i], "gridColumn": "1 / -1"}
        workers = [] if run is None else [str(n["id"]) for n in graph_nodes(run.get("graph"))
                                          if n.get("role", "worker") == "worker"]
        options = [{"label": "none: the aggregates", "value": ""}] + [
            {"label": w, "value": w} for w in node_order(workers)]
        return styles, options

    # ------------------------------------------------------------------ steering
    def controls_view(self, run_id: int | None):
        """(control requests table rows, target options, apply disabled?, hint)."""
        if run_id is None:
            return [], [{"label": "all links", "value": "*"}], True, "No run selected."
        with self.store() as store:
            try:
                run = store.run(run_id)
            except RunNotFound:
                return [], [{"label": "all links", "value": "*"}], True, f"Run {run_id} not found."
            controls = store.controls(run["id"])
        rows = [{"id": c["id"], "target": c["target"],
                 "changes": ", ".join(f"{k}={v:g}" for k, v in c["changes"].items()),
                 "status": c["status"], "iteration": c["applied_iteration"],
                 "message": c["message"] or ""} for c in reversed(controls)]
        options = [{"label": "all links" if t == "*" else t.replace("->", " → "), "value": t}
                   for t in link_targets(run.get("graph"))]
        running = run["status"] == "running"
        hint = ("Changes reach the run at its next iteration." if running else
                f"This run is {run['status']}: steering works only while a run is running.")
        return rows, options, not running, hint

    def submit_control(self, run_id, target, bandwidth_mbps, delay_ms, loss_p):
        """Validate and write one control request: (message, level)."""
        if run_id is None:
            return "Pick a run first.", "warn"
        changes = {k: v for k, v in (("bandwidth_mbps", bandwidth_mbps), ("delay_ms", delay_ms),
                                     ("loss_p", loss_p)) if v not in (None, "")}
        if not changes:
            return "Enter a bandwidth, a delay or a loss probability to change.", "warn"
        with self.store() as store:
            try:
                run = store.run(run_id)
                target, changes = validate_control(run, target or "*", changes)
            except (RunNotFound, ControlError) as e:
                return str(e), "error"
            cid = store.request_control(run["id"], target, changes)
        what = ", ".join(f"{k}={v:g}" for k, v in changes.items())
        return (f"Control #{cid} requested: {'all links' if target == '*' else target}: {what}. "
                "The run applies it at its next iteration."), "ok"

    # ------------------------------------------------------------------ compare
    def compare_view(self, run_ids: list[int] | None, target: float | None, x: str | None):
        """(figure, summary rows, message) for the chosen runs; `target` in [0, 1]."""
        x = x or "virtual_time_s"
        run_ids = list(run_ids or [])
        if target is None or not (0 < target <= 1):
            return (C.compare_figure([], x, as_dict=True), [],
                    f"Target accuracy {target!r} is out of range: enter a percentage in (0, 100].")
        with self.store() as store:
            entries = [self._entry(store, rid) for rid in run_ids]
            entries = [e for e in entries if e is not None]
            baseline = next((e for e in entries if e["run"].get("method") == "none"), None)
            if baseline is None:
                base_id = Q.newest_run_id(store.db, method="none")
                baseline = self._entry(store, base_id) if base_id is not None else None
        if not entries:
            return (C.compare_figure([], x, as_dict=True), [],
                    "Tick one or more runs in the table above to compare them.")
        rows = C.compare_summary(entries, target, baseline)
        with self.store() as store:  # energy to the target beside the time to it
            for row in rows:
                it = row["iterations_to_target"]
                row["energy_to_target_j"] = None if it is None else Q.energy_to(store.db, row["id"], it)
        if baseline is None:
            note = "No fp32 run (method 'none') in the store: the compression ratio is left blank."
        else:
            b = baseline["run"]
            note = f"Compression ratio: bits per iteration of fp32 run #{b['id']} {b['name']} over each run's."
        return C.compare_figure(entries, x, target, as_dict=True), rows, f"{len(entries)} run(s). {note}"

    def _entry(self, store: Store, run_id: int) -> dict | None:
        try:
            run = store.run(run_id)
        except RunNotFound:
            return None
        last = Q.last_iteration(store.db, run["id"])
        stride = max(1, math.ceil((last + 1) / self.max_points)) if last is not None else 1
        its = Q.iterations(store.db, run["id"], -1, last if last is not None else -1, stride)
        return {"run": run, "iterations": its, "evals": store.evals(run["id"])}

    # ------------------------------------------------------------------ sweep
    def sweep_view(self, base: str | None, x_key: str | None, y_key: str | None,
                   target: float | None):
        """The sweep heat maps: (figure, sweep options, sweep, key options, x key, y options,
        y key, message). Unknown or missing choices fall back to the newest sweep and to its
        first two grid keys that vary (seeds are averaged over unless chosen)."""
        with self.store() as store:
            groups = S.sweeps(store.runs())
            if not groups:
                return (S.sweep_figure([], None, as_dict=True), [], None, [], None, [], NO_AXIS,
                        f"No sweep in {self.path} yet: run `testbed sweep FILE --grid key=v1,v2 "
                        f"--store {self.path}`.")
            if base not in groups:
                base = max(groups, key=lambda b: groups[b][-1][0]["id"])
            members = groups[base]
            keys = S.sweep_keys([p for _, p in members])
            x_key = x_key if x_key in keys else keys[0]
            varying = [k for k in keys if len({p.get(k) for _, p in members}) > 1]
            if y_key != NO_AXIS and (y_key not in keys or y_key == x_key):
                y_key = next((k for k in varying if k not in (x_key, "seed")), NO_AXIS)
            bad_target = target is None or not 0 < target <= 1
            cells = []
            for run, params in members:
                evals = store.evals(run["id"])
                accs = [e["test_accuracy"] for e in evals if e["test_accuracy"] is not None]
                it, t = (None, None) if bad_target else C.time_to_accuracy(evals, target)
                cells.append({"params": params, "final_accuracy": accs[-1] if accs else None,
                              "time_to_target_s": t,
                              "energy_to_target_j": None if it is None else
                              Q.energy_to(store.db, run["id"], it)})
        y = None if y_key == NO_AXIS else y_key
        others = [k for k in varying if k not in (x_key, y)]
        title = f"Sweep {base}: {len(members)} runs"
        fig = S.sweep_figure(cells, x_key, y, None if bad_target else target, title, as_dict=True)
        message = (f"{len(members)} runs of sweep {base} over "
                   + ", ".join(f"{k} ({len(S.sweep_values([p for _, p in members], k))})" for k in keys)
                   + (f"; each cell averages over {', '.join(others)}." if others else "."))
        if bad_target:
            message += f" Target accuracy {target!r} is out of range: enter a percentage in (0, 100]."
        key_options = [{"label": k, "value": k} for k in keys]
        y_options = [{"label": "(one row)", "value": NO_AXIS}] + [o for o in key_options if o["value"] != x_key]
        sweep_options = [{"label": f"{b} ({len(m)} runs)", "value": b} for b, m in groups.items()]
        return fig, sweep_options, base, key_options, x_key, y_options, y_key, message


    # ------------------------------------------------------------------ tune
    def tune_view(self, name: str | None, objective: str | None, param: str | None):
        """The Tune view: (history figure, parameter figure, front figure, study options,
        study, objective options, objective, parameter options, parameter, message). Unknown
        or missing choices fall back to the newest study, its first objective and first
        parameter."""
        with self.store() as store:
            found = T.studies(store.runs(), store.sweep_specs())
            if not found:
                empty = T.history_figure([], None, as_dict=True)
                return (empty, T.param_figure([], None, None, as_dict=True),
                        T.front_figure([], [], as_dict=True), [], None, [], None, [], None,
                        f"No tune study in {self.path} yet: run `testbed tune FILE --param "
                        f"KEY=LOW:HIGH --objective NAME --trials N --name STUDY --store {self.path}`.")
            if name not in found:
                name = max(found, key=lambda n: found[n]["runs"][-1]["id"])
            spec, runs = found[name]["spec"], found[name]["runs"]
            metrics = {r["id"]: run_metrics(store, r["id"], spec.get("target")) for r in runs}
        ts = T.trials(spec, runs, metrics)
        objectives = [tuple(o) for o in spec.get("objectives", [])]
        names = [n for n, _ in objectives] + [c[0] for c in spec.get("constraints", [])
                                              if c[0] not in [n for n, _ in objectives]]
        objective = objective if objective in names else (names[0] if names else None)
        direction = dict(objectives).get(objective, "min")
        params = {p["key"]: p for p in spec.get("params", [])}
        param = param if param in params else next(iter(params), None)
        p = params.get(param, {})
        counts = {s: sum(t["status"] == s for t in ts) for s in ("completed", "pruned", "failed",
                                                                 "running", "stopped")}
        title = f"Study {name}: {objective} by trial ({direction})"
        # a parameter against itself says nothing: against the next figure (a constraint's)
        against = objective if objective != param else next(
            (n for n in names if n != param), objective)
        figs = (T.history_figure(ts, objective, direction, title, as_dict=True),
                T.param_figure(ts, param, against, log=bool(p.get("log")),
                               categorical=p.get("kind") == "categorical", as_dict=True),
                T.front_figure(ts, objectives, as_dict=True))
        unmet = sum(t["status"] == "completed" and not t["feasible"] for t in ts)
        said = {s: f"{n} {s}" for s, n in counts.items() if n}
        if unmet:
            said["completed"] += f" ({unmet} not meeting the constraints)"
        message = (f"{len(ts)} trials of study {name}: " + ", ".join(said.values())
                   + (f"; target accuracy {spec['target']:g}" if spec.get("target") else "")
                   + ". Click a trial to open its run in the live view.")
        study_options = [{"label": f"{n} ({len({r['trial'] for r in found[n]['runs']})} trials)",
                          "value": n} for n in found]
        return (*figs, study_options, name, [{"label": n, "value": n} for n in names], objective,
                [{"label": k, "value": k} for k in params], param, message)

    @staticmethod
    def open_trial(click: dict | None):
        """The run id a click on a Tune figure's point names (its customdata), else None."""
        points = (click or {}).get("points") or []
        run_id = points[0].get("customdata") if points else None
        return run_id if isinstance(run_id, int) else None


def _level_class(level: str) -> str:
    return f"message {level}"


def register(app, board: Dashboard) -> None:
    """Wire the page's components (dashboards/layout.py ids) to `board`."""
    live_outputs = [Output(f"{name}-graph", "figure") for name in _names()]

    @app.callback(Output("runs-table", "data"), Output("run-select", "options"),
                  Output("run-select", "value"), Output("runs-message", "children"),
                  Input("runs-interval", "n_intervals"), State("run-select", "value"))
    def _runs(_n, current):
        return board.runs_view(current)

    @app.callback(*live_outputs, Output("live-state", "data"), Output("live-message", "children"),
                  Output("live-message", "className"),
                  Input("live-interval", "n_intervals"), Input("run-select", "value"),
                  Input("x-mode", "value"), Input("rate-scale", "value"), Input("smoothing", "value"),
                  Input("focus-select", "value"), State("live-state", "data"))
    def _live(_n, run_id, x, scale, smoothing, focus, state):
        figs, state, message, level = board.live_view(run_id, x, state, scale, smoothing, focus)
        return (*figs, state, message, _level_class(level))

    @app.callback(*[Output(f"{name}-graph", "style") for name in _names()],
                  Output("focus-select", "options"), Input("run-select", "value"))
    def _panels(run_id):
        styles, options = board.panels_view(run_id)
        return (*styles, options)

    @app.callback(Output("controls-table", "data"), Output("control-target", "options"),
                  Output("control-apply", "disabled"), Output("steer-hint", "children"),
                  Input("live-interval", "n_intervals"), Input("run-select", "value"))
    def _controls(_n, run_id):
        return board.controls_view(run_id)

    @app.callback(Output("control-message", "children"), Output("control-message", "className"),
                  Input("control-apply", "n_clicks"),
                  State("run-select", "value"), State("control-target", "value"),
                  State("control-bandwidth", "value"), State("control-delay", "value"),
                  State("control-loss", "value"), prevent_initial_call=True)
    def _steer(_clicks, run_id, target, bandwidth, delay, loss):
        message, level = board.submit_control(run_id, target, bandwidth, delay, loss)
        return message, _level_class(level)

    @app.callback(Output("compare-graph", "figure"), Output("compare-table", "data"),
                  Output("compare-message", "children"),
                  Input("runs-table", "selected_row_ids"), Input("target-accuracy", "value"),
                  Input("compare-x", "value"), Input("view-tabs", "value"))
    def _compare(run_ids, target_pct, x, _tab):
        target = None if target_pct is None else float(target_pct) / 100
        return board.compare_view(run_ids, target, x)

    @app.callback(Output("sweep-graph", "figure"), Output("sweep-select", "options"),
                  Output("sweep-select", "value"), Output("sweep-x", "options"),
                  Output("sweep-x", "value"), Output("sweep-y", "options"), Output("sweep-y", "value"),
                  Output("sweep-message", "children"),
                  Input("runs-interval", "n_intervals"), Input("view-tabs", "value"),
                  Input("sweep-select", "value"), Input("sweep-x", "value"),
                  Input("sweep-y", "value"), Input("sweep-target", "value"))
    def _sweep(_n, tab, base, x_key, y_key, target_pct):
        if tab != "sweep":
            return (no_update,) * 8
        target = None if target_pct is None else float(target_pct) / 100
        return board.sweep_view(base, x_key, y_key, target)

    @app.callback(Output("tune-history-graph", "figure"), Output("tune-param-graph", "figure"),
                  Output("tune-front-graph", "figure"), Output("tune-select", "options"),
                  Output("tune-select", "value"), Output("tune-objective", "options"),
                  Output("tune-objective", "value"), Output("tune-param", "options"),
                  Output("tune-param", "value"), Output("tune-message", "children"),
                  Input("runs-interval", "n_intervals"), Input("view-tabs", "value"),
                  Input("tune-select", "value"), Input("tune-objective", "value"),
                  Input("tune-param", "value"))
    def _tune(_n, tab, name, objective, param):
        if tab != "tune":
            return (no_update,) * 10
        return board.tune_view(name, objective, param)

    @app.callback(Output("run-select", "value", allow_duplicate=True),
                  Output("view-tabs", "value", allow_duplicate=True),
                  Input("tune-history-graph", "clickData"), Input("tune-param-graph", "clickData"),
                  Input("tune-front-graph", "clickData"), prevent_initial_call=True)
    def _open_trial(*_clicks):
        run_id = board.open_trial(ctx.triggered[0]["value"] if ctx.triggered else None)
        return (no_update, no_update) if run_id is None else (run_id, "live")
