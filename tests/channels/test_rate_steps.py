"""A device's own link rate as a step function of virtual time (channels/rate_steps.py), taken
by every engine at each packet's start: a hand-made trace whose rate halves mid-transfer ends at
the analytic time, and the compiled engines (relay, CSMA) agree with SimPy float for float."""
import json
import pickle

import numpy as np
import pytest
from channels_helpers import identical, make_net
from test_channels_engines import _same
from test_channels_relay import _mesh

from channels.rate_steps import RateSteps

PKT = 1500 * 8     # a full packet on the wire (1460 B payload + 40 B header), bits


def halving(t=1.0, before=8e6, after=4e6, period=0.0):
    return RateSteps([0.0, t], [before, after], period)


def test_step_rate_by_hand():
    s = RateSteps([0.0, 1.0, 2.5], [8e6, 4e6, 2e6])
    assert [s.rate(t) for t in (0.0, 0.999, 1.0, 2.49, 2.5, 1e9)] == [8e6, 8e6, 4e6, 4e6, 2e6, 2e6]
    p = RateSteps([0.0, 1.0], [8e6, 4e6], period_s=3.0)
    assert [p.rate(t) for t in (0.5, 1.5, 3.0, 4.2, 6.9)] == [8e6, 4e6, 8e6, 4e6, 8e6]
    # the block number changes exactly where the rate may change
    assert list(p.block([0.5, 0.9, 1.0, 2.9, 3.0, 4.0])) == [0, 0, 1, 1, 2, 3]
    assert pickle.loads(pickle.dumps(p)) == p and p != s
    with pytest.raises(ValueError):
        RateSteps([0.5, 1.0], [1e6, 2e6])


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_a_transfer_straddling_the_halving_ends_at_the_analytic_time(engine):
    # 8 Mb/s until t = 1.0 s, then 4: a packet takes 1.5 ms, then 3 ms. Packets 0..665 end by
    # 0.999 s; packet 666 starts at 0.999 s, before the step, and goes at 8 Mb/s to 1.0005 s;
    # the other 333 go at 4 Mb/s. Last bit at 1.0005 + 333 x 3 ms, arrival 1 ms later (delay).
    net = make_net(workers=2, engine=engine, delay_ms=1.0)
    net.set_rate_steps("w0", "server", halving())
    rep = net.transfer("w0", "server", [1460] * 1000, at=0.0)
    arr = rep.flows[0].arrival_s
    k = np.arange(1000)
    want = np.where(k <= 666, (k + 1) * PKT / 8e6, 667 * PKT / 8e6 + (k - 666) * PKT / 4e6) + 1e-3
    assert np.allclose(arr, want, rtol=0, atol=1e-12)
    assert rep.flows[0].completion_s == pytest.approx(1.0005 + 0.999 + 1e-3, abs=1e-12)
    # the airtime the link counts: 667 packets at 8 Mb/s, 333 at 4
    assert rep.links[("w0", "server")].busy_s == pytest.approx(667 * PKT / 8e6 + 333 * PKT / 4e6, abs=1e-12)
    # the reverse direction and the other worker keep the [network] 10 Mb/s
    back = net.transfer("server", "w0", [1460] * 10, at=3.0)
    assert back.links[("server", "w0")].busy_s == pytest.approx(10 * PKT / 10e6, abs=1e-12)
    # None: the link's bandwidth_mbps again
    net.set_rate_steps("w0", "server", None)
    again = net.transfer("w0", "server", [1460] * 10, at=4.0)
    assert again.links[("w0", "server")].busy_s == pytest.approx(10 * PKT / 10e6, abs=1e-12)


@pytest.mark.parametrize("medium,sharing", [("dedicated", "tdma"), ("shared", "tdma"), ("shared", "ofdma")])
def test_fast_and_simpy_agree_with_rate_steps(medium, sharing):
    reps = []
    for engine in ("fast", "simpy"):
        net = make_net(workers=3, medium=medium, sharing=sharing, engine=engine, seed=3, delay_ms=0.5,
                       loss={"model": "bernoulli", "p": 0.1})
        net.set_rate_steps("w0", "server", RateSteps([0.0, 0.004, 0.009], [8e6, 2e6, 5e6], period_s=0.013))
        net.set_rate_steps("server", "w1", halving(0.006))
        g = net.gather({w: [1460] * 12 for w in ("w0", "w1", "w2")}, "server", at=0.0)
        b = net.broadcast("server", ["w0", "w1", "w2"], [1000] * 9, at=g.end_s)
        reps.append((g, b))
    for x, y in zip(*reps):
        _same(x, y)
    assert reps[0][0].links[("w0", "server")].busy_s != pytest.approx(12 * PKT / 10e6)


