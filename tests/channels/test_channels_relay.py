"""Multi-hop traffic on the relay engine (channels/relay.py): hand-computed relay timings and
drop-tail, and identical reports to the SimPy engine over relayed and routed paths."""
import itertools

import networkx as nx
import numpy as np
import pytest

from channels.errors import ChannelConfigError, DeliveryError
from channels.link import LinkSpec
from channels.loss import build_loss
from channels import relay
from channels.network import Network
from channels_helpers import identical, make_net
from test_channels_engines import LOSSES, _same

MS = 1e-3


def _mesh(engine, medium="dedicated", sharing="tdma", seed=0, **link) -> Network:
    """A routed mesh: workers reach each other and the server over 1-3 hops of unequal delay,
    through a relay node and through the access point (whose links share a cell if shared)."""
    g = nx.Graph()
    g.add_node("server", role="server")
    g.add_node("r0", role="relay")
    for w in ("w0", "w1", "w2", "w3", "w4"):
        g.add_node(w, role="worker")
    edges = {("w0", "r0"): 2.0, ("w1", "r0"): 3.0, ("r0", "server"): 1.5, ("server", "w2"): 2.5,
             ("w2", "w3"): 4.0, ("w3", "w4"): 1.0, ("w4", "server"): 6.0}
    for (a, b), d in edges.items():
        g.add_edge(a, b, link=LinkSpec(**{"bandwidth_mbps": 10.0, **link, "delay_ms": d}))
    return Network(g, medium=medium, sharing=sharing, engine=engine, rng=np.random.default_rng(seed))


def test_store_and_forward_times_by_hand():
    # 1500-byte packets at 10 Mb/s: 1.2 ms per hop, 5 ms delay. Dedicated links pipeline: packet
    # k leaves w0 at 1.2(k+1), reaches the server 5 ms later and, the server->w1 link being as
    # fast, is forwarded at once: arrival 1.2(k+1) + 5 + 1.2 + 5 ms.
    net = make_net(workers=3, engine="fast")
    rep = net.transfer("w0", "w1", [1460] * 4, at=0.0)
    assert np.allclose(rep.flows[0].arrival_s, [(1.2 * (k + 1) + 11.2) * MS for k in range(4)], rtol=0, atol=1e-12)
    assert rep.links[("w0", "server")].packets == rep.links[("server", "w1")].packets == 4
    # One TDMA cell: w0 sends its three packets back to back (0-3.6 ms); the server's first
    # arrives at 6.2 ms on an idle cell; the others arrive at 7.4 and 8.6 ms, just as the cell
    # frees, so each goes at once: arrivals at w1 at 6.2 + 1.2 + 5, then 1.2 ms apart.
    net = make_net(workers=3, medium="shared", engine="fast")
    rep = net.transfer("w0", "w1", [1460] * 3, at=0.0)
    assert np.allclose(rep.flows[0].arrival_s, [12.4 * MS, 13.6 * MS, 14.8 * MS], rtol=0, atol=1e-12)
    assert rep.end_s == pytest.approx(14.8 * MS, abs=1e-12)


def test_drop_tail_at_the_relay_by_hand():
    # 100 Mb/s into the relay, 1 Mb/s out of it, room for 2 waiting packets. Packet 0 is sent on
    # at once (12 ms on the slow hop), 1 and 2 wait, 3..9 arrive 0.12 ms apart to a full queue.
    for engine in ("fast", "simpy"):
        net = make_net(workers=2, engine=engine, delivery="best_effort", queue_packets=2)
        net.set_link("w0", "server", one_way=True, bandwidth_mbps=100.0)
        net.set_link("server", "w1", one_way=True, bandwidth_mbps=1.0)
        rep = net.transfer("w0", "w1", [1460] * 10, at=0.0)
        f = rep.flows[0]
        assert f.arrived.tolist() == [True] * 3 + [False] * 7
        assert rep.links[("w0", "server")].lost == 7 and f.packets_lost == 7
        assert rep.links[("server", "w1")].packets == 3
        # packet 2 leaves the relay after 0 and 1: 0.12 + 5 + 3 x 12 ms, then 5 ms to w1
        assert f.completion_s == pytest.approx((0.12 + 5 + 3 * 12 + 5) * MS)


def _traffic(net, kind, rng):
    if kind == "ring-over-star":
        ws = [f"w{i}" for i in range(4)]
        return [net.ring_allreduce(ws, int(rng.integers(20_000, 40_000)), at=0.0),
                net.transfer("w3", "w1", [900] * 25, at=0.01)]
    if kind == "mesh":
        sends = {w: [int(x) for x in rng.integers(200, 1461, size=rng.integers(5, 25))] for w in ("w0", "w1", "w3")}
        g = net.gather(sends, "w4", at={"w0": 0.0, "w1": 0.002, "w3": 0.0})
        b = net.broadcast("w2", ["w0", "w1", "w4"], [1200] * 15, at=g.end_s)
        return [g, b, net.transfer("w4", "w0", [1460] * 30, at=b.end_s - 0.01)]
    ws = [f"w{i}" for i in range(5)]     # ring topology: routes of up to two hops
    b = net.broadcast("w0", ws, [1000] * 20, at=0.0)
    return [b, net.gather({w: [1460] * 12 for w in ws[1:]}, "w0", at=b.end_s)]


