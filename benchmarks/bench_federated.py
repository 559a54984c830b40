"""Federated rounds at scale: 1,000 clients, 50 per round, the CNN on digits, in one
process with the model held once. Per row: the wall seconds of one round of the federated driver
(testbed/drivers/federated.py: sampling, model download, 50 clients' local steps in turn, the exchange
over the emulated shared cell, the server step, the store's rows) against 50 x one client's
local steps alone (`nodes.federated.local_train`, no driver, no network): target within 1.2x.
And the process's peak resident memory (target under 4 GB), with the per-client error memory
the run holds (top-k: each client that took part keeps one, the full population's projected).

Digits has 1,437 training images, so 1,000 iid shards hold 1-2 images each (a client's batch is
its whole shard): the overhead per client is as large as it gets relative to its compute.
Medians over the timed rounds, each followed at once by 50 clients alone (so both see the same
load), in wall seconds and in this process's CPU seconds (on a shared, loaded machine the wall
ratio swings with the other processes).
Then the codec's share of a round: CPU milliseconds to encode 50 dense fp32 messages of the
CNN's 29,066 weights (`codec.encode_dense`, 1,472-byte payloads) and to decode them
(`codec.decode`), median of 30 repeats (quick: 10).
Run: `python -m benchmarks federated` (quick: 4 timed rounds) or `--full` (12).
"""
from __future__ import annotations

import resource
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import torch

from nodes.compression import codec
from nodes.federated import local_train, sample_clients
from nodes.workers import ShardSampler, assign
from testbed.configuration.loading import load_config
from testbed.experiment import Experiment
from testbed.records.store import Store

CLIENTS, PER_ROUND, LOCAL_STEPS = 1000, 50, 5

FILE = """
[run]
seed = 0
iterations = {rounds}
eval_every = 100000
[data]
dataset = "digits"
batch_size = 32
[model]
name = "cnn"
[optim]
lr = 0.05
momentum = 0.0
[compression]
method = "{method}"
[federated]
clients = {clients}
clients_per_round = {per_round}
local_steps = {steps}
[network]
topology = "star"
medium = "shared"
[network.link]
bandwidth_mbps = 20.0
delay_ms = 2.0
"""


def _measure(method: str, rounds: int, folder: Path):
    """Per round (but the first, a warm-up, and the last, which evaluates): the round's wall
    and CPU seconds, and, right after it, those of 50 clients' local steps run alone (fresh
    batch orders, the driver's own untouched), so both see the same load."""
    path = folder / f"{method}.toml"
    path.write_text(textwrap.dedent(FILE.format(rounds=rounds + 2, method=method, clients=CLIENTS,
                                                per_round=PER_ROUND, steps=LOCAL_STEPS)))
    store = Store(folder / f"{method}.db")
    exp = Experiment(load_config(path), store)
    rows, begun = [], [time.perf_counter(), time.process_time()]

    def after_round(p):
        wall, cpu = time.perf_counter() - begun[0], time.process_time() - begun[1]
        t, c0 = time.perf_counter(), time.process_time()
        # 50 clients drawn as a round draws them (shard sizes differ: 1 or 2 images)
        for client in sample_clients(np.random.default_rng([1, p.iteration]), range(CLIENTS), PER_ROUND):
            sampler = ShardSampler(exp.driver.clients.shards[client], exp.cfg.data.batch_size, client)
            local_train(exp.driver.model, exp.driver.weights, sampler, exp.training.data.train_x, exp.training.data.train_y,
                        LOCAL_STEPS, 0.05)
        rows.append((wall, cpu, time.perf_counter() - t, time.process_time() - c0))
        assign(exp.driver.model, exp.driver.weights)
        begun[:] = [time.perf_counter(), time.process_time()]

    exp.progress = after_round
    exp.run()
    store.close()
    return rows[1:-1], exp


def run(quick: bool = True) -> list[dict]:
    rounds = 4 if quick else 12
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for method in ("none", "topk"):
            timed, exp = _measure(method, rounds, Path(d))
            wall, cpu, alone, alone_cpu = (statistics.median(col) for col in zip(*timed))
            per_client = exp.driver.memory.nbytes() / max(1, len(exp.driver.memory.kept))
            rows.append({"method": method, "round_s": wall, "alone_s": alone,
                         "ratio": wall / alone, "round_cpu_s": cpu, "alone_cpu_s": alone_cpu,
                         "cpu_ratio": cpu / alone_cpu,
                         "memory_clients": len(exp.driver.memory.kept),
                         "memory_mb": exp.driver.memory.nbytes() / 2**20,
                         "memory_all_mb": per_client * CLIENTS / 2**20,
                         "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    return rows


def codec_ms(repeats: int, messages: int = PER_ROUND, numel: int = 29066) -> tuple[float, float]:
    """Median CPU ms to encode, then to decode, `messages` dense fp32 messages of `numel` values."""
    xs = [torch.randn(numel, generator=torch.Generator().manual_seed(i)) for i in range(messages)]
    enc, dec = [], []
    for _ in range(repeats):
        t0 = time.process_time()
        sent = [codec.encode_dense(x, payload_bytes=1472) for x in xs]
        t1 = time.process_time()
        for m in sent:
            codec.decode(m.packets, numel)
        enc.append(t1 - t0)
        dec.append(time.process_time() - t1)
    return 1e3 * statistics.median(enc), 1e3 * statistics.median(dec)


def format_table(rows: list[dict]) -> str:
    head = (f"{'method':>6}  {'wall s: round, 50 x alone, ratio':>32}  "
            f"{'CPU s: round, 50 x alone, ratio':>31}  "
            f"{'EF memory: clients, MB (all 1,000)':>35}  {'peak RSS MB':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['method']:>6}  {r['round_s']:>12.3f}, {r['alone_s']:>7.3f}, {r['ratio']:>5.2f}x  "
                     f"{r['round_cpu_s']:>11.3f}, {r['alone_cpu_s']:>7.3f}, {r['cpu_ratio']:>5.2f}x  "
                     f"{r['memory_clients']:>12}, {r['memory_mb']:>7.1f} ({r['memory_all_mb']:>7.1f})  "
                     f"{r['peak_mb']:>11.0f}")
    return "\n".join(lines)


def main(quick: bool = True) -> dict:
    """Prints the table; returns its figures (`python -m benchmarks federated --out FILE`)."""
    rows = run(quick)   # the run sets its threads (run.threads = 0: one)
    print(f"federated rounds: {CLIENTS} clients, {PER_ROUND} per round, {LOCAL_STEPS} local steps, "
          f"CNN on digits, shared 20 Mbit/s cell, {torch.get_num_threads()} torch thread(s); "
          "targets: round within 1.2x of 50 x one client alone, peak memory under 4 GB")
    print(format_table(rows))
    enc, dec = codec_ms(10 if quick else 30)
    print(f"codec, {PER_ROUND} dense fp32 messages of 29,066 values: encode {enc:.1f} ms, "
          f"decode {dec:.1f} ms of CPU (median)")
    return {"rows": rows, "encode_ms": enc, "decode_ms": dec}
