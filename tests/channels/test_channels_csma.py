"""802.11 DCF on a shared cell (`sharing = "csma"`): Bianchi's saturation analysis, a trace of
backoff counters worked out by hand, and the two engines agreeing bit for bit."""
import argparse
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq

from channels import csma, csma_fast
from channels.config import validate_network
from channels.energy import radio_seconds
from channels.errors import ChannelConfigError, DeliveryError
from channels.network import Network
from channels.topology import build_topology
from channels_helpers import FixedStream, identical, make_net, u
from testbed.commands.probe import load_probe_config, probe_report

ROOT = Path(__file__).resolve().parents[2]
# 802.11a defaults, as [network.csma] documents them
SLOT, SIFS, DIFS, PHY, ACK_BYTES, CW_MIN, CW_MAX, RETRY, EIFS = 9e-6, 16e-6, 34e-6, 20e-6, 14, 15, 1023, 7, 94e-6
RATE, PAYLOAD, HEADER = 54e6, 1460, 40


def bianchi(n: int):
    """Saturation throughput (payload b/s) and collision probability p from Bianchi's fixed point.

    His Markov chain with the retry limit: a frame goes through stages 0..RETRY - 1 (RETRY
    attempts, dot11ShortRetryLimit), stage i draws its
    counter in [0, W_i - 1], W_i = min(2^i (CW_MIN + 1), CW_MAX + 1), and each attempt collides with
    probability p. tau = E[attempts per frame] / E[slots per frame]
        = sum_i p^i / sum_i p^i (W_i + 1) / 2,   p = 1 - (1 - tau)^(n - 1).
    S = Ps Ptr E[P] / ((1 - Ptr) slot + Ptr Ps Ts + Ptr (1 - Ps) Tc)."""
    W = [min(2 ** i * (CW_MIN + 1), CW_MAX + 1) for i in range(RETRY)]

    def tau_of(p):
        return sum(p ** i for i in range(RETRY)) / sum(p ** i * (W[i] + 1) / 2 for i in range(RETRY))

    p = 0.0 if n == 1 else brentq(lambda p: p - (1 - (1 - tau_of(p)) ** (n - 1)), 0.0, 1.0)
    tau = tau_of(p)
    ptr = 1 - (1 - tau) ** n
    ps = n * tau * (1 - tau) ** (n - 1) / ptr
    # airtimes in whole 4 us OFDM symbols (16 service + 6 tail bits); the ACK at 24 Mb/s; after a
    # collision of k frames the stations that did not send wait EIFS (k = 2), EIFS with
    # probability 0.71 (k = 3), else DIFS, so Tc is averaged over k (binomial in tau)
    data = PHY + 4e-6 * math.ceil(((PAYLOAD + HEADER) * 8 + 22) / (RATE * 4e-6))
    ts = data + SIFS + PHY + 4e-6 * math.ceil((ACK_BYTES * 8 + 22) / (24e6 * 4e-6)) + DIFS
    pk = [math.comb(n, k) * tau ** k * (1 - tau) ** (n - k) for k in range(n + 1)]
    wait = [EIFS if k == 2 else 0.71 * EIFS + 0.29 * DIFS if k == 3 else DIFS for k in range(n + 1)]
    tc = data + (sum(pk[k] * wait[k] for k in range(2, n + 1)) / sum(pk[2:]) if n > 1 else EIFS)
    S = ps * ptr * PAYLOAD * 8 / ((1 - ptr) * SLOT + ptr * ps * ts + ptr * (1 - ps) * tc)
    return S, p


NS = [1, 2, 5, 10, 20, 50]


