"""Table 5: ResNet-20 on CIFAR-10-format data, 8 workers, fp32 vs DGC vs LGC's ablation vs LGC-PS
(GPU when present).

    .venv/bin/python -m experiments.results.gpu_resnet20 [--data FOLDER] [--iterations N]

`--data` is a CIFAR-10 python-batch folder (data_batch_1..5, test_batch). Without it the script
writes a generated one in exactly that format into a temporary folder first: 32x32 RGB images
whose class sets a colour and a stripe orientation, under noise, so the figures say the
pipeline trains, not what CIFAR-10 accuracy is. `device = "auto"` in
experiments/gpu_resnet20.toml uses CUDA when there is one (`--device cpu|cuda` to force).
Every method runs through the loop over the emulated shared 20 Mbit/s cell, same seed,
split and budget; prints the table and writes table5_gpu_resnet20.csv/.md.
"""
from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np

from experiments.results import methods as M
from experiments.results.harness import TableRun, run_many, stage_lengths
from experiments.results.tables import Column, emit, out_dir

CONFIG = "experiments/gpu_resnet20.toml"
LABELS = ["fp32", "dgc", "lgc_ablation", "lgc_ps"]

COLUMNS = [Column("method", "method"), Column("status", "status"),
           Column("accuracy", "acc", "{:.4f}"), Column("bits_after_warmup", "bits/it >=W", "{:,.0f}"),
           Column("bits_final", "bits/it final", "{:,.0f}"), Column("x_fp32", "x fp32", "{:.1f}"),
           Column("x_dgc", "x DGC", "{:.2f}"), Column("virtual_s", "virtual s", "{:.1f}"),
           Column("wall_s", "wall s", "{:.1f}"), Column("device", "device")]


def write_cifar_format(folder: Path, per_batch: int, n_test: int, seed: int = 0) -> Path:
    """A learnable 10-class image set in CIFAR-10's python-batch format (uint8 N x 3072)."""
    rng = np.random.default_rng(seed)
    colours = rng.uniform(40, 215, size=(10, 3))
    yy, xx = np.mgrid[0:32, 0:32]
    stripes = [np.sin((np.cos(a) * xx + np.sin(a) * yy) * 0.6) for a in np.linspace(0, np.pi, 10, endpoint=False)]

    def batch(n):
        labels = rng.integers(0, 10, size=n)
        img = colours[labels][:, :, None, None] + 35 * np.stack(stripes)[labels][:, None]
        img = img + rng.normal(0, 30, size=(n, 3, 32, 32))
        data = np.clip(img, 0, 255).astype(np.uint8).reshape(n, 3072)
        return {b"data": data, b"labels": [int(x) for x in labels], b"batch_label": b"generated"}

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, 6):
        with open(folder / f"data_batch_{i}", "wb") as f:
            pickle.dump(batch(per_batch), f)
    with open(folder / "test_batch", "wb") as f:
        pickle.dump(batch(n_test), f)
    return folder


def specs(root: str, iterations: int, seed: int, extra: list[str]) -> list[TableRun]:
    warmup, ae = stage_lengths(iterations)
    return [TableRun(f"t5[{label}]", CONFIG,
                    [f'data.root="{root}"', f"run.iterations={iterations}", f"run.seed={seed}",
                     f"run.eval_every={max(1, iterations // 6)}", *extra,
                     *M.overrides(label, warmup, ae)], tags={"method": label})
            for label in LABELS]


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.gpu_resnet20",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="CIFAR-10 python-batch folder (default: generate one)")
    ap.add_argument("--iterations", type=int, default=None, help="budget (default 600; --quick 4)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: tiny generated data, 4 iterations")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--batch-size", type=int, default=None, help="per worker (default 32; --quick 8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for CSV/Markdown (default docs/results; "
                                                "--quick writes nothing unless given)")
    ap.add_argument("--store", default=None, help="SQLite store to keep the runs in")
    args = ap.parse_args(argv)
    iterations = args.iterations or (4 if args.quick else 600)
    batch = args.batch_size or (8 if args.quick else 32)
    extra = [f'run.device="{args.device}"', f"data.batch_size={batch}"]
    with tempfile.TemporaryDirectory(prefix="cifar-format-") as tmp:
        if args.data:
            root, source = args.data, f"CIFAR-10-format folder {args.data}"
        else:
            per_batch, n_test = (64, 64) if args.quick else (10000, 2000)
            root = str(write_cifar_format(Path(tmp), per_batch, n_test, seed=args.seed))
            source = f"generated CIFAR-10-format data ({5 * per_batch} train, {n_test} test images)"
        results = run_many(specs(root, iterations, args.seed, extra), store=args.store)
    rows = []
    for r in results:
        rows.append({"method": r.spec.tags["method"], "status": r.status,
                     "accuracy": r.final_accuracy, "virtual_s": r.virtual_time_s, "wall_s": r.wall_s,
                     "iterations": r.iterations, "device": r.device,
                     "note": r.note.splitlines()[0] if r.note else ""})
    warmup, ae = stage_lengths(iterations)
    for row, r in zip(rows, results):
        row["bits_after_warmup"] = r.mean_bits(warmup)
        row["bits_final"] = r.mean_bits(warmup + ae)
    base = {row["method"]: row for row in rows if row.get("bits_final")}
    for row in rows:
        for ref, key in (("fp32", "x_fp32"), ("dgc", "x_dgc")):
            if ref in base and row.get("bits_after_warmup"):
                row[key] = base[ref]["bits_after_warmup"] / row["bits_after_warmup"]
    notes = [f"ResNet-20, {source}, 8 workers, batch {batch} per worker, {iterations} iterations "
             f"(DGC/LGC warm-up {warmup}, LGC autoencoder training {ae}), seed {args.seed}, one "
             "shared 20 Mbit/s cell; bits/it as in table 1 (every byte counted)."]
    notes += [f"{row['method']}: {row['status']}: {row['note']}" for row in rows if row["note"]]
    emit(rows, COLUMNS, title=f"Table 5: ResNet-20, 8 workers, {iterations} iterations", notes=notes,
         out=out_dir(args), stem="table5_gpu_resnet20")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
