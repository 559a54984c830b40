"""A run's checkpoint for `testbed resume`: one file per run in a folder beside the store
(`runs.db` -> `runs.db.checkpoints/run-7.pt`), always whole.

The file is written as SQLite writes a journal: into a temporary file in the same folder,
flushed to disk (fsync), then renamed over the old one (rename is atomic on POSIX), and the
folder is synced so the rename itself survives a power loss. A crash at any moment leaves the
previous checkpoint or the new one, never a mixture. The run's rows up to the checkpoint are
committed to the store before it is written, so the checkpoint never runs ahead of the rows.

What it holds is the loop's `state_dict()` (testbed/loop.py) with the driver's in it: the
iteration it was taken after, the model, the optimizer, the scheme's state (every worker's compressor state and
the server's), the worker pool's batch order, the link layer's state, the virtual clock and the
global random generators.
"""
from __future__ import annotations

import os
from pathlib import Path

FORMAT = 1


def path_for(store_path: str | os.PathLike, run_id: int, rank: int | None = None) -> Path:
    """`run-N.pt`, or with a torchrun rank `run-N.rank-R.pt` (each rank holds its own
    worker's compressor state and batch order)."""
    ranked = "" if rank is None else f".rank-{int(rank)}"
    return Path(f"{store_path}.checkpoints") / f"run-{int(run_id)}{ranked}.pt"


def save(path: Path, state: dict) -> None:
    """Replace `path` with `state`, atomically (see the module's docstring)."""
    import torch  # here: `testbed resume` reads paths from this module before any torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    try:  # the rename is durable once the folder's entry is on disk
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # folders cannot be opened on every system; the file itself is whole
        pass


def load(path: Path) -> dict:
    """The state saved at `path` (a file this testbed wrote: it holds pickled link-layer
    objects, so only load checkpoints you trust, like any pickle)."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("format") != FORMAT:
        raise ValueError(f"{path}: checkpoint format {state.get('format')!r}, this testbed "
                         f"reads format {FORMAT}")
    return state
