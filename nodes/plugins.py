"""Objects named by a string: `"package.module:name"` or `"path/to/file.py:name"`.

What `[model] name` and `[data] dataset` accept besides the built-in names (nodes/models.py,
nodes/data.py). A module path is imported as Python imports it, with the working directory on
the search path as `python -m` has it (so a package in the folder a run starts from is found
in process as under torchrun, whose ranks start with `python -m`); a file path is imported from
that file (the experiment file's folder resolves a relative one, testbed/paths.py), once per
process, under a module name of its own.

Objects handed to the Python API (testbed/api.py) are kept here under `"<given>:Type"` for the
run of this process that uses them.

Every failure is one `PluginError` line naming the key, the value and what was expected.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from lgc_schema import OptionError

GIVEN_PREFIX = "<given>:"
_GIVEN: dict[str, Any] = {}
EXPECTED = "'package.module:name' or 'path/to/file.py:name'"


class PluginError(OptionError):
    """A `module:name` string that does not name a usable object (exit 2 at the CLI)."""

    def __init__(self, key: str, value: Any, problem: str, expected: str = EXPECTED):
        super().__init__(key, value, expected,
                         message=f"{key} = {value!r}: {problem}; expected {expected}")


def is_reference(name: Any) -> bool:
    """True for `module:name`, `file.py:name` and API-given objects; False for built-in names."""
    return isinstance(name, str) and ":" in name


def split_reference(value: str) -> tuple[str, str]:
    """(`module or file`, `attribute`) of a reference; a Windows drive colon is not a split."""
    where, _, attr = value.rpartition(":")
    return where, attr


def give(obj: Any) -> str:
    """Keep an object for this process's runs; the reference a config names it by."""
    name = f"{GIVEN_PREFIX}{type(obj).__qualname__}"
    _GIVEN[name] = obj
    return name


def resolve(key: str, value: str) -> Any:
    """The object `value` names (its module imported); PluginError if there is none."""
    if not is_reference(value):
        raise PluginError(key, value, "is not a reference")
    if value.startswith(GIVEN_PREFIX):
        if value not in _GIVEN:
            raise PluginError(key, value, "names an object handed to the Python API by another "
                              "process; hand it again (testbed.api.run(..., model=/dataset=))")
        return _GIVEN[value]
    where, attr = split_reference(value)
    if not where or not attr or not attr.replace(".", "").replace("_", "").isalnum():
        raise PluginError(key, value, "is not of the form module:name")
    module = _import_file(key, value, where) if where.endswith(".py") else \
        _import_module(key, value, where)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginError(key, value, f"module {module.__name__!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def resolve_callable(key: str, value: str) -> Any:
    obj = resolve(key, value)
    if not callable(obj):
        raise PluginError(key, value, f"names a {type(obj).__name__}, which is not callable")
    return obj


def _import_module(key: str, value: str, name: str):
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)   # as `python -m` has it: what torchrun's ranks see
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise PluginError(key, value, f"module {name!r} cannot be imported "
                          f"({type(e).__name__}: {e})") from None
    except Exception as e:   # the module's own code failed on import
        raise PluginError(key, value, f"importing module {name!r} raised "
                          f"{type(e).__name__}: {' '.join(str(e).split())}") from None


def _import_file(key: str, value: str, where: str):
    path = Path(where).resolve()
    if not path.is_file():
        raise PluginError(key, value, f"file {where} does not exist (a relative path is looked up "
                          "from the working directory, then beside the experiment file)")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"lgc_user_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # before running it: dataclasses and pickling look it up
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise PluginError(key, value, f"importing {where} raised "
                          f"{type(e).__name__}: {' '.join(str(e).split())}") from None
    return module
