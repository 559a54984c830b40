"""Mahimahi traces and fading, against hand-worked timings and closed forms."""
import math

import numpy as np
import pytest
from scipy.special import exp1

from channels.errors import ChannelConfigError
from channels.trace import Trace
from channels_helpers import make_net


def test_mahimahi_trace_delivery_times_by_hand(tmp_path):
    tr = tmp_path / "link.trace"
    tr.write_text("2\n2\n5\n9\n10\n")     # period 10 ms; opportunities 2,2,5,9,10, 12,12,15,...
    net = make_net(trace=str(tr), delay_ms=1.0)
    rep = net.transfer("w0", "server", [1460] * 7, at=0.0)
    # packet k takes opportunity k: 2,2,5,9,10,12,12 ms; +1 ms propagation
    assert np.allclose(rep.flows[0].arrival_s * 1e3, [3, 3, 6, 10, 11, 13, 13])
    # the trace position persists; a call at 14 ms skips the unused ones and takes 15, 19
    rep = net.transfer("w0", "server", [1460] * 2, at=0.014)
    assert np.allclose(rep.flows[0].arrival_s * 1e3, [16, 20])


def test_trace_with_loss_retransmits_on_later_opportunities(tmp_path):
    tr = tmp_path / "t"
    tr.write_text("1\n")                  # one opportunity every ms
    net = make_net(trace=str(tr), delay_ms=1.0, rto_margin_ms=1.0, delivery="reliable",
                   loss={"model": "bernoulli", "p": 1.0}, retry_limit=1)
    net.set_link(None, None, loss={"model": "none"})
    rep = net.transfer("w0", "server", [100] * 3, at=0.0)
    assert np.allclose(rep.flows[0].arrival_s * 1e3, [2, 3, 4])


@pytest.mark.parametrize("text,line", [("1\n2\nabc\n", 3), ("5\n3\n", 2), ("1\n-2\n", 2)])
def test_trace_with_garbage_names_file_and_line(tmp_path, text, line):
    tr = tmp_path / "bad.trace"
    tr.write_text(text)
    with pytest.raises(ChannelConfigError, match=rf"bad.trace:{line}"):
        Trace.load(str(tr))
    with pytest.raises(ChannelConfigError, match=rf"bad.trace:{line}"):
        make_net(trace=str(tr))


def test_rayleigh_mean_shannon_rate_matches_closed_form():
    # E[log2(1 + snr X)], X ~ Exp(1)  =  exp(1/snr) E1(1/snr) / ln 2
    loss = {"model": "fading", "fading": "rayleigh", "shadowing_db": 0.0, "distance_m": 10.0,
            "coherence_ms": 2.0, "efficiency": 1.0, "channel_bandwidth_mhz": 1.0, "tx_power_dbm": 0.0}
    net = make_net(seed=1, loss=loss)
    fad = net.link_state("w0", "server").fading
    snr = fad.mean_snr
    closed = math.exp(1 / snr) * exp1(1 / snr) / math.log(2) * 1e6     # bits/s
    # through the link: a backlogged transfer; bits sent in [0, T) / T is the time-average rate
    n_blocks = 3000
    T = n_blocks * 2e-3
    pk = 500
    n_pk = int(closed * T / ((pk + 40) * 8) * 1.3)
    rep = net.transfer("w0", "server", [pk] * n_pk, at=0.0)
    ends = rep.flows[0].arrival_s - 0.005
    sent_bits = (ends < T).sum() * (pk + 40) * 8
    assert sent_bits / T == pytest.approx(closed, rel=0.02)
    # and the per-block rate itself
    rates = fad.rate_bps(np.arange(200_000) * 2e-3 + 1e-4)
    assert rates.mean() == pytest.approx(closed, rel=0.02)


