"""Experiment files (TOML) validated into typed objects.

Every mistake becomes one `ConfigError` line that names the key path, the bad value and what is
allowed; an unknown key is an error too, with the closest known key suggested. `[compression]`
options are checked against the method's own option table (nodes.compression.registry) and
`[network]` by the link layer's validator (channels.config), so each room owns its own keys.
"""
from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


class ConfigError(ValueError):
    """One line: `FILE: key.path = value: what is allowed`."""

    def __init__(self, key: str, value: Any = None, allowed: str = "", *, source: str | None = None,
                 message: str | None = None):
        self.key, self.value, self.allowed, self.source = key, value, allowed, source
        text = message or f"{key} = {value!r}: {allowed}"
        super().__init__(f"{source}: {text}" if source else text)


_MISSING = object()


@dataclass(frozen=True)
class Key:
    """One scalar key: its type, default (`_MISSING` = required) and what values are allowed."""
    type: type | tuple
    default: Any = _MISSING
    min: float | None = None
    max: float | None = None
    min_open: bool = False      # True: value must be > min rather than >= min
    choices: tuple | None = None

    def describe(self) -> str:
        if self.choices:
            return "must be one of " + ", ".join(repr(c) for c in self.choices)
        names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        t = self.type if isinstance(self.type, tuple) else (self.type,)
        kind = " or ".join(names.get(x, x.__name__) for x in t)
        if self.min is not None and self.max is not None:
            return f"must be {kind} in {'(' if self.min_open else '['}{self.min}, {self.max}]"
        if self.min is not None:
            return f"must be {kind} {'>' if self.min_open else '>='} {self.min}"
        return f"must be {kind}"

    def check(self, path: str, value: Any) -> Any:
        t = self.type if isinstance(self.type, tuple) else (self.type,)
        ok = isinstance(value, t) and not (isinstance(value, bool) and bool not in t)
        if not ok and float in t and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise ConfigError(path, value, self.describe())
        if self.choices and value not in self.choices:
            raise ConfigError(path, value, self.describe())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.min is not None and (value < self.min or (self.min_open and value == self.min)):
                raise ConfigError(path, value, self.describe())
            if self.max is not None and value > self.max:
                raise ConfigError(path, value, self.describe())
        return value


def _unknown(path: str, key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {'.'.join(filter(None, [path, close[0]]))!r}?)" if close else \
        f" (known: {', '.join(sorted(known))})"
    full = ".".join(filter(None, [path, key]))
    return ConfigError(full, message=f"unknown key {full!r}{hint}")


def check_table(path: str, table: Any, schema: dict[str, Key]) -> dict:
    """Validate one table against a schema of scalar keys; fill in defaults."""
    if not isinstance(table, dict):
        raise ConfigError(path, table, "must be a table")
    for key in table:
        if key not in schema:
            raise _unknown(path, key, list(schema))
    out = {}
    for key, spec in schema.items():
        full = f"{path}.{key}"
        if key in table:
            out[key] = spec.check(full, table[key])
        elif spec.default is _MISSING:
            raise ConfigError(full, message=f"{full} is required: it {spec.describe()}")
        else:
            out[key] = spec.default
    return out


# ----------------------------------------------------------------------------- schemas
COMPUTE_TIME = ("flops", "measured")

RUN_KEYS = {
    "name": Key(str, None),
    "seed": Key(int, 0, min=0),
    "iterations": Key(int, None, min=1),
    "epochs": Key(float, None, min=0, min_open=True),
    "eval_every": Key(int, 20, min=1),
    "device": Key(str, "auto", choices=("auto", "cpu", "cuda")),
    # Virtual compute time: FLOPs of the real step at the node's speed (deterministic for a
    # seed), or the measured wall time of the real step (what this machine took).
    "compute_time": Key(str, "flops", choices=COMPUTE_TIME),
    "device_gflops": Key(float, 20.0, min=0, min_open=True),
    "workers_mode": Key(str, "auto", choices=("auto", "sequential", "vmap")),
    "target_accuracy": Key(float, None, min=0, max=1, min_open=True),
    "flush_every": Key(int, 10, min=1),
    "threads": Key(int, 0, min=0),
    "stop_at_accuracy": Key(bool, False),
}
DATA_KEYS = {
    "dataset": Key(str, "digits"),
    "batch_size": Key(int, 32, min=1),
    "partition": Key(str, "iid", choices=("iid", "dirichlet", "shards")),
    "alpha": Key(float, 0.5, min=0, min_open=True),
    "shards_per_worker": Key(int, 2, min=1),
    "root": Key(str, None),
    "eval_batch_size": Key(int, 1024, min=1),
}
MODEL_KEYS = {"name": Key(str, "cnn")}
OPTIM_KEYS = {
    "lr": Key(float, 0.05, min=0, min_open=True),
    "momentum": Key(float, 0.9, min=0, max=1),
    "weight_decay": Key(float, 0.0, min=0),
    "nesterov": Key(bool, False),
    "lr_schedule": Key(str, "constant", choices=("constant", "cosine", "step")),
    "warmup_iterations": Key(int, 0, min=0),
}
SECTIONS = ("run", "data", "model", "optim", "compression", "network")


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
    threads: int
    stop_at_accuracy: bool


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


@dataclass
class ExperimentConfig:
    run: RunConfig
    data: DataConfig
    model: ModelConfig
    optim: OptimConfig
    compression: CompressionConfig
    network: dict          # validated [network] table, defaults filled (channels' format)
    source: str = "<config>"

    def as_dict(self) -> dict:
        """The validated file, defaults filled in: what the store records."""
        return {
            "run": vars(self.run).copy(),
            "data": {**{k: v for k, v in vars(self.data).items() if k != "options"},
                     **self.data.options},
            "model": vars(self.model).copy(),
            "optim": vars(self.optim).copy(),
            "compression": {"method": self.compression.method, **self.compression.options},
            "network": self.network,
        }


