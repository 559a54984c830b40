"""Experiment files loaded: a TOML file (or tables, or a stored run's config) read, its `--set`
overrides applied, the method switch made (a method's known-good values), its relative files
resolved (testbed.paths), then validated (testbed.configuration.sections) into an
ExperimentConfig.

The loader is the caller that prints: the notes that the method switch and the section checks
return (one line each, "note: ...") go to stderr here, when a load ends, whether it succeeds or
fails. This module is imported by the CLI's parser (probe, sweep, resume), which must start
without torch: the checks, which load the data sets', models' and methods' Fields, are imported
only when a file is validated (`_checks`).
"""
from __future__ import annotations

import copy
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed.configuration.overrides import apply_overrides, parse_override
from testbed.configuration.schema import RUN_KEYS, ExperimentConfig
from testbed.errors import ConfigError
from testbed.paths import resolve_paths


@contextmanager
def printed_notes() -> Iterator[list[str]]:
    """A list for the notes of one step of a load, printed to stderr (one line each) when the
    step ends, as it does when it raises."""
    notes: list[str] = []
    try:
        yield notes
    finally:
        for line in notes:
            print(line, file=sys.stderr)


def _checks():
    """(sections, method_policy): the section checks and the method policy."""
    # deferred: torch (nodes.data, nodes.models, the method registry); the CLI's parser imports this module
    from testbed.configuration import method_policy, sections
    return sections, method_policy


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
        sections, method_policy = _checks()
        with printed_notes() as notes:
            raw = method_policy.switch_to_known_good(
                raw, file_method, {".".join(parse_override(o)[0]) for o in overrides or []}, notes)
        raw = resolve_paths(raw, base, RUN_KEYS)
    except ConfigError as e:
        raise ConfigError(e.key, e.value, e.allowed, source=source, message=str(e)) from None
    with printed_notes() as notes:
        return sections.validate(raw, source=source, default_name=default_name, notes=notes)


def config_from_stored(stored: dict, *, source: str, base: str | Path = ".") -> ExperimentConfig:
    """The ExperimentConfig of a run's stored config (`ExperimentConfig.as_dict()`, where an
    unset key is None): what `testbed resume` rebuilds the run from. Its files are absolute
    since testbed.paths; a relative one (an older store) is looked up from here, then in `base`
    (the store's folder)."""
    sections, _ = _checks()
    with printed_notes() as notes:
        return sections.validate(resolve_paths(set_keys(stored), base, RUN_KEYS), source=source,
                                 notes=notes)


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
