"""Topologies as networkx graphs: nodes carry `role` (and `pos`), edges carry `link` (LinkSpec).

Node names: workers `w0..w{N-1}` and the aggregator `server` (on a star, the access point hosts
it); `role` is "worker", "server" or "relay", `pos` (x, y) in metres. Graphs are undirected and
each direction of an edge is its own link (own queue, own loss state), with the same spec
unless overridden. Per-direction overrides (`[[network.links]]` with src/dst) live in the edge attribute
`directed` = {(src, dst): LinkSpec}; `link_spec(graph, u, v)` resolves one direction.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import networkx as nx
import numpy as np

from channels.config import LINK_KEYS, NODE_EXTRA_KEYS, check_link_consistency, validate_link, validate_network
from channels.errors import ChannelConfigError
from channels.link import LinkSpec
from channels.mobility import build_mobility

SERVER = "server"


def worker_names(n: int) -> list[str]:
    return [f"w{i}" for i in range(n)]


def link_spec(graph: nx.Graph, u: str, v: str) -> LinkSpec:
    data = graph.edges[u, v]
    return data.get("directed", {}).get((u, v), data["link"])


def _base_graph(net: dict, rng: np.random.Generator) -> nx.Graph:
    kind, n = net["topology"], net["workers"]
    g = nx.Graph()
    workers = worker_names(n)
    if kind == "star":
        g.add_node(SERVER, role="server", pos=(0.0, 0.0))
        for i, w in enumerate(workers):
            a = 2 * math.pi * i / n
            g.add_node(w, role="worker", pos=(10 * math.cos(a), 10 * math.sin(a)))
            g.add_edge(w, SERVER)
    elif kind == "ring":
        for i, w in enumerate(workers):
            a = 2 * math.pi * i / n
            g.add_node(w, role="worker", pos=(10 * math.cos(a), 10 * math.sin(a)))
        for i in range(n):
            if n > 1:
                g.add_edge(workers[i], workers[(i + 1) % n])
    elif kind == "mesh":
        g.add_node(SERVER, role="server", pos=(0.0, 0.0))
        for i, w in enumerate(workers):
            a = 2 * math.pi * i / n
            g.add_node(w, role="worker", pos=(10 * math.cos(a), 10 * math.sin(a)))
        names = [SERVER, *workers]
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                g.add_edge(a, b)
    elif kind == "geometric":
        side = net["area_m"]
        g.add_node(SERVER, role="server", pos=(side / 2, side / 2))
        xy = rng.uniform(0, side, size=(n, 2))
        for w, (x, y) in zip(workers, xy):
            g.add_node(w, role="worker", pos=(float(x), float(y)))
        for name, over in net["nodes"].items():  # placements given in the file win
            if "pos" in over and name in g:
                g.nodes[name]["pos"] = tuple(over["pos"])
        names = list(g.nodes)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if _distance(g, a, b) <= net["range_m"]:
                    g.add_edge(a, b)
    elif kind == "file":
        g = _read_graph_file(net["file"])
    return g


def _distance(g: nx.Graph, a, b) -> float:
    (x1, y1), (x2, y2) = g.nodes[a]["pos"], g.nodes[b]["pos"]
    return math.hypot(x1 - x2, y1 - y2)


def _read_graph_file(path: str) -> nx.Graph:
    p = Path(path)
    try:
        if p.suffix.lower() in (".graphml", ".xml"):
            g = nx.read_graphml(p)
        else:
            data = json.loads(p.read_text())
            g = nx.node_link_graph(data, edges="links" if "links" in data else "edges")
    except FileNotFoundError:
        raise ChannelConfigError("network.file", path, "an existing GraphML (.graphml) or JSON node-link file")
    except json.JSONDecodeError as e:
        raise ChannelConfigError(f"{path}:{e.lineno}", e.msg, "valid JSON (a node-link graph)")
    except Exception as e:  # malformed GraphML / node-link structure
        raise ChannelConfigError("network.file", path, f"a GraphML or JSON node-link graph ({e})")
    g = nx.Graph(g)
    g = nx.relabel_nodes(g, {n: str(n) for n in g.nodes})
    for n, attrs in g.nodes(data=True):
        role = attrs.get("role", SERVER if n == SERVER else "worker")
        attrs["role"] = NODE_EXTRA_KEYS["role"].validate(f"{path}: node {n} role", role, ChannelConfigError)
        if "x" in attrs and "y" in attrs and "pos" not in attrs:
            attrs["pos"] = (float(attrs.pop("x")), float(attrs.pop("y")))
        elif isinstance(attrs.get("pos"), (list, tuple)):
            attrs["pos"] = tuple(float(x) for x in attrs["pos"])
    for u, v, attrs in g.edges(data=True):
        over = {k: attrs.pop(k) for k in list(attrs) if k in LINK_KEYS}
        attrs["_file_link"] = validate_link(over, f"{path}: edge {u}-{v}", partial=True)
    return g


def build_topology(network: dict, seed) -> nx.Graph:
    """The `[network]` table -> graph. A ValidNetwork (channels.config.validate_network's) is
    used as it is; a raw table is validated first."""
    net = validate_network(network)
    rng = np.random.default_rng([int(seed), 0x70B0])
    g = _base_graph(net, rng)
    if g.number_of_nodes() == 0:
        raise ChannelConfigError("network.topology", net["topology"], "a graph with at least one node")
    base = net["link"]
    for name, over in net["nodes"].items():
        if name not in g:
            raise ChannelConfigError(f"network.nodes.{name}", name,
                                     f"a node of the topology ({', '.join(map(str, g.nodes))})")
        for k in NODE_EXTRA_KEYS:
            if k in over:
                g.nodes[name][k] = tuple(over[k]) if k == "pos" else over[k]
    node_link = {n: {k: v for k, v in o.items() if k in LINK_KEYS} for n, o in net["nodes"].items()}
    geometric = net["topology"] == "geometric"
    hops = _hops_to_server(g)
    for u, v, attrs in g.edges(data=True):
        d = {**base, **node_link.get(u, {}), **node_link.get(v, {}), **attrs.pop("_file_link", {})}
        check_link_consistency(d, f"network.link (edge {u}-{v})")
        explicit = "pos" in net["nodes"].get(u, {}) or "pos" in net["nodes"].get(v, {})
        if "pos" in g.nodes[u] and "pos" in g.nodes[v] and (geometric or explicit):
            d["distance_m"] = _distance(g, u, v)  # fading path loss uses the edge's length
        attrs["link"] = LinkSpec.from_dict(d)
        attrs["directed"] = {}
        # Per-direction traces: uplink = towards the server (fewer hops to it), as Mahimahi's
        # mm-link takes one trace per direction; an edge with no such direction keeps `trace`.
        hu, hv = hops.get(u, math.inf), hops.get(v, math.inf)
        if hu != hv:
            up = (u, v) if hv < hu else (v, u)
            for key, pair in (("uplink_trace", up), ("downlink_trace", up[::-1])):
                if d.get(key):
                    attrs["directed"][pair] = attrs["link"].with_changes(trace=d[key])
    for i, over in enumerate(net["links"]):
        u, v = over["src"], over["dst"]
        if not g.has_edge(u, v):
            raise ChannelConfigError(f"network.links[{i}]", f"{u}->{v}",
                                     "an existing edge of the topology (src and dst adjacent)")
        spec = link_spec(g, u, v)
        changes = {k: val for k, val in over.items() if k not in ("src", "dst")}
        g.edges[u, v]["directed"][(u, v)] = spec.with_changes(**changes)
    _check_connected(g, net["topology"])
    g.graph["csma"] = net["csma"]
    if net["mobility"] is not None:  # who moves, and where each node is at a virtual time
        g.graph["mobility"] = build_mobility(net["mobility"], g, seed)
    return g


def _hops_to_server(g: nx.Graph) -> dict:
    servers = [n for n, a in g.nodes(data=True) if a.get("role") == "server"]
    return nx.multi_source_dijkstra_path_length(g, servers, weight=None) if servers else {}


def _check_connected(g: nx.Graph, kind: str) -> None:
    servers = [n for n, a in g.nodes(data=True) if a.get("role") == "server"]
    comps = list(nx.connected_components(g))
    if len(comps) > 1:
        hub = servers[0] if servers else next(iter(g.nodes))
        cut = sorted(str(n) for n in g.nodes if not nx.has_path(g, hub, n))
        raise ChannelConfigError("network.topology", kind,
                                 f"a connected graph: no path from {hub} to {', '.join(cut)} "
                                 "(geometric: raise network.range_m or shrink network.area_m)")
