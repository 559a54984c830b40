"""LGC-PS and LGC-RAR against fp32 and DGC on digits, 8 workers, same seeds and budget.

`python -m benchmarks lgc` (quick) or `python -m benchmarks --full lgc`, or
`python benchmarks/bench_lgc.py [--full]`.

Training is driven with nodes.workers.WorkerPool and nodes.compression.ideal.run_exchange
(ideal delivery: every packet arrives; the ring is summed on the real bytes), so the figures are
accuracy and *bits*, not time. Bits are the real serialized bytes of every phase: uplinks,
downlink broadcasts, ring all-reduce traffic (per node, 2 (N-1)/N of the buffer) and worker
broadcasts (LGC-RAR's shared indices and the shipped autoencoder).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from experiments.lgc_probe import seeded_pool  # noqa: E402

from nodes.compression.ideal import run_exchange  # noqa: E402
from nodes.compression.registry import build_scheme  # noqa: E402
from nodes.workers import evaluate, set_gradients  # noqa: E402

N_WORKERS, BATCH, LR, DENSITY, PAYLOAD = 8, 32, 0.05, 0.01, 1470


def methods(warmup: int, ae_iters: int) -> dict[str, tuple[str, dict]]:
    lgc = dict(ratio=DENSITY, warmup_iterations=warmup, ae_iterations=ae_iters, ae_steps=25,
               ae_channels="16,16,16", ae_kernel=5, latent_ratio=0.125, latent_dtype="f16")
    return {"fp32": ("none", {}),
            "dgc": ("dgc", dict(ratio=DENSITY, warmup_iterations=warmup)),
            "lgc_ps": ("lgc_ps", dict(lgc, innovation_ratio=0.01)),
            "lgc_rar": ("lgc_rar", lgc)}


@dataclass
class Result:
    accuracy: float
    bits_after_warmup: list[int] = field(default_factory=list)   # total bits, it >= warm-up
    up_after_warmup: list[int] = field(default_factory=list)     # uplink + ring + worker broadcast
    bits_lgc_stage: list[int] = field(default_factory=list)      # total bits in the LGC stage
    wall_s: float = 0.0


def train(label: str, method: str, options: dict, seed: int, iterations: int, warmup: int,
          lgc_start: int) -> Result:
    data, model, pool = seeded_pool("digits", "cnn", N_WORKERS, BATCH, seed)
    scheme = build_scheme(method, options, n_workers=N_WORKERS,
                          shapes=[p.shape for p in model.parameters()], payload_bytes=PAYLOAD, seed=seed)
    momentum = 0.0 if scheme.handles_momentum else 0.9
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)
    res = Result(accuracy=float("nan"))
    t0 = time.perf_counter()
    for it in range(iterations):
        grads, _ = pool.gradients()
        agg, st = run_exchange(scheme, it, grads)
        set_gradients(model, agg)
        opt.step()
        if it >= warmup:
            res.bits_after_warmup.append(st.bits_total)
            res.up_after_warmup.append(st.bits_total - st.bits_down)
        if it >= lgc_start:
            res.bits_lgc_stage.append(st.bits_total)
    res.accuracy = evaluate(model, data.test_x, data.test_y)[1]
    res.wall_s = time.perf_counter() - t0
    return res


def run(quick: bool = True) -> list[dict]:
    torch.set_num_threads(1)
    iterations, warmup, ae_iters = (240, 60, 30) if quick else (600, 120, 40)
    seeds = (0, 1, 2)
    rows = []
    for label, (method, options) in methods(warmup, ae_iters).items():
        results = [train(label, method, options, s, iterations, warmup, warmup + ae_iters) for s in seeds]
        rows.append({
            "method": label,
            "acc": [r.accuracy for r in results],
            "bits_after_warmup": statistics.mean(statistics.mean(r.bits_after_warmup) for r in results),
            "up_after_warmup": statistics.mean(statistics.mean(r.up_after_warmup) for r in results),
            "bits_lgc_stage": statistics.mean(statistics.mean(r.bits_lgc_stage) for r in results),
            "wall_s": sum(r.wall_s for r in results),
        })
    base = {r["method"]: r for r in rows}
    for r in rows:
        for ref in ("fp32", "dgc"):
            r[f"x_vs_{ref}"] = base[ref]["bits_after_warmup"] / r["bits_after_warmup"]
            r[f"x_vs_{ref}_lgc"] = base[ref]["bits_lgc_stage"] / r["bits_lgc_stage"]
    print(f"digits, cnn (29k weights), {N_WORKERS} workers, {iterations} iterations (warm-up {warmup}, "
          f"AE training {ae_iters}), density {DENSITY}, seeds {seeds}, ideal delivery")
    head = (f"{'method':8} {'acc mean':>8} {'acc per seed':>20} {'bits/it >=W':>12} {'up/it >=W':>11} "
            f"{'bits/it LGC':>12} {'x fp32':>7} {'x DGC':>6} {'x DGC LGC':>9} {'wall s':>7}")
    print(head)
    for r in rows:
        accs = " ".join(f"{a:.3f}" for a in r["acc"])
        print(f"{r['method']:8} {statistics.mean(r['acc']):8.4f} {accs:>20} {r['bits_after_warmup']:12.0f} "
              f"{r['up_after_warmup']:11.0f} {r['bits_lgc_stage']:12.0f} {r['x_vs_fp32']:7.1f} "
              f"{r['x_vs_dgc']:6.2f} {r['x_vs_dgc_lgc']:9.2f} {r['wall_s']:7.1f}")
    print("bits/it >=W: all bits per iteration from the end of warm-up on (AE training, the one-off "
          "AE shipment and the LGC stage); bits/it LGC: the LGC stage only; every header, index and "
          "latent byte counted.")
    return rows


def main(quick: bool = True) -> list[dict]:
    return run(quick)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true")
    main(quick=not ap.parse_args().full)