TOPOLOGIES = ["ring-over-star", "mesh", "ring"]
MEDIA = ["dedicated", "shared-tdma", "shared-ofdma"]


@pytest.mark.parametrize("kind,medium", list(itertools.product(TOPOLOGIES, MEDIA)))
def test_relay_engine_agrees_with_simpy(kind, medium):
    med, _, sharing = medium.partition("-")
    combos = list(itertools.product(["reliable", "best_effort"], [100, 2]))
    for i, (delivery, queue) in enumerate(combos):
        loss = LOSSES[(i + TOPOLOGIES.index(kind)) % 3]     # none, Bernoulli, Gilbert-Elliott
        seed = 11 * i + len(kind)
        reps = []
        for engine in ("fast", "simpy"):
            link = dict(delivery=delivery, retry_limit=40, loss=loss, queue_packets=queue, ack_bytes=14)
            if kind == "mesh":
                net = _mesh(engine, med, sharing or "tdma", seed=seed, **link)
            else:
                net = make_net("star" if kind == "ring-over-star" else "ring", workers=4 if kind != "ring" else 5,
                               medium=med, sharing=sharing or "tdma", engine=engine, seed=seed, **link)
            reps.append(_traffic(net, kind, np.random.default_rng(seed)))
        for a, b in zip(*reps):
            identical(a, b)


def test_relay_queue_drops_agree_under_bursty_loss():
    # Small relay queues behind a fast first hop, Gilbert-Elliott bursts on both hops, reliable:
    # drops, channel losses and retransmissions all interleave.
    reps = []
    for engine in ("fast", "simpy"):
        net = make_net(workers=4, engine=engine, seed=4, queue_packets=3, retry_limit=60, loss=LOSSES[2])
        for i in range(4):
            net.set_link("server", f"w{i}", one_way=True, bandwidth_mbps=2.0)
        reps.append(net.ring_allreduce([f"w{i}" for i in range(4)], 60_000, at=0.0))
    identical(*reps)
    channel = reps[1].links[("server", "w1")].lost
    # queue drops are counted as losses on the hop into the relay: more than the channel alone
    assert reps[1].links[("w0", "server")].lost > 0 and channel > 0
    sent_in = reps[1].links[("w0", "server")].packets - reps[1].links[("w0", "server")].lost
    assert sent_in == reps[1].links[("server", "w1")].packets - channel  # every accepted packet delivered once


def test_auto_falls_back_to_simpy_where_the_relay_engine_does_not_reach():
    fading = LOSSES[3]
    a = make_net(workers=3, engine="auto", seed=2, loss=fading).transfer("w0", "w2", [1000] * 30, at=0.0)
    b = make_net(workers=3, engine="simpy", seed=2, loss=fading).transfer("w0", "w2", [1000] * 30, at=0.0)
    _same(a, b)
    with pytest.raises(ChannelConfigError, match="fading"):
        make_net(workers=3, engine="fast", loss=fading).transfer("w0", "w2", [1000] * 3, at=0.0)


@pytest.mark.parametrize("loss", LOSSES[:3])
def test_peeked_losses_are_the_ones_drawn(loss):
    a, b = build_loss(loss, 5), build_loss(loss, 5)
    seen = a.peek(5000)
    a.skip(3000)
    assert np.array_equal(seen, b.draw(np.zeros(5000)))
    assert np.array_equal(a.draw(np.zeros(2000)), seen[3000:])


def test_relay_engine_resumes_where_its_peeked_losses_ran_out(monkeypatch):
    # The relay engine peeks each link's loss outcomes ahead and stops for more when a link runs
    # out. With one outcome peeked at a time it stops and resumes at nearly every transmission of
    # a lossy relayed ring whose small relay queues drop packets handed back across media; the
    # reports must still be the SimPy engine's, float for float.
    monkeypatch.setattr(relay, "PEEK", 0)
    monkeypatch.setattr(relay, "MIN_PEEK", 1)
    asked = []
    more = relay._more_draws
    monkeypatch.setattr(relay, "_more_draws", lambda *a: asked.append(1) or more(*a))
    reps = []
    for engine in ("fast", "simpy"):
        net = make_net(workers=4, engine=engine, seed=9, queue_packets=2, retry_limit=200,
                       loss={"model": "bernoulli", "p": 0.5})
        for i in range(4):
            net.set_link("server", f"w{i}", one_way=True, bandwidth_mbps=2.0)
        ring = net.ring_allreduce([f"w{i}" for i in range(4)], 30_000, at=0.0)
        reps.append([ring, net.transfer("w0", "w2", [1460] * 40, at=ring.end_s)])
    for a, b in zip(*reps):
        identical(a, b)
    assert reps[1][0].links[("w0", "server")].lost > reps[1][0].links[("w0", "server")].packets / 3
    assert len(asked) > 100


