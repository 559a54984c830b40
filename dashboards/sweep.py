"""The sweep view: the runs of one `testbed sweep` (the store's `sweep` and `sweep_params`
columns) as heat maps over two of its grid keys, averaging the others (seeds)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from dashboards.style import axis, base_layout, make_figure, placeholder_note

ALL = "all"


def sweeps(runs: Sequence[dict]) -> dict[str, list[tuple[dict, dict]]]:
    """Runs grouped by the sweep they belong to (`Store.runs()` rows), in run order:
    {sweep: [(run, params)]} (two runs or more); a tune study's trials are the Tune view's."""
    out: dict[str, list] = defaultdict(list)
    for run in runs:
        if run.get("sweep") is not None and run.get("trial") is None:
            out[run["sweep"]].append((run, run.get("sweep_params") or {}))
    return {base: members for base, members in out.items() if len(members) > 1}


def sweep_keys(params: Sequence[dict]) -> list[str]:
    """The grid keys of a sweep, those that vary first (seeds last), in the grid's order."""
    keys: list[str] = []
    for p in params:
        keys += [k for k in p if k not in keys]
    varies = [k for k in keys if len({p.get(k) for p in params}) > 1]
    return sorted(keys, key=lambda k: (k not in varies, k == "seed"))


def sweep_values(params: Sequence[dict], key: str | None) -> list[str]:
    if key is None:
        return [ALL]
    out: list[str] = []
    for p in params:
        if p.get(key) not in out:
            out.append(p.get(key))
    return out


def sweep_grid(cells: Sequence[dict], x_key: str, y_key: str | None) -> dict:
    """Mean final accuracy, mean virtual time to the target and mean joules to it (all workers,
    `energy_to_target_j`, None where not recorded) of the runs in each (x, y) cell (`cells`:
    {"params", "final_accuracy", "time_to_target_s", "energy_to_target_j"} per run); the other
    grid keys (seeds, ...) are averaged over. Time and energy are over the runs that reached the
    target; `reached` counts them ("2/3")."""
    params = [c["params"] for c in cells]
    xs, ys = sweep_values(params, x_key), sweep_values(params, y_key)
    acc = [[None] * len(xs) for _ in ys]
    ttt = [[None] * len(xs) for _ in ys]
    etj = [[None] * len(xs) for _ in ys]
    reached = [[""] * len(xs) for _ in ys]
    for j, yv in enumerate(ys):
        for i, xv in enumerate(xs):
            here = [c for c in cells if c["params"].get(x_key) == xv
                    and (y_key is None or c["params"].get(y_key) == yv)]
            if not here:
                continue
            accs = [c["final_accuracy"] for c in here if c["final_accuracy"] is not None]
            times = [c["time_to_target_s"] for c in here if c["time_to_target_s"] is not None]
            joules = [c["energy_to_target_j"] for c in here
                      if c["time_to_target_s"] is not None and c.get("energy_to_target_j") is not None]
            acc[j][i] = sum(accs) / len(accs) if accs else None
            ttt[j][i] = sum(times) / len(times) if times else None
            etj[j][i] = sum(joules) / len(joules) if joules else None
            reached[j][i] = f"{len(times)}/{len(here)}"
    return {"x": xs, "y": ys, "accuracy": acc, "time_to_target_s": ttt, "energy_to_target_j": etj,
            "reached": reached}


def sweep_figure(cells: Sequence[dict], x_key: str | None, y_key: str | None = None,
                 target: float | None = None, title: str = "", as_dict: bool = False) -> go.Figure | dict:
    """Three heat maps over the sweep's grid: final test accuracy, virtual time to `target` and
    joules to it (all workers' energy up to the evaluation that reached it)."""
    layout = base_layout(title or "Sweep", 460, None, hovermode="closest",
                     xaxis=axis(domain=[0, 0.26], type="category", title=dict(text=x_key or "")),
                     xaxis2=axis(domain=[0.37, 0.63], type="category", anchor="y2",
                                  title=dict(text=x_key or "")),
                     xaxis3=axis(domain=[0.74, 0.98], type="category", anchor="y3",
                                  title=dict(text=x_key or "")),
                     yaxis=axis(type="category", title=dict(text=y_key or "")),
                     yaxis2=axis(type="category", anchor="x2", matches="y", showticklabels=True),
                     yaxis3=axis(type="category", anchor="x3", matches="y", showticklabels=True))
    if not cells or x_key is None:
        layout["annotations"].append(placeholder_note(
            "No sweep in this store: `testbed sweep FILE --grid key=v1,v2` makes one, a run per grid point."))
        return make_figure([], layout, as_dict)
    g = sweep_grid(cells, x_key, y_key)
    pct = "" if target is None else f"{100 * target:g}%"
    acc_text = [[("" if v is None else f"{100 * v:.1f}%") for v in row] for row in g["accuracy"]]
    ttt_text = [[("never" if v is None and r else "" if v is None else f"{v:.2f} s ({r})")
                 for v, r in zip(row, rrow)] for row, rrow in zip(g["time_to_target_s"], g["reached"])]
    etj_text = [[("" if v is None else f"{v:.4g} J") for v in row] for row in g["energy_to_target_j"]]
    traces = [
        dict(type="heatmap", uid="sweep_accuracy", x=g["x"], y=g["y"], z=g["accuracy"],
             text=acc_text, texttemplate="%{text}", colorscale="Viridis",
             colorbar=dict(x=0.27, thickness=10, title=dict(text="final acc."), tickformat=".0%"),
             hovertemplate=f"{x_key}=%{{x}}<br>{y_key or ''}=%{{y}}<br>final accuracy %{{text}}<extra></extra>"),
        dict(type="heatmap", uid="sweep_time", x=g["x"], y=g["y"], z=g["time_to_target_s"],
             text=ttt_text, texttemplate="%{text}", colorscale="Viridis", reversescale=True,
             xaxis="x2", yaxis="y2", colorbar=dict(x=0.64, thickness=10, title=dict(text="s")),
             hovertemplate=f"{x_key}=%{{x}}<br>{y_key or ''}=%{{y}}<br>to {pct}: %{{text}}<extra></extra>"),
        dict(type="heatmap", uid="sweep_energy", x=g["x"], y=g["y"], z=g["energy_to_target_j"],
             text=etj_text, texttemplate="%{text}", colorscale="Viridis", reversescale=True,
             xaxis="x3", yaxis="y3", colorbar=dict(x=0.99, thickness=10, title=dict(text="J")),
             hovertemplate=f"{x_key}=%{{x}}<br>{y_key or ''}=%{{y}}<br>energy to {pct}: %{{text}}<extra></extra>"),
    ]
    for text, x in (("final test accuracy", 0.0), (f"virtual time to {pct} (reached/runs)", 0.37),
                    (f"energy to {pct}, all workers", 0.74)):
        layout["annotations"].append(dict(text=text, xref="paper", yref="paper", x=x, y=1.0,
                                          xanchor="left", yanchor="bottom", showarrow=False,
                                          font=dict(size=12)))
    if all(v is None for row in g["energy_to_target_j"] for v in row):   # a blank map says why
        why = "no run reached the target" if all(v is None for row in g["time_to_target_s"] for v in row) \
            else "these runs recorded no energy"
        layout["annotations"].append(dict(text=f"No energy to show:<br>{why}.", xref="x3 domain",
                                          yref="y3 domain", x=0.5, y=0.5, showarrow=False,
                                          font=dict(size=13, color="#666")))
    return make_figure(traces, layout, as_dict)
