"""What packing a node's parts into shared packets could save LGC-PS at most.

    python -m benchmarks.bench_lgc_packing

A short real Fashion-MNIST run (experiments.lgc_probe, 8 workers) records 10 iterations of
gradients; LGC-PS (and its ablation, and LGC-PS with dense_below = 3000) exchange them with a
warm-up and AE training of 2 iterations each, the table's other options. Per LGC iteration it
counts the packets each node sends and the fewest packets its content (bytes minus the 30-byte
headers) would fill if parts shared packets with no per-part descriptor at all: an upper bound
of the header bytes packing could save (uplink per iteration, downlink per node).
"""
from __future__ import annotations

import math

from experiments.lgc_probe import PAYLOAD, real_run
from nodes.compression import codec
from nodes.compression.ideal import run_exchange
from nodes.compression.registry import build_scheme

CASES = (("lgc_ps", dict(ae_steps=5)), ("lgc_ablation", {}),
         ("lgc_ps", dict(ae_steps=5, dense_below=3000)))


def fewest(message) -> int:
    content = message.nbytes - codec.HEADER_BYTES * len(message.packets)
    return math.ceil(content / (PAYLOAD - codec.HEADER_BYTES))


def main(quick: bool = True) -> list[dict]:
    rows = []
    for method, extra in CASES:
        rec = real_run("none", {}, 10, record_last=10, workers=8, max_train=4096)
        s = build_scheme(method, dict(ratio=0.01, warmup_iterations=2, ae_iterations=2, **extra),
                         n_workers=8, shapes=rec.shapes, payload_bytes=PAYLOAD, seed=0)
        up = up_pk = up_min = down = down_pk = down_min = its = 0
        for it, grads in enumerate(rec.recorded):
            _, st = run_exchange(s, it, grads)
            if s.stage(it) != "lgc":
                continue
            its += 1
            for m in st.uplinks[0].values():
                up, up_pk, up_min = up + m.nbytes, up_pk + len(m.packets), up_min + fewest(m)
            for m in st.downlinks:
                down, down_pk, down_min = down + m.nbytes, down_pk + len(m.packets), down_min + fewest(m)
        h = codec.HEADER_BYTES
        row = dict(case=f"{method} {extra}", up_bytes=up / its, up_packets=up_pk / its,
                   up_saving=(up_pk - up_min) * h / its, down_bytes=down / its,
                   down_packets=down_pk / its, down_saving=(down_pk - down_min) * h / its)
        rows.append(row)
        print(f"{row['case']}: uplink {row['up_bytes']:.0f} B/it in {row['up_packets']:.1f} packets, "
              f"packing saves at most {row['up_saving']:.0f} B ({100 * row['up_saving'] / row['up_bytes']:.2f}%); "
              f"downlink {row['down_bytes']:.0f} B per node in {row['down_packets']:.1f} packets, at most "
              f"{row['down_saving']:.0f} B ({100 * row['down_saving'] / max(row['down_bytes'], 1):.2f}%)",
              flush=True)
    return rows


if __name__ == "__main__":
    main()