def _gives_up(engine, link, changes, packets):
    net = make_net(workers=3, engine=engine, seed=1, **link)
    for (u, v), change in changes.items():
        net.set_link(u, v, one_way=True, **change)
    with pytest.raises(DeliveryError) as e:
        net.transfer("w0", "w1", [1460] * packets, at=0.0)
    return e.value


@pytest.mark.parametrize("cause", ["channel loss on the second hop", "drop-tail at the relay"])
def test_relayed_delivery_gives_up_where_simpy_does(cause):
    if cause.startswith("channel"):
        # one packet; the first hop is clean, every transmission on server->w1 is lost: it is sent
        # 1 + retry_limit times there, 1.2 ms each, the next ready rto = 2 x 5 + 1 ms after a loss
        link, changes = dict(retry_limit=2), {("server", "w1"): dict(loss={"model": "bernoulli", "p": 1.0})}
        packets = 1
    else:
        # 100 Mb/s in, 1 Mb/s out, room for one waiting packet, no resends: the third packet is
        # dropped at the relay and its sender gives up at once
        link = dict(retry_limit=0, queue_packets=1)
        changes = {("w0", "server"): dict(bandwidth_mbps=100.0), ("server", "w1"): dict(bandwidth_mbps=1.0)}
        packets = 20
    fast, simpy = (_gives_up(engine, link, changes, packets) for engine in ("fast", "simpy"))
    assert (fast.src, fast.dst, fast.packet, fast.attempts, fast.at_s) == \
           (simpy.src, simpy.dst, simpy.packet, simpy.attempts, simpy.at_s)
    if cause.startswith("channel"):
        assert (fast.packet, fast.attempts) == (0, 3)
        # it reaches the relay at 1.2 + 5 ms; tries end at 7.4, 7.4 + 11 + 1.2, 7.4 + 2 (11 + 1.2) ms
        assert fast.at_s == pytest.approx((7.4 + 2 * 12.2) * MS)
    else:
        # packet 0 goes on at once, 1 waits, 2 (sent 0.24-0.36 ms, 0.12 ms a packet) finds it waiting
        assert (fast.packet, fast.attempts) == (2, 1) and fast.at_s == pytest.approx(0.36 * MS)


def test_a_ring_of_twelve_over_a_shared_cell_agrees_with_simpy():
    # 12 workers, 24 transmitters taking turns on one cell, bursty loss, best effort: many flows
    # interleaving on the relay loop's round robin
    reps = [make_net(workers=12, medium="shared", engine=e, seed=12, delivery="best_effort", loss=LOSSES[2])
            .ring_allreduce([f"w{i}" for i in range(12)], 90_000, at=0.25) for e in ("fast", "simpy")]
    identical(*reps)
    assert 0 < sum(s.lost for s in reps[0].links.values()) < sum(s.packets for s in reps[0].links.values())


@pytest.mark.parametrize("kind,seed,queue,medium", [("ring", 258460, 3, "dedicated"), ("mesh", 642694, 100, "dedicated"),
                                                     ("mesh", 778777, 2, "shared-ofdma"), ("ring", 199829, 3, "shared-tdma")])
def test_the_earliest_give_up_is_the_one_raised(kind, seed, queue, medium):
    # Many flows over several media, 15% loss, one resend allowed: reliable delivery gives up on
    # several packets in one call. The relay engine runs media ahead of each other, so it can meet
    # a later give-up first; it must raise the earliest in virtual time, as SimPy does.
    med, _, sharing = medium.partition("-")
    errors = []
    for engine in ("fast", "simpy"):
        link = dict(delivery="reliable", retry_limit=1, loss=LOSSES[1], queue_packets=queue, ack_bytes=14)
        if kind == "mesh":
            net = _mesh(engine, med, sharing or "tdma", seed=seed, **link)
        else:
            net = make_net("ring", workers=5, medium=med, sharing=sharing or "tdma", engine=engine, seed=seed, **link)
        with pytest.raises(DeliveryError) as e:
            _traffic(net, kind, np.random.default_rng(seed))
        errors.append((e.value.src, e.value.dst, e.value.packet, e.value.attempts, e.value.at_s))
    assert errors[0] == errors[1]


def test_routes_go_around_an_away_relay_and_stay_cached_when_only_leaves_are_away(monkeypatch):
    """A node with one neighbour is inside no route: taking it away (a cell's stations sampled
    out of a round) recomputes nothing; taking away a node that relays does."""
    net = _mesh("fast")
    searched = []
    real = nx.shortest_path
    monkeypatch.setattr(nx, "shortest_path", lambda *a, **k: searched.append(a[1:3]) or real(*a, **k))
    assert net.path("w0", "w2") == ["w0", "r0", "server", "w2"]
    net.set_away(["w1"])                      # a leaf: the cached route stands
    assert net.path("w0", "w2") == ["w0", "r0", "server", "w2"] and len(searched) == 1
    assert net.path("w3", "server") == ["w3", "w2", "server"]
    net.set_away(["w1", "w2"])                # w2 relays w3's traffic: around it, via w4
    assert net.path("w3", "server") == ["w3", "w4", "server"] and len(searched) == 3
