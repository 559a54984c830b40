"""Nodes that move (channels/mobility.py): a node at constant speed crosses an MCS threshold
when the path-loss formula says, transmissions take the rate of where the node is, random
waypoint stays in its area at its speeds and is a pure function of (seed, node, t), and a
checkpointed network carries on exactly."""
import math
import pickle

import numpy as np
import pytest

from channels import csma
from channels.errors import ChannelConfigError
from channels.fading import load_mcs_table
from channels.mobility import read_position_trace
from channels.network import Network
from channels.topology import build_topology
from channels_helpers import identical

LOSS = {"model": "fading", "fading": "none", "shadowing_db": 0.0, "rate": "mcs", "coherence_ms": 1.0,
        "tx_power_dbm": 20.0, "reference_loss_db": 40.0, "path_loss_exponent": 3.0,
        "noise_dbm_per_hz": -174.0, "noise_figure_db": 7.0, "channel_bandwidth_mhz": 20.0}
D0, SPEED = 5.0, 1.0      # w0 leaves 5 m from the AP at t = 0, walking away at 1 m/s


def moving_net(mobility, workers=1, delivery="best_effort", seed=0):
    table = {"topology": "star", "workers": workers, "medium": "dedicated",
             "link": {"bandwidth_mbps": 20.0, "delay_ms": 0.0, "delivery": delivery, "loss": LOSS},
             "mobility": mobility}
    g = build_topology(table, seed)
    return Network(g, medium="dedicated", rng=np.random.default_rng(seed))


def walk():
    return moving_net({"model": "path", "paths": {"w0": [[0, D0, 0], [100, D0 + 100 * SPEED, 0]]}})


def test_a_node_at_constant_speed_crosses_an_mcs_threshold_when_path_loss_says():
    # SNR(d) = P - (L_ref + 10 n log10 d) - (N0 + 10 log10 B + NF): solved for each threshold
    noise = -174.0 + 10 * math.log10(20e6) + 7.0
    table = load_mcs_table()
    d_of = {float(s): 10 ** ((20.0 - 40.0 - noise - s) / 30.0) for s in table.min_snr_db}
    crossings = [(s, d) for s, d in d_of.items() if D0 < d < D0 + 100 * SPEED]
    assert crossings, "no MCS threshold crossed on the walk"
    net = walk()
    link = net.link_state("w0", "server")
    coh = 1e-3
    for snr_thr, d in crossings:
        t_cross = (d - D0) / SPEED
        k = int(np.flatnonzero(table.min_snr_db == snr_thr)[0])
        # the SNR is taken at each 1 ms block's start: the last block starting before the
        # crossing still has MCS k, the first starting after it has a lower one
        # (queried mid-block, away from float rounding at the boundaries)
        b = math.floor(t_cross / coh)
        assert b * coh <= t_cross < (b + 1) * coh
        assert link.rate_at((b + 0.5) * coh) == pytest.approx(table.rate_mbps[k] * 1e6)
        assert link.rate_at((b + 1.5) * coh) < table.rate_mbps[k] * 1e6
        snr_db = 10 * math.log10(link.fading.snr((b + 0.5) * coh)[0])
        assert snr_db == pytest.approx(20.0 - 40.0 - 30 * math.log10(D0 + SPEED * b * coh) - noise)


def test_each_transmission_runs_at_the_rate_of_where_the_node_is():
    net = walk()
    table = load_mcs_table()
    noise = -174.0 + 10 * math.log10(20e6) + 7.0
    snr_at = lambda t: 20.0 - 40.0 - 30 * math.log10(D0 + SPEED * t) - noise   # noqa: E731
    for t in (0.5, 20.25, 70.5):    # block starts: the distance there sets the packet's rate
        rep = net.transfer("w0", "server", [1460], at=t)
        k = np.searchsorted(table.min_snr_db, snr_at(t), side="right") - 1
        rate = table.rate_mbps[max(k, 0)] * 1e6
        assert rep.links[("w0", "server")].busy_s == pytest.approx(1500 * 8 / rate)
        assert rep.links[("w0", "server")].snr_db == pytest.approx(snr_at(t))


