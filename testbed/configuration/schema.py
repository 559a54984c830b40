"""The experiment file's schema: each section's keys as `Field` tables (type, default, bounds,
the help the reference pages print), and the typed objects a validated file becomes.

Each key is written once, in its table: the section objects (RunConfig, DataConfig, OptimConfig,
ModelConfig, FederatedConfig) are dataclasses generated from the tables, their fields the
table's keys in the table's order (what `ExperimentConfig.as_dict()` and so the store record).
Checking a file against the tables is testbed.configuration.sections' job; `testbed keys` and
docs/reference/configuration.md read the tables through testbed.configuration.keys.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field, make_dataclass
from typing import Any

import lgc_schema
from channels.config import ValidNetwork
from lgc_schema import Field, Rule


COMPUTE_TIME = ("flops", "measured")

RUN_KEYS = {
    "name": Field(None, str,
        help="the run's name in the store (`testbed runs`, `testbed export NAME`); default: "
             "the file's stem"),
    "seed": Field(0, int, min=0,
        help="seeds the model's initial weights, the data split, the batch order and every "
             "draw of the link layer: the same file and seed give the same rows"),
    "iterations": Field(None, int, min=1,
        help="training iterations (a federated run: rounds, or server steps with mode = "
             "\"fedbuff\"); give this or run.epochs; neither: 200"),
    "epochs": Field(None, float, min=0, min_open=True,
        help="passes over the training set, turned into iterations (workers x batch_size "
             "samples each); instead of run.iterations"),
    "eval_every": Field(20, int, min=1,
        help="evaluate on the test set every N iterations, and after the last"),
    "device": Field("auto", str, choices=("auto", "cpu", "cuda"),
        help="where the workers train: auto (CUDA when there is a GPU, else the CPU), cpu or "
             "cuda"),
    "compute_time": Field("flops", str, choices=COMPUTE_TIME,
        help="a step's time on the virtual clock: its FLOPs at the node's speed (flops: the "
             "same on every machine for a seed) or the real step's measured wall time "
             "(measured)"),
    "device_gflops": Field(20.0, float, min=0, min_open=True,
        help="a worker's compute speed on the virtual clock, GFLOP/s (a node's own gflops or "
             "compute_speed changes it)"),
    # Sequential by default: one answer per seed, in one process and under torchrun (a rank
    # computes one worker). vmap rounds convolutions differently and is slower for the shipped
    # small models (benchmarks/bench_workers.py); "auto"/"vmap" are there for the runs where it pays.
    "workers_mode": Field("sequential", str, choices=("auto", "sequential", "vmap"),
        help="how the workers' gradients are computed: one worker after another (sequential: "
             "torchrun's rows), batched with torch.func.vmap (vmap), or the faster of the two "
             "for the model (auto)"),
    "target_accuracy": Field(None, float, min=0, max=1, min_open=True,
        help="a test accuracy in (0, 1]: the virtual seconds and joules to its first crossing "
             "are reported (`testbed runs`, the dashboard)"),
    "flush_every": Field(10, int, min=1,
        help="write the buffered rows to the store every N iterations (a reader, such as the "
             "dashboard, sees them then)"),
    # The checkpoint holds the model, optimizer, compressor, batch order, link layer and clock.
    "checkpoint_every": Field(100, int, min=0,
        help="a checkpoint beside the store every N iterations, for `testbed resume RUN`; 0: "
             "none"),
    # Intra-op (and inter-op) CPU threads of this process. One by default, for every model size:
    # threads wait on each other while another process holds a core, and every shipped model ran
    # slower at two threads than at one, idle and busy (docs/results.md, "Thread policy under
    # load"); one thread is also what every torchrun rank runs, so one process and torchrun give
    # the same rows. N > 0 is for a machine of the run's own or a large model: measure first.
    "threads": Field(0, int, min=0, help="CPU threads per process; 0: one (holds its speed on a "
                     "busy machine, the same rows as torchrun's ranks); N: N threads"),
    "stop_at_accuracy": Field(False, bool,
        help="end the run at the first evaluation at or above run.target_accuracy"),
    "deadline_s": Field(None, float, min=0, min_open=True,
        help="virtual seconds from an iteration's start at which its round closes: an update "
             "not arrived by then is left out of the aggregate; a ring is formed without the "
             "workers still computing"),
    # The trace's format: testbed/emulation/device_trace.py.
    "device_trace": Field(None, str, noun=lgc_schema.FILE_PATH,
        help="a JSON file of each worker's compute speed and availability over virtual time "
             "(optionally its link rates and energy profile); an away worker skips the "
             "iteration"),
}
RUN_RULES = (Rule("epochs", needs=("iterations",),
                  check=lambda t: None if t["iterations"] is None or t["epochs"] is None
                  else "left out with run.iterations set (run.iterations or run.epochs, not both)"),)
DATA_KEYS = {
    "dataset": Field("digits", str,
        help="digits (scikit-learn's, bundled), synthetic, cifar10, mnist, fashion_mnist, or a "
             "loader of your own ('package.module:name' or 'path/to/file.py:name'; the table's "
             "other keys are its keyword arguments)"),
    "batch_size": Field(32, int, min=1, help="training samples per worker per iteration"),
    "partition": Field("iid", str, choices=("iid", "dirichlet", "shards"),
        help="how the training set is split over the workers (or clients): iid, dirichlet "
             "(label skew set by data.alpha) or shards (data.shards_per_worker single-label "
             "shards each)"),
    "alpha": Field(0.5, float, min=0, min_open=True,
        help="dirichlet: concentration of the label skew (smaller: more skewed)"),
    "shards_per_worker": Field(2, int, min=1,
        help="shards: single-label shards per worker (or client)"),
    "root": Field(None, str,
        help="folder an on-disk data set is read from (cifar10, mnist, fashion_mnist); none: "
             "the data set's own default folder"),
    "eval_batch_size": Field(1024, int, min=1,
        help="test samples per forward pass when evaluating (memory only: the figures do not "
             "change)"),
}
MODEL_KEYS = {"name": Field(
    "cnn", str, help="mlp, cnn, cnn_fc, resnet20, resnet18, or a factory of your own "
                     "('package.module:name' or 'path/to/file.py:name', called as "
                     "factory(input_shape, num_classes, **the table's other keys))")}
OPTIM_KEYS = {
    "lr": Field(0.05, float, min=0, min_open=True,
        help="learning rate of the workers' SGD (a federated run: the clients')"),
    "momentum": Field(0.9, float, min=0, max=1,
        help="SGD momentum (a method with DGC's momentum correction applies it itself, and the "
             "optimizer adds none)"),
    "weight_decay": Field(0.0, float, min=0, help="L2 weight decay"),
    "nesterov": Field(False, bool, help="Nesterov momentum (needs momentum > 0)"),
    "lr_schedule": Field("constant", str, choices=("constant", "cosine", "step"),
        help="constant; cosine (down to 0 over the run); step (x0.1 at a third and two thirds "
             "of the run)"),
    "warmup_iterations": Field(0, int, min=0,
        help="linear learning-rate warm-up over the first N iterations; 0: none"),
}
# Federated training (testbed/drivers/federated.py, nodes/federated.py): a population of clients, a
# few sampled per round, local steps with [optim] as the client's optimizer, the model delta
# through [compression]'s exchange, a server optimizer. Each round's clients send from the
# network's worker nodes (one per client of a round: network.workers is set to it).
FEDERATED_KEYS = {
    "clients": Field(100, int, min=1, help="population size; each client has its own shard "
                     "([data] partition over the clients)"),
    "clients_per_round": Field(10, int, min=1, help="sync: clients sampled per round"),
    "sampler": Field("uniform", str, choices=("uniform", "available"),
                     help="uniform over all clients, or over those the device trace (names "
                     "c0..cN-1) says are available at the round's start"),
    "local_steps": Field(5, int, min=1, help="SGD steps a client runs per round ([optim] lr, "
                         "momentum, weight_decay; a fresh optimizer each round)"),
    "server_optimizer": Field("fedavg", str, choices=("fedavg", "fedavgm", "fedadam"),
        help="how the server applies the clients' mean delta: fedavg, fedavgm "
             "(server_momentum) or fedadam (beta1, beta2, tau)"),
    "server_lr": Field(1.0, float, min=0, min_open=True,
        help="the server optimizer's learning rate"),
    "server_momentum": Field(0.9, float, min=0, max=1, max_open=True, help="fedavgm"),
    "beta1": Field(0.9, float, min=0, max=1, max_open=True, help="fedadam"),
    "beta2": Field(0.99, float, min=0, max=1, max_open=True, help="fedadam"),
    "tau": Field(1e-3, float, min=0, min_open=True, help="fedadam's adaptivity"),
    "mode": Field("sync", str, choices=("sync", "fedbuff"),
        help="sync (rounds of clients_per_round clients) or fedbuff (asynchronous and "
             "buffered: concurrency, buffer_size, staleness)"),
    "concurrency": Field(20, int, min=1, help="fedbuff: clients training at once"),
    "buffer_size": Field(10, int, min=1, help="fedbuff: updates per server step (K)"),
    "staleness": Field("sqrt", str, choices=("sqrt", "none"),
                       help="fedbuff: an update tau versions old weighs 1/sqrt(1+tau), or 1"),
    "download_model": Field(True, bool, help="a client downloads the whole fp32 model over the "
                            "link before its local steps"),
}
SECTIONS = ("run", "data", "model", "optim", "compression", "network", "federated")


def _section_class(name: str, keys: dict[str, Field], doc: str, *extra: tuple,
                   **namespace: Any) -> type:
    """A dataclass with one field per key of `keys` (its annotation the Field's types, `| None`
    where the default is None), then the `extra` fields ((name, type, dataclasses.field))."""
    def annotation(f: Field) -> Any:
        kind = functools.reduce(operator.or_, f.types)
        return kind | None if f.default is None else kind

    return make_dataclass(name, [*((k, annotation(f)) for k, f in keys.items()), *extra],
                          namespace={"__module__": __name__, "__doc__": doc, **namespace})


def _options() -> tuple:
    """The `options` field: what a section's own keys leave over (a fresh one per class)."""
    return ("options", dict, field(default_factory=dict))


