"""The topology as plain JSON (the runs table's `graph_json`): written by the loop,
read by the steering validator (testbed/records/controls.py) and the dashboard's figures. One module,
so the writer and the readers agree on the format.

Format: {"nodes": [{"id", "role", optional "pos": [x, y]}], "edges": [{"source", "target",
bandwidth_mbps, delay_ms, mtu_bytes, header_bytes, delivery}]}; readers also accept networkx's
node-link "links" and "directed" keys.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only an annotation: the steering validator reads JSON without networkx
    import networkx as nx


def graph_to_json(graph: nx.Graph) -> dict:
    """The topology as plain JSON for the store/dashboard: roles, positions, link figures."""
    nodes = []
    for n, attrs in graph.nodes(data=True):
        item = {"id": str(n), "role": attrs.get("role", "worker")}
        if attrs.get("pos") is not None:
            item["pos"] = [float(x) for x in attrs["pos"]]
        nodes.append(item)
    edges = []
    for u, v, attrs in graph.edges(data=True):
        spec = attrs.get("link")
        item = {"source": str(u), "target": str(v)}
        for name in ("bandwidth_mbps", "delay_ms", "mtu_bytes", "header_bytes", "delivery"):
            if spec is not None and hasattr(spec, name):
                val = getattr(spec, name)
                item[name] = val if isinstance(val, (int, float, str)) or val is None else str(val)
        edges.append(item)
    return {"nodes": nodes, "edges": edges}


def graph_nodes(graph: dict | None) -> list[dict]:
    """Node dicts (`id`, `role`, optional `pos`) of a node-link graph; [] when there is none."""
    return list((graph or {}).get("nodes") or [])


def graph_edges(graph: dict | None) -> list[dict]:
    """Edge dicts (`source`, `target`, attributes) of a node-link graph.

    networkx writes the list under "edges" (>= 3.4) or "links" (older): accept both.
    """
    graph = graph or {}
    return list(graph.get("edges") or graph.get("links") or [])


def directed_links(graph: dict | None) -> list[tuple[str, str]]:
    """Every one-way link of the topology; an undirected edge is two links."""
    directed = bool((graph or {}).get("directed", False))
    out: list[tuple[str, str]] = []
    for e in graph_edges(graph):
        u, v = str(e["source"]), str(e["target"])
        out.append((u, v))
        if not directed:
            out.append((v, u))
    return list(dict.fromkeys(out))
