"""A Flower app loaded as `flwr run` loads it: APP_DIR/pyproject.toml's `[tool.flwr.app]`.

- `[tool.flwr.app.components]` `serverapp` and `clientapp`, each "module:object", imported
  with APP_DIR first on sys.path (as an installed app's package would be);
- `[tool.flwr.app.config]`: the run config, nested tables flattened with dots (Flower's
  `flatten_dict`), overridden by `key=value` items (`--run-config`, Flower's syntax: the value
  is a TOML literal) whose keys must exist in the file (Flower's `fuse_dicts`);
- the node count: `options.num-supernodes` of the federation `[tool.flwr.federations]`
  `default` names (or of `federation` when given).

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


def load_app(app_dir: str | Path, run_config: list[str] | None = None,
             federation: str | None = None) -> FlowerApp:
    """The app at `app_dir` with its run config (and `run_config` overrides) and node count."""
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
    feds = data.get("tool", {}).get("flwr", {}).get("federations", {})
    name = federation or feds.get("default", "")
    fed = feds.get(name) if name else None
    if federation and not isinstance(fed, dict):
        known = ", ".join(k for k, v in feds.items() if isinstance(v, dict)) or "none"
        raise AppError(f"--federation {federation!r}: must be a federation of {where} ({known})")
    nodes = (fed or {}).get("options", {}).get("num-supernodes", 2)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise AppError(f"tool.flwr.federations.{name}.options.num-supernodes = {nodes!r}: must be "
                       "an integer >= 1")
    server = _component(app_dir, "serverapp", components["serverapp"], ServerApp)
    client = _component(app_dir, "clientapp", components["clientapp"], ClientApp)
    return FlowerApp(app_dir, server, client, config, nodes, name)
