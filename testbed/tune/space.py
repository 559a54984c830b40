"""What `testbed tune` searches and for what: its --param, --objective and --constraint parsed,
then checked against the experiment file before anything runs (every mistake one line, exit 2).

A parameter is a key of the file over a range (`KEY=LOW:HIGH`, `:log` for a log scale, `:int`
for whole numbers) or a list of choices (`KEY=a,b,c`, each read as `--set` reads a value). An
objective is a metric of testbed/records/objectives.py or a searched parameter's own value
(the least bandwidth that still meets the constraints); a constraint bounds either.
"""
from __future__ import annotations

import contextlib
import difflib
import hashlib
import io
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from testbed.configuration.loading import load_config
from testbed.errors import ConfigError, UserError
from testbed.records.objectives import METRICS, TO_TARGET

PARAM_FORM = "KEY=LOW:HIGH[:log|:int] or KEY=a,b,c"
RANGE_FLAGS = ("log", "int")


@dataclass(frozen=True)
class Param:
    """One searched key: a range (`kind` "float" or "int", `log` scale or not) or choices."""
    key: str
    kind: str                     # "float" | "int" | "categorical"
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple = ()
    text: str = ""                # as given on the command line

    def as_dict(self) -> dict:
        return {"key": self.key, "kind": self.kind, "low": self.low, "high": self.high,
                "log": self.log, "choices": list(self.choices)}

    @property
    def numeric(self) -> bool:
        return self.kind != "categorical" or all(
            isinstance(c, (int, float)) and not isinstance(c, bool) for c in self.choices)

    def setting(self, value) -> str:
        """`KEY=VALUE` as `--set` takes it."""
        return f"{self.key}={literal(value)}"

    def values_to_check(self) -> list:
        """Values a run must accept: the bounds, and for a float range one between them that
        is no whole number (an integer key accepts 8.0 but not 38.7)."""
        if self.kind == "categorical":
            return list(self.choices)
        inside = [self.low + (self.high - self.low) * 0.3719] if self.kind == "float" else []
        return [self.low, self.high, *inside]


def literal(value) -> str:
    """A value as `--set` reads it back: numbers and booleans as TOML, a string as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return str(value)


def read_value(text: str):
    """A choice as `--set` reads a value: a TOML literal where it is one, else the string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _number(text: str, item: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--param {item}: {text!r} is not a number; allowed: {PARAM_FORM}") from None
    if not math.isfinite(value):
        raise UserError(f"--param {item}: {text!r} is not a finite number; allowed: {PARAM_FORM}")
    return value


def parse_param(item: str) -> Param:
    key, eq, spec = item.partition("=")
    key, spec = key.strip(), spec.strip()
    if not eq or not key or not spec or any(not p for p in key.split(".")):
        raise UserError(f"--param {item}: must be of the form {PARAM_FORM}")
    if ":" in spec:
        parts = [p.strip() for p in spec.split(":")]
        flags = parts[2:]
        if len(parts) < 2 or any(f not in RANGE_FLAGS for f in flags) or len(set(flags)) < len(flags):
            raise UserError(f"--param {item}: must be of the form {PARAM_FORM} (flags: log, int)")
        low, high = _number(parts[0], item), _number(parts[1], item)
        if low >= high:
            raise UserError(f"--param {item}: LOW {low:g} >= HIGH {high:g}; allowed: LOW < HIGH")
        log = "log" in flags
        if log and low <= 0:
            raise UserError(f"--param {item}: a log range must lie above 0, and LOW = {low:g} "
                            "reaches 0 or below; allowed: 0 < LOW < HIGH, or a linear range "
                            "(no :log)")
        if "int" in flags:
            if low != int(low) or high != int(high):
                raise UserError(f"--param {item}: an :int range needs whole bounds; allowed: "
                                "e.g. 10:200:int")
            return Param(key, "int", int(low), int(high), log, text=item)
        return Param(key, "float", low, high, log, text=item)
    choices = [c.strip() for c in spec.split(",") if c.strip()]
    if len(choices) < 2:
        raise UserError(f"--param {item}: one value is no search; allowed: a range LOW:HIGH or two "
                        "choices or more (a,b,c); a fixed value is --set KEY=VALUE")
    values = tuple(read_value(c) for c in choices)
    if len(set(map(repr, values))) < len(values):
        raise UserError(f"--param {item}: a choice is given twice; allowed: distinct choices")
    return Param(key, "categorical", choices=values, text=item)


def objective_names(params: list[Param]) -> list[str]:
    return [*METRICS, *(p.key for p in params if p.numeric)]


def _unknown(flag: str, name: str, params: list[Param]) -> UserError:
    names = objective_names(params)
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    keys = [p.key for p in params if p.numeric]
    return UserError(f"{flag} {name}: unknown objective{hint}; allowed: "
                     f"{', '.join(METRICS)}" + (f", or a searched key: {', '.join(keys)}" if keys else ""))


def parse_objective(item: str, params: list[Param]) -> tuple[str, str]:
    name, _, direction = item.partition(":")
    name, direction = name.strip(), direction.strip()
    if name not in objective_names(params):
        raise _unknown("--objective", name, params)
    if direction and direction not in ("min", "max"):
        raise UserError(f"--objective {item}: direction {direction!r}; allowed: min or max")
    if not direction:
        direction = METRICS[name].direction if name in METRICS else "min"
    return name, direction


CONSTRAINT = re.compile(r"^\s*(?P<name>[^<>=\s]+)\s*(?P<op><=|>=)\s*(?P<bound>\S+)\s*$")


def parse_constraint(item: str, params: list[Param]) -> tuple[str, str, float]:
    m = CONSTRAINT.match(item)
    if not m:
        raise UserError(f"--constraint {item}: must be NAME<=X or NAME>=X, e.g. "
                        "virtual_s_to_target<=30")
    if m["name"] not in objective_names(params):
        raise _unknown("--constraint", m["name"], params)
    try:
        bound = float(m["bound"])
    except ValueError:
        raise UserError(f"--constraint {item}: {m['bound']!r} is not a number") from None
    return m["name"], m["op"], bound


def short_labels(keys: list[str]) -> dict[str, str]:
    """Each key's label in run names and sweep_params: its last part, or the whole key where
    two keys share that part."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last)}


@dataclass
class TuneSpec:
    """A study: the file, what is searched, what for, and what every trial's runs share."""
    file: str                                   # absolute
    params: list[Param]
    objectives: list[tuple[str, str]]           # (name, "min" | "max")
    constraints: list[tuple[str, str, float]] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)   # --set, and run.target_accuracy
    seeds: list[int] | None = None
    target: float | None = None
    budget_s: float | None = None

    @property
    def labels(self) -> dict[str, str]:
        return short_labels([p.key for p in self.params])

    def identity(self) -> dict:
        """What makes a study the same study when its command is given again (JSON)."""
        return {"file": hashlib.sha256(Path(self.file).read_bytes()).hexdigest(),
                "params": [p.as_dict() for p in self.params],
                "objectives": [list(o) for o in self.objectives],
                "constraints": [list(c) for c in self.constraints],
                "overrides": list(self.overrides), "seeds": self.seeds, "target": self.target,
                "budget_s": self.budget_s}

    def key(self) -> str:
        return "tune-" + hashlib.sha256(json.dumps(self.identity(), sort_keys=True)
                                        .encode()).hexdigest()[:16]


