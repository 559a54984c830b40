"""Wall time of one iteration of the worker pool (every worker's forward + backward on one
minibatch): 1, 4, 16 and 64 workers, one after another ("sequential") or all at once with
torch.func ("vmap"). Small CNN on digits, batch 32 per worker; the MLP rows show the same for a
model without convolutions (on CPU, vmap's per-worker convolution weight gradients are grouped
convolutions, which are slow, so the CNN gains little there while the MLP gains a lot).

64 x 32 samples is more than digits' 1437 training images, so each worker here draws from its
own seeded random subset (subsets may overlap): the point is compute time, not learning.
Run: `python -m benchmarks workers` (quick) or `python -m benchmarks workers --full`.

Measured 2026-12-03 on the 2-core machine (`python -m benchmarks workers`, 1 torch thread),
ms per iteration sequential / vmap: CNN 5.6/8.1 (1 worker), 21.9/33.4 (4), 85.4/75.2 (16),
315/531 (64); MLP 0.45/1.24 (1), 1.6/1.9 (4), 15.3/8.9 (16), 31.2/13.6 (64). vmap pays only for
the MLP from 16 workers on, and a vmapped convolution rounds differently from a rank's own
(torchrun), which is why `run.workers_mode` defaults to "sequential".
"""
from __future__ import annotations

import time

import torch

from nodes.data import load_dataset
from nodes.models import build_model
from nodes.workers import WorkerPool

WORKERS = (1, 4, 16, 64)
BATCH = 32


def _time_per_iteration(pool: WorkerPool, reps: int) -> float:
    for _ in range(2):                       # warm-up: vmap traces its batching rules once
        pool.gradients()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        pool.gradients()
        times.append(time.perf_counter() - t0)
    return min(times)     # best of: the machine is shared, interference only adds time


def run(quick: bool = True, models: tuple[str, ...] = ("cnn", "mlp")) -> list[dict]:
    """One row per model and worker count: best ms per iteration both ways, the speed-up."""
    reps = 5 if quick else 20
    ds = load_dataset("digits", seed=0)
    rows = []
    for name in models:
        rows += _rows(name, ds, reps)
    return rows


def _rows(name: str, ds, reps: int) -> list[dict]:
    torch.manual_seed(0)
    model = build_model(name, ds.input_shape, ds.num_classes)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for n in WORKERS:
        shards = [torch.randperm(len(ds.train_y), generator=gen)[: 4 * BATCH] for _ in range(n)]
        ms = {}
        for mode in ("sequential", "vmap"):
            pool = WorkerPool(model, ds.train_x, ds.train_y, shards, BATCH, seed=0, mode=mode)
            ms[mode] = 1000 * _time_per_iteration(pool, reps)
        rows.append({"model": name, "workers": n, "sequential_ms": ms["sequential"], "vmap_ms": ms["vmap"],
                     "speedup": ms["sequential"] / ms["vmap"]})
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'model':>5}  {'workers':>7}  {'sequential ms/it':>16}  {'vmap ms/it':>10}  {'vmap speed-up':>13}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['model']:>5}  {r['workers']:>7}  {r['sequential_ms']:>16.2f}  {r['vmap_ms']:>10.2f}  "
                     f"{r['speedup']:>12.2f}x")
    return "\n".join(lines)


def main(quick: bool = True) -> None:
    print(f"worker pool on digits, batch {BATCH} per worker, "
          f"{torch.get_num_threads()} torch threads, wall time (best of the repetitions)")
    print(format_table(run(quick)))


if __name__ == "__main__":
    main()
