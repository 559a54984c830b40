"""Real gradients for LGC's coder checks: a short real training run on Fashion-MNIST.

`real_run` trains the Fashion-MNIST `cnn_fc` (Debian's idx files, a subset) with 8 workers and
one LGC-family scheme in the loop (ideal delivery, plain SGD on the returned update, as the
testbed's loop does for methods that handle momentum), and keeps the last iterations' worker
gradients so that several schemes can then be compared on the very same inputs. Used by
tests/nodes/compression/test_lgc_real.py and benchmarks/bench_lgc_coder.py.

`rel_error(pred, target)` is ||pred - target|| / ||target|| over a batch of value vectors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nodes.compression.ideal import run_exchange
from nodes.compression.registry import build_scheme
from nodes.data import load_dataset
from nodes.models import build_model
from nodes.partition import split
from nodes.workers import WorkerPool, set_gradients

N_WORKERS, BATCH, LR, PAYLOAD = 8, 32, 0.05, 1470


@dataclass
class RealRun:
    scheme: object
    model: torch.nn.Module
    pool: WorkerPool
    shapes: list
    recorded: list[list[torch.Tensor]] = field(default_factory=list)  # per iteration, per worker


def seeded_pool(dataset: str, model_name: str, workers: int, batch: int, seed: int,
                **data_options):
    """The data set, the model and the worker pool a probe trains with, seeded as the testbed
    seeds them (the data and its iid split, then the model's initial weights)."""
    torch.manual_seed(seed)
    data = load_dataset(dataset, seed=seed, **data_options)
    shards = split(data.train_y, workers, "iid", seed=seed)
    torch.manual_seed(seed)
    model = build_model(model_name, data.input_shape, data.num_classes)
    pool = WorkerPool(model, data.train_x, data.train_y, shards, batch_size=batch, seed=seed)
    return data, model, pool


def real_run(method: str, options: dict, iterations: int, *, record_last: int = 0, seed: int = 0,
             max_train: int = 4096, workers: int = N_WORKERS, batch: int = BATCH) -> RealRun:
    _, model, pool = seeded_pool("fashion_mnist", "cnn_fc", workers, batch, seed,
                                 max_train=max_train, max_test=500)
    shapes = [p.shape for p in model.parameters()]
    scheme = build_scheme(method, options, n_workers=workers, shapes=shapes, payload_bytes=PAYLOAD,
                          seed=seed)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    run = RealRun(scheme, model, pool, shapes)
    for it in range(iterations):
        grads, _ = pool.gradients()
        if it >= iterations - record_last:
            run.recorded.append([g.clone() for g in grads])
        agg, _ = run_exchange(scheme, it, grads)
        set_gradients(model, agg)
        opt.step()
    return run


def rel_error(pred: torch.Tensor, target: torch.Tensor) -> float:
    return float((pred - target).norm() / target.norm())


def collect_held_out(run: RealRun, start: int, iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Continue the run for `iterations` AE-training iterations from `start`, keeping the pairs
    the server builds there *out of* the AE's training (held out); returns (inputs, targets)."""
    trainer = run.scheme.trainer
    xs, ts = [], []
    add, train = trainer.add, trainer.train
    # (side and group: the per-node decoders' inputs and the latent pull's; the probe keeps pairs)
    trainer.add = lambda x, t, **_: (xs.append(x.detach().float()), ts.append(t.detach().float()))
    trainer.train = lambda steps: 0.0
    opt = torch.optim.SGD(run.model.parameters(), lr=LR)
    try:
        for it in range(start, start + iterations):
            grads, _ = run.pool.gradients()
            agg, _ = run_exchange(run.scheme, it, grads)
            set_gradients(run.model, agg)
            opt.step()
    finally:
        trainer.add, trainer.train = add, train
    return torch.stack(xs), torch.stack(ts)


def predictor_errors(ae, untrained, x: torch.Tensor, t: torch.Tensor) -> dict[str, float]:
    """Relative error of the trained coder and of the trivial predictors on (x -> t) pairs."""
    with torch.no_grad():
        alpha = float((x * t).sum() / (x * x).sum())
        return {"trained": rel_error(ae(x), t), "untrained": rel_error(untrained(x), t),
                "zeros": 1.0, "leader": rel_error(x, t), "leader_scaled": rel_error(alpha * x, t)}