@pytest.fixture(scope="module")
def saturated(tmp_path_factory):
    """`testbed probe` on a gather where every station always has a frame (no loss, no delay)."""
    out = {}
    for n in NS:
        path = tmp_path_factory.mktemp("csma") / f"cell{n}.toml"
        path.write_text(f"[run]\nseed = {n}\n[network]\nworkers = {n}\nmedium = \"shared\"\n"
                        f"sharing = \"csma\"\nengine = \"fast\"\n"
                        f"link = {{ bandwidth_mbps = {RATE / 1e6}, delay_ms = 0.0 }}\n")
        seed, network = load_probe_config(str(path))
        per_station = max(6000 // n, 160)
        args = argparse.Namespace(pattern="gather", payload_bytes=per_station * PAYLOAD, src=None,
                                  dst=None, repeat=1)
        out[n] = probe_report(network, seed, args)
    return out


@pytest.mark.parametrize("n", NS)
def test_saturation_throughput_matches_bianchi(saturated, n):
    # Bianchi's chain counts a busy period as one slot of every counter; plain DCF (ours, ns-3's,
    # the standard's) freezes counters while busy, and colliders recover after the ACK timeout
    # while the others wait EIFS or DIFS. Measured gap (2026-12-04, this fixture): +0.1, -0.8,
    # -0.9, 0.0, +0.9, +4.0 % at n = 1, 2, 5, 10, 20, 50, so the tolerance went from 3 % to 4.5 %.
    S, _ = bianchi(n)
    assert saturated[n]["saturated_mbps"] == pytest.approx(S / 1e6, rel=0.045)


def test_collisions_per_success_rise_with_n_as_the_analysis_says(saturated):
    ratios = []
    for n in NS:
        links = saturated[n]["links"].values()
        collisions = sum(s["collisions"] for s in links)
        successes = sum(s["packets"] - s["collisions"] - s["lost"] for s in links)
        ratios.append(collisions / successes)
        _, p = bianchi(n)
        # each attempt collides with probability p: p / (1 - p) collided attempts per success
        # (Bianchi's independence assumption and his busy-slot decrement overstate p: measured
        # 2026-12-04 the ratio is 0, -0.2, -8, -13, -15, -19 % off his at n = 1, 2, 5, 10, 20, 50,
        # where the old Bianchi-style counting was 5-8 % off; over 6000 frames it also moves by
        # about +-4 % from seed to seed, so the tolerance went from 15 % to 22 %. ns-3.37 itself
        # is the check of the standard's counting: validation/ns3.)
        assert ratios[-1] == pytest.approx(p / (1 - p), rel=0.22, abs=0.01), n
    assert ratios[0] == 0 and all(a < b for a, b in zip(ratios, ratios[1:]))




@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_two_stations_backoff_trace_by_hand(engine):
    # 8 Mb/s, 4 us OFDM symbols of 32 bits. Frame 60 + 40 B: DATA = 20 + 4 ceil((800 + 22) / 32)
    # = 124 us. The ACK goes at the highest basic rate not above 8 Mb/s, 6 Mb/s (24 bits a
    # symbol): 20 + 4 ceil((112 + 22) / 24) = 44 us. After a success everyone counts again
    # 124 + 16 + 44 + 34 = 218 us after the DATA began; after a collision of the two, each sender
    # 124 + 45 (ACK timeout) + 34 = 203 us after. A busy period freezes the others' counters and
    # takes off only the whole idle slots that ended before it was sensed (4 us after it began).
    net = make_net(workers=2, medium="shared", sharing="csma", engine=engine, bandwidth_mbps=8.0, delay_ms=0.0)
    cell = net._medium(("cell", "server"))
    cell.csma_streams["w0"] = FixedStream([u(2, 15), u(5, 31), u(0, 15), u(7, 15)])
    cell.csma_streams["w1"] = FixedStream([u(2, 15), u(1, 31), u(3, 15), u(2, 15)])
    rep = net.gather({"w0": [60] * 3, "w1": [60] * 3}, "server", at=0.0)
    # Both take a frame at the first boundary >= DIFS = 34 us: 36 us; counters 2 and 2.
    #   54: collision; each sender counts from 54 + 203 = 257 at CW 31: w0 5 -> 302, w1 1 -> 266
    #  266: w1 alone, DATA ends 390; all count from 484. w0 saw 1 slot (257-266): 4 left -> 520;
    #       w1 next frame: 3 -> 511
    #  511: w1, DATA ends 635; from 729. w0 saw 3 slots (484-511): 1 left -> 738; w1 2 -> 747
    #  738: w0, DATA ends 862; from 956. w1 saw 1 slot (729-738): 1 left -> 965; w0 0 -> 956
    #  956: w0, DATA ends 1080; from 1174. w1: 1 left -> 1183; w0 7 -> 1237
    # 1183: w1, DATA ends 1307 (its last); from 1401. w0 saw 1 slot: 6 left -> 1455
    # 1455: w0, DATA ends 1579; the medium is free for all at 1673
    us = 1e-6
    f0, f1 = rep.flows
    assert np.allclose(f0.arrival_s, np.array([862, 1080, 1579]) * us, rtol=0, atol=1e-12)
    assert np.allclose(f1.arrival_s, np.array([390, 635, 1307]) * us, rtol=0, atol=1e-12)
    assert cell.free_at == pytest.approx(1673 * us, abs=1e-12)
    for w in ("w0", "w1"):
        st = rep.links[(w, "server")]
        assert (st.packets, st.collisions, st.retries, st.lost) == (4, 1, 1, 0)
        assert rep.links[("server", w)].bytes == 3 * ACK_BYTES        # one ACK per success
        assert rep.nodes[w].packets_sent == 4 and rep.nodes[w].retransmissions == 1
    # airtime: four DATA (three successes, one collided), and three ACKs (44 us, 20 of them the
    # PHY preamble and header) sent back
    assert rep.links[("w0", "server")].busy_s == pytest.approx(4 * 124 * us)
    assert rep.links[("server", "w0")].busy_s == pytest.approx(3 * 44 * us)
    assert rep.links[("server", "w0")].header_s == pytest.approx(3 * 20 * us)
    assert cell.csma_streams["w0"].pos == 4 and cell.csma_streams["w1"].pos == 4   # only used draws taken


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_the_ack_goes_at_the_basic_rate(engine):
    # 54 Mb/s data (216 bits a symbol): a 1500 + 36 B frame is 20 + 4 ceil((12288 + 22) / 216) =
    # 248 us; the ACK goes at 24 Mb/s (96 bits a symbol): 20 + 4 ceil(134 / 96) = 28 us, not the
    # 24 us it would take at 54. Taken at 36 us with counter 0: DATA ends 284, ACK 300 - 328,
    # the medium is free at 362.
    net = make_net(workers=1, medium="shared", sharing="csma", engine=engine, bandwidth_mbps=54.0,
                   delay_ms=0.0, mtu_bytes=1536, header_bytes=36)
    cell = net._medium(("cell", "server"))
    cell.csma_streams["w0"] = FixedStream([u(0, 15)])
    rep = net.gather({"w0": [1500]}, "server", at=0.0)
    assert float(rep.flows[0].arrival_s[0]) == pytest.approx(284e-6, abs=1e-12)
    assert rep.links[("w0", "server")].busy_s == pytest.approx(248e-6)      # DATA
    assert rep.links[("server", "w0")].busy_s == pytest.approx(28e-6)       # the ACK, sent back
    assert cell.free_at == pytest.approx(362e-6, abs=1e-12)


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_a_station_that_heard_a_collision_waits_eifs(engine):
    # Three stations, one frame each (DATA 124 us, as above). w0 and w1 collide at 45 us (DATA
    # ends 169); they count again after the ACK timeout, 169 + 45 + 34 = 248 us; w2 heard a frame
    # it could not decode and waits EIFS, 169 + 94 = 263 us. With DIFS it would have counted from
    # 203 and sent first (at 239).
    net = make_net(workers=3, medium="shared", sharing="csma", engine=engine, bandwidth_mbps=8.0, delay_ms=0.0)
    cell = net._medium(("cell", "server"))
    cell.csma_streams["w0"] = FixedStream([u(1, 15), u(0, 31)])
    cell.csma_streams["w1"] = FixedStream([u(1, 15), u(3, 31)])
    cell.csma_streams["w2"] = FixedStream([u(5, 15)])
    rep = net.gather({"w0": [60], "w1": [60], "w2": [60]}, "server", at=0.0)
    # 36: all take their frame (1, 1, 5). 45: w0 + w1 collide; w2 saw the slot ending at 45: 4 left.
    # 248: w0 (drew 0), DATA ends 372; all from 466. w1 3 -> 493; w2 (from 263: no slot) 4 -> 502
    # 493: w1, DATA ends 617; from 711. w2 saw 3 slots: 1 left -> 720. 720: w2, DATA ends 844.
    us = 1e-6
    assert [float(f.arrival_s[0]) / us for f in rep.flows] == pytest.approx([372, 617, 844], abs=1e-6)
    assert cell.free_at == pytest.approx(938 * us, abs=1e-12)
    assert [rep.links[(w, "server")].collisions for w in ("w0", "w1", "w2")] == [1, 1, 0]
    # Radio seconds as ns-3's PHY and energy model count them: w2 locked onto the collision's
    # first frame, decoded its PHY header (hence EIFS) and was in RX to its end, 124 - 20 = 104 us;
    # the senders were transmitting. Each station also receives the others' clear frames (104 us
    # each) and every ACK (44 - 20 = 24 us each): w2 104 + 2 x 104 + 3 x 24 = 384 us; w0 and w1
    # 2 x 104 + 3 x 24 = 280 us, each transmitting 2 x 124 us.
    times = radio_seconds(rep, shared=True)
    assert [times[w][1] / us for w in ("w0", "w1", "w2")] == pytest.approx([280, 280, 384], abs=1e-6)
    assert [times[w][0] / us for w in ("w0", "w1", "w2")] == pytest.approx([248, 248, 124], abs=1e-6)


@pytest.mark.parametrize("engine", ["fast", "simpy"])
@pytest.mark.parametrize("frames", [2, 3])
def test_with_preamble_detection_no_one_decodes_a_collision_and_the_others_wait_difs(engine, frames):
    # The trace above with ns-3's default PHY: w0 and w1 (and w2) collide at 45 us, DATA ends at
    # 169; equal-power preambles stand 0 dB (-3 dB) above each other, under the 4 dB a receiver
    # needs to lock onto one, so the last station heard energy only: it counts from 169 + DIFS =
    # 203, its 4 slots end at 239 and its DATA at 363 (without detection: EIFS, 263, 299, 423).
    # It draws nothing (its stream holds one value).
    workers = frames + 1
    table = validate_network({"sharing": "csma", "csma": {"preamble_detection": True}})["csma"]
    g = build_topology({"topology": "star", "workers": workers, "medium": "shared", "sharing": "csma",
                        "link": {"bandwidth_mbps": 8.0, "delay_ms": 0.0}}, 0)
    net = Network(g, medium="shared", sharing="csma", engine=engine, rng=np.random.default_rng(0), csma=table)
    cell = net._medium(("cell", "server"))
    names = [f"w{i}" for i in range(workers)]
    for i, w in enumerate(names[:-1]):
        cell.csma_streams[w] = FixedStream([u(1, 15), u(20 + i, 31)])
    cell.csma_streams[names[-1]] = FixedStream([u(5, 15)])
    rep = net.gather({w: [60] for w in names}, "server", at=0.0)
    assert float(rep.flows[-1].arrival_s[0]) == pytest.approx(363e-6, abs=1e-12)
    assert cell.csma_streams[names[-1]].pos == 1


@pytest.mark.parametrize("engine", ["fast", "simpy"])
@pytest.mark.parametrize("draw, waits", [(0.1, "eifs"), (0.9, "difs")])
def test_after_three_frames_collide_each_other_station_draws_eifs_or_difs(engine, draw, waits):
    # w0, w1, w2 collide at 45 us (DATA 124 us, ends 169); w3 saw the slot ending at 45 (5 -> 4
    # left) and draws one uniform from its stream: below eifs_share (0.71) it decoded the PHY
    # header and waits EIFS (169 + 94 = 263, sends at 263 + 36 = 299), else DIFS (203, sends at
    # 239). The senders count from 248 with counters of 20 and more.
    net = make_net(workers=4, medium="shared", sharing="csma", engine=engine, bandwidth_mbps=8.0, delay_ms=0.0)
    cell = net._medium(("cell", "server"))
    for i, w in enumerate(("w0", "w1", "w2")):
        cell.csma_streams[w] = FixedStream([u(1, 15), u(20 + i, 31)])
    cell.csma_streams["w3"] = FixedStream([u(5, 15), draw])
    rep = net.gather({w: [60] for w in ("w0", "w1", "w2", "w3")}, "server", at=0.0)
    sent = {"eifs": 299, "difs": 239}[waits]
    assert float(rep.flows[3].arrival_s[0]) == pytest.approx((sent + 124) * 1e-6, abs=1e-12)
    assert cell.csma_streams["w3"].pos == 2 and cell.csma_streams["w0"].pos == 2


LOSSES = [
    {"model": "none"},
    {"model": "bernoulli", "p": 0.3},
    {"model": "gilbert_elliott", "p_good_to_bad": 0.1, "p_bad_to_good": 0.3, "loss_good": 0.02, "loss_bad": 0.6},
    {"model": "fading", "fading": "rayleigh", "coherence_ms": 0.5, "rate": "mcs", "distance_m": 30.0},
]


@pytest.mark.parametrize("loss", range(len(LOSSES)))
@pytest.mark.parametrize("delivery", ["reliable", "best_effort"])
def test_fast_and_simpy_engines_give_identical_reports(loss, delivery):
    rng = np.random.default_rng([loss, len(delivery)])
    sends = {f"w{i}": [int(x) for x in rng.integers(1, 1461, size=rng.integers(5, 30))] for i in range(4)}
    at = {w: float(rng.choice([0.0, 0.0, rng.uniform(0, 0.004)])) for w in sends}
    reps = []
    for engine in ("fast", "simpy"):
        net = make_net(workers=4, medium="shared", sharing="csma", engine=engine, seed=11, delivery=delivery,
                       retry_limit=40, loss=LOSSES[loss], delay_ms=0.5)
        net.csma = net.csma.__class__(retry_limit=2)          # MAC drops happen: ARQ takes over
        g = net.gather(sends, "server", at=at)
        b = net.broadcast("server", list(sends), [1200] * 12, at=g.end_s)
        ag = net.allgather({w: [700] * 4 for w in sends}, at=b.end_s)
        t = net.transfer("w1", "server", [800] * 15, at=ag.end_s + 0.001)
        reps.append((g, b, ag, t))
    for x, y in zip(*reps):
        identical(x, y)
    g = reps[0][0]
    assert sum(s.collisions for s in g.links.values()) > 0
    if delivery == "reliable":
        assert all(f.arrived.all() for r in reps[0] for f in r.flows)


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_loss_is_a_failure_retried_with_a_doubled_window(engine):
    # One station, every frame lost: after each attempt it waits DATA + ACK timeout + DIFS; the MAC
    # tries retry_limit (7) times, then reliable delivery gives up (link retry_limit 0).
    net = make_net(workers=1, medium="shared", sharing="csma", engine=engine, bandwidth_mbps=8.0, delay_ms=0.0,
                   loss={"model": "bernoulli", "p": 1.0}, retry_limit=0)
    with pytest.raises(DeliveryError, match="gave up on packet 0"):
        net.gather({"w0": [60]}, "server", at=0.0)
    net = make_net(workers=1, medium="shared", sharing="csma", engine=engine, bandwidth_mbps=8.0, delay_ms=0.0,
                   loss={"model": "bernoulli", "p": 1.0}, delivery="best_effort")
    cell = net._medium(("cell", "server"))
    cws = [15, 31, 63, 127, 255, 511, 1023]
    cell.csma_streams["w0"] = FixedStream([u(cw, cw) for cw in cws])   # the largest counter each time
    rep = net.gather({"w0": [60]}, "server", at=0.0)
    st = rep.links[("w0", "server")]
    assert (st.packets, st.lost, st.collisions, st.retries) == (7, 7, 0, 6) and not rep.flows[0].arrived.any()
    # first boundary >= 34 us is 36 us; attempt k waits cw_k slots, then DATA (124 us, as in the
    # trace above) + ACK timeout 45 + DIFS 34 = 203 us
    end = 36e-6 + sum(cw * 9e-6 + 203e-6 for cw in cws)
    assert cell.free_at == pytest.approx(end, abs=1e-12)


def test_csma_keys_are_validated_with_one_line_errors():
    out = validate_network({"sharing": "csma"})
    assert out["csma"] == {"slot_us": 9.0, "sifs_us": 16.0, "difs_us": 34.0, "cw_min": 15, "cw_max": 1023,
                           "phy_header_us": 20.0, "ack_bytes": 14, "retry_limit": 7, "basic_rate_mbps": 24.0,
                           "symbol_us": 4.0, "ack_timeout_us": 45.0, "eifs_us": 94.0, "cca_us": 4.0,
                           "preamble_detection": False, "eifs_frames": 2, "eifs_share": 0.71}
    for table, key, words in [({"cw_min": 31, "cw_max": 15}, "network.csma.cw_max", ">= cw_min (31)"),
                              ({"slot_us": 0}, "network.csma.slot_us", "> 0"),
                              ({"cw_mn": 3}, "network.csma.cw_mn", "did you mean 'network.csma.cw_min'"),
                              ({"retry_limit": 1.5}, "network.csma.retry_limit", "an integer")]:
        with pytest.raises(ChannelConfigError) as e:
            validate_network({"sharing": "csma", "csma": table})
        assert e.value.key == key and words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ChannelConfigError, match="'csma'"):
        validate_network({"sharing": "aloha"})


