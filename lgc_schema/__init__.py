"""One option schema for every room: a `Field` says a key's type, default, bounds, choices and
help, and `Field.validate` is the one check of a key (type, bounds, choices, and its own `check`), a
`Rule` the one check between keys of a table, both with the one-line error

    KEY = VALUE: must be ALLOWED

used by the experiment file (testbed.configuration), the compression methods' options
(nodes.compression.registry), the link layer's keys (channels.config) and the steering controls
(testbed.records.controls). Standard library only, so channels (no torch) and nodes (no channels) can
both import it and the arrows stay one way.
"""
from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()   # a Field default: the key must be given
FILE_PATH = "a file path"      # a Field's noun for a file: relative to the experiment file too

_NOUNS = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
          list: "an array", dict: "a table"}


class OptionError(ValueError):
    """A bad value (or key): `key` is the dotted path, `allowed` what would have been accepted.

    `problem` is "type", "range", "choice", "unknown" or "required"."""

    def __init__(self, key: str, value: Any = None, allowed: str = "", *, message: str | None = None,
                 problem: str = "range"):
        self.key, self.value, self.allowed, self.problem = key, value, allowed, problem
        super().__init__(message or f"{key} = {value!r}: must be {allowed}")


@dataclass(frozen=True)
class Field:
    """One scalar option. `type` defaults to the default's type; an int is accepted where a
    float is expected (and returned as a float), a whole float where an int is expected."""
    default: Any = REQUIRED
    type: Any = None                 # a type or a tuple of types
    min: float | None = None
    max: float | None = None
    min_open: bool = False           # True: value > min rather than >= min
    max_open: bool = False
    choices: tuple | None = None
    multiple_of: int | None = None
    noun: str | None = None          # how `allowed` names the kind ("a probability", "a file path")
    help: str = ""
    # names this key had before a rename: still accepted for one release, with a one-line note
    old_names: tuple = ()
    # what type, bounds and choices cannot say: the normalised value -> None when it is
    # allowed, else what is allowed in words ("an odd integer >= 1"), for the one-line error
    check: Callable[[Any], str | None] | None = None

    def __post_init__(self):
        if self.type is None:
            d = self.default
            inferred = type(d) if d is not None and d is not REQUIRED else (int, float, str, bool)
            object.__setattr__(self, "type", inferred)

    @property
    def types(self) -> tuple:
        return self.type if isinstance(self.type, tuple) else (self.type,)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def is_file_path(self) -> bool:
        return self.noun == FILE_PATH

    def allowed(self) -> str:
        """What is accepted, in words: "an integer >= 1", "one of 'f32', 'f16'"."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        kind = self.noun or " or ".join(_NOUNS.get(t, t.__name__) for t in self.types)
        lo = None if self.min is None else f"{'(' if self.min_open else '['}{self.min:g}"
        hi = None if self.max is None else f"{self.max:g}{')' if self.max_open else ']'}"
        if lo and hi:
            text = f"{kind} in {lo}, {hi}"
        elif lo:
            text = f"{kind} {'>' if self.min_open else '>='} {self.min:g}"
        elif hi:
            text = f"{kind} {'<' if self.max_open else '<='} {self.max:g}"
        else:
            text = kind
        if self.multiple_of:
            text += f", a multiple of {self.multiple_of}"
        return text

    def validate(self, key: str, value: Any, error: type[OptionError] = OptionError) -> Any:
        """The value, normalised (int -> float where a number is asked), or `error` raised."""
        if value is None and self.default is None:
            return None
        types = self.types
        if isinstance(value, bool) and bool not in types:
            ok = False
        elif isinstance(value, types):
            ok = True
        elif float in types and isinstance(value, int):
            value, ok = float(value), True
        elif int in types and isinstance(value, float) and value.is_integer():
            value, ok = int(value), True
        else:
            ok = False
        if not ok:
            raise error(key, value, self.allowed(), problem="type")
        if self.choices and value not in self.choices:
            raise error(key, value, self.allowed(), problem="choice")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise error(key, value, self.allowed(), problem="range")
            too_low = self.min is not None and (value < self.min or (self.min_open and value == self.min))
            too_high = self.max is not None and (value > self.max or (self.max_open and value == self.max))
            if too_low or too_high or (self.multiple_of and value % self.multiple_of):
                raise error(key, value, self.allowed(), problem="range")
        if self.check is not None:
            wanted = self.check(value)
            if wanted is not None:
                raise error(key, value, wanted, problem="range")
        return value


@dataclass(frozen=True)
class Rule:
    """A rule between the keys of one table (each key's own Field passed): `check(table)` is
    None when the combination is allowed, else what `key` must be, in words. Checked once the
    table's defaults are filled in; the error names `key` with its value, as a Field's does."""
    key: str
    check: Callable[[dict], str | None]
    needs: tuple = ()     # the other keys it reads (a partial table without one skips the rule)


def check_rules(path: str, table: dict, rules: Iterable[Rule],
                error: type[OptionError] = OptionError) -> dict:
    """`table` (already checked key by key), or `error` naming the first rule it breaks."""
    for rule in rules:
        if rule.key not in table or any(k not in table for k in rule.needs):
            continue
        wanted = rule.check(table)
        if wanted is not None:
            full = ".".join(filter(None, [path, rule.key]))
            raise error(full, table[rule.key], wanted, problem="range")
    return table


def unknown_key(path: str, key: str, known: Iterable[str],
                error: type[OptionError] = OptionError) -> OptionError:
    """The error for a key no schema knows, suggesting the closest known one by its full path."""
    known = list(known)
    full = ".".join(filter(None, [path, key]))
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {'.'.join(filter(None, [path, close[0]]))!r}?)" if close else \
        f" (known: {', '.join(sorted(known))})"
    return error(full, key, ", ".join(sorted(known)), message=f"unknown key {full!r}{hint}",
                 problem="unknown")


def renamed(fields: dict[str, Field]) -> dict[str, str]:
    """{old name: current name} of `fields` (each Field's `old_names`)."""
    return {old: key for key, f in fields.items() for old in f.old_names}


def deprecation_note(path: str, old: str, new: str) -> str:
    full = ".".join(filter(None, [path, old]))
    return (f"note: {full} is deprecated: it is now {'.'.join(filter(None, [path, new]))} "
            f"(the old name is accepted for this release only)")


def rename_old(path: str, table: Any, fields: dict[str, Field],
               error: type[OptionError] = OptionError) -> Any:
    """`table` with each key's old name (Field.old_names) replaced by its current one, a one-line
    deprecation note on stderr for each; both names at once is an error."""
    if not isinstance(table, dict):
        return table
    old = renamed(fields)
    if not any(k in old for k in table):
        return table
    out = {}
    for key, value in table.items():
        new = old.get(key)
        if new is None:
            out[key] = value
            continue
        full = ".".join(filter(None, [path, key]))
        if new in table:
            now = ".".join(filter(None, [path, new]))
            raise error(full, value, f"left out ({now} is given too)", problem="unknown",
                        message=f"{full} and {now} are the old and the new name of one option: "
                                f"keep only {now}")
        print(deprecation_note(path, key, new), file=sys.stderr)
        out[new] = value
    return out


def check_table(path: str, table: Any, fields: dict[str, Field], *, partial: bool = False,
                error: type[OptionError] = OptionError, rules: Iterable[Rule] = ()) -> dict:
    """Validate a table of scalar keys against `fields`, then against the table's `rules`.
    Unknown keys are errors; missing keys get their default (or are left out when `partial`);
    a REQUIRED one missing is an error. A key's old name (Field.old_names) is taken for it,
    with a deprecation note."""
    if not isinstance(table, dict):
        raise error(path, table, "a table", problem="type")
    table = rename_old(path, table, fields, error)
    for key in table:
        if key not in fields:
            raise unknown_key(path, key, fields, error)
    out = {}
    for key, field in fields.items():
        full = f"{path}.{key}" if path else key
        if key in table:
            out[key] = field.validate(full, table[key], error)
        elif partial:
            continue
        elif field.required:
            raise error(full, None, field.allowed(), problem="required",
                        message=f"{full} is required: it must be {field.allowed()}")
        else:
            out[key] = field.default
    return check_rules(path, out, rules, error)


def defaults(fields: dict[str, Field]) -> dict:
    return {k: f.default for k, f in fields.items() if not f.required}
