"""A Flower app loaded as `flwr run` loads it: APP_DIR/pyproject.toml's `[tool.flwr.app]`.

- `[tool.flwr.app.components]` `serverapp` and `clientapp`, each "module:object", imported
  with APP_DIR first on sys.path (as an installed app's package would be);
- `[tool.flwr.app.config]`: the run config, nested tables flattened with dots (Flower's
  `flatten_dict`), overridden by `key=value` items (`--run-config`, Flower's syntax: the value
  is a TOML literal) whose keys must exist in the file (Flower's `fuse_dicts`);
- the federation's simulation options, as flwr 1.42 takes them: the `options.` table of the
  federation `[tool.flwr.federations]` `default` names (or `federation`; flwr 1.42 migrates
  that table into the user's Flower configuration and still reads it there), overridden by
  `--federation-config "num-supernodes=10 client-resources-num-cpus=1"` (flwr run's flag, its
  parser; dashes as on flwr's command line). Honoured: `num-supernodes` (the node count, 2 if
  none), `client-resources-num-cpus` and `client-resources-num-gpus` (each ClientApp's CPUs and
  share of a GPU, fractions allowed, as Flower's Ray backend sizes its actors; flwr's defaults
  2 and 0), `init-args-*` (Ray's `ray.init` arguments, as Flower's Ray backend passes its
  `init_args`: `init-args-address` joins a running cluster, `init-args-num-cpus` sizes a local
  one; any other `ray.init` keyword by its name, dashes for underscores), `backend` ("ray"
  only: the runtime our grid replaces) and `verbose` (Flower's log lines). Refused, one line
  each: a deployment federation's `address` and anything else.

Where the ClientApps run (testbed/flower/launch.py): with an `init-args-*` option or a GPU
share, on Ray actors (testbed/flower/ray_pool.py); otherwise in this process, or with
`run.threads` in forked worker processes (testbed/flower/pool.py).

A mistake in the app is the user's: one line naming the key, the value and what is allowed
(`AppError`, exit 2).
"""
from __future__ import annotations

import importlib
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from flwr.clientapp import ClientApp
from flwr.common.config import parse_config_args
from flwr.serverapp import ServerApp

from testbed.errors import UserError


class AppError(UserError):
    """The app directory, its pyproject.toml or a component is not what `flwr run` takes."""


@dataclass
class FlowerApp:
    app_dir: Path
    server_app: object            # flwr.serverapp.ServerApp
    client_app: object            # flwr.clientapp.ClientApp
    run_config: dict = field(default_factory=dict)
    num_nodes: int = 2
    federation: str = ""
    num_cpus: float = 2.0         # client-resources-num-cpus (flwr's default)
    verbose: bool = False         # the federation's verbose
    num_gpus: float = 0.0         # client-resources-num-gpus (flwr's default)
    ray_init: dict = field(default_factory=dict)   # init-args-*, as ray.init's keywords
    said: dict = field(default_factory=dict)       # option -> where it was given (messages)

    @property
    def uses_ray(self) -> bool:
        """ClientApps on Ray actors: a Ray option (init-args-*) or a GPU share was given."""
        return bool(self.ray_init) or self.num_gpus > 0


def _toml(app_dir: Path) -> dict:
    path = app_dir / "pyproject.toml"
    if not app_dir.is_dir():
        raise AppError(f"{app_dir}: no such app directory (a folder with a pyproject.toml)")
    if not path.is_file():
        raise AppError(f"{path}: no such file (a Flower app has a pyproject.toml)")
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise AppError(f"{path}: not valid TOML: {e}") from None


def _section(data: dict, dotted: str, where: Path) -> dict:
    node = data
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            raise AppError(f"{where}: [{dotted}] is missing (flwr run needs it)")
    if not isinstance(node, dict):
        raise AppError(f"{where}: {dotted} = {node!r}: must be a table")
    return node


def flatten(table: dict, prefix: str = "") -> dict:
    """Nested tables as dotted keys (Flower's flatten_dict)."""
    out = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        elif isinstance(v, (bool, int, float, str)):
            out[key] = v
        else:
            raise AppError(f"tool.flwr.app.config.{key} = {v!r}: must be a bool, int, float or "
                           "string (or a table of those)")
    return out


