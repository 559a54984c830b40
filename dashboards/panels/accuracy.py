"""Accuracy and loss against iteration or virtual time (and LGC's coder error)."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.panel import Panel
from dashboards.style import (
    PALETTE,
    X_AXES,
    Series,
    add_marks,
    base_layout,
    check_x,
    grid2,
    last_x,
    line_trace,
    make_figure,
    placeholder_note,
    points,
    smooth,
    smooth_note,
    titled,
)


def accuracy_series(iterations: Sequence[dict], evals: Sequence[dict],
                    x: str = "iteration") -> Series:
    check_x(x)
    return {"test_accuracy": points(evals, x, "test_accuracy"),
            "train_loss": points(iterations, x, "train_loss"),
            "test_loss": points(evals, x, "test_loss"),
            "lgc_coder_error": points(evals, x, "lgc_coder_error")}


def accuracy_figure(iterations: Sequence[dict], evals: Sequence[dict], events: Sequence[dict] = (),
                    x: str = "iteration", uirevision=None, note: str = "", smoothing: float = 0.0,
                    as_dict: bool = False) -> go.Figure | dict:
    """Test accuracy (top) and train/test loss (bottom) against iteration or virtual time; with
    LGC in its LGC stage, the coder's in-use relative error (testbed.records.store's lgc_coder_error)
    on the bottom axis too."""
    s, _ = smooth(accuracy_series(iterations, evals, x), "accuracy", smoothing)
    traces = [
        line_trace("test_accuracy", "test accuracy", s["test_accuracy"], mode="lines+markers",
              line=dict(color=PALETTE[0])),
        line_trace("train_loss", "train loss", s["train_loss"], row=2, line=dict(color=PALETTE[1], width=1)),
        line_trace("test_loss", "test loss", s["test_loss"], row=2, mode="lines+markers",
              line=dict(color=PALETTE[2])),
    ]
    if s["lgc_coder_error"][0]:  # LGC's stage only: the coder's in-use relative error
        traces.append(line_trace("lgc_coder_error", "LGC coder in-use rel. error", s["lgc_coder_error"],
                            row=2, mode="lines+markers", line=dict(color=PALETTE[3], dash="dot")))
    axes = grid2(x_title=X_AXES[x])
    layout = base_layout(titled(f"Accuracy and loss vs {X_AXES[x]}", smooth_note(note, smoothing)), 440,
                     uirevision, grid=axes,
                     yaxis=dict(title=dict(text="test accuracy"), tickformat=".0%", rangemode="tozero"),
                     yaxis2=dict(title=dict(text="loss"), rangemode="tozero"))
    if not iterations:
        layout["annotations"].append(placeholder_note("No iterations yet: the run has not written its first step."))
    elif not evals:
        layout["annotations"].append(placeholder_note("No evaluation yet: accuracy appears after the first test pass."))
    return make_figure(traces, add_marks(layout, events, x, last_x(iterations, x)), as_dict)


PANEL = Panel(
    name="accuracy",
    figure=lambda rows, view, as_dict: accuracy_figure(
        rows.iterations, rows.evals, rows.events, view.x, uirevision=view.uirevision,
        note=view.note, smoothing=view.smoothing, as_dict=as_dict),
    series=lambda rows, view, totals: accuracy_series(rows.iterations, rows.evals, view.x),
    noisy=("train_loss",), mark_x="view", exports=("iteration", "virtual_time_s"))