def _slots(self) -> int:
    """Clients of one exchange, each at a worker node of the network."""
    return self.concurrency if self.mode == "fedbuff" else self.clients_per_round


RunConfig = _section_class("RunConfig", RUN_KEYS, "[run], checked (RUN_KEYS).")
# options: the dataset's own options / a model factory's keyword arguments
DataConfig = _section_class("DataConfig", DATA_KEYS, "[data], checked (DATA_KEYS).", _options())
ModelConfig = _section_class("ModelConfig", MODEL_KEYS, "[model], checked (MODEL_KEYS).", _options())
OptimConfig = _section_class("OptimConfig", OPTIM_KEYS, "[optim], checked (OPTIM_KEYS).")
FederatedConfig = _section_class("FederatedConfig", FEDERATED_KEYS,
                                 "[federated], checked (FEDERATED_KEYS).", slots=property(_slots))


@dataclass
class CompressionConfig:
    method: str
    options: dict
    set_aside: dict = field(default_factory=dict)   # other methods' options, not used


@dataclass
class ExperimentConfig:
    run: RunConfig
    data: DataConfig
    model: ModelConfig
    optim: OptimConfig
    compression: CompressionConfig
    network: ValidNetwork  # the [network] table, checked once, defaults filled (channels.config)
    source: str = "<config>"
    federated: FederatedConfig | None = None   # [federated]: None for data-parallel runs
    # run.device_trace parsed (testbed.emulation.device_trace.DeviceTrace), once, by `validate`
    devices: Any = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict:
        """The validated file, defaults filled in: what the store records."""
        return {
            "run": vars(self.run).copy(),
            "data": {**{k: v for k, v in vars(self.data).items() if k != "options"},
                     **self.data.options},
            "model": {"name": self.model.name, **self.model.options},
            "optim": vars(self.optim).copy(),
            "compression": {"method": self.compression.method, **self.compression.options},
            "network": self.network,
            **({"federated": vars(self.federated).copy()} if self.federated else {}),
        }