def test_random_waypoint_stays_in_its_area_at_its_speeds_and_is_pure():
    mob = {"model": "random_waypoint", "area_m": [-20, -10, 20, 10], "speed_mps": [1.0, 2.0], "pause_s": 0.5}
    net = moving_net(mob, workers=3, seed=4)
    m = net.graph.graph["mobility"]
    t = np.linspace(0, 300, 3001)
    for w in ("w0", "w1", "w2"):
        xy = m.position(w, t)
        assert np.allclose(xy[0], net.graph.nodes[w]["pos"])       # starts where the topology put it
        later = xy[t > 60]
        assert (later[:, 0] >= -20 - 1e-9).all() and (later[:, 0] <= 20 + 1e-9).all()
        assert (later[:, 1] >= -10 - 1e-9).all() and (later[:, 1] <= 10 + 1e-9).all()
        speed = np.hypot(*np.diff(xy, axis=0).T) / np.diff(t)
        assert speed.max() <= 2.0 + 1e-9 and (speed < 1e-9).any()  # never faster; pauses
    # a fresh model queried backwards agrees (positions depend on seed, node and t only)
    other = moving_net(mob, workers=3, seed=4).graph.graph["mobility"]
    assert np.array_equal(other.position("w1", t[::-1])[::-1], m.position("w1", t))
    assert not np.array_equal(moving_net(mob, workers=3, seed=5).graph.graph["mobility"].position("w1", t),
                              m.position("w1", t))


def test_a_checkpointed_network_carries_on_with_the_same_positions_and_rates():
    mob = {"model": "random_waypoint", "area_m": [-60, -60, 60, 60], "speed_mps": [5.0, 10.0]}
    a = moving_net(mob, workers=2, delivery="reliable")
    a.gather({"w0": [1460] * 20, "w1": [1460] * 20}, "server", at=0.0)
    state = a.state_dict()
    b = moving_net(mob, workers=2, delivery="reliable")
    b.load_state_dict(state)
    for at in (3.0, 11.0):
        ra = a.gather({"w0": [1460] * 20, "w1": [1460] * 20}, "server", at=at)
        rb = b.gather({"w0": [1460] * 20, "w1": [1460] * 20}, "server", at=at)
        assert ra.links == rb.links and ra.end_s == rb.end_s
    assert pickle.loads(pickle.dumps(a.graph.graph["mobility"])).position("w0", [7.5]).tolist() == \
        a.graph.graph["mobility"].position("w0", [7.5]).tolist()


def test_a_position_trace_csv_is_read_and_checked(tmp_path):
    f = tmp_path / "pos.csv"
    f.write_text("# walk\ntime_s,node,x_m,y_m\n0,w0,10,0\n10,w0,30,0\n")
    net = moving_net({"model": "trace", "file": str(f)})
    assert net.graph.graph["mobility"].position("w0", [5.0]).tolist() == [[20.0, 0.0]]
    assert read_position_trace(str(f))["w0"].at([99.0]).tolist() == [[30.0, 0.0]]
    f.write_text("time_s,node,x_m,y_m\n0,w0,10,0\n0,w0,30,0\n")
    with pytest.raises(ChannelConfigError, match="times >= 0 and strictly increasing"):
        moving_net({"model": "trace", "file": str(f)})
    with pytest.raises(ChannelConfigError, match=r"network.mobility.speed_mps = \[2, 1\]: must be 0 < min <= max"):
        moving_net({"model": "random_waypoint", "speed_mps": [2, 1]})
    with pytest.raises(ChannelConfigError, match="unknown key 'network.mobility.speed'"):
        moving_net({"model": "random_waypoint", "speed": [2, 1]})


def test_away_walks_each_worker_straight_out_from_the_access_point_and_stops():
    net = moving_net({"model": "away", "speed_mps": [2.0, 2.0], "until_m": 30.0}, workers=3)
    m = net.graph.graph["mobility"]
    for i in range(3):   # the star puts w_i 10 m out at angle 2 pi i / 3
        a = 2 * math.pi * i / 3
        # 10 m + 2 m/s x t until 30 m (t = 10 s), then it stands
        for t, r in ((0.0, 10.0), (4.0, 18.0), (10.0, 30.0), (50.0, 30.0)):
            assert m.position(f"w{i}", [t])[0] == pytest.approx([r * math.cos(a), r * math.sin(a)], abs=1e-9)
    with pytest.raises(ChannelConfigError, match="network.mobility.until_m = None"):
        moving_net({"model": "away"})


@pytest.mark.parametrize("mobility, fading", [
    ({"model": "away", "speed_mps": [40.0, 60.0], "until_m": 400.0}, "none"),
    ({"model": "random_waypoint", "area_m": [-30.0, -30.0, 30.0, 30.0], "speed_mps": [20.0, 40.0],
      "pause_s": 0.01}, "rayleigh")])