def test_csma_parameters_reach_the_cell():
    cfg = {"workers": 1, "medium": "shared", "sharing": "csma", "csma": {"slot_us": 20.0, "difs_us": 50.0},
           "link": {"bandwidth_mbps": 8.0, "delay_ms": 0.0}}
    net = Network(build_topology(cfg, 0), medium="shared", sharing="csma", rng=np.random.default_rng(0))
    assert net.csma.slot_s == pytest.approx(20e-6) and net.csma.difs_s == pytest.approx(50e-6)
    cell = net._medium(("cell", "server"))
    cell.csma_streams["w0"] = FixedStream([u(0, 15)])
    rep = net.gather({"w0": [60]}, "server", at=0.0)
    # first boundary >= 50 us on a 20 us grid: 60 us; counter 0; DATA 20 + 4 ceil(822 / 32) = 124 us
    assert rep.end_s == pytest.approx(184e-6, abs=1e-12)


def test_multi_hop_through_a_csma_cell_runs_on_simpy():
    # w0 - server - w1 in a line: both hops on the access point's cell, so the AP's forwarding
    # contends with w0's uplink; the relay engine does not model contention, SimPy does.
    cfg = {"topology": "geometric", "workers": 2, "medium": "shared", "sharing": "csma", "range_m": 60,
           "nodes": {"w0": {"pos": [0.0, 50.0]}, "w1": {"pos": [100.0, 50.0]}},
           "link": {"bandwidth_mbps": 10.0, "delay_ms": 2.0}}
    net = Network(build_topology(cfg, 0), medium="shared", sharing="csma", rng=np.random.default_rng(0))
    rep = net.transfer("w0", "w1", [1460] * 30, at=0.0)
    assert rep.flows[0].arrived.all()
    up, down = rep.links[("w0", "server")], rep.links[("server", "w1")]
    assert up.packets - up.collisions == 30 and down.packets - down.collisions == 30
    assert up.collisions == down.collisions > 0      # they collide with each other only
    fast = Network(build_topology(cfg, 0), medium="shared", sharing="csma", engine="fast",
                   rng=np.random.default_rng(0))
    with pytest.raises(ChannelConfigError, match="CSMA cell"):
        fast.transfer("w0", "w1", [1460] * 3, at=0.0)


