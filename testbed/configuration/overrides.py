"""`--set KEY=VALUE`: one override parsed (its key path and its value, read as a TOML literal)
and a list of them applied to a file's tables, before anything is validated."""
from __future__ import annotations

import tomllib
from typing import Any

from testbed.errors import ConfigError


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
    """`raw` with each `overrides` item (`key.path=value`) set in it, in order (in place; a
    missing table on the path is made)."""
    for item in overrides or []:
        path, value = parse_override(item)
        node = raw
        for p in path[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(".".join(path), value, f"under a table ({p} is not one)")
        node[path[-1]] = value
    return raw

