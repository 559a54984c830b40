"""What a run prints: the progress bar while it goes and the one summary line at the end.

Shared by `testbed run` (testbed/commands/run.py) and every torchrun rank (testbed/launch.py),
so neither imports the other for it.
"""
from __future__ import annotations

import sys
import time

from tqdm import tqdm

from testbed.records.summary import ITERATION_UNITS, run_summary, summary_text

# The progress bar's word for one iteration (tqdm's "it/s" for data-parallel runs)
SHORT_UNITS = {"iteration": "it", "round": "round", "server step": "step"}


def unit_of(cfg) -> str:
    """"iteration", or for a federated config "round" (sync) or "server step" (FedBuff)."""
    fed = getattr(cfg, "federated", None)
    return ITERATION_UNITS.get(getattr(fed, "mode", None), "iteration") if fed else "iteration"


def progress_printer(total: int, quiet: bool, unit: str = "iteration"):
    """A tqdm bar showing iteration (or round), accuracy, virtual time and bits per
    iteration (or round)."""
    if quiet:
        return None, lambda: None
    short = SHORT_UNITS.get(unit, unit)
    bar = tqdm(total=total, unit=short, dynamic_ncols=True, file=sys.stderr)

    def update(p) -> None:
        bar.n = p.iteration
        acc = "-" if p.accuracy is None else f"{100 * p.accuracy:.1f}%"
        bar.set_postfix_str(f"acc {acc} | vt {p.virtual_time_s:.2f}s | "
                            f"{p.bits / 1e3:.1f} kbit/{short} | {p.stage}", refresh=False)
        bar.update(0)

    return update, bar.close


def summary_line(store, run_id: int, name: str) -> str:
    """`run N (name) completed: ...` with the iterations (rounds), the final and best accuracy,
    the virtual time and the bytes on the wire (testbed.records.summary: worded as every view words them)."""
    s = run_summary(store, run_id)
    return f"run {run_id} ({name}) {s['status']}: {summary_text(s)}"


def control_reporter(store, run_id_of, write=None, every_s: float = 0.0):
    """A function to call as the run goes (and once at its end): it writes one line for each
    control request (`testbed control`, the dashboard) the run has applied or refused since
    the last call: "control 3 applied at iteration 121: ..." (`run_id_of()`: the run's id, None
    until it has one; `every_s`: at most one look into the store per so many seconds, unless
    `force`; a look is one small indexed query, cheap beside an iteration)."""
    write = write or (lambda line: tqdm.write(line, file=sys.stderr))
    seen: set[int] = set()
    last = [float("-inf")]

    def check(force: bool = False) -> None:
        rid = run_id_of()
        now = time.monotonic()
        if rid is None or (not force and now - last[0] < every_s):
            return
        last[0] = now
        for c in store.controls(rid):
            if c["status"] != "pending" and c["id"] not in seen:
                seen.add(c["id"])
                write(f"control {c['id']} {c['status']} at iteration {c['applied_iteration']}: "
                      f"{c['message']}")

    return check
