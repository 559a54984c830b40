"""Validation of the `[network]` table: types, ranges, defaults, and close-match suggestions.

`validate_network(table)` returns a new dict with every default filled in; the experiment config
validator (testbed/config.py) calls it and turns `ChannelConfigError` into its own error.
"""
from __future__ import annotations

import difflib
import math
from typing import Any

from channels.errors import ChannelConfigError

TOPOLOGIES = ("star", "ring", "mesh", "geometric", "file")
MEDIA = ("dedicated", "shared")
SHARINGS = ("tdma", "ofdma")
DELIVERIES = ("reliable", "best_effort")
ENGINES = ("auto", "fast", "simpy")
LOSS_MODELS = ("none", "bernoulli", "gilbert_elliott", "fading")

# name -> (kind, default, check) ; kinds: "num", "int", "str", "choice:<a|b>", "path"
_POS = ("num", ">0")
LINK_KEYS: dict[str, tuple] = {
    "bandwidth_mbps": ("num", 20.0, ">0"),
    "delay_ms": ("num", 1.0, ">=0"),
    "mtu_bytes": ("int", 1500, ">0"),
    "header_bytes": ("int", 40, ">=0"),
    "queue_packets": ("int", 100, ">0"),
    "delivery": ("choice", "reliable", DELIVERIES),
    "ack_bytes": ("int", 0, ">=0"),
    "rto_margin_ms": ("num", 1.0, ">=0"),
    "retry_limit": ("int", 7, ">=0"),
    "trace": ("path", None, None),
    "loss": ("table", None, None),
}

LOSS_KEYS: dict[str, dict[str, tuple]] = {
    "none": {},
    "bernoulli": {"p": ("num", None, "[0,1]")},
    "gilbert_elliott": {
        "p_good_to_bad": ("num", None, "[0,1]"),
        "p_bad_to_good": ("num", None, "[0,1]"),
        "loss_good": ("num", 0.0, "[0,1]"),
        "loss_bad": ("num", 1.0, "[0,1]"),
    },
    "fading": {
        "fading": ("choice", "rayleigh", ("rayleigh", "rician", "none")),
        "k_factor": ("num", 3.0, ">=0"),            # Rician K (linear)
        "coherence_ms": ("num", 10.0, ">0"),
        "tx_power_dbm": ("num", 20.0, "any"),
        "noise_dbm_per_hz": ("num", -174.0, "any"),
        "noise_figure_db": ("num", 7.0, ">=0"),
        "channel_bandwidth_mhz": ("num", 20.0, ">0"),
        "path_loss_exponent": ("num", 3.0, ">0"),
        "reference_loss_db": ("num", 40.0, ">=0"),   # path loss at 1 m
        "shadowing_db": ("num", 4.0, ">=0"),         # std of log-normal shadowing, per link
        "distance_m": ("num", 10.0, ">0"),
        "rate": ("choice", "shannon", ("shannon", "mcs")),
        "efficiency": ("num", 0.75, "(0,1]"),
        "mcs_table": ("path", None, None),
        "per_slope_db": ("num", 1.5, ">0"),
        "outage_snr_db": ("num", None, "any"),       # shannon: below this SNR a packet is lost
        "min_rate_mbps": ("num", 0.1, ">0"),
    },
}

NODE_EXTRA_KEYS: dict[str, tuple] = {
    "pos": ("pos", None, None),
    "role": ("choice", None, ("worker", "server", "relay")),
    "compute_speed": ("num", None, ">0"),
    "gflops": ("num", None, ">0"),
}

NETWORK_KEYS: dict[str, tuple] = {
    "topology": ("choice", "star", TOPOLOGIES),
    "workers": ("int", 4, ">0"),
    "medium": ("choice", "shared", MEDIA),
    "sharing": ("choice", "tdma", SHARINGS),
    "engine": ("choice", "auto", ENGINES),
    "file": ("path", None, None),
    "area_m": ("num", 100.0, ">0"),      # geometric: side of the square the workers are placed in
    "range_m": ("num", 60.0, ">0"),      # geometric: two nodes closer than this are linked
    "link": ("table", None, None),
    "nodes": ("table", None, None),
    "links": ("list", None, None),
}


