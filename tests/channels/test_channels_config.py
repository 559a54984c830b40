"""Bad input gives one clear error naming the key (or file and line), the value, what is allowed."""
import json

import networkx as nx
import numpy as np
import pytest

from channels.config import NETWORK_KEYS, validate_network
from channels.errors import ChannelConfigError
from channels.network import Network
from channels.topology import build_topology


@pytest.mark.parametrize("net,key,words", [
    ({"link": {"bandwidth_mbps": -5}}, "network.link.bandwidth_mbps", ["-5", "> 0"]),
    ({"link": {"loss": {"model": "bernoulli", "p": 1.2}}}, "network.link.loss.p", ["1.2", "[0, 1]"]),
    ({"link": {"loss": {"model": "bernoulli", "p": -0.1}}}, "network.link.loss.p", ["-0.1"]),
    ({"link": {"loss": {"model": "bernouli", "p": 0.1}}}, "network.link.loss.model", ["bernouli", "'bernoulli'"]),
    ({"link": {"loss": {"p": 0.1}}}, "network.link.loss.model", ["is missing beside p", "'bernoulli'"]),
    ({"topology": "hexagon"}, "network.topology", ["hexagon", "'star'"]),
    ({"toplogy": "star"}, "network.toplogy", ["did you mean 'network.topology'"]),
    ({"link": {"loss": {"model": "gilbert_elliott", "p_good_to_bad": 0.1}}}, "network.link.loss.p_bad_to_good", ["required"]),
    ({"link": {"mtu_bytes": 40, "header_bytes": 40}}, "network.link.header_bytes", ["less than mtu_bytes"]),
    ({"medium": "air"}, "network.medium", ["'dedicated'", "'shared'"]),
    ({"nodes": {"w1": {"delay_m": 3}}}, "network.nodes.w1.delay_m", ["did you mean 'network.nodes.w1.delay_ms'"]),
    ({"links": [{"src": "w0", "dst": "server", "delivery": "maybe"}]}, "network.links[0].delivery", ["maybe"]),
    ({"link": {"loss": {"model": "fading", "rate": "turbo"}}}, "network.link.loss.rate", ["'shannon'", "'mcs'"]),
])
def test_bad_values_name_their_key(net, key, words):
    with pytest.raises(ChannelConfigError) as e:
        validate_network(net)
    assert e.value.key == key
    msg = str(e.value)
    assert key in msg and all(w in msg for w in words), msg
    assert "\n" not in msg


def test_defaults_are_filled_and_keys_published():
    out = validate_network({"topology": "ring", "workers": 3})
    assert out["link"]["header_bytes"] == 40 and out["link"]["loss"] == {"model": "none"}
    assert out["medium"] in ("dedicated", "shared") and "link" in NETWORK_KEYS


def test_graph_with_no_path_is_an_error():
    cfg = {"topology": "geometric", "workers": 2, "range_m": 10, "area_m": 100,
           "nodes": {"w0": {"pos": [0.0, 0.0]}, "w1": {"pos": [100.0, 100.0]}}}
    with pytest.raises(ChannelConfigError, match="no path from server to w0, w1"):
        build_topology(cfg, 0)


def test_unknown_node_and_missing_edge_override():
    with pytest.raises(ChannelConfigError, match="network.nodes.w9"):
        build_topology({"workers": 2, "nodes": {"w9": {"delay_ms": 1}}}, 0)
    with pytest.raises(ChannelConfigError, match=r"network.links\[0\]"):
        build_topology({"topology": "star", "workers": 2, "links": [{"src": "w0", "dst": "w1", "delay_ms": 1}]}, 0)


def test_overrides_reach_the_links():
    g = build_topology({"workers": 3, "link": {"bandwidth_mbps": 10},
                        "nodes": {"w1": {"bandwidth_mbps": 2.0, "compute_speed": 0.5}},
                        "links": [{"src": "server", "dst": "w2", "delay_ms": 9.0}]}, 0)
    net = Network(g, rng=np.random.default_rng(0))
    specs = {(u, v): s for u, v, s in net.links()}
    assert specs[("w1", "server")].bandwidth_mbps == 2.0 and specs[("w0", "server")].bandwidth_mbps == 10
    assert specs[("server", "w2")].delay_ms == 9.0 and specs[("w2", "server")].delay_ms == 1.0
    assert g.nodes["w1"]["compute_speed"] == 0.5


def test_topologies_and_files(tmp_path):
    assert build_topology({"topology": "ring", "workers": 5}, 0).number_of_edges() == 5
    assert build_topology({"topology": "mesh", "workers": 3}, 0).number_of_edges() == 6
    star = build_topology({"topology": "star", "workers": 3}, 0)
    assert star.nodes["server"]["role"] == "server" and star.degree("server") == 3
    g = nx.Graph()
    g.add_node("server", role="server")
    g.add_node("a", role="worker")
    g.add_node("r", role="relay")
    g.add_edge("a", "r", bandwidth_mbps=5.0)
    g.add_edge("r", "server")
    nx.write_graphml(g, tmp_path / "g.graphml")
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(g, edges="links")))
    for name in ("g.graphml", "g.json"):
        h = build_topology({"topology": "file", "file": str(tmp_path / name)}, 0)
        assert h.edges["a", "r"]["link"].bandwidth_mbps == 5.0 and h.nodes["r"]["role"] == "relay"
    (tmp_path / "bad.json").write_text('{"nodes": [\n  oops]}')
    with pytest.raises(ChannelConfigError, match="bad.json:2"):
        build_topology({"topology": "file", "file": str(tmp_path / "bad.json")}, 0)


def test_drop_tail_queue_at_a_relay():
    # w0 -(96 Mb/s)- r -(10 Mb/s)- server: the relay's queue of 5 overflows on best effort
    g = nx.Graph()
    g.add_node("server", role="server")
    g.add_node("w0", role="worker")
    g.add_node("r", role="relay")
    g.add_edge("w0", "r", bandwidth_mbps=96.0)
    g.add_edge("r", "server")
    import tempfile, os
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.graphml")
        nx.write_graphml(g, path)
        cfg = {"topology": "file", "file": path, "medium": "dedicated",
               "link": {"bandwidth_mbps": 10.0, "queue_packets": 5, "delivery": "best_effort", "delay_ms": 0.0}}
        net = Network(build_topology(cfg, 0), rng=np.random.default_rng(0))
        rep = net.transfer("w0", "server", [1460] * 20, at=0.0)
        f = rep.flows[0]
        # By hand: packet k reaches r at 0.125 (k+1) ms; r sends one per 1.2 ms from 0.125 ms.
        # 0 is in service, 1-5 wait, 6-9 find 5 waiting and are dropped; at 1.325 ms packet 1
        # starts, so 10 (1.375 ms) gets in; 11-19 (up to 2.5 ms) are dropped before 2.525 ms.
        assert np.flatnonzero(f.arrived).tolist() == [0, 1, 2, 3, 4, 5, 10]
        assert rep.links[("r", "server")].packets == 7 and rep.links[("w0", "r")].lost == 13
        # reliable: the relay's drops are resent, everything arrives
        net2 = Network(build_topology({**cfg, "link": {**cfg["link"], "delivery": "reliable", "retry_limit": 50}}, 0),
                       rng=np.random.default_rng(0))
        assert net2.transfer("w0", "server", [1460] * 20, at=0.0).flows[0].arrived.all()
