"""Steering requests for a running experiment: what a control may ask, checked in one place.

A control names a `target` and a dict of `changes`:
  target   "u->v"  one direction of a link
           "u-v"   both directions of the link between u and v
           "*"     every link
  changes  bandwidth_mbps (> 0), delay_ms (>= 0), loss_p (Bernoulli loss probability, 0..1)

The dashboard validates before it writes a request to the store and the loop validates
again when it applies one (the store may be written by anything), so both import this module.
It is pure: a run dict (`status`, `graph` as node-link JSON) in, a normalised request out.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from channels.config import LINK_KEYS, LOSS_KEYS
from lgc_schema import Field, OptionError
from testbed.errors import ControlError
from testbed.records.graph_json import directed_links, graph_edges, graph_nodes  # noqa: F401 (re-exported)

# what a control may change: schema fields (channels' own link fields where they exist)
CHANGE_RULES: dict[str, Field] = {
    "bandwidth_mbps": LINK_KEYS["bandwidth_mbps"],
    "delay_ms": LINK_KEYS["delay_ms"],
    "loss_p": LOSS_KEYS["bernoulli"]["p"],
}
ALL_LINKS = "*"


def link_targets(graph: dict | None) -> list[str]:
    """The targets a user may pick for this topology: all links, each edge, each direction."""
    links = directed_links(graph)
    edges: dict[frozenset, tuple[str, str]] = {}
    for u, v in links:
        edges.setdefault(frozenset((u, v)), (u, v))
    return [ALL_LINKS] + [f"{u}-{v}" for u, v in edges.values()] + [f"{u}->{v}" for u, v in links]


def _split_pair(text: str, sep: str, nodes: set[str]) -> tuple[str, str] | None:
    """Split "u<sep>v" where u and v are known nodes (node names may contain the separator)."""
    start = 0
    while (i := text.find(sep, start)) != -1:
        u, v = text[:i].strip(), text[i + len(sep):].strip()
        if u in nodes and v in nodes:
            return u, v
        start = i + 1
    return None


def resolve_target(graph: dict | None, target: str) -> list[tuple[str, str]]:
    """The one-way links a target covers, in the topology's order. Raises ControlError."""
    if not isinstance(target, str) or not target.strip():
        raise ControlError(f"control target {target!r} is empty; allowed: '*', 'u-v' or 'u->v'")
    target = target.strip()
    links = directed_links(graph)
    if target == ALL_LINKS:
        return links
    if not links:
        raise ControlError(f"control target {target!r}: the run has no topology recorded, "
                           "so only '*' (all links) is allowed")
    nodes = {n for link in links for n in link}
    known = set(links)
    if "->" in target:
        pair = _split_pair(target, "->", nodes)
        if pair is None or pair not in known:
            raise ControlError(f"control target {target!r} is not a link of the run's topology; "
                               f"allowed: '*', {_examples(links)}")
        return [pair]
    pair = _split_pair(target, "-", nodes)
    if pair is None or not ({pair, pair[::-1]} & known):
        raise ControlError(f"control target {target!r} is not a link of the run's topology; "
                           f"allowed: '*', {_examples(links)}")
    return [l for l in (pair, pair[::-1]) if l in known]


def _examples(links: Iterable[tuple[str, str]], n: int = 4) -> str:
    links = list(links)
    shown = ", ".join(f"'{u}-{v}'" for u, v in links[: 2 * n: 2])
    more = f" ... ({len(links)} one-way links, also 'u->v')" if len(links) > 2 * n else " or 'u->v'"
    return shown + more


def validate_changes(changes: Any) -> dict[str, float]:
    """Checked, float-valued copy of a `changes` dict. Raises ControlError naming the key."""
    if not isinstance(changes, dict) or not changes:
        raise ControlError(f"control changes {changes!r} are empty; allowed keys: "
                           f"{', '.join(CHANGE_RULES)}")
    out: dict[str, float] = {}
    for key, value in changes.items():
        if key not in CHANGE_RULES:
            raise ControlError(f"control change {key!r} is unknown; allowed keys: "
                               f"{', '.join(CHANGE_RULES)}")
        try:
            out[key] = CHANGE_RULES[key].validate(key, value)
        except OptionError as e:
            what = "is not a number" if e.problem == "type" else "is out of range"
            raise ControlError(f"control change {key}={e.value!r} {what}; allowed: {e.allowed}") from None
    return out


def validate_control(run: dict, target: str, changes: dict) -> tuple[str, dict[str, float]]:
    """Check a control request against a run; return the normalised (target, changes).

    `run` needs `status` and `graph` (node-link JSON, or None), as `Store.run()` returns.
    Only a `running` run can be steered.
    """
    status = run.get("status")
    if status != "running":
        name = run.get("name") or run.get("id")
        raise ControlError(f"run {name!r} is {status}; controls apply only to a running run")
    clean = validate_changes(changes)
    target = target.strip() if isinstance(target, str) else target
    resolve_target(run.get("graph"), target)
    return target, clean
