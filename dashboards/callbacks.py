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

from dash import Input, Output, Patch, State, no_update

from dashboards import figures as F
from dashboards import queries as Q
from testbed.controls import ControlError, link_targets, validate_control
from testbed.store import RunNotFound, Store

LIVE_FIGURES = ["accuracy", "rate", "latency", "channel", "energy", "topology"]
SERIES_FIGURES = ["accuracy", "rate", "latency", "channel", "energy"]
NO_EVAL_TEXT = "No evaluation yet: accuracy appears after the first test pass."
NO_AXIS = "-"   # the sweep view's "no second axis" choice (one row)


class Dashboard:
    def __init__(self, store_path: str | Path, *, max_points: int = 600, topology_window: int = 10,
                 dead_check_s: float = 10.0):
        self.path = Path(store_path)
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
        rows = F.runs_table_rows(runs)
        options = [{"label": f"#{r['id']} {r['name']} · {r['method'] or '?'} · {r['status']}",
                    "value": r["id"]} for r in reversed(runs)]
        ids = {r["id"] for r in runs}
        if current_run in ids:
            value = no_update
        else:
            running = [r["id"] for r in runs if r["status"] == "running"]
            value = (running or [r["id"] for r in runs] or [None])[-1]
        if not runs:
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
    def _message(run: dict, has_iter: bool, has_eval: bool, upto: int) -> tuple[str, str]:
        name = f"Run #{run['id']} {run['name']} ({run.get('method') or '?'})"
        status = run["status"]
        if status == "failed":
            return f"{name} failed: {run.get('error') or 'no error recorded'}", "error"
        if upto < 0:
            return (f"{name} is {status} and has written no iteration yet.",
                    "info" if status == "running" else "warn")
        tail = "" if has_eval else " No evaluation yet."
        if status == "running":
            return f"{name} is running: iteration {upto}.{tail}", "info"
        return f"{name} {status} after iteration {upto}.{tail}", "info"

    def _empty(self, text: str):
        return tuple(F.empty_figure(text, as_dict=True) for _ in LIVE_FIGURES)

    def live_view(self, run_id: int | None, x: str | None, state: dict | None,
                  scale: str | None = "log", smoothing: float | None = 0.0):
        """(figures in LIVE_FIGURES order, new state, message, level). `scale`: the rate
        axis ("log" or "linear"); `smoothing`: the EMA weight of noisy curves (0 = raw)."""
        x, scale, smoothing = x or "iteration", scale or "log", float(smoothing or 0.0)
        if run_id is None:
            return self._empty("No run to show."), None, "No run to show: the store is empty.", "warn"
        with self.store() as store:
            try:
                run = store.run(run_id)
            except RunNotFound:
                return (self._empty("Run not found."), None,
                        f"Run {run_id} is not in the store {self.path}.", "warn")
            view = {"x": x, "scale": scale, "smoothing": smoothing}
            if (not state or state.get("run_id") != run["id"] or state.get("scale") != scale
                    or state.get("smoothing") != smoothing):
                return self._full(store, run, view)
            if state.get("x") != x:
                return self._switch_x(store, run, x, state)
            return self._tick(store, run, view, state)

    def _switch_x(self, store: Store, run: dict, x: str, state: dict):
        """Redraw only the accuracy figure against the other x axis, from the rows already sent."""
        rid, stride, upto = run["id"], state["stride"], state["iter"]
        its = Q.iterations(store.db, rid, -1, upto, stride)
        evals = [e for e in store.evals(rid) if e["iteration"] <= state["eval"]]
        events = [e for e in store.events(rid) if e["id"] <= state["event"]]
        note = f"mean per {stride} iterations" if stride > 1 else ""
        acc = F.accuracy_figure(its, evals, events, x, uirevision=rid, note=note,
                                smoothing=state["smoothing"], as_dict=True)
        figs = tuple(acc if name == "accuracy" else no_update for name in LIVE_FIGURES)
        state = dict(state, x=x, uids=dict(state["uids"], accuracy=[t["uid"] for t in acc["data"]]),
                     carry=dict(state["carry"], accuracy=F.smoothing_carry(acc, "accuracy")))
        msg, level = self._message(run, state["has_iter"], state["has_eval"], upto)
        return figs, state, msg, level

    def _window(self, store: Store, run_id: int, upto: int) -> list[dict]:
        rows = store.links(run_id, after=upto - self.topology_window)
        return [r for r in rows if r["iteration"] <= upto]

    def _full(self, store: Store, run: dict, view: dict):
        rid, x, sm = run["id"], view["x"], view["smoothing"]
        last = Q.last_iteration(store.db, rid)
        stride = max(1, math.ceil((last + 1) / self.max_points)) if last is not None else 1
        upto = self._upto(store, run, stride)
        its = Q.iterations(store.db, rid, -1, upto, stride)
        nodes = Q.node_iterations(store.db, rid, -1, upto, stride)
        links = Q.links(store.db, rid, -1, upto, stride)
        evals = store.evals(rid)
        events = store.events(rid)
        note = f"mean per {stride} iterations" if stride > 1 else ""
        times = {r["iteration"]: r["virtual_time_s"] for r in its}
        figs = {
            "accuracy": F.accuracy_figure(its, evals, events, x, uirevision=rid, note=note,
                                          smoothing=sm, as_dict=True),
            "rate": F.rate_figure(its, nodes, events, uirevision=rid, note=note, scale=view["scale"],
                                  smoothing=sm, as_dict=True),
            "latency": F.latency_figure(its, events, uirevision=rid, note=note, smoothing=sm,
                                        as_dict=True, nodes=nodes),
            "channel": F.channel_figure(links, None, events, uirevision=rid, note=note,
                                        smoothing=sm, as_dict=True),
            "energy": F.energy_figure(nodes, times, events, uirevision=rid, note=note,
                                      smoothing=sm, as_dict=True),
            "topology": self._topology(store, run, upto),
        }
        cum = F.rate_series(its, ())
        state = {
            "run_id": rid, **view, "stride": stride, "iter": upto,
            "end_vt": its[-1]["virtual_time_s"] if its else None,
            "eval": evals[-1]["iteration"] if evals else -1,
            "event": max((e["id"] for e in events), default=0),
            "cum_bytes": {part: (cum[f"cum_{part}"][1] or [0.0])[-1] for part in ("up", "down")},
            "cum_energy": F.energy_totals(nodes, times),
            "has_iter": bool(its), "has_eval": bool(evals), "has_links": bool(links),
            "rows": sorted(F.channel_rows_present(links)),
            "uids": {name: [t["uid"] for t in figs[name]["data"]] for name in SERIES_FIGURES},
            "carry": {name: F.smoothing_carry(figs[name], name) for name in SERIES_FIGURES},
        }
        msg, level = self._message(run, bool(its), bool(evals), upto)
        return tuple(figs[n] for n in LIVE_FIGURES), state, msg, level

    def _topology(self, store: Store, run: dict, upto: int):
        window = self._window(store, run["id"], upto) if upto >= 0 else []
        label = f"over iterations {max(0, upto - self.topology_window + 1)}-{upto}" if upto >= 0 else ""
        return F.topology_figure(run.get("graph"), window, label, uirevision=run["id"], as_dict=True)

    def _tick(self, store: Store, run: dict, view: dict, state: dict):
        rid, stride, after, x = run["id"], state["stride"], state["iter"], view["x"]
        upto = max(after, self._upto(store, run, stride))
        new = upto > after
        its = Q.iterations(store.db, rid, after, upto, stride) if new else []
        nodes = Q.node_iterations(store.db, rid, after, upto, stride) if new else []
        links = Q.links(store.db, rid, after, upto, stride) if new else []
        evals = store.evals(rid, after=state["eval"])
        events = store.events(rid)
        new_events = [e for e in events if e["id"] > state["event"]]
        # A figure drawn with a "no data yet" note is redrawn whole when its data arrives, and
        # the channel figure when its first SNR or collision arrives (a row of its own).
        times = {r["iteration"]: r["virtual_time_s"] for r in its}
        if ((its and not state["has_iter"]) or (evals and not state["has_eval"])
                or (links and not state["has_links"])
                or not F.channel_rows_present(links) <= set(state["rows"])):
            return self._full(store, run, view)
        series = {
            "accuracy": F.accuracy_series(its, evals, x),
            "rate": F.rate_series(its, nodes, start_bytes=state["cum_bytes"]),
            "latency": F.latency_series(its),
            "channel": F.channel_series(links),
            "energy": F.energy_series(nodes, times, start=state.get("cum_energy")),
        }
        for name, s in series.items():
            if any(xy[0] and uid not in state["uids"][name] for uid, xy in s.items()):
                return self._full(store, run, view)  # a new node or link: new traces
        carry = dict(state["carry"])
        for name in SERIES_FIGURES:
            series[name], carry[name] = F.smooth(series[name], name, view["smoothing"], carry[name])
        end_vt = its[-1]["virtual_time_s"] if its else state["end_vt"]
        # Stage bands stretch to the newest point: redraw the marks when rows or events arrive.
        remark = bool(new_events) or (new and bool(F.stage_bands(events)))
        ends = {"accuracy": upto if x == "iteration" else end_vt, "rate": upto, "latency": upto,
                "channel": end_vt, "energy": end_vt}
        out: dict[str, Any] = {}
        for name, s in series.items():
            patch, changed = Patch(), False
            uids = state["uids"][name]
            for uid, (xs, ys) in s.items():
                if xs:
                    i = uids.index(uid)
                    patch["data"][i]["x"].extend(xs)
                    patch["data"][i]["y"].extend(ys)
                    if name == "latency" and uid == "left_out":  # who, on the new markers' hover
                        patch["data"][i]["text"].extend(F.left_out_text(its, nodes))
                    changed = True
            if remark:
                mark_x = (x if name == "accuracy" else "virtual_time_s" if name in ("channel", "energy")
                          else "iteration")
                shapes, notes = F.event_marks(events, mark_x, ends[name])
                if name == "accuracy" and not (state["has_eval"] or evals):
                    notes = [F.placeholder_note(NO_EVAL_TEXT)] + notes
                patch["layout"]["shapes"] = shapes
                patch["layout"]["annotations"] = notes
                changed = True
            out[name] = patch if changed else no_update
        out["topology"] = self._topology(store, run, upto) if (new or new_events) else no_update
        cum = series["rate"]
        state = dict(state, iter=upto, eval=evals[-1]["iteration"] if evals else state["eval"],
                     event=max([state["event"]] + [e["id"] for e in new_events]), end_vt=end_vt,
                     cum_bytes={part: (cum[f"cum_{part}"][1] or [state["cum_bytes"][part]])[-1]
                                for part in ("up", "down")},
                     cum_energy=F.energy_totals(nodes, times, state.get("cum_energy")),
                     has_eval=state["has_eval"] or bool(evals), carry=carry)
        msg, level = self._message(run, state["has_iter"], state["has_eval"], upto)
        return tuple(out[n] for n in LIVE_FIGURES), state, msg, level

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
            return (F.compare_figure([], x, as_dict=True), [],
                    f"Target accuracy {target!r} is out of range: enter a percentage in (0, 100].")
        with self.store() as store:
            entries = [self._entry(store, rid) for rid in run_ids]
            entries = [e for e in entries if e is not None]
            baseline = next((e for e in entries if e["run"].get("method") == "none"), None)
            if baseline is None:
                base_id = Q.newest_run_id(store.db, method="none")
                baseline = self._entry(store, base_id) if base_id is not None else None
        if not entries:
            return (F.compare_figure([], x, as_dict=True), [],
                    "Tick one or more runs in the table above to compare them.")
        rows = F.compare_summary(entries, target, baseline)
        with self.store() as store:  # energy to the target beside the time to it
            for row in rows:
                it = row["iterations_to_target"]
                row["energy_to_target_j"] = None if it is None else Q.energy_to(store.db, row["id"], it)
        if baseline is None:
            note = "No fp32 run (method 'none') in the store: the compression ratio is left blank."
        else:
            b = baseline["run"]
            note = f"Compression ratio: bits per iteration of fp32 run #{b['id']} {b['name']} over each run's."
        return F.compare_figure(entries, x, target, as_dict=True), rows, f"{len(entries)} run(s). {note}"

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
            groups = F.sweeps(store.runs())
            if not groups:
                return (F.sweep_figure([], None, as_dict=True), [], None, [], None, [], NO_AXIS,
                        f"No sweep in {self.path} yet: run `testbed sweep FILE --grid key=v1,v2 "
                        f"--store {self.path}`.")
            if base not in groups:
                base = max(groups, key=lambda b: groups[b][-1][0]["id"])
            members = groups[base]
            keys = F.sweep_keys([p for _, p in members])
            x_key = x_key if x_key in keys else keys[0]
            varying = [k for k in keys if len({p.get(k) for _, p in members}) > 1]
            if y_key != NO_AXIS and (y_key not in keys or y_key == x_key):
                y_key = next((k for k in varying if k not in (x_key, "seed")), NO_AXIS)
            bad_target = target is None or not 0 < target <= 1
            cells = []
            for run, params in members:
                evals = store.evals(run["id"])
                accs = [e["test_accuracy"] for e in evals if e["test_accuracy"] is not None]
                it, t = (None, None) if bad_target else F.time_to_accuracy(evals, target)
                cells.append({"params": params, "final_accuracy": accs[-1] if accs else None,
                              "time_to_target_s": t,
                              "energy_to_target_j": None if it is None else
                              Q.energy_to(store.db, run["id"], it)})
        y = None if y_key == NO_AXIS else y_key
        others = [k for k in varying if k not in (x_key, y)]
        title = f"Sweep {base}: {len(members)} runs"
        fig = F.sweep_figure(cells, x_key, y, None if bad_target else target, title, as_dict=True)
        message = (f"{len(members)} runs of sweep {base} over "
                   + ", ".join(f"{k} ({len(F.sweep_values([p for _, p in members], k))})" for k in keys)
                   + (f"; each cell averages over {', '.join(others)}." if others else "."))
        if bad_target:
            message += f" Target accuracy {target!r} is out of range: enter a percentage in (0, 100]."
        key_options = [{"label": k, "value": k} for k in keys]
        y_options = [{"label": "(one row)", "value": NO_AXIS}] + [o for o in key_options if o["value"] != x_key]
        sweep_options = [{"label": f"{b} ({len(m)} runs)", "value": b} for b, m in groups.items()]
        return fig, sweep_options, base, key_options, x_key, y_options, y_key, message


def _level_class(level: str) -> str:
    return f"message {level}"


def register(app, board: Dashboard) -> None:
    """Wire the page's components (dashboards/layout.py ids) to `board`."""
    live_outputs = [Output(f"{name}-graph", "figure") for name in LIVE_FIGURES]

    @app.callback(Output("runs-table", "data"), Output("run-select", "options"),
                  Output("run-select", "value"), Output("runs-message", "children"),
                  Input("runs-interval", "n_intervals"), State("run-select", "value"))
    def _runs(_n, current):
        return board.runs_view(current)

    @app.callback(*live_outputs, Output("live-state", "data"), Output("live-message", "children"),
                  Output("live-message", "className"),
                  Input("live-interval", "n_intervals"), Input("run-select", "value"),
                  Input("x-mode", "value"), Input("rate-scale", "value"), Input("smoothing", "value"),
                  State("live-state", "data"))
    def _live(_n, run_id, x, scale, smoothing, state):
        figs, state, message, level = board.live_view(run_id, x, state, scale, smoothing)
        return (*figs, state, message, _level_class(level))

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
