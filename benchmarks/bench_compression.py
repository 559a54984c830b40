"""Every baseline compressor in real bytes: rate and codec speed, and (full) training on digits.

Per method: bits one worker sends per iteration, the compression ratio against fp32 (the same
vector as raw 4-byte floats, headers included on both sides), and the wall milliseconds per
iteration to encode (one worker's share of the worker-side work: selection, quantisation,
error feedback, bytes, decoding the broadcast; workers run in parallel) and to decode (the
server: decoding all workers' packets, aggregating, encoding the broadcast) for a
gradient of the small CNN's size and for 1M elements; then final test accuracy of the small
CNN on digits with 4 workers. Run: `python -m benchmarks compression` (quick) or `--full`.
"""
from __future__ import annotations

import statistics

import torch

from nodes.compression.ideal import run_exchange
from nodes.compression.registry import build_scheme, load_all, names
from nodes.data import load_dataset
from nodes.models import build_model
from nodes.partition import split
from nodes.workers import WorkerPool, flatten, unflatten

# every registered method but the LGC family (benchmarks/bench_lgc.py measures those)
METHODS = [m for m in names() if not m.startswith("lgc_")]
PAYLOAD = 1472  # a 1500-byte MTU minus IP/UDP headers
WORKERS = 4
# Training schedule per method (default options): SGD lr 0.05, momentum 0.9, batch 32 per worker.
# random-k's error feedback piles each coordinate up for ~1/ratio iterations: momentum 0.9 on
# top of those bursts diverges, 0.5 does not. DGC's default warm-up alone takes 100 iterations.
TRAIN_SETTINGS = {"randomk": {"momentum": 0.5, "iterations": 200}, "dgc": {"iterations": 200}}
TRAIN_ITERATIONS = 120


def _cnn_shapes():
    model = build_model("cnn", (1, 8, 8), 10)
    return [p.shape for p in model.parameters()]


def _million_shapes():
    return [torch.Size([1000, 1000])]  # one matrix, so PowerSGD has something to factor


def measure(method: str, shapes, reps: int = 3, options: dict | None = None) -> dict:
    opts = dict(options or {})
    if method == "dgc":
        opts.setdefault("warmup_iterations", 0)  # the steady state, not the warm-up
    scheme = build_scheme(method, opts, n_workers=WORKERS, shapes=shapes, payload_bytes=PAYLOAD, seed=0)
    n = scheme.numel
    gen = torch.Generator().manual_seed(0)
    enc, dec, bits = [], [], []
    for it in range(reps + 1):
        grads = [torch.randn(n, generator=gen) for _ in range(WORKERS)]
        _, st = run_exchange(scheme, it, grads)
        if it == 0:
            continue  # first call pays for lazy state allocation
        # between yields the scheme alternates: workers (even slots), server (odd slots)
        enc.append(sum(st.wall_s[0::2]) / WORKERS)
        dec.append(sum(st.wall_s[1::2]))
        # what one worker sends, on average: uplinks, ring chunks and a leader's broadcasts
        # (PowerSGD and ScaleCom send nothing on an uplink)
        bits.append((st.bits_up_total + sum(st.bits_allreduce.values()) + st.bits_broadcast) / WORKERS)
    fp32_bits = 8 * (4 * n + 30 * -(-4 * n // (PAYLOAD - 30)))
    b = statistics.median(bits)
    return {"method": method, "n": n, "bits_per_iteration": int(b), "bits_per_element": b / n,
            "ratio_vs_fp32": fp32_bits / b, "encode_ms": 1e3 * statistics.median(enc),
            "decode_ms": 1e3 * statistics.median(dec)}


def train_digits(method: str, options: dict | None = None, *, iterations: int = 150,
                 lr: float = 0.05, momentum: float = 0.9, batch_size: int = 32, seed: int = 0,
                 model_name: str = "cnn") -> dict:
    """Data-parallel SGD of `model_name` on digits with 4 iid workers, every packet delivered.
    Momentum SGD on the aggregate, except for schemes that handle momentum themselves (DGC)."""
    ds = load_dataset("digits", seed=seed)
    torch.manual_seed(seed)
    model = build_model(model_name, ds.input_shape, ds.num_classes)
    shards = split(ds.train_y, WORKERS, "iid", seed=seed)
    pool = WorkerPool(model, ds.train_x, ds.train_y, shards, batch_size, seed=seed)
    scheme = build_scheme(method, dict(options or {}), n_workers=WORKERS, shapes=pool.shapes,
                          payload_bytes=PAYLOAD, seed=seed)
    own_momentum = scheme.handles_momentum
    params = flatten(model.parameters())
    buf = torch.zeros_like(params)
    bits = 0
    for it in range(iterations):
        grads, _ = pool.gradients(params)
        agg, st = run_exchange(scheme, it, grads)
        bits += st.bits_up_total + sum(st.bits_allreduce.values())  # sent up or around the ring
        if own_momentum:
            params = params - lr * agg
        else:
            buf = momentum * buf + agg
            params = params - lr * buf
    loss, acc = pool.evaluate(ds.test_x, ds.test_y, params=unflatten(params, pool.shapes))
    return {"method": method, "accuracy": acc, "loss": loss,
            "bits_per_iteration": bits / iterations / WORKERS}


def _table(rows, cols):
    widths = [max(len(c), *(len(f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])) for r in rows))
              for c in cols]
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(fmt(r[c]).rjust(w) for c, w in zip(cols, widths)) for r in rows]
    return "\n".join(lines)


def run(quick: bool = True) -> list[dict]:
    load_all()
    cols = ["method", "n", "bits_per_iteration", "bits_per_element", "ratio_vs_fp32", "encode_ms", "decode_ms"]
    rows = []
    for label, shapes in (("small CNN", _cnn_shapes()), ("1M elements", _million_shapes())):
        part = [measure(m, shapes, reps=2 if quick else 5) for m in METHODS]
        print(f"\n{label} gradient, {WORKERS} workers, payload {PAYLOAD} B (per worker per iteration):")
        print(_table(part, cols))
        rows += part
    train = []
    for m in METHODS:
        kw = {"iterations": TRAIN_ITERATIONS, **TRAIN_SETTINGS.get(m, {})}
        if not quick:
            kw["iterations"] *= 3
        train.append({**train_digits(m, **kw), "iterations": kw["iterations"]})
    print(f"\nsmall CNN on digits, {WORKERS} workers, default options (iterations per row):")
    print(_table(train, ["method", "iterations", "accuracy", "loss", "bits_per_iteration"]))
    return rows + train


def main(quick: bool = True) -> None:
    run(quick)


if __name__ == "__main__":
    main()