@pytest.mark.parametrize("delivery, preamble", [("reliable", False), ("best_effort", False), ("reliable", True)])
def test_many_stations_agree_while_the_fast_loop_resumes(monkeypatch, delivery, preamble):
    # 20 stations contend (collisions of several frames at once), 30% loss, MAC retry limit 3 so
    # that ARQ takes frames over, then the access point's group frames and an all-gather through
    # it; with and without preamble detection. The fast engine starts with one peeked value per stream and one row of room and stops
    # for more each time it runs out; the reports must still be the SimPy engine's exactly.
    for name, value in (("PEEK", 0), ("MIN_PEEK", 1), ("ROWS", 0), ("MIN_ROWS", 1)):
        monkeypatch.setattr(csma_fast, name, value)
    asked = []
    more = csma_fast._more
    monkeypatch.setattr(csma_fast, "_more", lambda *a: asked.append(a[1]) or more(*a))
    rng = np.random.default_rng(20)
    sends = {f"w{i}": [int(x) for x in rng.integers(1, 1461, size=rng.integers(1, 8))] for i in range(20)}
    reps = []
    for engine in ("fast", "simpy"):
        net = make_net(workers=20, medium="shared", sharing="csma", engine=engine, seed=5, delivery=delivery,
                       retry_limit=60, loss={"model": "bernoulli", "p": 0.3}, delay_ms=0.2)
        net.csma = net.csma.__class__(retry_limit=3, preamble_detection=preamble)
        g = net.gather(sends, "server", at=0.0)
        b = net.broadcast("server", list(sends), [1000] * 6, at=g.end_s)
        ag = net.allgather({w: [300] * 2 for w in list(sends)[:6]}, at=b.end_s)
        reps.append((g, b, ag))
    for x, y in zip(*reps):
        identical(x, y)
    assert {"bu", "lo"} <= set(asked)
    collided = [s.collisions for s in reps[0][0].links.values()]
    assert sum(collided) > 20


