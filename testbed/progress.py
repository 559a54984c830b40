"""What a run prints: the progress bar while it goes and the one summary line at the end.

Shared by `testbed run` (testbed/commands/run.py) and every torchrun rank (testbed/launch.py),
so neither imports the other for it.
"""
from __future__ import annotations

import sys

from tqdm import tqdm


def progress_printer(total: int, quiet: bool):
    """A tqdm bar showing iteration, accuracy, virtual time and bits per iteration."""
    if quiet:
        return None, lambda: None
    bar = tqdm(total=total, unit="it", dynamic_ncols=True, file=sys.stderr)

    def update(p) -> None:
        bar.n = p.iteration
        acc = "-" if p.accuracy is None else f"{100 * p.accuracy:.1f}%"
        bar.set_postfix_str(f"acc {acc} | vt {p.virtual_time_s:.2f}s | "
                            f"{p.bits / 1e3:.1f} kbit/it | {p.stage}", refresh=False)
        bar.update(0)

    return update, bar.close


def summary_line(store, run_id: int, name: str) -> str:
    """`run N (name) completed: ...` with the final accuracy, virtual time and bytes."""
    evals = store.evals(run_id)
    its = store.iterations(run_id)
    acc = f"{100 * evals[-1]['test_accuracy']:.2f}%" if evals else "n/a"
    vt = its[-1]["virtual_time_s"] if its else 0.0
    bits = sum(r["bits_up"] + r["bits_down"] for r in its)
    return (f"run {run_id} ({name}) completed: {len(its)} iterations, test accuracy {acc}, "
            f"virtual time {vt:.2f} s, {bits / 8e6:.3f} MB on the wire")
