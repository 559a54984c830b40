"""Energy from the virtual clock (channels/energy.py) against hand figures: a dedicated link's
transfer is power x analytic airtime, a 2-station CSMA cell's energy includes the collisions
its backoff trace shows, an away node sleeps; profiles are data with a source per figure."""
import pytest

from channels.config import validate_network
from channels.energy import Profile, load_profiles, radio_seconds
from channels.errors import ChannelConfigError
from channels_helpers import FixedStream, make_net, u

P = Profile("hand", compute_w=5.0, tx_w=1.5, rx_w=1.0, idle_w=0.75, sleep_w=0.125)


def test_a_transfer_on_a_dedicated_link_costs_power_times_its_airtime():
    # 10 Mb/s, 5 ms delay, 40-byte headers: 7 packets of 1460 B payload = 1500 B on the wire
    net = make_net(workers=2, medium="dedicated")
    rep = net.transfer("w0", "server", [1460] * 7, at=0.0)
    airtime = 7 * 1500 * 8 / 10e6
    times = radio_seconds(rep, shared=False)
    assert times["w0"] == pytest.approx([airtime, 0.0], abs=1e-15)
    assert times["server"] == pytest.approx([0.0, airtime], abs=1e-15)
    # over the call (airtime + the last packet's 5 ms flight) the sender idles for the delay
    window = rep.end_s - rep.start_s
    assert window == pytest.approx(airtime + 5e-3)
    assert P.radio_joules(*times["w0"], window) == pytest.approx(1.5 * airtime + 0.75 * 5e-3)
    assert P.radio_joules(*times["server"], window) == pytest.approx(1.0 * airtime + 0.75 * 5e-3)


def test_a_dedicated_broadcast_charges_the_sender_each_link_a_shared_one_once():
    sizes = [1460] * 3
    one = 3 * 1500 * 8 / 10e6
    ded = radio_seconds(make_net(workers=3, medium="dedicated").broadcast("server", ["w0", "w1", "w2"], sizes, at=0.0), False)
    assert ded["server"][0] == pytest.approx(3 * one)
    cell = radio_seconds(make_net(workers=3, medium="shared").broadcast("server", ["w0", "w1", "w2"], sizes, at=0.0), True)
    assert cell["server"][0] == pytest.approx(one)            # one transmission heard by all
    assert [cell[w][1] for w in ("w0", "w1", "w2")] == pytest.approx([one] * 3)




@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_a_csma_stations_energy_includes_the_collisions_of_its_backoff_trace(engine):
    # test_channels_csma's hand trace (test_two_stations_backoff_trace_by_hand): 8 Mb/s, 60 + 40 B
    # frames in 4 us OFDM symbols, DATA = 124 us, the ACK at 6 Mb/s = 44 us (20 us of it PHY
    # preamble and header). Each station: 3 successes and 1 collided DATA (124 us, the collision at
    # 54 us of that trace): 4 x 124 us transmitting; receiving its 3 ACKs and, overheard, w1's 3
    # successful DATA and their 3 ACKs, each less its 20 us PHY preamble and header (as ns-3's
    # radio energy model counts them, its PHY is CCA-busy, at idle power, then): 3 x 24 + 3 x 104
    # + 3 x 24 = 456 us. w0's last DATA ends at 1579 us, when the call ends (no delay).
    net = make_net(workers=2, medium="shared", sharing="csma", engine=engine, bandwidth_mbps=8.0, delay_ms=0.0)
    cell = net._medium(("cell", "server"))
    cell.csma_streams["w0"] = FixedStream([u(2, 15), u(5, 31), u(0, 15), u(7, 15)])
    cell.csma_streams["w1"] = FixedStream([u(2, 15), u(1, 31), u(3, 15), u(2, 15)])
    rep = net.gather({"w0": [60] * 3, "w1": [60] * 3}, "server", at=0.0)
    us = 1e-6
    assert rep.links[("w0", "server")].collisions == 1
    times = radio_seconds(rep, shared=True)
    assert times["w0"] == pytest.approx([4 * 124 * us, 456 * us])
    window = rep.end_s - rep.start_s
    assert window == pytest.approx(1579 * us)
    joules = P.radio_joules(*times["w0"], window)
    assert joules == pytest.approx(1.5 * 496 * us + 1.0 * 456 * us + 0.75 * (1579 - 952) * us)
    # the collided frame costs its airtime at transmit rather than idle power
    without = 1.5 * 372 * us + 1.0 * 456 * us + 0.75 * (1579 - 828) * us
    assert joules - without == pytest.approx((1.5 - 0.75) * 124 * us)
    # the access point received every attempt addressed to it, collided ones included (less
    # their 20 us headers), and sent the 6 ACKs
    assert times["server"] == pytest.approx([6 * 44 * us, 8 * (124 - 20) * us])