def test_collided_receptions_lock_onto_the_first_frame_and_count_decoded_headers():
    # Hand-made attempt rows (station, start us, DATA end us, outcome), 802.11a defaults
    # (preamble detection off: headers decoded in collisions of 2 frames, by 71% of the others in
    # collisions of 3, none beyond; CCA 4 us, PHY header 20 us):
    #   collision A at 0 us: stations 0 and 1 start together; the first recorded (0) is locked onto
    #   a success of station 2 at 500 us
    #   collision B: station 2 at 1002 us, station 0 at 1000 us (recorded second): 0 is earliest
    #   collision C at 2000 us: stations 0, 1, 2 (station 2 a group frame on two links: two rows)
    #   collision D at 3000 us: four stations
    us = 1e-6
    rows = [(0, 0, 100), (1, 0, 150), (2, 500, 600), (2, 1002, 1202), (0, 1000, 1100),
            (0, 2000, 2100), (1, 2000, 2300), (2, 2001, 2101), (2, 2001, 2101),
            (0, 3000, 3100), (1, 3000, 3100), (2, 3000, 3100), (3, 3000, 3100)]
    code = np.array([csma.COLLIDED] * 2 + [csma.OK] + [csma.COLLIDED] * 10)
    station = np.array([r[0] for r in rows])
    start, end = (np.array([r[i] for r in rows]) * us for i in (1, 2))
    locked, rx0, rx1, weight, captured, srows, sgroup = csma.collided_receptions(station, start, end, code,
                                                                                 csma.CsmaParams())
    assert locked.tolist() == [0, 4, 5, 9] and not captured.any()
    assert np.allclose(rx0 / us, [20, 1020, 2020, 3020]) and np.allclose(rx1 / us, [100, 1100, 2100, 3100])
    assert weight.tolist() == [1.0, 1.0, 0.71, 0.0]
    assert srows.tolist() == [0, 1, 4, 3, 5, 6, 7, 9, 10, 11, 12]   # by station within a collision
    assert sgroup.tolist() == [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3]


