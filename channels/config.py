"""Validation of the `[network]` table: types, ranges, defaults, and close-match suggestions.

`validate_network(table)` returns a `ValidNetwork` (a dict with every default filled in) that no
one checks again; the experiment config validator (testbed/configuration/sections.py) calls it once and turns
`ChannelConfigError` into its own error. Each key is a schema Field; what holds between keys is a
schema Rule (LINK_RULES, CSMA_RULES, NETWORK_RULES).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from channels.energy import check_profile, load_profiles
from channels.errors import ChannelConfigError
from lgc_schema import (
    FILE_PATH,
    REQUIRED,
    Field,
    Rule,
    check_rules,
    check_table,
    unknown_key,
)

TOPOLOGIES = ("star", "ring", "mesh", "geometric", "file")
MEDIA = ("dedicated", "shared")
SHARINGS = ("tdma", "ofdma", "csma")
DELIVERIES = ("reliable", "best_effort")
ENGINES = ("auto", "fast", "simpy")
LOSS_MODELS = ("none", "bernoulli", "gilbert_elliott", "fading")

# Every key is a schema Field (type, default, bounds, choices); tables and lists are checked
# by the functions below.
_PROB = dict(min=0.0, max=1.0, noun="a probability")
LINK_KEYS: dict[str, Field] = {
    "bandwidth_mbps": Field(20.0, float, min=0, min_open=True,
        help="link rate, Mbit/s (on a shared medium: the cell's)"),
    "delay_ms": Field(1.0, float, min=0, help="one-way propagation delay, ms"),
    "mtu_bytes": Field(1500, int, min=0, min_open=True,
        help="largest packet on the wire, headers included, bytes"),
    "header_bytes": Field(40, int, min=0, help="header bytes of every packet, counted on the wire"),
    "queue_packets": Field(100, int, min=0, min_open=True,
        help="drop-tail queue of a forwarding node, packets"),
    "delivery": Field("reliable", str, choices=DELIVERIES,
        help="reliable (a lost packet is resent, up to retry_limit times) or best_effort (a "
             "lost packet stays lost)"),
    "ack_bytes": Field(0, int, min=0,
        help="> 0: every acknowledgement costs this much air time, bytes (a CSMA cell counts "
             "the MAC's ACK instead)"),
    "rto_margin_ms": Field(1.0, float, min=0,
        help="reliable delivery: a packet is resent when its acknowledgement has not come back "
             "within the round trip plus this margin, ms"),
    "retry_limit": Field(7, int, min=0,
        help="reliable delivery: retransmissions of one packet before the link gives up on it"),
    "trace": Field(None, str, noun=FILE_PATH, help="Mahimahi trace, both directions"),
    "uplink_trace": Field(None, str, noun=FILE_PATH, help="Mahimahi trace towards the server"),
    "downlink_trace": Field(None, str, noun=FILE_PATH, help="Mahimahi trace away from the server"),
    "loss": Field(None, dict),
}
TRACE_KEYS = ("trace", "uplink_trace", "downlink_trace")

# `[network.csma]`: 802.11 DCF basic access on a shared cell (`sharing = "csma"`); 802.11a defaults.
CSMA_KEYS: dict[str, Field] = {
    "slot_us": Field(9.0, float, min=0, min_open=True, help="backoff slot"),
    "sifs_us": Field(16.0, float, min=0, help="gap before the ACK"),
    "difs_us": Field(34.0, float, min=0, help="idle time before backoff resumes"),
    "cw_min": Field(15, int, min=0, min_open=True,
        help="contention window of a frame's first attempt"),
    "cw_max": Field(1023, int, min=0, min_open=True, help="largest contention window"),
    "phy_header_us": Field(20.0, float, min=0, help="preamble + PLCP header before every frame"),
    "ack_bytes": Field(14, int, min=0, help="the MAC acknowledgement frame"),
    "retry_limit": Field(7, int, min=1,
        help="attempts of a frame before the MAC drops it (dot11ShortRetryLimit)"),
    "basic_rate_mbps": Field(24.0, float, min=0, min_open=True,
                             help="the ACK's rate (or the highest of 6, 12, 24 Mbit/s not above the data rate)"),
    "symbol_us": Field(4.0, float, min=0,
        help="OFDM symbol: airtimes are whole symbols (0: exactly bits / rate)"),
    "ack_timeout_us": Field(45.0, float, min=0,
        help="how long a sender waits for an ACK (SIFS + slot + PHY header)"),
    "eifs_us": Field(94.0, float, min=0,
                     help="idle time after a frame a station could not decode (SIFS + ACK at 6 Mbit/s + DIFS)"),
    "cca_us": Field(4.0, float, min=0,
        help="how long after a transmission starts the others sense it"),
    "preamble_detection": Field(False, bool,
                                help="a receiver locks onto a frame only if its preamble stands 4 dB above the rest "
                                     "(ns-3's default PHY): a collision is energy only, the others wait DIFS and "
                                     "eifs_frames / eifs_share do not apply"),
    "eifs_frames": Field(2, int, min=0,
        help="without preamble detection: collisions of at most this many frames leave a PHY "
             "header the others decode (then EIFS, else DIFS)"),
    "eifs_share": Field(0.71, float, min=0.0, max=1.0, noun="a probability",
                        help="without preamble detection: after a collision of eifs_frames + 1 frames, the chance each other station decodes its header (EIFS)"),
}

LOSS_KEYS: dict[str, dict[str, Field]] = {
    "none": {},
    "bernoulli": {"p": Field(REQUIRED, float, **_PROB,
                             help="probability that a packet is lost, independently of the others")},
    "gilbert_elliott": {
        "p_good_to_bad": Field(REQUIRED, float, **_PROB,
            help="per packet, probability of moving from the good state to the bad one"),
        "p_bad_to_good": Field(REQUIRED, float, **_PROB,
            help="per packet, probability of moving from the bad state back to the good one"),
        "loss_good": Field(0.0, float, **_PROB, help="loss probability in the good state"),
        "loss_bad": Field(1.0, float, **_PROB, help="loss probability in the bad state"),
    },
    "fading": {
        "fading": Field("rayleigh", str, choices=("rayleigh", "rician", "none"),
            help="small-scale fading, redrawn every coherence block: rayleigh, rician "
                 "(k_factor) or none"),
        "k_factor": Field(3.0, float, min=0,
            help="rician: K factor, the line-of-sight to scattered power ratio (linear)"),
        "coherence_ms": Field(10.0, float, min=0, min_open=True,
            help="coherence time: the fading gain is redrawn every this many ms"),
        "tx_power_dbm": Field(20.0, float, help="transmit power, dBm"),
        "noise_dbm_per_hz": Field(-174.0, float, help="noise power spectral density, dBm/Hz"),
        "noise_figure_db": Field(7.0, float, min=0, help="receiver noise figure, dB"),
        "channel_bandwidth_mhz": Field(20.0, float, min=0, min_open=True,
            help="channel bandwidth, MHz: the noise power and the Shannon rate use it"),
        "path_loss_exponent": Field(3.0, float, min=0, min_open=True,
            help="log-distance path loss exponent"),
        "reference_loss_db": Field(40.0, float, min=0,
            help="path loss at 1 m, dB"),
        "shadowing_db": Field(4.0, float, min=0,
            help="standard deviation of the log-normal shadowing, drawn per link, dB"),
        "distance_m": Field(10.0, float, min=0, min_open=True,
            help="the link's length where neither the topology nor mobility gives one, metres"),
        "rate": Field("shannon", str, choices=("shannon", "mcs"),
            help="shannon: efficiency x B log2(1 + SNR); mcs: the highest rate of mcs_table "
                 "whose SNR threshold the SNR meets"),
        "efficiency": Field(0.75, float, min=0, min_open=True, max=1,
            help="shannon: the share of the Shannon capacity a link reaches"),
        "mcs_table": Field(None, str, noun=FILE_PATH,
            help="mcs: a CSV of rates and their SNR thresholds (none: the packaged 802.11ac "
                 "table, channels/data/mcs_80211.csv)"),
        "per_slope_db": Field(1.5, float, min=0, min_open=True,
            help="mcs: steepness of the packet error waterfall, 1/dB: PER = 1 / (1 + 9 "
                 "exp(slope x (SNR - threshold)))"),
        "outage_snr_db": Field(None, float,
            help="shannon: below this SNR (dB) a packet is lost; none: never"),
        "min_rate_mbps": Field(0.1, float, min=0, min_open=True,
            help="the lowest rate a link falls to, Mbit/s"),
    },
}

def _xy(value: list) -> str | None:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
    return None if len(value) == 2 and numbers else "[x, y] in metres"


NODE_EXTRA_KEYS: dict[str, Field] = {
    "pos": Field(None, list, noun="[x, y] in metres", check=_xy,
        help="the node's position [x, y], metres (on fading links the distance sets the path "
             "loss)"),
    "role": Field(None, str, choices=("worker", "server", "relay"),
        help="worker, server or relay (none: what the topology gives it)"),
    "compute_speed": Field(None, float, min=0, min_open=True,
        help="the node's compute speed as a factor of run.device_gflops (0.5: a straggler at "
             "half speed)"),
    "gflops": Field(None, float, min=0, min_open=True,
        help="the node's compute speed in GFLOP/s, in place of run.device_gflops"),
    "energy_profile": Field(None, str, noun="a device profile name",
                            help="this node's device profile for its joules, in place of "
                                 "network.energy_profile"),
}

NETWORK_KEYS: dict[str, Field] = {
    "topology": Field("star", str, choices=TOPOLOGIES,
        help="star (workers around a server or access point), ring, mesh, geometric (random "
             "positions, linked within range_m) or file (a graph, network.file)"),
    "workers": Field(4, int, min=0, min_open=True,
        help="number of worker nodes (a federated run: the clients of one exchange)"),
    "medium": Field("shared", str, choices=MEDIA,
        help="shared: the nodes of a cell share its air time (network.sharing); dedicated: "
             "every link has its own capacity"),
    "sharing": Field("tdma", str, choices=SHARINGS,
        help="how a shared medium is divided: tdma (turns), ofdma (parallel sub-channels) or "
             "csma (802.11 DCF contention, [network.csma])"),
    "engine": Field("auto", str, choices=ENGINES,
        help="the link layer's engine: auto (the compiled engines where they apply, SimPy "
             "elsewhere), fast (refused where the compiled engines do not apply) or simpy (the "
             "discrete-event reference)"),
    "file": Field(None, str, noun=FILE_PATH,
        help="topology = \"file\": a GraphML or JSON node-link graph whose nodes carry roles "
             "and whose edges carry link keys"),
    "area_m": Field(100.0, float, min=0, min_open=True,
        help="geometric: side of the square the workers are placed in, metres"),
    "range_m": Field(60.0, float, min=0, min_open=True,
        help="geometric: nodes closer than this are linked, metres"),
    "link": Field(None, dict),
    "csma": Field(None, dict),
    "nodes": Field(None, dict),
    "links": Field(None, list),
    # Energy (channels/energy.py): every node's device profile unless [network.nodes.X] names
    # its own, and a TOML file of profiles adding to the packaged ones.
    "energy_profile": Field("rpi4", str, noun="a device profile name",
        help="every node's device profile for its joules: rpi4, jetson_nano, phone, or one of "
             "network.energy_profiles"),
    "energy_profiles": Field(None, str, noun=FILE_PATH,
        help="a TOML file of device profiles of your own, beside the packaged ones"),
    "mobility": Field(None, dict),
}
_TABLES = ("link", "csma", "nodes", "links", "loss", "mobility")

# `[network.mobility]`: nodes that move on the virtual clock (channels/mobility.py).
MOBILITY_KEYS: dict[str, Field] = {
    "model": Field("random_waypoint", str, choices=("random_waypoint", "away", "path", "trace"),
        help="random_waypoint, away (straight out from the access point), path (waypoints per "
             "node) or trace (a CSV of positions)"),
    "nodes": Field(None, list, noun="a list of node names",
        help="random_waypoint: who moves (default: every worker)"),
    "area_m": Field([-50.0, -50.0, 50.0, 50.0], list, noun="[xmin, ymin, xmax, ymax] in metres",
        help="random_waypoint: the area the nodes walk in, [xmin, ymin, xmax, ymax] metres"),
    "speed_mps": Field([0.5, 1.5], list, noun="[min, max] metres per second",
        help="random_waypoint and away: a node's speed is drawn uniformly in [min, max], m/s"),
    "pause_s": Field(0.0, float, min=0, help="random_waypoint: pause at each waypoint"),
    "until_m": Field(None, float, min=0, min_open=True,
        help="away: where the walk stops (metres from the server)"),
    "paths": Field(None, dict, help="path: NODE = [[t, x, y], ...]"),
    "file": Field(None, str, noun=FILE_PATH, help="trace: CSV time_s,node,x_m,y_m"),
}


def _fix_files(table: Any, fields: dict[str, Field], fix: Callable[[str], str]) -> Any:
    if not isinstance(table, dict):
        return table   # the validator says what is wrong with it
    out = {k: fix(v) if k in fields and fields[k].is_file_path and isinstance(v, str) else v
           for k, v in table.items()}
    if isinstance(out.get("loss"), dict):
        model = out["loss"].get("model", "none")
        out["loss"] = _fix_files(out["loss"], LOSS_KEYS.get(model, {}), fix)
    return out


def map_file_paths(network: Any, fix: Callable[[str], str]) -> Any:
    """The raw `[network]` table with `fix` applied to every value of a file-path Field (the
    graph file, energy profiles, mobility trace, each link's Mahimahi traces and MCS table):
    how testbed.paths resolves the files named relative to the experiment file."""
    if not isinstance(network, dict):
        return network
    out = _fix_files(network, NETWORK_KEYS, fix)
    for key, fields in (("link", LINK_KEYS), ("mobility", MOBILITY_KEYS)):
        if key in out:
            out[key] = _fix_files(out[key], fields, fix)
    if isinstance(out.get("nodes"), dict):
        out["nodes"] = {n: _fix_files(o, {**LINK_KEYS, **NODE_EXTRA_KEYS}, fix)
                        for n, o in out["nodes"].items()}
    if isinstance(out.get("links"), list):
        out["links"] = [_fix_files(o, LINK_KEYS, fix) for o in out["links"]]
    return out


def _unknown(path: str, key: str, known) -> ChannelConfigError:
    return unknown_key(path, key, known, ChannelConfigError)


def _check(path: str, value: Any, field: Field) -> Any:
    value = field.validate(path, value, ChannelConfigError)
    if field is NODE_EXTRA_KEYS["pos"]:   # checked by its Field: [x, y] as floats
        return [float(value[0]), float(value[1])]
    return value


def validate_loss(loss: Any, path: str = "network.link.loss") -> dict:
    if loss is None:
        return {"model": "none"}
    if not isinstance(loss, dict):
        raise ChannelConfigError(path, loss, 'a table such as { model = "bernoulli", p = 0.01 }')
    model = loss.get("model", "none")
    if "model" not in loss and loss:   # parameters without the model they belong to
        names = ", ".join(map(repr, LOSS_MODELS))
        raise ChannelConfigError(f"{path}.model", None, names, message=(
            f"{path}.model is missing beside {', '.join(loss)}: the loss table names its model, "
            f'e.g. {{ model = "bernoulli", p = 0.01 }} (one of {names})'))
    if model not in LOSS_KEYS:
        raise ChannelConfigError(f"{path}.model", model, "one of " + ", ".join(map(repr, LOSS_MODELS)))
    rest = {k: v for k, v in loss.items() if k != "model" and v is not None}
    return {"model": model, **check_table(path, rest, LOSS_KEYS[model], error=ChannelConfigError)}


def validate_link(link: Any, path: str, *, partial: bool) -> dict:
    """One link table. `partial`: an override (only the keys given), else defaults are filled."""
    if not isinstance(link, dict):
        raise ChannelConfigError(path, link, "a table of link parameters")
    out: dict[str, Any] = {}
    for key, value in link.items():
        if key not in LINK_KEYS:
            raise _unknown(path, key, LINK_KEYS)
        if key == "loss":
            out[key] = validate_loss(value, f"{path}.loss")
        else:
            out[key] = _check(f"{path}.{key}", value, LINK_KEYS[key])
    if not partial:
        for key, field in LINK_KEYS.items():
            out.setdefault(key, {"model": "none"} if key == "loss" else field.default)
    return out


def _trace_rules(key: str) -> tuple[Rule, ...]:
    return (Rule("mtu_bytes", needs=(key,), check=lambda t: None if not t[key] or t["mtu_bytes"] <= 1500
                 else "<= 1500 with a Mahimahi trace (one packet of up to 1500 bytes per opportunity)"),
            Rule(key, needs=("loss",), check=lambda t: None if not t[key] or t["loss"]["model"] != "fading"
                 else "a trace or a fading model sets the rate, not both"))


# Rules between the keys of one complete link (the file's, a node's or a direction's merged
# over it, an edge's from a graph file).
LINK_RULES: tuple[Rule, ...] = (
    Rule("header_bytes", needs=("mtu_bytes",),
         check=lambda t: None if t["header_bytes"] < t["mtu_bytes"]
         else f"less than mtu_bytes ({t['mtu_bytes']}), so a packet carries payload"),
    *(rule for key in TRACE_KEYS for rule in _trace_rules(key)),
)
CSMA_RULES = (Rule("cw_max", needs=("cw_min",),
                   check=lambda t: None if t["cw_max"] >= t["cw_min"] else f">= cw_min ({t['cw_min']})"),)


def _traced(net: dict) -> bool:
    return any(o.get(k) for o in [net["link"], *net["links"], *net["nodes"].values()] for k in TRACE_KEYS)


NETWORK_RULES = (
    Rule("workers", needs=("topology",),
         check=lambda t: None if t["topology"] != "ring" or t["workers"] >= 2 else ">= 2 for a ring"),
    Rule("file", needs=("topology",),
         check=lambda t: None if t["topology"] != "file" or t["file"]
         else 'a GraphML or JSON node-link file when topology = "file"'),
    Rule("medium", needs=("link", "links", "nodes"),
         check=lambda t: None if t["medium"] != "shared" or not _traced(t)
         else '"dedicated" with a Mahimahi trace (the trace is one link\'s own capacity)'),
)


def check_link_consistency(link: dict, path: str) -> None:
    """The rules between the keys of one complete link (LINK_RULES)."""
    check_rules(path, link, LINK_RULES, ChannelConfigError)


def validate_csma(table: Any, path: str = "network.csma") -> dict:
    """The `[network.csma]` table with every default filled in."""
    return check_table(path, {} if table is None else table, CSMA_KEYS, error=ChannelConfigError,
                       rules=CSMA_RULES)


def _check_profiles(out: dict) -> None:
    """Every device profile named exists (packaged, or in `energy_profiles`)."""
    profiles = load_profiles(out["energy_profiles"])
    check_profile("network.energy_profile", out["energy_profile"], profiles)
    for name, node in out["nodes"].items():
        if node.get("energy_profile") is not None:
            check_profile(f"network.nodes.{name}.energy_profile", node["energy_profile"], profiles)


class ValidNetwork(dict):
    """The `[network]` table as `validate_network` returns it: every key checked, every default
    filled in. Whoever takes one (build_topology, testbed.emulation.edge_network.build_network) does not
    check it again; a plain dict (a test's, a benchmark's) is validated first."""


def validate_network(network: Any) -> ValidNetwork:
    """Check the `[network]` table and return it with every default filled in (a ValidNetwork
    is returned as it is: it was checked)."""
    if isinstance(network, ValidNetwork):
        return network
    if network is None:
        network = {}
    if not isinstance(network, dict):
        raise ChannelConfigError("network", network, "a table")
    out: dict[str, Any] = {}
    for key, value in network.items():
        if key not in NETWORK_KEYS:
            raise _unknown("network", key, NETWORK_KEYS)
    for key, field in NETWORK_KEYS.items():
        if key in _TABLES:
            continue
        value = network.get(key)
        out[key] = field.default if value is None else _check(f"network.{key}", value, field)
    check_rules("network", out, NETWORK_RULES[:2], ChannelConfigError)
    out["link"] = validate_link(network.get("link", {}), "network.link", partial=False)
    check_link_consistency(out["link"], "network.link")
    out["csma"] = validate_csma(network.get("csma"))
    mobility = network.get("mobility")
    out["mobility"] = None if mobility is None else check_table(
        "network.mobility", mobility, MOBILITY_KEYS, error=ChannelConfigError)

    nodes = network.get("nodes", {}) or {}
    if not isinstance(nodes, dict):
        raise ChannelConfigError("network.nodes", nodes, "a table of node name -> overrides")
    out["nodes"] = {}
    for name, over in nodes.items():
        path = f"network.nodes.{name}"
        if not isinstance(over, dict):
            raise ChannelConfigError(path, over, "a table of overrides")
        extra = {k: _check(f"{path}.{k}", v, NODE_EXTRA_KEYS[k]) for k, v in over.items()
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
    _check_profiles(out)
    return ValidNetwork(check_rules("network", out, NETWORK_RULES[2:], ChannelConfigError))