# What differs between a stored study and the command, in the words the refusal uses.
IDENTITY_PARTS = (("params", "another search space (--param)"),
                  ("objectives", "other objectives (--objective)"),
                  ("constraints", "other constraints (--constraint)"),
                  ("file", "another version of the experiment file"),
                  ("overrides", "other --set values"), ("seeds", "other --seeds"),
                  ("target", "another target accuracy (--target or run.target_accuracy)"),
                  ("budget_s", "another --budget-s"))


def difference(stored: dict, given: dict) -> str | None:
    """The first part in which a stored study's identity differs from the command's, worded."""
    return next((words for part, words in IDENTITY_PARTS if stored.get(part) != given.get(part)),
                None)


def parse_seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) < len(seeds):
        raise UserError(f"--seeds {text}: allowed: distinct whole numbers >= 0, e.g. 0,1,2")
    return seeds


def build(file: str, params: list[str], objectives: list[str], constraints: list[str],
          overrides: list[str], seeds: str | None, target: float | None,
          budget_s: float | None):
    """The study's TuneSpec and its first trial's configuration, every input checked (one
    line each, UserError or ConfigError: exit 2)."""
    if not params:
        raise UserError(f"--param: none given; allowed: at least one {PARAM_FORM}")
    parsed = [parse_param(p) for p in params]
    keys = [p.key for p in parsed]
    twice = next((k for k in keys if keys.count(k) > 1), None)
    if twice:
        raise UserError(f"--param {twice}: given twice; allowed: each key once")
    fixed = {o.partition("=")[0].strip() for o in overrides}
    both = next((k for k in keys if k in fixed), None)
    if both:
        raise UserError(f"--param {both}: also fixed by --set {both}=...; allowed: one of the two")
    seed_list = parse_seeds(seeds)
    if seed_list is not None and "run.seed" in keys:
        raise UserError("--seeds: run.seed is also a --param; allowed: one of the two")
    if not objectives:
        raise UserError("--objective: none given; allowed: " + ", ".join(objective_names(parsed)))
    objs = [parse_objective(o, parsed) for o in objectives]
    names = [n for n, _ in objs]
    again = next((n for n in names if names.count(n) > 1), None)
    if again:
        raise UserError(f"--objective {again}: given twice; allowed: each objective once")
    cons = [parse_constraint(c, parsed) for c in constraints]
    if target is not None and not 0 < target <= 1:
        raise UserError(f"--target {target:g}: allowed: a test accuracy in (0, 1], e.g. 0.95")
    if budget_s is not None and not (budget_s > 0 and math.isfinite(budget_s)):
        raise UserError(f"--budget-s {budget_s:g}: allowed: virtual seconds > 0")
    sets = list(overrides) + ([f"run.target_accuracy={target!r}"] if target is not None else [])
    cfg = quietly(load_config, file, sets)      # the file and --set as `testbed run` reads them
    target = cfg.run.target_accuracy
    needs = [n for n in names + [c[0] for c in cons] if n in TO_TARGET]
    if target is None and (needs or budget_s is not None):
        what = f"--objective/--constraint {needs[0]}" if needs else "--budget-s"
        raise UserError(f"{what}: needs a target accuracy; allowed: --target ACC, or "
                        "run.target_accuracy in the file or --set")
    for p in parsed:                             # each bound or choice as a run would read it
        for value in p.values_to_check():
            try:
                quietly(load_config, file, [*sets, p.setting(value)])
            except ConfigError as e:
                hint = " (an integer key: add :int)" if p.kind == "float" and "integer" in str(e) else ""
                raise UserError(f"--param {p.text}: {e}{hint}") from None
    spec = TuneSpec(str(Path(file).resolve()), parsed, objs, cons, sets, seed_list, target,
                    budget_s)
    return spec, cfg


def quietly(fn, *args):
    """`fn(*args)` without the notes a method switch prints (a run prints them)."""
    with contextlib.redirect_stderr(io.StringIO()):
        return fn(*args)