def capture_cell(engine: str, positions: dict, preamble: bool = False) -> Network:
    """A DCF cell of stations standing at `positions` (m; the access point at the origin) on
    802.11a fading links with the MCS table, as validation/ns3/walk.py sets them up: 20 dBm,
    LogDistance (exponent 3, 40 dB at 1 m), a 7 dB noise figure over 20 MHz, no fading."""
    table = validate_network({
        "workers": len(positions), "medium": "shared", "sharing": "csma", "engine": engine,
        "csma": {"preamble_detection": preamble},
        "link": {"bandwidth_mbps": 54.0, "delay_ms": 0.0, "mtu_bytes": 1536, "header_bytes": 36,
                 "delivery": "best_effort",
                 "loss": {"model": "fading", "fading": "none", "shadowing_db": 0.0, "coherence_ms": 10.0,
                          "tx_power_dbm": 20.0, "noise_figure_db": 7.0, "channel_bandwidth_mhz": 20.0,
                          "path_loss_exponent": 3.0, "reference_loss_db": 40.0, "rate": "mcs",
                          "mcs_table": str(ROOT / "channels/data/mcs_80211a.csv"), "per_slope_db": 2.97}},
        "nodes": {w: {"pos": list(p)} for w, p in positions.items()}})
    g = build_topology(table, 0)
    return Network(g, medium="shared", sharing="csma", engine=engine, rng=np.random.default_rng(0),
                   csma=table["csma"])


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_the_access_point_captures_a_near_stations_frame_in_a_collision(engine):
    # w0 stands 1 m from the access point, w1 30 m, w2 10 m (SNR 74, 30 and 44 dB: 54 Mbit/s each;
    # DATA of 1500 + 36 B 248 us, the ACK at 24 Mbit/s 28 us). w0 and w1 collide at 45 us (DATA
    # ends 293); the access point locks onto w0's frame (the stronger of equal starts) at an SINR
    # of 74 - 30 = 44 dB, far above 54 Mbit/s's 18.4 dB: decoded (one uniform drawn from w0's
    # link), acknowledged 309-337. Everyone counts again DIFS after the ACK, 371; w1 after its ACK
    # timeout, 293 + 45 + 34 = 372, at CW 31 (20 slots). w2 (4 slots left) sends at 407, DATA
    # ends 655, all count from 733; w1 saw 4 slots (to 408, sensed at 411): 16 left, sends at 877,
    # DATA ends 1125. (Without capture both fail: w0 would arrive after w2, w2 would wait EIFS.)
    net = capture_cell(engine, {"w0": (1.0, 0.0), "w1": (0.0, 30.0), "w2": (0.0, -10.0)})
    cell = net._medium(("cell", "server"))
    cell.csma_streams["w0"] = FixedStream([u(1, 15)])
    cell.csma_streams["w1"] = FixedStream([u(1, 15), u(20, 31)])
    cell.csma_streams["w2"] = FixedStream([u(5, 15)])
    rep = net.gather({"w0": [1500], "w1": [1500], "w2": [1500]}, "server", at=0.0)
    us = 1e-6
    assert [float(f.arrival_s[0]) / us for f in rep.flows] == pytest.approx([293, 1125, 655], abs=1e-6)
    assert [rep.links[(w, "server")].collisions for w in ("w0", "w1", "w2")] == [0, 1, 0]
    assert [rep.links[(w, "server")].packets for w in ("w0", "w1", "w2")] == [1, 2, 1]
    assert net.link_state("w0", "server").loss._u._pos == 1      # the capture's draw
    # Radio seconds (ns-3's PHY and energy model): the captured frame is received whole by w2
    # (248 - 20 = 228 us) and not by w1, which was sending; every ACK is received by all (28 - 20
    # = 8 us each). w0: its ACK + w2's and w1's frames and ACKs = 8 + 2 x (228 + 8) = 480 us;
    # w1: w0's ACK + w2's frame and ACK + its own ACK = 8 + 236 + 8 = 252 us; w2: w0's frame
    # and ACK + its ACK + w1's frame and ACK = 236 + 8 + 236 = 480 us.
    times = radio_seconds(rep, shared=True)
    assert [times[w][1] / us for w in ("w0", "w1", "w2")] == pytest.approx([480, 252, 480], abs=1e-6)
    assert [times[w][0] / us for w in ("w0", "w1", "w2")] == pytest.approx([248, 496, 248], abs=1e-6)


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_equal_powers_at_54_mbits_capture_nothing_and_draw_nothing(engine):
    # Two stations at the same distance collide at 0 dB SINR, 18.4 dB below 54 Mbit/s's waterfall:
    # its packet error rate is 1 in floating point, so no uniform is drawn and both fail (the
    # results of equal-power cells are those of the rule without capture, draw for draw).
    net = capture_cell(engine, {"w0": (10.0, 0.0), "w1": (0.0, 10.0), "w2": (-10.0, 0.0)})
    cell = net._medium(("cell", "server"))
    cell.csma_streams["w0"] = FixedStream([u(1, 15), u(0, 31)])
    cell.csma_streams["w1"] = FixedStream([u(1, 15), u(3, 31)])
    cell.csma_streams["w2"] = FixedStream([u(5, 15)])
    rep = net.gather({"w0": [1500], "w1": [1500], "w2": [1500]}, "server", at=0.0)
    assert [rep.links[(w, "server")].collisions for w in ("w0", "w1", "w2")] == [1, 1, 0]
    assert [net.link_state(w, "server").loss._u._pos for w in ("w0", "w1", "w2")] == [1, 1, 1]
