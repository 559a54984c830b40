"""Runs side by side: the runs table's rows, the compare figure (accuracy and cumulative bits
of the chosen runs) and its summary table (compression ratio against fp32, time to a target)."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.style import (
    PALETTE,
    X_AXES,
    base_layout,
    bits_sum,
    check_x,
    grid2,
    line_trace,
    make_figure,
    placeholder_note,
    points,
    series_uid,
    unit_axis,
)
from testbed.records.summary import ITERATION_UNITS, participants, plural


def _run_label(run: dict) -> str:
    return f"{run.get('name')} #{run.get('id')} ({run.get('method') or '?'})"


def compare_figure(entries: Sequence[dict], x: str = "virtual_time_s", target: float | None = None,
                   as_dict: bool = False) -> go.Figure | dict:
    """Chosen runs overlaid: test accuracy (top) and cumulative bits (bottom, log) vs `x`.

    `entries`: dicts with `run` (a run dict), `iterations` (raw or binned rows) and `evals`.
    """
    check_x(x)
    traces = []
    for i, entry in enumerate(entries):
        run, color = entry["run"], PALETTE[i % len(PALETTE)]
        label = _run_label(run)
        traces.append(line_trace(series_uid("acc", run["id"]), label, points(entry["evals"], x, "test_accuracy"),
                            mode="lines+markers", legendgroup=str(run["id"]), line=dict(color=color)))
        cum_x, cum_y, total = [], [], 0
        for r in entry["iterations"]:
            b = bits_sum(r)
            if b is None or r.get(x) is None:
                continue
            total += b
            cum_x.append(r[x])
            cum_y.append(total)
        traces.append(line_trace(series_uid("bits", run["id"]), label, (cum_x, cum_y), row=2,
                            legendgroup=str(run["id"]), showlegend=False, line=dict(color=color)))
    layout = base_layout(f"Compare: accuracy and bits vs {X_AXES[x]}", 520, None,
                     grid=grid2(top=0.6, x_title=X_AXES[x]),
                     yaxis=dict(title=dict(text="test accuracy"), tickformat=".0%", rangemode="tozero"),
                     yaxis2=dict(title=dict(text="cumulative"),
                                 **unit_axis("log", [y for t in traces if t["yaxis"] == "y2" for y in t["y"]],
                                             "bit")))
    if target is not None:
        layout["shapes"].append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=target,
                                     y1=target, line=dict(color="#999", dash="dash", width=1)))
    if not entries:
        layout["annotations"].append(placeholder_note("Tick runs in the table above to compare them."))
    return make_figure(traces, layout, as_dict)


def time_to_accuracy(evals: Sequence[dict], target: float) -> tuple[int | None, float | None]:
    """(iteration, virtual seconds) of the first eval at or above `target`; (None, None) if never."""
    for r in evals:
        acc = r.get("test_accuracy")
        if acc is not None and acc >= target:
            return r.get("iteration"), r.get("virtual_time_s")
    return None, None


def compare_summary(entries: Sequence[dict], target: float, baseline: dict | None = None) -> list[dict]:
    """One row per run: final and best accuracy, total bits, bits per iteration, compression
    ratio against the fp32 run (method "none") and virtual time to `target` accuracy.

    The ratio is the baseline's bits per iteration over this run's, so runs of different
    lengths compare fairly. `baseline` is an entry like the others; by default the first
    entry whose method is "none".
    """
    if baseline is None:
        baseline = next((e for e in entries if e["run"].get("method") == "none"), None)

    def totals(entry: dict) -> tuple[int, int]:
        """(total bits, iterations) of an entry's rows, raw or binned."""
        bits = n = 0
        for r in entry["iterations"]:
            b = bits_sum(r)
            if b is not None:
                bits += b
                n += r.get("n", 1)
        return bits, n

    def bits_per_iteration(entry: dict) -> float | None:
        bits, n = totals(entry)
        return bits / n if n else None

    base_bpi = bits_per_iteration(baseline) if baseline else None
    rows = []
    for entry in entries:
        run, evals = entry["run"], entry["evals"]
        bpi = bits_per_iteration(entry)
        accs = [r["test_accuracy"] for r in evals if r.get("test_accuracy") is not None]
        it_target, vt_target = time_to_accuracy(evals, target)
        rows.append({
            "id": run["id"], "name": run.get("name"), "method": run.get("method"),
            "status": run.get("status"),
            "final_accuracy": accs[-1] if accs else None,
            "best_accuracy": max(accs) if accs else None,
            "total_bits": totals(entry)[0],
            "total_mb": round(totals(entry)[0] / 8e6, 3),   # as every view says it (testbed.records.summary)
            "bits_per_iteration": bpi,
            "compression_ratio": (base_bpi / bpi) if (base_bpi and bpi) else None,
            "iterations_to_target": it_target,
            "time_to_target_s": vt_target,
        })
    return rows


def runs_table_rows(runs: Sequence[dict], final: dict | None = None,
                    federated: dict | None = None) -> list[dict]:
    """Rows of `Store.runs()` shaped for the runs table (numbers stay numbers: it sorts), with
    `final` {run id: final accuracy} and `federated` {run id: [federated] table} (testbed.records.summary:
    a federated run's participants are its clients; its iterations, rounds)."""
    rows = []
    for r in runs:
        bits = r.get("total_bits")
        fed = (federated or {}).get(r["id"])
        last = r.get("last_iteration")
        rows.append({
            "id": r["id"], "name": r.get("name"), "method": r.get("method"),
            "topology": r.get("topology"),
            "workers": participants(r, fed) if fed else r.get("workers"),
            "bandwidth_mbps": r.get("bandwidth_mbps"), "status": r.get("status"),
            "iterations": None if last is None else (
                plural(last + 1, ITERATION_UNITS.get(fed.get("mode", "sync"))) if fed else last + 1),
            "final_accuracy": (final or {}).get(r["id"]),
            "best_accuracy": r.get("best_accuracy"),
            "total_mb": None if bits is None else round(bits / 8e6, 3),
            "virtual_time_s": r.get("virtual_time_s"),
        })
    return rows