@pytest.mark.parametrize("loss", [{"model": "none"}, {"model": "bernoulli", "p": 0.2}])
def test_relay_engine_equals_simpy_with_rate_steps(loss):
    reps = []
    for engine in ("fast", "simpy"):     # "fast": the relay engine, or an error if it cannot
        net = _mesh(engine, seed=4, loss=loss, queue_packets=6, retry_limit=40)
        net.set_rate_steps("w0", "r0", RateSteps([0.0, 0.003, 0.02], [20e6, 2e6, 9e6], period_s=0.05))
        net.set_rate_steps("r0", "server", halving(0.01, 10e6, 5e6))
        net.set_rate_steps("server", "w2", halving(0.008, 6e6, 3e6))
        reps.append(net.gather({"w0": [1460] * 40, "w1": [1460] * 25, "w3": [900] * 10}, "server", at=0.0))
        reps.append(net.transfer("w0", "w2", [1460] * 30, at=reps[-1].end_s))
    identical(reps[0], reps[2])
    identical(reps[1], reps[3])


@pytest.mark.parametrize("delivery", ["reliable", "best_effort"])
def test_csma_fast_equals_simpy_with_a_stations_rate_steps(delivery):
    reps = []
    for engine in ("fast", "simpy"):
        net = make_net(workers=4, medium="shared", sharing="csma", engine=engine, seed=5, delivery=delivery,
                       retry_limit=40, loss={"model": "bernoulli", "p": 0.2}, delay_ms=0.5)
        # w0's uplink falls from 24 to 6 Mb/s mid-gather (the ACK rate falls with it); the access
        # point's group frames go at the least of its links' rates, one of which steps
        net.set_rate_steps("w0", "server", halving(0.004, 24e6, 6e6))
        net.set_rate_steps("server", "w2", RateSteps([0.0, 0.01], [12e6, 36e6], period_s=0.02))
        g = net.gather({f"w{i}": [1460] * 15 for i in range(4)}, "server", at=0.0)
        b = net.broadcast("server", [f"w{i}" for i in range(4)], [1200] * 10, at=g.end_s)
        t = net.transfer("server", "w2", [800] * 12, at=b.end_s)
        reps.append((g, b, t))
    for x, y in zip(*reps):
        identical(x, y)
    # w0's frames went at both rates: some airtimes above what 24 Mb/s alone gives
    assert reps[0][0].links[("w0", "server")].busy_s > reps[0][0].links[("w1", "server")].busy_s


def test_a_fedscale_clients_capacity_reaches_the_link_layer(tmp_path):
    from testbed.emulation.device_trace import (
        apply_link_rates,
        from_fedscale,
        parse_device_trace,
    )
    behave = {7: {"active": [0], "inactive": [1e6], "finish_time": 1e6}}
    capacity = {7: {"computation": 100.0, "communication": 2500.0}}   # kbit/s: 2.5 Mb/s
    trace = parse_device_trace(json.loads(json.dumps(from_fedscale(behave, capacity, [7]))))
    net = make_net(workers=2, engine="fast", delay_ms=1.0)
    assert apply_link_rates(trace, net, ["w0", "w1"], 0.0) == ["w0->server", "server->w0"]
    rep = net.transfer("w0", "server", [1460] * 5, at=0.0)
    assert rep.flows[0].completion_s == pytest.approx(5 * PKT / 2.5e6 + 1e-3, abs=1e-12)
    down = net.transfer("server", "w0", [1460] * 5, at=1.0)
    assert down.flows[0].completion_s == pytest.approx(1.0 + 5 * PKT / 2.5e6 + 1e-3, abs=1e-12)


def test_a_device_traces_steps_reach_every_packet(tmp_path):
    from testbed.emulation.device_trace import apply_link_rates, parse_device_trace
    trace = parse_device_trace({"nodes": {"w0": {"uplink_mbps": [[0, 8.0], [1.0, 4.0]]}}})
    net = make_net(workers=2, engine="fast", delay_ms=1.0)
    # at the iteration's start (t = 0) the links show 8 Mb/s; the link layer has the steps
    assert apply_link_rates(trace, net, ["w0", "w1"], 0.0) == ["w0->server"]
    assert net.link_state("w0", "server").steps == halving()
    assert apply_link_rates(trace, net, ["w0", "w1"], 0.5) == []       # nothing changed
    rep = net.transfer("w0", "server", [1460] * 1000, at=0.0)
    assert rep.flows[0].completion_s == pytest.approx(1.0005 + 0.999 + 1e-3, abs=1e-12)
    # resume: the steps travel in the network's state
    other = make_net(workers=2, engine="fast", delay_ms=1.0)
    other.load_state_dict(net.state_dict())
    assert other.link_state("w0", "server").steps == halving()


def test_the_cached_rate_holds_until_valid_until():
    # the relay engine keeps the rate in force until `valid_until` says: it must never be stale
    from channels.rate_steps import step_rate, valid_until
    s = RateSteps([0.0, 0.3, 0.7], [1e6, 2e6, 3e6], period_s=1.1)
    rng = np.random.default_rng(0)
    for t in np.sort(rng.uniform(0, 50, 300)):
        until = valid_until(s.times, s.period, t)
        assert t < until
        for u in np.linspace(t, until, 20, endpoint=False):
            assert step_rate(s.times, s.rates, s.period, u) == s.rate(t)
        # and it is no earlier than a microsecond before the next step
        assert s.rate(until + 2e-6 + 1e-9 * until) != s.rate(t)
    assert valid_until(np.array([0.0, 1.0]), 0.0, 2.0) == np.inf
