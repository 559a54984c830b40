"""Methods by name: `[compression] method = NAME` and the options each one accepts.

Each method module decorates its Scheme with `@register(name, **options)`; the config
validator reads `METHODS` to check option names, types and ranges before a run starts.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from nodes.compression.base import Scheme


@dataclass(frozen=True)
class Option:
    default: Any
    type: type = float
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    help: str = ""

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        lo = "-inf" if self.min is None else repr(self.min)
        hi = "inf" if self.max is None else repr(self.max)
        return f"{self.type.__name__} in [{lo}, {hi}]"


METHODS: dict[str, dict[str, Option]] = {}
SCHEMES: dict[str, type[Scheme]] = {}

# Modules that register methods; imported lazily so `import nodes` stays light.
_MODULES = ["none", "fp16", "topk", "randomk", "dgc", "qsgd", "terngrad", "signsgd",
            "powersgd", "lgc"]
_loaded = False


def register(name: str, **options: Option):
    def deco(cls: type[Scheme]) -> type[Scheme]:
        cls.name = name
        SCHEMES[name] = cls
        METHODS[name] = dict(options)
        return cls
    return deco


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    for mod in _MODULES:
        try:
            importlib.import_module(f"nodes.compression.{mod}")
        except ModuleNotFoundError as e:  # a method module not written yet
            if e.name != f"nodes.compression.{mod}":
                raise
    _loaded = True


def methods() -> dict[str, dict[str, Option]]:
    load_all()
    return METHODS


def build_scheme(method: str, options: dict, *, n_workers: int, shapes, payload_bytes: int,
                 seed: int = 0, device="cpu") -> Scheme:
    load_all()
    if method not in SCHEMES:
        raise KeyError(f"unknown compression method {method!r}; known: {', '.join(sorted(SCHEMES))}")
    spec = METHODS[method]
    unknown = sorted(set(options) - set(spec))
    if unknown:
        raise KeyError(f"unknown option {unknown[0]!r} for compression method {method!r}; "
                       f"allowed: {', '.join(sorted(spec)) or 'none'}")
    full = {k: o.default for k, o in spec.items()}
    full.update(options)
    return SCHEMES[method](n_workers=n_workers, shapes=shapes, payload_bytes=payload_bytes,
                           seed=seed, device=device, **full)