def test_mcs_rate_and_packet_errors():
    loss = {"model": "fading", "fading": "none", "shadowing_db": 0.0, "rate": "mcs"}
    net = make_net(loss=loss)
    fad = net.link_state("w0", "server").fading
    snr_db = fad.mean_snr_db
    # 10% PER points of ns-3.37's TableBasedErrorRateModel for 1500-byte frames (validation/ns3)
    table = [(0.94, 6.5), (3.94, 13), (6.43, 19.5), (9.71, 26), (12.81, 39), (17.05, 52), (18.39, 58.5),
             (19.64, 65), (23.73, 78)]
    expected = max([r for thr, r in table if thr <= snr_db] or [6.5])
    assert fad.rate_bps(0.0)[0] == pytest.approx(expected * 1e6)
    thr = max([t for t, _ in table if t <= snr_db] or [0.94])
    per = 1 / (1 + 9 * math.exp(1.5 * (snr_db - thr)))
    assert fad.per(0.0)[0] == pytest.approx(per)


def test_rician_gain_has_unit_mean():
    loss = {"model": "fading", "fading": "rician", "k_factor": 5.0}
    fad = make_net(loss=loss).link_state("w0", "server").fading
    g = fad.gain(np.arange(100_000))
    assert g.mean() == pytest.approx(1.0, abs=0.01)
    assert g.var() == pytest.approx((1 + 2 * 5) / (1 + 5) ** 2, rel=0.05)   # variance of the unit-power Rician gain


def test_traces_per_direction(tmp_path):
    up, down = tmp_path / "up.trace", tmp_path / "down.trace"
    up.write_text("1\n")                  # an opportunity every ms
    down.write_text("5\n")                # one every 5 ms
    from channels.network import Network
    from channels.topology import build_topology

    def net(link, **extra):
        cfg = {"topology": "star", "workers": 2, "medium": "dedicated",
               "link": {"delay_ms": 1.0, **link}, **extra}
        return Network(build_topology(cfg, 0), rng=np.random.default_rng(0))

    def arrivals_ms(n, src, dst):
        return n.transfer(src, dst, [1000] * 3, at=0.0).flows[0].arrival_s * 1e3

    n = net({"uplink_trace": str(up), "downlink_trace": str(down)})
    assert np.allclose(arrivals_ms(n, "w0", "server"), [2, 3, 4])       # uplink: 1, 2, 3 ms + 1
    assert np.allclose(arrivals_ms(n, "server", "w0"), [6, 11, 16])     # downlink: 5, 10, 15 ms + 1
    n = net({"trace": str(down)})                                       # `trace` is both directions
    assert np.allclose(arrivals_ms(n, "w0", "server"), [6, 11, 16])
    assert np.allclose(arrivals_ms(n, "server", "w0"), [6, 11, 16])
    n = net({"trace": str(down), "uplink_trace": str(up)})              # one direction overridden
    assert np.allclose(arrivals_ms(n, "w0", "server"), [2, 3, 4])
    assert np.allclose(arrivals_ms(n, "server", "w0"), [6, 11, 16])
    n = net({}, nodes={"w1": {"uplink_trace": str(down)}})              # one node's uplink only
    assert np.allclose(arrivals_ms(n, "w1", "server"), [6, 11, 16])
    assert arrivals_ms(n, "server", "w1")[-1] < 6 and arrivals_ms(n, "w0", "server")[-1] < 6
    n = net({"trace": str(down), "uplink_trace": str(up)}, topology="mesh")   # w0-w1: neither way is up
    assert np.allclose(arrivals_ms(n, "w0", "w1"), [6, 11, 16])
    assert np.allclose(arrivals_ms(n, "w1", "server"), [2, 3, 4])
    with pytest.raises(ChannelConfigError, match="network.medium"):
        net({"uplink_trace": str(up)}, medium="shared")
    with pytest.raises(ChannelConfigError, match="network.link.downlink_trace"):
        net({"downlink_trace": str(down), "loss": {"model": "fading"}})
