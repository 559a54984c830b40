"""A run's rows as TensorBoard scalar event files (`testbed export RUN --format tensorboard`).

One folder per run, `<out>/<name>_<id>/`, so several exports into one `--out` show side by
side in `tensorboard --logdir <out>`. Scalars (TensorBoard's "step" is the iteration unless
said otherwise):

  train/loss, test/accuracy (a fraction in [0, 1]), test/loss
  rate/bits_up, rate/bits_down            bits of that iteration (summed over nodes)
  rate/cumulative_bits                    up + down since the start
  time/virtual_s, time/wall_s             the two clocks at the end of the iteration
  energy/total_j, energy/cumulative_j     joules of the iteration (all workers) and since
                                          the start; energy/NODE_j each worker's
                                          (channels/energy.py)
  federated/participants, federated/staleness_mean
                                          federated runs: the updates that counted in the
                                          round (server step) and their mean staleness
  federated/staleness                     a histogram per round (server step) of the counted
                                          updates' staleness (node_iterations.staleness; all 0
                                          in sync rounds)
  by_virtual_ms/test_accuracy, by_virtual_ms/train_loss, by_virtual_ms/cumulative_bits,
  by_virtual_ms/cumulative_energy_j       the same against virtual time: step = virtual
                                          milliseconds (TensorBoard steps are integers)

Every event's wall time is the run's start plus the iteration's wall time, so TensorBoard's
"Relative" x axis is this machine's wall clock.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

INSTALL_HINT = ("TensorBoard export needs the tensorboard package: `pip install tensorboard` "
                "(`make venv` installs it)")


def run_folder(out: Path, run: dict) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.=,-]+", "_", str(run["name"])).strip("_") or "run"
    return Path(out) / f"{safe}_{run['id']}"


def write_tensorboard(data: dict, out: str | Path) -> Path:
    """Write the event file of one run (`Store.export()`'s shape) under `out`; return its folder."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # torch imports tensorboard lazily: name what is missing
        raise RuntimeError(f"{INSTALL_HINT} ({e})") from None
    run = data["run"]
    folder = run_folder(Path(out), run)
    start = run.get("started_at") or 0.0
    wall = {r["iteration"]: start + (r.get("wall_time_s") or 0.0) for r in data["iterations"]}
    writer = SummaryWriter(log_dir=str(folder))
    try:
        staleness: dict[int, list[int]] = {}   # iteration -> the counted updates' staleness
        for n in data.get("nodes", []):
            if n.get("energy_j") is not None:
                writer.add_scalar(f"energy/{n['node']}_j", n["energy_j"], n["iteration"],
                                  walltime=wall.get(n["iteration"], start))
            if n.get("staleness") is not None:
                staleness.setdefault(n["iteration"], []).append(n["staleness"])
        for it, values in sorted(staleness.items()):
            writer.add_histogram("federated/staleness", np.asarray(values), it,
                                 walltime=wall.get(it, start))
        cumulative = 0
        joules = 0.0
        for r in data["iterations"]:
            it, t = r["iteration"], wall[r["iteration"]]
            up, down = r.get("bits_up") or 0, r.get("bits_down") or 0
            cumulative += up + down
            vms = _ms(r.get("virtual_time_s"))
            scalars = {"rate/bits_up": up, "rate/bits_down": down, "rate/cumulative_bits": cumulative,
                       "train/loss": r.get("train_loss"), "time/virtual_s": r.get("virtual_time_s"),
                       "time/wall_s": r.get("wall_time_s")}
            if r.get("energy_j") is not None:
                joules += r["energy_j"]
                scalars.update({"energy/total_j": r["energy_j"], "energy/cumulative_j": joules})
            scalars.update({"federated/participants": r.get("participants"),
                            "federated/staleness_mean": r.get("staleness")})
            for tag, value in scalars.items():
                if value is not None:
                    writer.add_scalar(tag, value, it, walltime=t)
            if vms is not None:
                writer.add_scalar("by_virtual_ms/cumulative_bits", cumulative, vms, walltime=t)
                if r.get("energy_j") is not None:
                    writer.add_scalar("by_virtual_ms/cumulative_energy_j", joules, vms, walltime=t)
                if r.get("train_loss") is not None:
                    writer.add_scalar("by_virtual_ms/train_loss", r["train_loss"], vms, walltime=t)
        for e in data["evals"]:
            it = e["iteration"]
            t = wall.get(it, start)
            for tag, key in (("test/accuracy", "test_accuracy"), ("test/loss", "test_loss")):
                if e.get(key) is not None:
                    writer.add_scalar(tag, e[key], it, walltime=t)
            vms = _ms(e.get("virtual_time_s"))
            if vms is not None and e.get("test_accuracy") is not None:
                writer.add_scalar("by_virtual_ms/test_accuracy", e["test_accuracy"], vms, walltime=t)
    finally:
        writer.close()
    return folder


def _ms(seconds) -> int | None:
    return None if seconds is None else int(round(1000 * seconds))
