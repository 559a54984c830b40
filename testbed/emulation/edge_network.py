"""The one value built from a validated `[network]` table: the graph, its workers in order, the
server (or None) and the `channels.Network` with the table's medium, sharing and engine.

The loop, `testbed probe` and the torchrun launcher all build it here, so a `[network]`
key, `engine` included, is read in one place.
"""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from channels.network import Network
from channels.topology import build_topology

# Salt of the link layer's random stream: a run's loss/timing draws depend on [run] seed only.
NETWORK_RNG_SALT = 0xC4A7


def worker_order(graph: nx.Graph) -> list:
    """Worker nodes in index order: w0, w1, ..., w10 (by length, then name)."""
    return sorted((n for n, a in graph.nodes(data=True) if a.get("role") == "worker"),
                  key=lambda n: (len(str(n)), str(n)))


def server_of(graph: nx.Graph):
    """The aggregator node (the access point on a star), or None on a server-less topology."""
    return next((n for n, a in graph.nodes(data=True) if a.get("role") == "server"), None)


@dataclass
class EdgeNetwork:
    graph: nx.Graph
    workers: list           # worker r is workers[r]
    server: object          # node name, or None
    network: object         # channels.network.Network

    @property
    def shared(self) -> bool:
        """One cell's airtime for every link touching the access point."""
        return self.network.medium == "shared"


def build_network(table: dict, seed: int, draws_seed: int | None = None) -> EdgeNetwork:
    """Graph, workers, server and Network of a validated `[network]` table (defaults filled).
    `draws_seed`: the link layer's draws (backoffs, packet errors) from this seed instead of
    `seed`, the topology, positions and mobility legs staying the seed's (a second random run of
    the same cell)."""
    graph = build_topology(table, seed)
    draws = seed if draws_seed is None else draws_seed
    # the validated table has every key (its defaults are the schema's: no second default here)
    network = Network(graph, medium=table["medium"], sharing=table["sharing"], engine=table["engine"],
                      rng=np.random.default_rng([draws, NETWORK_RNG_SALT]), csma=table["csma"])
    return EdgeNetwork(graph, worker_order(graph), server_of(graph), network)