def _unknown(path: str, key: str, known) -> ChannelConfigError:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ChannelConfigError(f"{path}.{key}" if path else key, key,
                              f"unknown key; {hint}known keys: {', '.join(sorted(known))}")


def _check(path: str, value: Any, kind: str, check) -> Any:
    if kind in ("num", "int"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ChannelConfigError(path, value, "a number" if kind == "num" else "an integer")
        if kind == "int" and (isinstance(value, float) and not value.is_integer()):
            raise ChannelConfigError(path, value, "an integer")
        if not math.isfinite(value):
            raise ChannelConfigError(path, value, "a finite number")
        value = int(value) if kind == "int" else float(value)
        ok = {">0": value > 0, ">=0": value >= 0, "[0,1]": 0 <= value <= 1,
              "(0,1]": 0 < value <= 1, "any": True}[check]
        if not ok:
            words = {">0": "> 0", ">=0": ">= 0", "[0,1]": "a probability in [0, 1]",
                     "(0,1]": "in (0, 1]", "any": ""}[check]
            raise ChannelConfigError(path, value, words)
        return value
    if kind == "choice":
        if value not in check:
            raise ChannelConfigError(path, value, "one of " + ", ".join(repr(c) for c in check))
        return value
    if kind == "path":
        if not isinstance(value, str) or not value:
            raise ChannelConfigError(path, value, "a file path (string)")
        return value
    if kind == "pos":
        if (not isinstance(value, (list, tuple)) or len(value) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)):
            raise ChannelConfigError(path, value, "[x, y] in metres")
        return [float(value[0]), float(value[1])]
    raise AssertionError(kind)


def validate_loss(loss: Any, path: str = "network.link.loss") -> dict:
    if loss is None:
        return {"model": "none"}
    if not isinstance(loss, dict):
        raise ChannelConfigError(path, loss, 'a table such as { model = "bernoulli", p = 0.01 }')
    model = loss.get("model", "none")
    if model not in LOSS_KEYS:
        raise ChannelConfigError(f"{path}.model", model, "one of " + ", ".join(map(repr, LOSS_MODELS)))
    spec = LOSS_KEYS[model]
    out = {"model": model}
    for key, value in loss.items():
        if key == "model":
            continue
        if key not in spec:
            raise _unknown(path, key, ["model", *spec])
    for key, (kind, default, check) in spec.items():
        if key in loss and loss[key] is not None:
            out[key] = _check(f"{path}.{key}", loss[key], kind, check)
        elif default is None and kind == "num" and check == "[0,1]":
            raise ChannelConfigError(f"{path}.{key}", None, f"required for model {model!r}: a probability in [0, 1]")
        else:
            out[key] = default
    return out


def validate_link(link: Any, path: str, *, partial: bool) -> dict:
    """One link table. `partial`: an override (only the keys given), else defaults are filled."""
    if not isinstance(link, dict):
        raise ChannelConfigError(path, link, "a table of link parameters")
    out: dict[str, Any] = {}
    for key, value in link.items():
        if key not in LINK_KEYS:
            raise _unknown(path, key, LINK_KEYS)
        kind, _, check = LINK_KEYS[key]
        if key == "loss":
            out[key] = validate_loss(value, f"{path}.loss")
        elif value is None and key == "trace":
            out[key] = None
        else:
            out[key] = _check(f"{path}.{key}", value, kind, check)
    if not partial:
        for key, (kind, default, _) in LINK_KEYS.items():
            out.setdefault(key, {"model": "none"} if key == "loss" else default)
    return out


