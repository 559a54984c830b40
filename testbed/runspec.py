"""One run as a command asks for it: the one description that `testbed run`, `resume` and
`sweep`, the Python API (`testbed.api.run_spec`) and the torchrun launcher share."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunSpec:
    """One run as a command asks for it (`testbed run`, `resume`, `sweep`): what the
    in-process run and `launch_torchrun` need, and nothing of argparse."""
    store: str
    file: str | None = None             # None when resuming
    overrides: tuple[str, ...] = ()     # KEY=VALUE
    name: str | None = None             # the run's name (else [run] name or the file's stem)
    launcher: str = "local"             # "local" | "torchrun"
    nproc: int | None = None            # torchrun processes (None: the file's workers)
    quiet: bool = False                 # no progress bar
    resume: int | None = None           # continue this run id from its checkpoints
