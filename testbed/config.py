"""Experiment files (TOML) validated into typed objects.

Every mistake becomes one `ConfigError` line that names the key path, the bad value and what is
allowed; an unknown key is an error too, with the closest known key suggested. `[compression]`
options are checked against the method's own option table (nodes.compression.registry) and
`[network]` by the link layer's validator (channels.config), so each room owns its own keys.
"""
from __future__ import annotations

import copy
import difflib
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lgc_schema
from channels.config import ValidNetwork, validate_network
from channels.errors import ChannelConfigError
from lgc_schema import Field, Rule, unknown_key
from nodes.plugins import GIVEN_PREFIX, PluginError, is_reference, resolve_callable
from testbed.emulation.device_trace import check_device_trace
from testbed.errors import ConfigError, NoServerError  # noqa: F401 (NoServerError: re-exported for callers)
from testbed.paths import resolve_paths

# Keys a federated user reaches for that have another name here: {full key: what to set}.
OTHER_NAMES = {f"federated.{k}": "run.iterations (one iteration of a federated run is one round; "
               "one server step with mode = \"fedbuff\")" for k in ("rounds", "num_rounds")}


def _unknown(path: str, key: str, known: list[str]) -> ConfigError:
    return unknown_key(path, key, known, ConfigError)


def check_table(path: str, table: Any, fields: dict[str, Field], rules: tuple = ()) -> dict:
    """Validate one table against its fields and rules; fill in defaults."""
    try:
        return lgc_schema.check_table(path, table, fields, error=ConfigError, rules=rules)
    except ConfigError as e:
        if e.problem == "unknown" and e.key in OTHER_NAMES:
            raise ConfigError(e.key, e.value, OTHER_NAMES[e.key], problem="unknown",
                              message=f"unknown key {e.key!r}: the number of rounds is "
                                      f"{OTHER_NAMES[e.key]}") from None
        raise


# ----------------------------------------------------------------------------- schemas
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


@dataclass
class RunConfig:
    name: str
    seed: int
    iterations: int | None
    epochs: float | None
    eval_every: int
    device: str
    compute_time: str
    device_gflops: float
    workers_mode: str
    target_accuracy: float | None
    flush_every: int
    checkpoint_every: int
    threads: int
    stop_at_accuracy: bool
    deadline_s: float | None = None
    device_trace: str | None = None


@dataclass
class DataConfig:
    dataset: str
    batch_size: int
    partition: str
    alpha: float
    shards_per_worker: int
    root: str | None
    eval_batch_size: int
    options: dict = field(default_factory=dict)   # the dataset's own options


@dataclass
class ModelConfig:
    name: str
    options: dict = field(default_factory=dict)   # a factory's keyword arguments


@dataclass
class OptimConfig:
    lr: float
    momentum: float
    weight_decay: float
    nesterov: bool
    lr_schedule: str
    warmup_iterations: int


@dataclass
class CompressionConfig:
    method: str
    options: dict
    set_aside: dict = field(default_factory=dict)   # other methods' options, not used


@dataclass
class FederatedConfig:
    clients: int
    clients_per_round: int
    sampler: str
    local_steps: int
    server_optimizer: str
    server_lr: float
    server_momentum: float
    beta1: float
    beta2: float
    tau: float
    mode: str
    concurrency: int
    buffer_size: int
    staleness: str
    download_model: bool

    @property
    def slots(self) -> int:
        """Clients of one exchange, each at a worker node of the network."""
        return self.concurrency if self.mode == "fedbuff" else self.clients_per_round


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


# ----------------------------------------------------------------------------- sections
def _reference(key: str, value: Any) -> bool:
    """True if `value` names an object of the user's (`module:name`, `file.py:name`); its module
    is imported here, so that a bad one is a ConfigError before any run starts."""
    if not is_reference(value):
        return False
    if not value.startswith(GIVEN_PREFIX):
        try:
            resolve_callable(key, value)
        except PluginError as e:
            raise ConfigError(key, value, e.allowed, message=str(e)) from None
    return True


