"""The DCF against ns-3.37 itself (an outside implementation of 802.11): our own scenario
(validation/ns3/cell.cc) built against Debian's libns3-dev and the project's cell with its default
`[network.csma]`, side by side. Skips in one line where ns-3 or g++ is missing."""
import pytest

from validation.ns3 import run as ns3

why = ns3.available()
if why:
    pytest.skip(why, allow_module_level=True)

# ns-3 simulated seconds per N (N = 50 costs ~5 wall s per simulated s), our frames per N
SECONDS = {1: 2.0, 2: 2.0, 5: 3.0, 10: 3.0, 20: 3.0, 50: 2.0}
# Throughput within 1 % of ns-3 and collided attempts per success within 5 % (the bar).
TOL = {n: (0.01, 0.05) for n in ns3.NS}


@pytest.fixture(scope="module")
def rows():
    return {n: ns3.compare([n], seconds=SECONDS[n], frames=30000, seed=3)[0] for n in ns3.NS}


@pytest.mark.parametrize("n", ns3.NS)
def test_saturation_matches_ns3(rows, n):
    r = rows[n]
    thr, coll = TOL[n]
    assert r["ours"]["mbps"] == pytest.approx(r["ns3"]["mbps"], rel=thr)
    assert r["ours"]["collided_per_success"] == pytest.approx(r["ns3"]["collided_per_success"], rel=coll, abs=1e-9)


def test_mcs_table_thresholds_are_ns3s():
    """channels/data/mcs_80211.csv's min_snr_db: ns-3's TableBasedErrorRateModel, 10% PER at
    1500 bytes, each within 0.5 dB."""
    from channels.fading import load_mcs_table

    table = load_mcs_table(None)       # rows in order of min_snr_db: MCS 0..8
    model = [d["table_based_db"] for d in sorted(ns3.per_thresholds(1500), key=lambda d: d["mcs"])]
    assert table.min_snr_db.tolist() == pytest.approx(model, abs=0.5)


@pytest.mark.parametrize("per", [0.0, 0.2])
def test_a_dedicated_link_with_a_packet_error_rate_matches_ns3(per):
    """A best-effort burst on a dedicated 54 Mbit/s link (ns-3: PointToPoint + RateErrorModel):
    the same transfer time (1000 x 1500 B x 8 / 54 Mbit/s = 222.2 ms), and losses both within
    4 sigma of the binomial's mean."""
    b = ns3.burst(1000, 1500, per, seed=2)
    assert b["ours"]["last_arrival_s"] == pytest.approx(b["ns3"]["last_arrival_s"], abs=1e-6)
    assert b["ns3"]["last_arrival_s"] == pytest.approx(1000 * 1500 * 8 / 54e6, abs=1e-6)
    sigma = (1000 * per * (1 - per)) ** 0.5
    for side in ("ns3", "ours"):
        assert abs(b[side]["received"] - 1000 * (1 - per)) <= 4 * sigma + 1e-9, side


def test_ns3_wifi_radio_is_ns3s_energy_model():
    """channels/data/energy_profiles.toml's `ns3_wifi` radio (every packaged device's): ns-3's
    WifiRadioEnergyModel currents times BasicEnergySource's voltage, as ns-3.37's libraries
    initialise them (validation/ns3/energy_defaults.cc)."""
    import tomllib
    from importlib import resources

    ns = ns3.radio_energy_defaults()
    volts = ns["BasicEnergySupplyVoltageV"]
    radio = tomllib.loads(resources.files("channels").joinpath("data/energy_profiles.toml")
                          .read_text())["radios"]["ns3_wifi"]
    expected = {"tx_w": ns["TxCurrentA"] * volts, "rx_w": ns["RxCurrentA"] * volts,
                "idle_w": ns["IdleCurrentA"] * volts, "sleep_w": ns["SleepCurrentA"] * volts}
    assert {k: radio[k] for k in expected} == pytest.approx(expected, rel=1e-9)
