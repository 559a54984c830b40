"""Methods by name: the one source of truth for `[compression] method = NAME`.

Each method module decorates its Scheme with `@register(name, wire_id=..., rules=..., **fields)`,
so a new method is one file, named after the method (nodes/compression/NAME.py). A method is
imported when it is named (`find`: its file only, what a run pays); what lists every method
(`names`, `methods`, `testbed methods`, an unknown name's error) imports them all (`load_all`).
Methods of other packages are found through the entry-point group `lgc_testbed.methods`
(ENTRY_POINT_GROUP): each entry point names a module (or an object in one) whose import
registers its methods with the same decorator; their options go through the same schema.
Wire ids: 0..127 are this project's (OUR_IDS), 128..254 are for methods from other packages
(OUTSIDE_IDS); an outside method whose id or name is taken is refused (`PluginMethodError`).
The wire id is pinned by every method and set on the class (`Scheme.wire_id`), which is what a
method hands the codec. What reads the registry: the config validator (option fields and
rules), the contract tests, the results tables and the benchmarks (`names()`).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import pkgutil
from typing import Any

import nodes.compression
from nodes.compression.base import Scheme
from lgc_schema import Field, OptionError, Rule, check_rules, check_table, defaults

METHODS: dict[str, dict[str, Field]] = {}
RULES: dict[str, tuple[Rule, ...]] = {}   # per method, the rules between its options
# Per method, the experiment-file keys ("compression.ratio", "optim.momentum") it needs other
# values of than most files carry: what `--set compression.method=NAME` sets on a file written
# for another method (testbed.configuration.method_policy), with a note.
KNOWN_GOOD: dict[str, dict[str, object]] = {}
SCHEMES: dict[str, type[Scheme]] = {}
WIRE_IDS: dict[str, int] = {}
ORIGINS: dict[str, str] = {}   # per method, where it comes from (`testbed methods`)
FIRST_FREE_ID = 65   # shipped methods hold 0..13 and 64 (scalecom); new ones pick from here
OUR_IDS = range(0, 128)        # methods of nodes/compression/
OUTSIDE_IDS = range(128, 255)  # methods of other packages (entry points); 255 stays unused
ENTRY_POINT_GROUP = "lgc_testbed.methods"
_builtins_loaded = False       # every module of nodes.compression imported
_entry_points_loaded = False   # every entry point of ENTRY_POINT_GROUP imported
_load_error: Exception | None = None
_entry_point: str | None = None   # while an entry point loads: "dist version (group name = value)"


class PluginMethodError(OptionError):
    """A method of another package whose registration clashes (exit 2 at the CLI)."""


def collective_field(cls: type[Scheme]) -> Field:
    """`[compression] collective`: the ways this method can exchange, its natural one the default."""
    return Field(cls.collectives[0], str, choices=tuple(cls.collectives),
                 help="how messages travel: 'ps' (gather at the server, which broadcasts the "
                      "aggregate), 'allreduce' (summed along the ring), 'allgather' (every node "
                      "gets every message and aggregates locally)")


def register(name: str, *, wire_id: int, known_good: dict | None = None, rules: tuple = (),
             **options: Field):
    """Register a Scheme class under `name` with its option fields (plus `collective`, from the
    class's `collectives`) and its wire id byte, which every method pins (an id handed out by
    import order would change when a file is added, and old recordings would stop decoding).
    `known_good`: {"section.key": value} the method trains with where a file written for another
    method would not (see KNOWN_GOOD). `rules`: lgc_schema.Rule checks between its options."""
    taken = {i: n for n, i in WIRE_IDS.items() if n != name}
    if _entry_point is not None:
        _check_outside(name, wire_id, taken)
    if isinstance(wire_id, bool) or not isinstance(wire_id, int) or not 0 <= wire_id < 255 \
            or wire_id in taken:
        raise ValueError(f"method {name!r}: wire_id = {wire_id!r}: must be an integer in 0..254 "
                         f"not taken (taken: {', '.join(f'{i} {n}' for i, n in sorted(taken.items()))})")

    def deco(cls: type[Scheme]) -> type[Scheme]:
        cls.name, cls.wire_id = name, wire_id
        SCHEMES[name] = cls
        METHODS[name] = {**options, "collective": collective_field(cls)}
        RULES[name] = tuple(rules)
        WIRE_IDS[name] = wire_id
        KNOWN_GOOD[name] = dict(known_good or {})
        ORIGINS[name] = _entry_point or _origin_of(cls.__module__)
        return cls
    return deco


def _origin_of(module: str) -> str:
    if module.startswith("nodes.compression."):
        return f"built-in ({module.replace('.', '/')}.py)"
    return f"module {module}"


def _check_outside(name: str, wire_id: Any, taken: dict[int, str]) -> None:
    """An entry point's method: its name new (not a built-in method's: its file is imported to
    see), its wire id free and in OUTSIDE_IDS."""
    where = f"method {name!r} of {_entry_point}"
    if name in SCHEMES or _builtin(name):
        raise PluginMethodError("compression.method", name, message=(
            f"{where}: compression.method = {name!r} is taken by {ORIGINS.get(name, 'another')}; "
            f"expected a name of its own"))
    if isinstance(wire_id, bool) or not isinstance(wire_id, int) or wire_id not in OUTSIDE_IDS \
            or wire_id in taken:
        if isinstance(wire_id, int) and wire_id in OUR_IDS:
            _builtins()   # to name the built-in method that holds it
        holder = next((f" (held by {n!r})" for n, i in WIRE_IDS.items()
                       if i == wire_id and n != name), "")
        raise PluginMethodError("wire_id", wire_id, message=(
            f"{where}: wire_id = {wire_id!r}{holder}; expected a free integer in "
            f"{OUTSIDE_IDS.start}..{OUTSIDE_IDS.stop - 1}, the range for methods of other packages"))


def unregister(name: str) -> None:
    """Forget a method (tests that register a toy one clean up with this)."""
    for table in (SCHEMES, METHODS, RULES, WIRE_IDS, KNOWN_GOOD, ORIGINS):
        table.pop(name, None)


def _import_ours(module: str) -> None:
    """Import nodes/compression/MODULE.py as ours, also while an entry point is loading."""
    global _entry_point
    outer, _entry_point = _entry_point, None
    try:
        importlib.import_module(f"{nodes.compression.__name__}.{module}")
    finally:
        _entry_point = outer


def _builtin(name: str) -> bool:
    """Whether `name` is a built-in method: the file named after it registers it."""
    if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")):
        return False
    if name not in SCHEMES and importlib.util.find_spec(
            f"{nodes.compression.__name__}.{name}") is not None:
        _import_ours(name)
    return name in SCHEMES and SCHEMES[name].__module__ == f"{nodes.compression.__name__}.{name}"


def _builtins() -> None:
    """Import every module of nodes.compression once (every built-in method)."""
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for mod in pkgutil.iter_modules(nodes.compression.__path__):
            if not mod.name.startswith("_"):
                _import_ours(mod.name)


def _entry_points() -> None:
    """Import every entry point of ENTRY_POINT_GROUP once (other packages' methods; a few ms
    without any). A clash raised once is raised again on every later call (the modules are
    imported by then, their decorators will not run again)."""
    global _entry_points_loaded, _load_error, _entry_point
    if _load_error is not None:
        raise _load_error
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda e: (e.name, e.value)):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "an unnamed package"
        _entry_point = f"{dist} (entry point {ep.name} = {ep.value})"
        try:
            ep.load()
        except PluginMethodError as e:
            _load_error = e
            raise
        except Exception as e:   # the package's own import failed
            _load_error = PluginMethodError(ENTRY_POINT_GROUP, ep.name, message=(
                f"entry point {ENTRY_POINT_GROUP} {ep.name} = {ep.value!r} of {dist}: importing "
                f"it raised {type(e).__name__}: {' '.join(str(e).split())}; expected a module "
                f"that registers its methods with nodes.compression.registry.register"))
            raise _load_error from None
        finally:
            _entry_point = None


def load_all() -> None:
    """Every method: each module of nodes.compression, then each entry point of
    ENTRY_POINT_GROUP; the decorators fill the tables."""
    _builtins()
    _entry_points()


def find(method: str) -> bool:
    """Whether `method` is registered, importing as little as it takes: other packages' entry
    points (so that a clash among them is refused on every run), then a built-in method's own
    file (nodes/compression/METHOD.py); every method only for a name neither holds."""
    _entry_points()
    if method in SCHEMES or _builtin(method):
        return True
    load_all()
    return method in SCHEMES


def fields(method: str) -> dict[str, Field]:
    """One method's option fields (`[compression]` keys), its file alone imported."""
    if not find(method):
        raise KeyError(f"unknown compression method {method!r}; known: {', '.join(names())}")
    return METHODS[method]