def test_a_moving_cell_runs_in_the_compiled_loop_with_the_simpy_engines_draws(monkeypatch, mobility, fading):
    # Three stations walk (away from the access point, or random waypoints) while they contend on
    # a DCF cell whose links take rate and packet error from where each station is, per 1 ms
    # block (at 0 dBm: the bands go by within the call). The fast engine reads them from block
    # tables three blocks long (so it stops for more
    # at every third block) and draws its loss uniforms one peek at a time; the SimPy engine asks
    # the channel per attempt (Cell.attempt). Their reports must agree float for float, and the
    # walk must have crossed MCS bands (several rates on the air) and lost frames to the waterfall.
    from channels import csma_fast
    for name, value in (("BLOCKS", 3), ("PEEK", 0), ("MIN_PEEK", 1)):
        monkeypatch.setattr(csma_fast, name, value)
    asked, rows = [], []
    blocks, more = csma_fast._blocks, csma_fast._more
    monkeypatch.setattr(csma_fast, "_blocks", lambda *a: asked.append("ft") or blocks(*a))
    monkeypatch.setattr(csma_fast, "_more", lambda *a: asked.append(a[1]) or more(*a))
    finish = csma.Cell.finish
    monkeypatch.setattr(csma.Cell, "finish", lambda cell, cols=None: rows.append(
        cols if cols is not None else list(zip(*cell.rows))) or finish(cell, cols))
    loss = {**LOSS, "fading": fading, "path_loss_exponent": 3.5, "tx_power_dbm": 0.0}
    reps = []
    for engine in ("fast", "simpy"):
        table = {"topology": "star", "workers": 3, "medium": "shared", "sharing": "csma", "engine": engine,
                 "link": {"bandwidth_mbps": 20.0, "delay_ms": 0.0, "delivery": "best_effort", "loss": loss},
                 "mobility": mobility}
        net = Network(build_topology(table, 3), medium="shared", sharing="csma", engine=engine,
                      rng=np.random.default_rng(3))
        g = net.gather({f"w{i}": [1460] * 150 for i in range(3)}, "server", at=0.0)
        b = net.broadcast("server", ["w0", "w1", "w2"], [1000] * 20, at=g.end_s)
        reps.append((g, b))
    for x, y in zip(*reps):
        identical(x, y)
    g = reps[0][0]
    assert {"ft", "fu"} <= set(asked)
    links = [g.links[(f"w{i}", "server")] for i in range(3)]
    assert sum(s.lost for s in links) > 0 and sum(s.collisions for s in links) > 0
    busy_per_packet = {round(s.busy_s / s.packets * 1e6) for s in links}
    assert len(busy_per_packet) > 1 or max(s.snr_db for s in links) - min(s.snr_db for s in links) > 3
    # and, on random waypoints with Rayleigh gains (powers far apart), the access point captured
    # frames of collisions (csma.Cell._captured: a success among a collision's frames), the same
    # in both engines' gathers (rows: fast gather, fast broadcast, SimPy gather, ...)
    got = []
    for cols in (rows[0], rows[2]):
        qi, start, end, code = (np.asarray(cols[i]) for i in (0, 4, 5, 7))
        got.append(int(csma.collided_receptions(qi, start.astype(float), end.astype(float), code,
                                                csma.CsmaParams())[4].sum()))
    assert got[0] == got[1] and (got[0] > 0 or fading == "none"), got


@pytest.mark.parametrize("fading", ["none", "rayleigh"])
def test_the_snr_table_holds_each_blocks_own_snr_to_the_last_bit(fading):
    # FadingChannel looks SNRs up in a table computed for thousands of blocks at once (and the DCF
    # loop reads rates and packet error rates from block_tables): each entry must be the float a
    # query for that block alone computes, on a moving link (random waypoint) and with Rayleigh gains.
    table = {"topology": "star", "workers": 1, "medium": "dedicated",
             "link": {"bandwidth_mbps": 20.0, "delay_ms": 0.0, "delivery": "best_effort",
                      "loss": {**LOSS, "fading": fading, "per_slope_db": 2.0, "tx_power_dbm": 0.0,
                               "coherence_ms": 50.0}},
             "mobility": {"model": "random_waypoint", "area_m": [-40.0, -40.0, 40.0, 40.0],
                          "speed_mps": [1.0, 20.0], "pause_s": 0.5}}
    fad = Network(build_topology(table, 5), medium="dedicated", rng=np.random.default_rng(5)).link_state(
        "w0", "server").fading
    blocks = np.arange(30, 30 + 777)
    one = np.array([fad._snr_of(np.array([b]))[0] for b in blocks])
    assert np.array_equal(fad._snr(blocks), one)
    rate, per, snr, thr = fad.block_tables(30, 777)
    assert np.array_equal(snr, one)
    assert np.array_equal(thr, [fad.threshold_db((b + 0.5) * fad.coherence_s)[0] for b in blocks])
    assert np.array_equal(rate, [fad._rate_from_snr(np.array([x]))[0] for x in one])
    assert np.array_equal(per, [fad._per_from_snr(np.array([x]))[0] for x in one])
    assert len(set(rate.tolist())) > 1 and 0 < per.min() < per.max()