def parse_run_config(items: list[str], defaults: dict) -> dict:
    """`key=value` overrides (the value a TOML literal, else a bare string) of keys the app's
    config declares."""
    out = dict(defaults)
    for item in items:
        if "=" not in item:
            raise AppError(f"--run-config {item!r}: must be key=value, e.g. num-server-rounds=3")
        key, raw = (s.strip() for s in item.split("=", 1))
        if key not in defaults:
            known = ", ".join(sorted(defaults)) or "none"
            raise AppError(f"--run-config {key} = {raw!r}: must be a key of "
                           f"[tool.flwr.app.config] ({known})")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        out[key] = value
    return out


def _component(app_dir: Path, key: str, ref, kind: type) -> object:
    where = f"tool.flwr.app.components.{key}"
    if not isinstance(ref, str) or ref.count(":") != 1 or not all(ref.split(":")):
        raise AppError(f"{where} = {ref!r}: must be \"module:object\"")
    module, attr = ref.split(":")
    path = str(app_dir.resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        obj = getattr(importlib.import_module(module), attr)
    except AttributeError:
        raise AppError(f"{where} = {ref!r}: module {module} has no {attr}") from None
    except Exception as e:  # an app module that does not import is the user's to fix
        raise AppError(f"{where} = {ref!r}: does not import ({type(e).__name__}: {e})") from None
    if not isinstance(obj, kind):
        raise AppError(f"{where} = {ref!r}: is a {type(obj).__name__}, must be a "
                       f"flwr {kind.__name__}")
    return obj


def load_client_app(app_dir: str | Path) -> object:
    """The app's ClientApp alone (a worker process's: its run config comes in each context)."""
    app_dir = Path(app_dir)
    data = _toml(app_dir)
    components = _section(data, "tool.flwr.app.components", app_dir / "pyproject.toml")
    return _component(app_dir, "clientapp", components.get("clientapp"), ClientApp)


def load_app(app_dir: str | Path, run_config: list[str] | None = None,
             federation: str | None = None, federation_config: list[str] | None = None
             ) -> FlowerApp:
    """The app at `app_dir` with its run config (and `run_config` overrides) and its
    federation's options (and `federation_config` overrides)."""
    app_dir = Path(app_dir)
    data = _toml(app_dir)
    where = app_dir / "pyproject.toml"
    app = _section(data, "tool.flwr.app", where)
    components = _section(data, "tool.flwr.app.components", where)
    for key in ("serverapp", "clientapp"):
        if key not in components:
            raise AppError(f"{where}: tool.flwr.app.components.{key} is missing "
                           "(\"module:object\")")
    config = parse_run_config(run_config or [], flatten(app.get("config", {})))
    name, options = federation_options(data, where, federation, federation_config or [])
    server = _component(app_dir, "serverapp", components["serverapp"], ServerApp)
    client = _component(app_dir, "clientapp", components["clientapp"], ClientApp)
    said = options.pop("said")
    ray_init = {k.removeprefix("init-args-").replace("-", "_"): v for k, v in options.items()
                if k.startswith("init-args-")}
    return FlowerApp(app_dir, server, client, config, options["num-supernodes"], name,
                     options["client-resources-num-cpus"], options["verbose"],
                     options["client-resources-num-gpus"], ray_init, said)


# flwr 1.42's simulation options (its SimulationConfig) as `--federation-config` spells them,
# and as a pyproject federation's `options.` table spells them; `init-args-NAME` (table
# `backend.init-args.NAME`) is any keyword of ray.init, these four being flwr's own
FEDERATION_KEYS = {
    "num-supernodes": "num-supernodes",
    "client-resources-num-cpus": "backend.client-resources.num-cpus",
    "client-resources-num-gpus": "backend.client-resources.num-gpus",
    "backend": "backend.name",
    "verbose": "verbose",
    "init-args-num-cpus": "backend.init-args.num-cpus",
    "init-args-num-gpus": "backend.init-args.num-gpus",
    "init-args-logging-level": "backend.init-args.logging-level",
    "init-args-log-to-driver": "backend.init-args.log-to-driver",
}
INIT_ARGS, INIT_TABLE = "init-args-", "backend.init-args."
DEFAULTS = {"num-supernodes": 2, "client-resources-num-cpus": 2.0,
            "client-resources-num-gpus": 0.0, "backend": "ray", "verbose": False}
LOGGING_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def federation_options(data: dict, where: Path, federation: str | None,
                       overrides: list[str]) -> tuple[str, dict]:
    """(the federation's name, its options checked) from the pyproject and the
    `--federation-config` items (module doc)."""
    feds = data.get("tool", {}).get("flwr", {}).get("federations", {})
    name = federation or feds.get("default", "")
    fed = feds.get(name) if name else None
    if federation and not isinstance(fed, dict):
        known = ", ".join(k for k, v in feds.items() if isinstance(v, dict)) or "none"
        raise AppError(f"--federation {federation!r}: must be a federation of {where} ({known})")
    by_table = {v: k for k, v in FEDERATION_KEYS.items()}
    given = {}
    for key, value in flatten(fed or {}).items():
        table_key = key.removeprefix("options.")
        option = by_table.get(table_key)
        if option is None and table_key.startswith(INIT_TABLE) and table_key != INIT_TABLE:
            option = INIT_ARGS + table_key.removeprefix(INIT_TABLE)
        if key == table_key or option is None:
            raise AppError(f"tool.flwr.federations.{name}.{key} = {value!r}: not a simulation "
                           f"option; allowed: options.{', options.'.join(FEDERATION_KEYS.values())}"
                           f" (and any ray.init keyword as options.{INIT_TABLE}NAME)")
        given[option] = (value, f"tool.flwr.federations.{name}.{key}")
    for key, value in _parse_federation_config(overrides).items():
        if key not in FEDERATION_KEYS and not (key.startswith(INIT_ARGS) and key != INIT_ARGS):
            raise AppError(f"--federation-config {key} = {value!r}: not a simulation option; "
                           f"allowed: {', '.join(FEDERATION_KEYS)} (and any ray.init keyword "
                           f"as {INIT_ARGS}NAME)")
        given[key] = (value, f"--federation-config {key}")
    options = dict(DEFAULTS)
    said = {k: f"{k} (flwr's default)" for k in DEFAULTS}
    for key, (value, where) in given.items():
        options[key] = _federation_value(key, value, where)
        said[key] = where
    options["said"] = said
    return name, options


def _parse_federation_config(items: list[str]) -> dict:
    try:
        return parse_config_args(items)
    except Exception as e:  # noqa: BLE001 (flwr's parser raises click's or ValueError)
        raise AppError(f"--federation-config {' '.join(items)!r}: not key=value items "
                       f"(e.g. \"num-supernodes=10 client-resources-num-cpus=1\"): {e}") from None


def _federation_value(key: str, value, said: str):
    """`value` of option `key` if honoured, else one line saying why not (AppError)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "num-supernodes" and not (isinstance(value, int) and not isinstance(value, bool)
                                        and value >= 1):
        raise AppError(f"{said} = {value!r}: must be an integer >= 1")
    if key == "client-resources-num-cpus" and not (number and value > 0):
        raise AppError(f"{said} = {value!r}: must be a number > 0")
    if key == "client-resources-num-gpus" and not (number and value >= 0):
        raise AppError(f"{said} = {value!r}: must be a number >= 0 (each ClientApp's share of "
                       "a GPU, e.g. 0.5: two ClientApps per GPU)")
    if key == "backend" and value != "ray":
        raise AppError(f"{said} = {value!r}: must be \"ray\" (the simulation runtime the "
                       "emulated grid replaces)")
    if key == "verbose" and not isinstance(value, bool):
        raise AppError(f"{said} = {value!r}: must be true or false")
    if key in ("init-args-num-cpus", "init-args-num-gpus") and not (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise AppError(f"{said} = {value!r}: must be an integer >= 0 (the {key[-4:-1].upper()}s "
                       "of the local Ray it starts)")
    if key == "init-args-logging-level" and not (isinstance(value, str)
                                                 and value.upper() in LOGGING_LEVELS):
        raise AppError(f"{said} = {value!r}: must be one of {', '.join(LOGGING_LEVELS)}")
    if key == "init-args-log-to-driver" and not isinstance(value, bool):
        raise AppError(f"{said} = {value!r}: must be true or false")
    if key == "init-args-address" and not (isinstance(value, str) and value.strip()):
        raise AppError(f"{said} = {value!r}: must be a Ray cluster's address, e.g. "
                       "\"127.0.0.1:6379\" (what `ray start --head` printed), or \"auto\"")
    return float(value) if key.startswith("client-resources-") else value