def methods() -> dict[str, dict[str, Field]]:
    """Every method's option fields (imports every method)."""
    load_all()
    return METHODS


def origin(method: str) -> str:
    """Where a registered method comes from: built-in (its file), a package's entry point, or
    the module that registered it."""
    load_all()
    return ORIGINS.get(method, "unknown")


def names() -> list[str]:
    """Registered method names, in wire-id order (ours, then other packages')."""
    load_all()
    return sorted(SCHEMES, key=WIRE_IDS.__getitem__)


def wire_id(method: str) -> int:
    fields(method)
    return WIRE_IDS[method]


def check_options(method: str, options: dict, error: type[OptionError] = OptionError) -> dict:
    """The rules between a method's options, over `options` (checked one by one) and the
    defaults of those not given (what testbed.configuration.sections asks after its own key-by-key pass)."""
    fields(method)
    check_rules("compression", {**defaults(METHODS[method]), **options}, RULES[method], error)
    return options


def build_scheme(method: str, options: dict, *, n_workers: int, shapes, payload_bytes: int,
                 seed: int = 0, device="cpu") -> Scheme:
    """The method's Scheme with `options` checked against its fields (one-line OptionError
    naming compression.KEY) and defaults filled in."""
    fields(method)
    full: dict[str, Any] = check_table("compression", options, METHODS[method], error=OptionError,
                                       rules=RULES[method])
    return SCHEMES[method](n_workers=n_workers, shapes=shapes, payload_bytes=payload_bytes,
                           seed=seed, device=device, **full)