def test_an_away_node_sleeps_the_whole_window():
    assert P.radio_joules(0.0, 0.0, 2.5, away=True) == pytest.approx(0.125 * 2.5)
    assert P.radio_joules(0.0, 0.0, 2.5) == pytest.approx(0.75 * 2.5)   # present: idle-listens
    assert P.radio_joules(2.0, 2.0, 2.5) == pytest.approx(1.5 * 2 + 1.0 * 2)   # full duplex: no idle
    assert P.compute_joules(0.2) == pytest.approx(1.0)


def test_every_packaged_figure_has_a_source_and_profiles_are_checked(tmp_path):
    profiles = load_profiles()
    assert {"rpi4", "jetson_nano", "phone"} <= set(profiles)
    for p in profiles.values():
        for key in ("compute_w", "tx_w", "rx_w", "idle_w", "sleep_w"):
            assert p.sources.get(key), (p.name, key)
        assert 0 < p.sleep_w < p.idle_w < p.rx_w < p.tx_w
    assert validate_network({})["energy_profile"] == "rpi4"
    with pytest.raises(ChannelConfigError, match=r"network.nodes.w1.energy_profile = 'toaster': must be a device profile: jetson_nano, phone, rpi4"):
        validate_network({"nodes": {"w1": {"energy_profile": "toaster"}}})
    own = tmp_path / "mine.toml"
    own.write_text('[radios.r]\ntx_w = 2\nrx_w = 1\nidle_w = 0.5\nsleep_w = 0.01\n'
                   '[devices.toaster]\ncompute_w = 900\nradio = "r"\n')
    net = validate_network({"energy_profiles": str(own), "nodes": {"w1": {"energy_profile": "toaster"}}})
    assert load_profiles(net["energy_profiles"])["toaster"].compute_w == 900
    own.write_text('[devices.toaster]\ncompute_w = 900\nradio = "nope"\n')
    with pytest.raises(ChannelConfigError, match="devices.toaster.radio = 'nope'"):
        load_profiles(str(own))


def test_each_station_of_a_cell_hears_the_others_frames_summed_in_link_order():
    """The heard seconds of a station: the sum, link by link in the report's order, of the
    heard seconds of the links it is not on (the definition, written as a loop here), to the
    last bit, on random cells of 1-40 links over two cells."""
    import random
    import types

    from channels.energy import radio_seconds
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 40)
        links = {}
        for i in range(n):
            a, b = rng.choice(["ap"] + [f"w{j}" for j in range(n)]), rng.choice(["ap", f"w{i}", "x"])
            if a != b:
                links[a, b] = types.SimpleNamespace(busy_s=0.0, header_s=0.0, cell=rng.choice("cd"),
                                                    heard_collided_s=0.0, collided_deaf_s=0.0,
                                                    heard_s=rng.random() * 10 ** rng.randint(-6, 1))
        expected = {}
        for cell in "cd":
            mine = [(a, b, st.heard_s) for (a, b), st in links.items() if st.cell == cell]
            for x in {n for a, b, _ in mine for n in (a, b)}:
                heard = sum(h for a, b, h in mine if x not in (a, b))
                if heard:
                    expected[x] = expected.get(x, 0.0) + heard
        got = radio_seconds(types.SimpleNamespace(links=links, pattern="gather"), True)
        assert {x: r[1] for x, r in got.items() if r[1]} == expected
