"""Each section of an experiment file checked, and `validate`: a file's tables (overrides
applied, paths resolved: testbed.configuration.loading) into an ExperimentConfig.

Every mistake becomes one `ConfigError` line that names the key path, the bad value and what is
allowed; an unknown key is an error too, with the closest known key suggested. `[compression]`
options are checked against the method's own option table (nodes.compression.registry), the
collective against the topology (testbed.configuration.method_policy), and `[network]` by the
link layer's validator (channels.config), so each room owns its own keys. `[data]` and `[model]`
names are checked against the data sets and models (nodes.data, nodes.models: torch, so this
module is imported only when a file is validated). Nothing here prints: a note (an option set
aside for another method) is appended to the caller's `notes`.
"""
from __future__ import annotations

import difflib
from typing import Any

import lgc_schema
from channels.config import ValidNetwork, validate_network
from channels.errors import ChannelConfigError
from lgc_schema import Field, unknown_key
from nodes import data as datasets
from nodes import models as model_zoo
from nodes.compression.registry import check_options, fields, find, methods
from nodes.plugins import GIVEN_PREFIX, PluginError, is_reference, resolve_callable
from testbed.configuration.method_policy import collective
from testbed.configuration.schema import (
    DATA_KEYS,
    FEDERATED_KEYS,
    MODEL_KEYS,
    OPTIM_KEYS,
    RUN_KEYS,
    RUN_RULES,
    SECTIONS,
    CompressionConfig,
    DataConfig,
    ExperimentConfig,
    FederatedConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
)
from testbed.emulation.device_trace import check_device_trace
from testbed.errors import ConfigError

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
    names = getattr(model_zoo, "MODELS", None)
    if names and model["name"] not in names:
        raise ConfigError("model.name", model["name"],
                          "one of " + ", ".join(map(repr, names)) + ", or a factory "
                          "'package.module:name' or 'path/to/file.py:name'")
    return ModelConfig(**model)


def _check_data(table: dict) -> DataConfig:
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


def _check_compression(table: dict, network: dict, notes: list[str]) -> CompressionConfig:
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
        notes.append(f"note: compression.{key} = {value!r} set aside: it belongs to "
                     f"{', '.join(map(repr, owners))}, not {method!r}")
    check_options(method, options, ConfigError)   # the rules between its options
    chosen = collective(method, options.get("collective"), network)
    if chosen is not None:
        options["collective"] = chosen
    return CompressionConfig(method=method, options=options, set_aside=set_aside)


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


def validate(raw: dict, *, source: str = "<config>", default_name: str = "run",
             notes: list[str] | None = None) -> ExperimentConfig:
    """The ExperimentConfig of a file's tables, every key checked and every default filled in;
    a ConfigError names the first mistake. `notes`: a list the notes are appended to, for the
    caller to print (none given: they are dropped)."""
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
        compression = _check_compression(raw.get("compression", {}), network,
                                         [] if notes is None else notes)
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
