"""Transfer times against figures worked out by hand (no loss)."""

import numpy as np
import pytest

from channels_helpers import make_net


def test_single_link_transfer_time():
    # 10 Mb/s, 5 ms; 1460-byte payloads + 40-byte header = 1500 B = 12,000 bits = 1.2 ms each.
    net = make_net(bandwidth_mbps=10.0, delay_ms=5.0)
    rep = net.transfer("w0", "server", [1460] * 25, at=2.0)
    expected = 2.0 + 25 * (1460 + 40) * 8 / 10e6 + 0.005
    assert rep.end_s == pytest.approx(expected, abs=1e-12)
    f = rep.flows[0]
    assert f.arrived.all() and f.packets_sent == 25 and f.retransmissions == 0
    # packet k arrives after k+1 serialisations plus the delay
    hand = 2.0 + np.arange(1, 26) * 1.2e-3 + 0.005
    assert np.allclose(f.arrival_s, hand, atol=1e-12)
    assert f.bytes_on_wire == 25 * 1500
    assert rep.links[("w0", "server")].busy_s == pytest.approx(25 * 1.2e-3)


def test_reliable_without_loss_is_as_fast_as_best_effort():
    a = make_net(delivery="reliable").transfer("w0", "server", [1000] * 40, at=0.0)
    b = make_net(delivery="best_effort").transfer("w0", "server", [1000] * 40, at=0.0)
    assert a.end_s == b.end_s and np.array_equal(a.flows[0].arrival_s, b.flows[0].arrival_s)


def test_time_is_absolute_and_links_stay_busy_across_calls():
    net = make_net()
    r1 = net.transfer("w0", "server", [1460] * 10, at=0.0)        # busy until 12 ms
    r2 = net.transfer("w0", "server", [1460] * 1, at=0.001)       # waits for the link
    assert r2.end_s == pytest.approx(0.012 + 0.0012 + 0.005)
    assert r1.end_s == pytest.approx(0.017)


@pytest.mark.parametrize("sharing", ["tdma", "ofdma"])
def test_n_stations_on_a_shared_cell_take_n_times_longer(sharing):
    n, pk = 5, 20
    per_packet = 1500 * 8 / 10e6
    net = make_net(workers=n, medium="shared", sharing=sharing)
    rep = net.gather({f"w{i}": [1460] * pk for i in range(n)}, "server", at=0.0)
    # alone: pk*1.2 ms + 5 ms; together the cell carries n*pk packets back to back
    assert rep.end_s == pytest.approx(n * pk * per_packet + 0.005, abs=1e-12)
    if sharing == "tdma":  # round robin: station i's last packet is the (pk-1)*n + i + 1-th
        for i in range(n):
            assert rep.nodes[f"w{i}"].completion_s == pytest.approx(((pk - 1) * n + i + 1) * per_packet + 0.005)
    ded = make_net(workers=n, medium="dedicated").gather({f"w{i}": [1460] * pk for i in range(n)}, "server", at=0.0)
    assert ded.end_s == pytest.approx(pk * per_packet + 0.005)


def test_broadcast_on_a_shared_cell_is_sent_once():
    n, pk = 6, 10
    net = make_net(workers=n, medium="shared")
    rep = net.broadcast("server", [f"w{i}" for i in range(n)], [1460] * pk, at=0.0)
    assert rep.end_s == pytest.approx(pk * 1.2e-3 + 0.005)
    assert all(f.arrived.all() for f in rep.flows) and len(rep.flows) == n
    ded = make_net(workers=n, medium="dedicated").broadcast("server", [f"w{i}" for i in range(n)], [1460] * pk, at=0.0)
    assert ded.end_s == pytest.approx(pk * 1.2e-3 + 0.005)   # each worker has its own link


def test_gather_stragglers_start_at_their_own_time():
    net = make_net(workers=3, medium="shared")
    at = {"w0": 0.0, "w1": 0.0, "w2": 1.0}          # w2 finishes computing 1 s later
    rep = net.gather({w: [1460] * 10 for w in at}, "server", at=at)
    # w0 and w1 share the cell: 20 packets back to back; w2 then has it alone
    assert rep.nodes["w1"].completion_s == pytest.approx(20 * 1.2e-3 + 0.005)
    assert rep.nodes["w2"].completion_s == pytest.approx(1.0 + 10 * 1.2e-3 + 0.005)


def test_straggler_joins_round_robin_mid_way():
    net = make_net(workers=2, medium="shared")
    # w1 joins at 6 ms: w0 alone sends 5 packets (0-6 ms), then they alternate
    rep = net.gather({"w0": [1460] * 10, "w1": [1460] * 3}, "server", at={"w0": 0.0, "w1": 0.006})
    arr1 = rep.flows[1].arrival_s - 0.005
    assert np.allclose(arr1, np.array([7, 9, 11]) * 1.2e-3)
    assert rep.nodes["w0"].completion_s == pytest.approx(13 * 1.2e-3 + 0.005)


@pytest.mark.parametrize("n", [3, 4, 6])
def test_ring_allreduce_time(n):
    S, B, d = n * 14600, 8e6, 0.003          # chunk S/N = 10 packets of 1460 B payload
    net = make_net(topology="ring", workers=n, bandwidth_mbps=B / 1e6, delay_ms=d * 1e3)
    rep = net.ring_allreduce([f"w{i}" for i in range(n)], S, at=0.0)
    chunk_wire = (S / n) / 1460 * 1500 * 8
    assert rep.end_s == pytest.approx(2 * (n - 1) * (chunk_wire / B + d), rel=1e-12)
    assert len(rep.flows) == 2 * (n - 1) * n


def test_multi_hop_store_and_forward():
    # geometric line: w0 - server - w1 placed so w0 and w1 are out of range of each other
    from channels.network import Network
    from channels.topology import build_topology
    cfg = {"topology": "geometric", "workers": 2, "medium": "dedicated", "area_m": 100, "range_m": 60,
           "nodes": {"w0": {"pos": [0.0, 50.0]}, "w1": {"pos": [100.0, 50.0]}},
           "link": {"bandwidth_mbps": 10.0, "delay_ms": 2.0}}
    net = Network(build_topology(cfg, 0), rng=np.random.default_rng(0))
    assert net.path("w0", "w1") == ["w0", "server", "w1"]
    rep = net.transfer("w0", "w1", [1460] * 4, at=0.0)
    # pipeline of 2 hops: last packet leaves w0 at 4*1.2 ms, arrives +2 ms, then 1.2 ms + 2 ms
    assert rep.end_s == pytest.approx(4 * 1.2e-3 + 0.002 + 1.2e-3 + 0.002)


def test_payload_bytes_and_packet_size_check():
    net = make_net(mtu_bytes=1000, header_bytes=60)
    assert net.payload_bytes("w0", "server") == 940
    with pytest.raises(ValueError, match="0..940"):
        net.transfer("w0", "server", [941], at=0.0)


def test_set_link_changes_rate():
    net = make_net()
    changed = net.set_link("w0", "server", bandwidth_mbps=20.0)
    assert set(changed) == {("w0", "server"), ("server", "w0")}
    rep = net.transfer("w0", "server", [1460] * 10, at=0.0)
    assert rep.end_s == pytest.approx(10 * 0.6e-3 + 0.005)
    assert len(net.set_link(None, None, delay_ms=1.0)) == len(net.links())