def _check_model(table: Any) -> ModelConfig:
    """`[model]`: a built-in name, or a factory of the user's whose other keys are its options."""
    if not isinstance(table, dict):
        raise ConfigError("model", table, "a table")
    table = dict(table)
    name = table.get("name", MODEL_KEYS["name"].default)
    if isinstance(name, str) and _reference("model.name", name):
        options = {k: table.pop(k) for k in list(table) if k not in MODEL_KEYS}
        return ModelConfig(**check_table("model", table, MODEL_KEYS), options=options)
    model = check_table("model", table, MODEL_KEYS)
    from nodes import models as model_zoo

    names = getattr(model_zoo, "MODELS", None)
    if names and model["name"] not in names:
        raise ConfigError("model.name", model["name"],
                          "one of " + ", ".join(map(repr, names)) + ", or a factory "
                          "'package.module:name' or 'path/to/file.py:name'")
    return ModelConfig(**model)


def _check_data(table: dict) -> DataConfig:
    from nodes import data as datasets

    table = dict(table)
    ds_name = table.get("dataset", DATA_KEYS["dataset"].default)
    if isinstance(ds_name, str) and _reference("data.dataset", ds_name):
        # a loader of the user's: its options are its keyword arguments (it checks them)
        own = {k: table.pop(k) for k in list(table) if k not in DATA_KEYS}
        return DataConfig(**check_table("data", table, DATA_KEYS), options=own)
    known = getattr(datasets, "DATASETS", {})
    if known and ds_name not in known:
        raise ConfigError("data.dataset", ds_name, "one of " + ", ".join(map(repr, known))
                          + ", or a loader 'package.module:name' or 'path/to/file.py:name'")
    ds_options = known.get(ds_name, {}) if known else {}
    own = {k: table.pop(k) for k in list(table) if k in ds_options and k not in DATA_KEYS}
    for k, v in own.items():
        _check_option(f"data.{k}", v, ds_options[k])
    extra = [k for k in table if k not in DATA_KEYS]
    if extra:
        raise _unknown("data", extra[0], list(DATA_KEYS) + list(ds_options))
    base = check_table("data", table, DATA_KEYS)
    return DataConfig(**base, options=own)


def _check_option(path: str, value: Any, field: Field) -> Any:
    """Check one method/dataset option against its schema field."""
    return field.validate(path, value, ConfigError)


