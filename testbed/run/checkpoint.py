"""A run's checkpoint for `testbed resume`: one file per run in a folder beside the store
(`runs.db` -> `runs.db.checkpoints/run-7.pt`), always whole.

The file is written as SQLite writes a journal: into a temporary file in the same folder,
flushed to disk (fsync), then renamed over the old one (rename is atomic on POSIX), and the
folder is synced so the rename itself survives a power loss. A crash at any moment leaves the
previous checkpoint or the new one, never a mixture. The run's rows up to the checkpoint are
committed to the store before it is written, so the checkpoint never runs ahead of the rows.

What it holds is the loop's `state_dict()` (testbed/run/loop.py), each part's state under its
own key:
- `loop`: the iteration it was taken after, the virtual clock, the accuracy, the stage, the wall
  seconds so far;
- `network`: the link layer's state; `rng`: the global generators (`torch`, `numpy`);
- `driver`: the driver's `state_dict()` (data-parallel: `model`, `optimizer`, `scheme` (every
  worker's compressor state and the server's), `pool` (the batch order), `replicas`; federated:
  those and `federated`).
A checkpoint of the earlier flat layout (format 1) is read into this one (`load`).
"""
from __future__ import annotations

import os
from pathlib import Path

FORMAT = 2
# format 1 kept every part's keys side by side: these were the loop's and the generators'
_FLAT_LOOP = ("iteration", "clock", "accuracy", "stage", "wall_time_s")
_FLAT_RNG = {"torch_rng": "torch", "numpy_rng": "numpy"}


def path_for(store_path: str | os.PathLike, run_id: int, rank: int | None = None) -> Path:
    """`run-N.pt`, or with a torchrun rank `run-N.rank-R.pt` (each rank holds its own
    worker's compressor state and batch order)."""
    ranked = "" if rank is None else f".rank-{int(rank)}"
    return Path(f"{store_path}.checkpoints") / f"run-{int(run_id)}{ranked}.pt"


def remove_run(store_path: str | os.PathLike, run_id: int) -> list[Path]:
    """Delete every checkpoint of run `run_id` (`run-N.pt` and each rank's `run-N.rank-R.pt`)
    and the folder if that leaves it empty: what a completed run no longer needs (`testbed
    resume` continues stopped and failed runs only). Returns the files removed."""
    folder = path_for(store_path, run_id).parent
    removed = []
    for path in [path_for(store_path, run_id), *folder.glob(f"run-{int(run_id)}.rank-*.pt")]:
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
    try:
        folder.rmdir()  # only when empty: other runs' checkpoints stay
    except OSError:
        pass
    return removed


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
    if state.get("format") == 1:
        state = from_format_1(state)
    if state.get("format") != FORMAT:
        raise ValueError(f"{path}: checkpoint format {state.get('format')!r}, this testbed "
                         f"reads formats 1 and {FORMAT}")
    return state


def from_format_1(flat: dict) -> dict:
    """A format-1 checkpoint (every part's keys in one dict) in today's layout; the federated
    driver's stage, then the loop's, goes to the driver's own state."""
    rest = {k: v for k, v in flat.items() if k != "format"}
    loop = {k: rest.pop(k) for k in _FLAT_LOOP if k in rest}
    loop.setdefault("wall_time_s", 0.0)
    rng = {new: rest.pop(old) for old, new in _FLAT_RNG.items()}
    network = rest.pop("network")
    if "federated" in rest:
        rest["federated"] = {**rest["federated"], "stage": loop["stage"]}
    return {"format": FORMAT, "loop": loop, "network": network, "rng": rng, "driver": rest}
