"""Every key an experiment file accepts, read from the tables that validate it.

`catalog()` walks the same `Field` tables that check a file (testbed.configuration.schema's sections,
channels.config's network tables, nodes.data's data sets, the method registry), so what
`testbed keys` prints and what docs/reference/configuration.md lists cannot drift from what a
file may say. A key is named as a file spells it: `network.link.bandwidth_mbps`,
`network.nodes.NAME.compute_speed` (NAME: a node), `network.links[].src` (one entry of the
array); keys that exist only under a choice say which (`scope`): a method's options under
`compression`, a loss model's under `network.link.loss`, a data set's under `data`.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from channels.config import (
    CSMA_KEYS,
    LINK_KEYS,
    LOSS_KEYS,
    LOSS_MODELS,
    MOBILITY_KEYS,
    NETWORK_KEYS,
    NODE_EXTRA_KEYS,
)
from lgc_schema import REQUIRED, Field
from nodes.compression.registry import METHODS, names
from nodes.data import DATASETS
from testbed.configuration.schema import DATA_KEYS, FEDERATED_KEYS, MODEL_KEYS, OPTIM_KEYS, RUN_KEYS

# the tables of [network] that are sections of their own, not keys
NETWORK_TABLES = ("link", "csma", "nodes", "links", "mobility")
NODE = "network.nodes.NAME"
LINK_ENTRY = "network.links[]"


@dataclass(frozen=True)
class Key:
    """One key: its dotted name as a file spells it, its Field, and the choice it belongs to."""
    name: str
    field: Field
    section: str          # the table it is written in: "run", "network.link", "compression"
    scope: str = ""       # "" (always), or the choice it belongs to: "method 'topk'"

    @property
    def leaf(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def default_text(self) -> str:
        d = self.field.default
        if d is REQUIRED:
            return "required"
        if d is None:
            return "none"
        if isinstance(d, bool):
            return str(d).lower()
        return repr(d) if isinstance(d, str) else str(d)

    def type_text(self) -> str:
        names = {bool: "bool", int: "int", float: "float", str: "string", list: "array", dict: "table"}
        return " or ".join(names.get(t, t.__name__) for t in self.field.types)


def _table(section: str, fields: dict[str, Field], scope: str = "", skip=()) -> Iterator[Key]:
    for leaf, f in fields.items():
        if leaf not in skip:
            yield Key(f"{section}.{leaf}", f, section, scope)


# keys with no Field of their own in the tables: what their validators accept, in Fields
def _loss_model_field() -> Field:
    return Field("none", str, choices=LOSS_MODELS,
                 help="packet loss on the link: none, independent (bernoulli), bursty "
                      "(gilbert_elliott), or from the SNR of a fading channel (fading)")


def _method_field(names: list[str]) -> Field:
    return Field("none", str, choices=tuple(names),
                 help="the compression method; its options are the other keys of [compression] "
                      "(`testbed methods NAME`)")


END_FIELDS = {
    "src": Field(REQUIRED, str, noun="a node name", help="one end of the link (w0, w1, ..., server)"),
    "dst": Field(REQUIRED, str, noun="a node name", help="the other end of the link"),
}


def catalog(methods: bool = True) -> list[Key]:
    """Every key, section by section in the order of SECTION_ORDER; `methods`: the compression
    methods' options too (imports every method)."""
    keys: list[Key] = []
    keys += _table("run", RUN_KEYS)
    keys += _table("data", DATA_KEYS)
    for name, options in DATASETS.items():
        keys += _table("data", options, f"dataset '{name}'", skip=DATA_KEYS)
    keys += _table("model", MODEL_KEYS)
    keys += _table("optim", OPTIM_KEYS)
    keys += _compression_keys() if methods else []
    keys += _table("network", NETWORK_KEYS, skip=NETWORK_TABLES)
    keys += _table("network.link", LINK_KEYS, skip=("loss",))
    keys.append(Key("network.link.loss.model", _loss_model_field(), "network.link.loss"))
    for model in LOSS_MODELS:
        keys += _table("network.link.loss", LOSS_KEYS[model], f"loss model '{model}'")
    keys += _table("network.csma", CSMA_KEYS)
    keys += _table("network.mobility", MOBILITY_KEYS)
    keys += _table(NODE, NODE_EXTRA_KEYS)
    keys += _table(LINK_ENTRY, END_FIELDS)
    keys += _table("federated", FEDERATED_KEYS)
    return keys


def _compression_keys() -> list[Key]:
    out = [Key("compression.method", _method_field(names()), "compression")]
    for name in names():
        out += _table("compression", METHODS[name], f"method '{name}'")
    return out


# sections whose keys also include every network.link key (an override for a node or one link)
LINK_OVERRIDES = {NODE: "that node's links (both directions)", LINK_ENTRY: "that one link"}

SECTIONS = ("run", "data", "model", "optim", "compression", "network", "network.link",
            "network.link.loss", "network.csma", "network.mobility", NODE, LINK_ENTRY, "federated")


def select(query: str, keys: list[Key]) -> list[Key]:
    """The keys a query names: a section (and the sections under it), or one key (all its
    scopes: `compression.ratio` is an option of several methods). Empty: nothing matches."""
    q = query.strip().strip(".")
    q = {"[compression]": "compression"}.get(q, q).strip("[]")
    exact = [k for k in keys if k.name == q]
    if exact:
        return exact
    return [k for k in keys if k.section == q or k.section.startswith(q + ".")
            or k.section.startswith(q + "[")]


def closest(query: str, keys: list[Key], n: int = 3) -> list[str]:
    """The names nearest to a query that named nothing (keys and sections alike)."""
    names = sorted({k.name for k in keys} | {k.section for k in keys})
    by_name = difflib.get_close_matches(query, names, n=n, cutoff=0.5)
    leaf = query.rsplit(".", 1)[-1]
    by_leaf = [k.name for k in keys if k.leaf == leaf and k.name not in by_name]
    return (by_name + sorted(set(by_leaf)))[:n]