def check_link_consistency(link: dict, path: str) -> None:
    """Cross-key rules of one complete link."""
    if link["header_bytes"] >= link["mtu_bytes"]:
        raise ChannelConfigError(f"{path}.header_bytes", link["header_bytes"],
                                 f"less than mtu_bytes ({link['mtu_bytes']}), so a packet carries payload")
    if link.get("trace") and link["mtu_bytes"] > 1500:
        raise ChannelConfigError(f"{path}.mtu_bytes", link["mtu_bytes"],
                                 "<= 1500 with a Mahimahi trace (one packet of up to 1500 bytes per opportunity)")
    if link.get("trace") and link["loss"]["model"] == "fading":
        raise ChannelConfigError(f"{path}.trace", link["trace"],
                                 "a trace or a fading model sets the rate, not both")


def validate_network(network: Any) -> dict:
    """Check the `[network]` table and return it with every default filled in."""
    if network is None:
        network = {}
    if not isinstance(network, dict):
        raise ChannelConfigError("network", network, "a table")
    out: dict[str, Any] = {}
    for key, value in network.items():
        if key not in NETWORK_KEYS:
            raise _unknown("network", key, NETWORK_KEYS)
    for key, (kind, default, check) in NETWORK_KEYS.items():
        if key in ("link", "nodes", "links"):
            continue
        value = network.get(key)
        out[key] = default if value is None else _check(f"network.{key}", value, kind, check)
    if out["topology"] == "ring" and out["workers"] < 2:
        raise ChannelConfigError("network.workers", out["workers"], ">= 2 for a ring")
    if out["topology"] == "file" and not out["file"]:
        raise ChannelConfigError("network.file", None, 'a GraphML or JSON node-link file when topology = "file"')
    out["link"] = validate_link(network.get("link", {}), "network.link", partial=False)
    check_link_consistency(out["link"], "network.link")

    nodes = network.get("nodes", {}) or {}
    if not isinstance(nodes, dict):
        raise ChannelConfigError("network.nodes", nodes, "a table of node name -> overrides")
    out["nodes"] = {}
    for name, over in nodes.items():
        path = f"network.nodes.{name}"
        if not isinstance(over, dict):
            raise ChannelConfigError(path, over, "a table of overrides")
        extra = {k: _check(f"{path}.{k}", v, *NODE_EXTRA_KEYS[k][::2]) for k, v in over.items()
                 if k in NODE_EXTRA_KEYS}
        link_part = {k: v for k, v in over.items() if k not in NODE_EXTRA_KEYS}
        for k in link_part:
            if k not in LINK_KEYS:
                raise _unknown(path, k, [*LINK_KEYS, *NODE_EXTRA_KEYS])
        node = validate_link(link_part, path, partial=True)
        check_link_consistency({**out["link"], **node}, path)
        out["nodes"][str(name)] = {**extra, **node}

    links = network.get("links", []) or []
    if not isinstance(links, list):
        raise ChannelConfigError("network.links", links, "an array of tables { src, dst, ... }")
    out["links"] = []
    for i, over in enumerate(links):
        path = f"network.links[{i}]"
        if not isinstance(over, dict):
            raise ChannelConfigError(path, over, "a table { src, dst, ... }")
        for end in ("src", "dst"):
            if not isinstance(over.get(end), str):
                raise ChannelConfigError(f"{path}.{end}", over.get(end), "a node name (string)")
        rest = validate_link({k: v for k, v in over.items() if k not in ("src", "dst")}, path, partial=True)
        check_link_consistency({**out["link"], **rest}, path)
        out["links"].append({"src": over["src"], "dst": over["dst"], **rest})
    if out["link"].get("trace") or any(o.get("trace") for o in out["links"]) or \
            any(o.get("trace") for o in out["nodes"].values()):
        if out["medium"] == "shared":
            raise ChannelConfigError("network.medium", "shared",
                                     '"dedicated" with a Mahimahi trace (the trace is one link\'s own capacity)')
    return out
