"""The one rule for files an experiment names: a relative path not found from the working
directory is looked up beside the experiment file (and, for a stored run, beside its store), and a
path found either way is made absolute, so a stored run's configuration names the same files
from any directory (`testbed resume`).

Which values are files is the schema's to say (`Field(noun=lgc_schema.FILE_PATH)`): `[run]
device_trace` here and every file of `[network]` (channels.config.map_file_paths). Used by
`testbed run` and `sweep` (testbed.configuration.loading.load_config), `probe` and `resume`.
"""
from __future__ import annotations

from pathlib import Path

from channels.config import map_file_paths
from lgc_schema import Field


def beside(value: str, base: Path) -> str:
    """`value` absolute where it names a file from here or from `base`; else as given (the
    loader then says the file is missing, naming the key)."""
    p = Path(value)
    if not value or p.is_absolute():
        return value
    if p.exists():
        return str(p.resolve())
    if (base / p).exists():
        return str((base / p).resolve())
    return value


def resolve_paths(raw: dict, base: str | Path, run_keys: dict[str, Field]) -> dict:
    """The experiment's tables (raw, or as stored) with every file-path value resolved;
    `run_keys`: testbed.configuration.schema.RUN_KEYS (passed in: the loader imports this module)."""
    base = Path(base)
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    run = out.get("run")
    if isinstance(run, dict):
        out["run"] = {k: beside(v, base) if k in run_keys and run_keys[k].is_file_path
                      and isinstance(v, str) else v for k, v in run.items()}
    if "network" in out:
        out["network"] = map_file_paths(out["network"], lambda v: beside(v, base))
    for section, key in (("model", "name"), ("data", "dataset")):
        table = out.get(section)
        if isinstance(table, dict) and isinstance(table.get(key), str):
            out[section] = {**table, key: beside_reference(table[key], base)}
    return out


def beside_reference(value: str, base: Path) -> str:
    """`path/to/file.py:name` with its file resolved as `beside` does; other values as given."""
    where, sep, attr = value.rpartition(":")
    if not sep or not where.endswith(".py"):
        return value
    return f"{beside(where, base)}:{attr}"
