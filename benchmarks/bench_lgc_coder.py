"""What LGC's coder achieves on real Fashion-MNIST gradients, and what it costs on the wire.

    python -m benchmarks.bench_lgc_coder [--quick]

1. For each AE input order (signed value, magnitude, index): a real LGC-PS run (cnn_fc, 8
   workers, ideal delivery) through DGC warm-up and AE training; the server's pairs of the next
   iterations are held out. Relative error on them of the trained AE, an untrained one, zeros,
   the leader's own values (what lgc_ablation sends) and the best scalar multiple of them.
2. Bits of the two codings of ordered positions at this k and n.
3. On the same recorded gradients, one exchange from the trained state (the same memories for
   both): the aggregate's relative error against the mean of the nodes' accumulated v and the
   uplink bits, for LGC-PS and for lgc_ablation at several innovation ratios.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from experiments.lgc_probe import (collect_held_out, predictor_errors, real_run,  # noqa: E402
                                   rel_error)
from nodes.compression.ideal import run_exchange  # noqa: E402
from nodes.compression.lgc_autoencoder import GradientAutoencoder  # noqa: E402
from nodes.compression.lgc_messages import positions_message  # noqa: E402
from nodes.compression.registry import build_scheme, wire_id  # noqa: E402


def lgc_options(order: str, warmup: int, ae_iters: int) -> dict:
    return dict(ratio=0.01, warmup_iterations=warmup, ae_iterations=ae_iters, ae_steps=25, order=order,
                clip_norm=0.0)


def one_shot(scheme, state, it, grads):
    scheme.load_state_dict(state)
    m = scheme.dgc.momentum
    v = [scheme.dgc.v[w] + m * scheme.dgc.u[w] + grads[w] for w in range(len(grads))]
    avg, st = run_exchange(scheme, it, grads)
    return rel_error(avg, sum(v) / len(v)), st.bits_up_total


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_lgc_coder")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--orders", default="value,magnitude,sign,index")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    warmup, train, held = (20, 30, 5) if args.quick else (30, 60, 8)
    print(f"Fashion-MNIST subset (4096), cnn_fc, 8 workers, density 0.01, warm-up {warmup}, "
          f"AE training {train} iterations x 25 steps, {held} held-out iterations")
    runs = {}
    for order in args.orders.split(","):
        run = real_run("lgc_ps", lgc_options(order, warmup, train + held), warmup + train, record_last=0)
        x, t = collect_held_out(run, warmup + train, held)
        sch = run.scheme
        fresh = GradientAutoencoder(**sch._arch, seed=sch.seed)
        err = predictor_errors(sch.trainer.ae, fresh, x, t)
        print(f"order={order:9} " + "  ".join(f"{k} {v:.3f}" for k, v in err.items())
              + f"  ({x.shape[0]} pairs of {x.shape[1]} values)")
        runs[order] = run
    n = sum(torch.Size(s).numel() for s in next(iter(runs.values())).shapes)
    k = round(0.01 * n)
    idx = torch.randperm(n)[:k]
    for coding in ("ordered", "sorted_ranks"):
        m = positions_message(idx, n, order="value", coding=coding, payload_bytes=1470, method=wire_id("lgc_ps"),
                              iteration=0, scale=1.0)
        print(f"positions of k={k} in n={n}, coding {coding}: {m.nbytes} bytes in {len(m.packets)} packets")
    m = positions_message(torch.sort(idx).values, n, order="index", coding="ordered", payload_bytes=1470,
                          method=wire_id("lgc_ps"), iteration=0, scale=1.0)
    print(f"positions in index order (delta varints + 1-bit codes): {m.nbytes} bytes")

    # 3. LGC-PS against the ablation on the same recorded gradients, from a trained state
    order = "value" if "value" in runs else next(iter(runs))
    run = real_run("lgc_ps", lgc_options(order, warmup, train), warmup + train + 6, record_last=6)
    state = run.scheme.state_dict()
    it0 = warmup + train
    res = [one_shot(run.scheme, state, it0, g) for g in run.recorded]
    print(f"lgc_ps (innovation 0.05, order {order}): rel error {sum(e for e, _ in res) / len(res):.3f}, "
          f"uplink bits {sum(b for _, b in res) / len(res):,.0f}")
    for ratio in (0.0, 0.05, 0.1, 0.2, 0.4, 0.8):
        abl = build_scheme("lgc_ablation", dict(ratio=0.01, warmup_iterations=warmup, ae_iterations=train,
                                                innovation_ratio=ratio, clip_norm=0.0),
                           n_workers=8, shapes=run.shapes, payload_bytes=1470, seed=0)
        abl.load_state_dict({**abl.state_dict(), "dgc": state["dgc"]})
        res = [one_shot(abl, abl.state_dict(), it0, g) for g in run.recorded]
        print(f"lgc_ablation innovation {ratio}: rel error {sum(e for e, _ in res) / len(res):.3f}, "
              f"uplink bits {sum(b for _, b in res) / len(res):,.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