def _check_compression(table: dict, network: dict) -> CompressionConfig:
    from nodes.compression.registry import check_options, fields, find, methods

    if not isinstance(table, dict):
        raise ConfigError("compression", table, "a table")
    method = table.get("method", "none")
    if not (isinstance(method, str) and find(method)):   # imports the named method's file only
        known = methods()
        close = difflib.get_close_matches(str(method), list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError("compression.method", method,
                          "one of " + ", ".join(map(repr, known)) + hint)
    spec = fields(method)
    table = lgc_schema.rename_old("compression", table, spec, ConfigError)
    options, set_aside = {}, {}
    for key, value in table.items():
        if key == "method":
            continue
        if key in spec:
            options[key] = _check_option(f"compression.{key}", value, spec[key])
            continue
        owners = [m for m, s in methods().items() if key in s or key in lgc_schema.renamed(s)]
        if not owners:  # no registered method knows it: a typo, not a switch of method
            raise _unknown("compression", key, ["method", *spec])
        # switching methods on a file written for another one: its options wait, unused
        set_aside[key] = value
        print(f"note: compression.{key} = {value!r} set aside: it belongs to "
              f"{', '.join(map(repr, owners))}, not {method!r}", file=sys.stderr)
    check_options(method, options, ConfigError)   # the rules between its options
    collective = _collective(method, options.get("collective"), network)
    if collective is not None:
        options["collective"] = collective
    return CompressionConfig(method=method, options=options, set_aside=set_aside)


def has_server(network: dict) -> bool | None:
    """Whether the `[network]` topology has a server node (None: a graph file; the loop
    checks it once the graph is read)."""
    topology = network.get("topology")
    return None if topology == "file" else topology != "ring"


def _collective(method: str, given: str | None, network: dict) -> str | None:
    """The collective a method uses on this topology: the one the file names, else the method's
    first that the topology can carry (a ring has no server, so no 'ps'); None: the default."""
    from nodes.compression.registry import SCHEMES

    if has_server(network) is not False:
        return given
    if given == "ps":
        raise NoServerError("compression.collective", given,
                          message=ps_without_server(method, network.get("topology")))
    if given is not None:
        return given
    serverless = [c for c in SCHEMES[method].collectives if c != "ps"]
    if not serverless:
        raise NoServerError("compression.method", method,
                          message=ps_without_server(method, network.get("topology")))
    return serverless[0]


def ps_without_server(method: str, topology) -> str:
    """One line for a parameter-server exchange asked of a topology without a server."""
    from nodes.compression.registry import SCHEMES, load_all

    load_all()
    head = (f"compression.collective 'ps' (method {method!r}) needs a parameter server, but "
            f"network.topology {topology!r} has no server node; ")
    others = [c for c in SCHEMES[method].collectives if c != "ps"]
    if others:
        return head + (f"set compression.collective to {' or '.join(repr(c) for c in others)}, or use a "
                       f"topology with a server (star, mesh, geometric)")
    serverless = sorted(n for n, c in SCHEMES.items() if set(c.collectives) - {"ps"})
    head = (f"compression.method {method!r} needs a parameter server, but network.topology "
            f"{topology!r} has no server node; ")
    return head + (f"{method!r} only exchanges through a server: use a topology with one (star, "
                   f"mesh, geometric) or a method that needs none ({', '.join(serverless)})")


def switch_to_known_good(raw: dict, file_method: str, given: set[str]) -> dict:
    """On a file written for another method (`--set compression.method=NAME`), the method's
    known-good values (registry.KNOWN_GOOD) replace the file's, except keys set on the command
    line; one note line per key replaced."""
    from nodes.compression.registry import KNOWN_GOOD, fields, find

    comp = raw.get("compression")
    method = comp.get("method", "none") if isinstance(comp, dict) else None
    if method == file_method or not (isinstance(method, str) and find(method)):
        return raw
    tables = {"run": RUN_KEYS, "data": DATA_KEYS, "optim": OPTIM_KEYS, "compression": fields(method)}
    for path, value in KNOWN_GOOD[method].items():
        section, key = path.split(".", 1)
        table = raw.setdefault(section, {})
        if path in given or not isinstance(table, dict):
            continue
        field = tables[section].get(key)
        whose = f"the file's, written for {file_method!r}" if key in table else "the default"
        had = table.get(key, None if field is None else field.default)
        if had == value:
            continue
        table[key] = value
        print(f"note: {path} = {had!r} ({whose}) replaced by "
              f"{value!r}, {method}'s known-good value; --set {path}=... to choose another",
              file=sys.stderr)
    return raw


def _check_federated(raw: dict, run: dict) -> FederatedConfig | None:
    """[federated] checked, and the network given one worker node per client of an exchange
    (`network.workers`, if the file sets it, must say the same)."""
    if "federated" not in raw:
        return None
    fed = FederatedConfig(**check_table("federated", raw["federated"], FEDERATED_KEYS))
    if fed.clients_per_round > fed.clients:
        raise ConfigError("federated.clients_per_round", fed.clients_per_round,
                          f"<= federated.clients ({fed.clients})")
    if fed.mode == "fedbuff":
        if fed.concurrency > fed.clients:
            raise ConfigError("federated.concurrency", fed.concurrency,
                              f"<= federated.clients ({fed.clients})")
        if fed.buffer_size > fed.concurrency:
            raise ConfigError("federated.buffer_size", fed.buffer_size,
                              f"<= federated.concurrency ({fed.concurrency}): a buffer fills "
                              "from the clients in flight")
        if run["deadline_s"] is not None:
            raise ConfigError("run.deadline_s", run["deadline_s"], "unset in federated.mode = "
                              "'fedbuff' (the buffer, not a deadline, closes a step)")
    network = raw.setdefault("network", {})
    if isinstance(network, dict):
        given = network.get("workers")
        if given is None:
            network["workers"] = fed.slots
        elif given != fed.slots:
            what = "concurrency" if fed.mode == "fedbuff" else "clients_per_round"
            raise ConfigError("network.workers", given, f"{fed.slots} (federated.{what}: one "
                              "worker node per client of an exchange), or unset")
    return fed


def _check_network(table: dict) -> ValidNetwork:
    """`[network]`, checked once by the link layer's validator: the ValidNetwork every user of
    the run takes as it is (channels.topology, testbed.emulation.edge_network)."""
    try:
        return validate_network(table)
    except ChannelConfigError as e:
        raise ConfigError(e.key, e.value, e.allowed, message=str(e)) from None


# ----------------------------------------------------------------------------- loading
def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a","b","c"], value); the value is read as a TOML literal when it
    parses as one (numbers, booleans, strings in quotes, arrays, inline tables), else a string."""
    if "=" not in item:
        raise ConfigError("--set", item, "of the form key.path=value, e.g. run.iterations=100")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError("--set", item, "of the form key.path=value, e.g. run.iterations=100")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.split("."), value


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    for item in overrides or []:
        path, value = parse_override(item)
        node = raw
        for p in path[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(".".join(path), value, f"under a table ({p} is not one)")
        node[path[-1]] = value
    return raw


def validate(raw: dict, *, source: str = "<config>", default_name: str = "run") -> ExperimentConfig:
    try:
        if not isinstance(raw, dict):
            raise ConfigError("", raw, "a TOML document of tables (an experiment file)")
        for key in raw:
            if key not in SECTIONS:
                raise _unknown("", key, list(SECTIONS))
        run = check_table("run", raw.get("run", {}), RUN_KEYS, RUN_RULES)
        if run["iterations"] is None and run["epochs"] is None:
            run["iterations"] = 200
        run["name"] = run["name"] or default_name
        data = _check_data(raw.get("data", {}))
        model = _check_model(raw.get("model", {}))
        optim = check_table("optim", raw.get("optim", {}), OPTIM_KEYS)
        federated = _check_federated(raw, run)
        network = _check_network(raw.get("network", {}))
        compression = _check_compression(raw.get("compression", {}), network)
        devices = None if run["device_trace"] is None else \
            check_device_trace("run.device_trace", run["device_trace"], network)
    except ConfigError as e:
        if e.source is None:
            raise type(e)(e.key, e.value, e.allowed, source=source, message=str(e)) from None
        raise
    return ExperimentConfig(run=RunConfig(**run), data=data, model=model,
                            optim=OptimConfig(**optim), compression=compression,
                            network=network, source=source, federated=federated,
                            devices=devices)


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    path = Path(path)
    return config_from_raw(load_raw(path), overrides, base=path.parent, source=str(path),
                           default_name=path.stem)


def config_from_raw(raw: dict, overrides: list[str] | None = None, *, base: str | Path = ".",
                    source: str = "<config>", default_name: str = "run") -> ExperimentConfig:
    """An experiment's tables (as a file holds them) with `overrides` (KEY=VALUE) applied, its
    relative files looked up from here, then in `base`, validated."""
    raw = copy.deepcopy(raw)
    comp = raw.get("compression") if isinstance(raw, dict) else None
    file_method = comp.get("method", "none") if isinstance(comp, dict) else None
    try:
        if not isinstance(raw, dict):
            raise ConfigError("", raw, "a TOML document of tables (an experiment file)")
        raw = apply_overrides(raw, overrides or [])
        raw = switch_to_known_good(raw, file_method, {".".join(parse_override(o)[0]) for o in overrides or []})
        raw = resolve_paths(raw, base, RUN_KEYS)
    except ConfigError as e:
        raise ConfigError(e.key, e.value, e.allowed, source=source, message=str(e)) from None
    return validate(raw, source=source, default_name=default_name)


def config_from_stored(stored: dict, *, source: str, base: str | Path = ".") -> ExperimentConfig:
    """The ExperimentConfig of a run's stored config (`ExperimentConfig.as_dict()`, where an
    unset key is None): what `testbed resume` rebuilds the run from. Its files are absolute
    since testbed.paths; a relative one (an older store) is looked up from here, then in `base`
    (the store's folder)."""
    return validate(resolve_paths(set_keys(stored), base, RUN_KEYS), source=source)


def set_keys(tables):
    """Tables as a file would hold them: every key whose value is None (unset) left out."""
    if isinstance(tables, dict):
        return {k: set_keys(v) for k, v in tables.items() if v is not None}
    return [set_keys(v) for v in tables] if isinstance(tables, list) else tables


def load_raw(path: str | Path) -> dict:
    """The file's tables without validation (for tools that read only a part, like probe)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("", message=f"{path}: no such experiment file"
                          + (" (it is a directory)" if path.is_dir() else ""))
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError("", message=f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError("", message=f"{path}: cannot be read ({e.strerror})") from None