# ----------------------------------------------------------------------------- sections
def _check_data(table: dict) -> DataConfig:
    from nodes import data as datasets

    table = dict(table)
    ds_name = table.get("dataset", DATA_KEYS["dataset"].default)
    known = getattr(datasets, "DATASETS", {})
    if known and ds_name not in known:
        raise ConfigError("data.dataset", ds_name, "must be one of " + ", ".join(map(repr, known)))
    ds_options = known.get(ds_name, {}) if known else {}
    own = {k: table.pop(k) for k in list(table) if k in ds_options and k not in DATA_KEYS}
    for k, v in own.items():
        _check_option(f"data.{k}", v, ds_options[k])
    extra = [k for k in table if k not in DATA_KEYS]
    if extra:
        raise _unknown("data", extra[0], list(DATA_KEYS) + list(ds_options))
    base = check_table("data", table, DATA_KEYS)
    return DataConfig(**base, options=own)


def _check_option(path: str, value: Any, opt: Any) -> Any:
    """Check one method/dataset option against its `Option` (type, range, choices)."""
    default = getattr(opt, "default", None)
    typ = getattr(opt, "type", type(default) if default is not None else object)
    key = Key(typ if typ is not object else (int, float, str, bool, list),
              min=getattr(opt, "min", None), max=getattr(opt, "max", None),
              choices=getattr(opt, "choices", None))
    return key.check(path, value)


def _check_compression(table: dict) -> CompressionConfig:
    from nodes.compression.registry import methods

    if not isinstance(table, dict):
        raise ConfigError("compression", table, "must be a table")
    known = methods()
    method = table.get("method", "none")
    if method not in known:
        close = difflib.get_close_matches(str(method), list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError("compression.method", method,
                          "must be one of " + ", ".join(map(repr, known)) + hint)
    spec = known[method]
    options = {}
    for key, value in table.items():
        if key == "method":
            continue
        if key not in spec:
            raise _unknown("compression", key, ["method", *spec])
        options[key] = _check_option(f"compression.{key}", value, spec[key])
    return CompressionConfig(method=method, options=options)


def _check_network(table: dict, seed: int) -> dict:
    try:
        from channels.config import validate_network
    except ImportError:  # the link layer's validator is not there: take the table as given
        return dict(table)
    from channels.errors import ChannelConfigError

    try:
        return validate_network(table)
    except ChannelConfigError as e:
        key = getattr(e, "key", "network")
        raise ConfigError(key, getattr(e, "value", None), getattr(e, "allowed", ""),
                          message=str(e)) from None


# ----------------------------------------------------------------------------- loading
def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a","b","c"], value); the value is read as a TOML literal when it
    parses as one (numbers, booleans, strings in quotes, arrays, inline tables), else a string."""
    if "=" not in item:
        raise ConfigError("--set", item, "must look like key.path=value, e.g. run.iterations=100")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError("--set", item, "must look like key.path=value, e.g. run.iterations=100")
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
                raise ConfigError(".".join(path), value, f"{p} is not a table")
        node[path[-1]] = value
    return raw


def validate(raw: dict, *, source: str = "<config>", default_name: str = "run") -> ExperimentConfig:
    try:
        if not isinstance(raw, dict):
            raise ConfigError("", raw, "an experiment file is a TOML document of tables")
        for key in raw:
            if key not in SECTIONS:
                raise _unknown("", key, list(SECTIONS))
        run = check_table("run", raw.get("run", {}), RUN_KEYS)
        if run["iterations"] is not None and run["epochs"] is not None:
            raise ConfigError("run.epochs", run["epochs"],
                              "set either run.iterations or run.epochs, not both")
        if run["iterations"] is None and run["epochs"] is None:
            run["iterations"] = 200
        run["name"] = run["name"] or default_name
        data = _check_data(raw.get("data", {}))
        model = check_table("model", raw.get("model", {}), MODEL_KEYS)
        from nodes import models as model_zoo

        names = getattr(model_zoo, "MODELS", None)
        if names and model["name"] not in names:
            raise ConfigError("model.name", model["name"],
                              "must be one of " + ", ".join(map(repr, names)))
        optim = check_table("optim", raw.get("optim", {}), OPTIM_KEYS)
        compression = _check_compression(raw.get("compression", {}))
        network = _check_network(raw.get("network", {}), run["seed"])
    except ConfigError as e:
        if e.source is None:
            raise ConfigError(e.key, e.value, e.allowed, source=source,
                              message=str(e)) from None
        raise
    return ExperimentConfig(run=RunConfig(**run), data=data, model=ModelConfig(**model),
                            optim=OptimConfig(**optim), compression=compression,
                            network=network, source=source)


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    path = Path(path)
    if not path.exists():
        raise ConfigError("", message=f"{path}: no such experiment file", source=None)
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError("", message=f"{path}: not valid TOML: {e}") from None
    try:
        raw = apply_overrides(raw, overrides or [])
    except ConfigError as e:
        raise ConfigError(e.key, e.value, e.allowed, source=str(path), message=str(e)) from None
    return validate(raw, source=str(path), default_name=path.stem)


def load_raw(path: str | Path) -> dict:
    """The file's tables without validation (for tools that read only a part, like probe)."""
    return tomllib.loads(Path(path).read_text())
