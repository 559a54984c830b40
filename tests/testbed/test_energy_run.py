"""Energy in a training run: each worker's joules per iteration against its links' airtime and
its profile's powers, an away worker asleep for exactly its time away, the profile chosen per
node, the columns in the store, and `testbed export` (json, csv, tensorboard) carrying them."""
import csv
import json
import sqlite3

import pytest

from channels.energy import load_profiles
from testbed.cli import main as cli
from testbed.configuration.loading import load_config
from testbed.errors import ConfigError
from testbed.experiment import Experiment
from testbed.records.store import Store
from tests.testbed.experiment_files import experiment_file

ITERATIONS = 4


def experiment(tmp_path, away_after=None, profile="jetson_nano"):
    trace = tmp_path / "trace.json"
    nodes = {"w3": {"profile": profile}}
    if away_after is not None:
        nodes["w1"] = {"available": [[0, away_after]]}
    trace.write_text(json.dumps({"nodes": nodes}))
    return experiment_file(tmp_path, iterations=ITERATIONS, eval_every=2, run=f'device_trace = "{trace}"',
                           nodes='[network.nodes.w2]\nenergy_profile = "phone"')


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("energy")
    store = Store(tmp / "runs.db")
    # w1 is away from the second iteration on (the first ends well after 1 us)
    rid = Experiment(load_config(experiment(tmp, away_after=1e-6)), store).run()
    store.flush()
    return tmp, store, rid


def test_each_workers_joules_follow_its_airtime_and_profile(run):
    _, store, rid = run
    profiles = load_profiles()
    want = {"w0": "rpi4", "w1": "rpi4", "w2": "phone", "w3": "jetson_nano"}
    its = store.iterations(rid)
    starts = [0.0] + [r["virtual_time_s"] for r in its]
    links = store.links(rid)
    for r in store.node_iterations(rid):
        it, w = r["iteration"], r["node"]
        p = profiles[want[w]]
        window = starts[it + 1] - starts[it]
        if w == "w1" and it >= 1:    # away: asleep for the whole iteration, computes nothing
            assert r["left_out"] == "unavailable"
            assert r["radio_j"] == pytest.approx(p.sleep_w * window, rel=1e-12)
            assert r["compute_j"] == 0.0
        else:
            tx = sum(l["busy_s"] for l in links if l["iteration"] == it and l["src"] == w)
            rx = sum(l["busy_s"] for l in links if l["iteration"] == it and l["dst"] == w)
            assert tx > 0 and rx > 0
            idle = window - tx - rx
            assert r["radio_j"] == pytest.approx(p.tx_w * tx + p.rx_w * rx + p.idle_w * idle, rel=1e-9)
            assert r["compute_j"] == pytest.approx(p.compute_w * r["compute_s"], rel=1e-12)
        assert r["energy_j"] == pytest.approx(r["radio_j"] + r["compute_j"], rel=1e-12)
    for row in its:
        nodes = [n for n in store.node_iterations(rid) if n["iteration"] == row["iteration"]]
        assert row["energy_j"] == pytest.approx(sum(n["energy_j"] for n in nodes), rel=1e-12)
    run_row = next(r for r in store.runs() if r["id"] == rid)
    assert run_row["energy_j"] == pytest.approx(sum(r["energy_j"] for r in its), rel=1e-12)


def test_export_round_trips_the_energy_columns(run, capsys):
    tmp, store, rid = run
    db = str(tmp / "runs.db")
    assert cli(["export", str(rid), "--store", db, "--format", "json", "--out", str(tmp / "r.json")]) == 0
    data = json.loads((tmp / "r.json").read_text())
    nodes = store.node_iterations(rid)
    assert [(n["radio_j"], n["compute_j"], n["energy_j"]) for n in data["nodes"]] == \
           [(n["radio_j"], n["compute_j"], n["energy_j"]) for n in nodes]
    assert data["run"]["energy_j"] == pytest.approx(sum(r["energy_j"] for r in store.iterations(rid)))
    assert cli(["export", str(rid), "--store", db, "--format", "csv", "--out", str(tmp / "csv")]) == 0
    with (tmp / "csv" / "nodes.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [float(r["energy_j"]) for r in rows] == [n["energy_j"] for n in nodes]
    with (tmp / "csv" / "iterations.csv").open() as f:
        assert [float(r["energy_j"]) for r in csv.DictReader(f)] == [r["energy_j"] for r in store.iterations(rid)]
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert cli(["export", str(rid), "--store", db, "--format", "tensorboard", "--out", str(tmp / "tb")]) == 0
    acc = EventAccumulator(str(next((tmp / "tb").iterdir())))
    acc.Reload()
    total = [r["energy_j"] for r in store.iterations(rid)]
    assert [e.value for e in acc.Scalars("energy/total_j")] == pytest.approx(total)
    assert acc.Scalars("energy/cumulative_j")[-1].value == pytest.approx(sum(total))
    w2 = [n["energy_j"] for n in nodes if n["node"] == "w2"]
    assert [e.value for e in acc.Scalars("energy/w2_j")] == pytest.approx(w2)


def test_a_trace_profile_that_does_not_exist_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match=r"run.device_trace nodes.w3.profile = 'toaster': must be a device profile"):
        load_config(experiment(tmp_path, profile="toaster"))


def test_an_older_store_gains_the_energy_columns(tmp_path):
    path = tmp_path / "old.db"
    with Store(path) as s:
        rid = s.create_run("old", {})
        s.append_iteration(rid, {"iteration": 0, "bits_up": 8}, nodes=[{"iteration": 0, "node": "w0"}])
    db = sqlite3.connect(path)  # as a store written before the energy columns
    for table, col in (("node_iterations", "energy_j"), ("node_iterations", "radio_j"),
                       ("node_iterations", "compute_j"), ("iterations", "energy_j"), ("runs", "energy_j")):
        db.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
    db.commit()
    db.close()
    with Store(path, readonly=True) as s:
        assert s.node_iterations(rid)[0]["energy_j"] is None
        assert s.runs()[0]["energy_j"] is None
    with Store(path) as s:
        s.append_iteration(rid, {"iteration": 1, "energy_j": 2.5},
                           nodes=[{"iteration": 1, "node": "w0", "radio_j": 2.0, "compute_j": 0.5, "energy_j": 2.5}])
        s.flush()
        assert s.node_iterations(rid)[1]["energy_j"] == 2.5
        assert s.runs()[0]["energy_j"] == 2.5


def test_probe_prints_the_joules_of_the_probed_traffic(tmp_path, capsys):
    # two workers each send 7 packets of 1460 B (1500 B on the wire) at 10 Mb/s, 5 ms delay,
    # on dedicated links: 8.4 ms of airtime each; the call lasts 8.4 + 5 ms
    path = tmp_path / "p.toml"
    path.write_text('[run]\nseed = 0\n[network]\ntopology = "star"\nworkers = 2\nmedium = "dedicated"\n'
                    '[network.link]\nbandwidth_mbps = 10.0\ndelay_ms = 5.0\n'
                    '[network.nodes.w1]\nenergy_profile = "phone"\n')
    assert cli(["probe", str(path), "--payload-bytes", str(7 * 1460), "--pattern", "gather", "--json"]) == 0
    energy = json.loads(capsys.readouterr().out)["energy"]
    p = load_profiles()
    air, window = 7 * 1500 * 8 / 10e6, 7 * 1500 * 8 / 10e6 + 5e-3
    assert energy["w0"]["tx_s"] == pytest.approx(air)
    assert energy["w0"]["radio_j"] == pytest.approx(p["rpi4"].tx_w * air + p["rpi4"].idle_w * (window - air))
    assert energy["w1"]["profile"] == "phone"
    assert energy["server"]["rx_s"] == pytest.approx(2 * air)


MOBILE = """
[network.mobility]
model = "random_waypoint"
area_m = [-40.0, -40.0, 40.0, 40.0]
speed_mps = [20.0, 40.0]
"""
FADING = ('{ model = "fading", fading = "rayleigh", rate = "mcs", coherence_ms = 2.0, '
          'shadowing_db = 0.0, path_loss_exponent = 3.5 }')


def test_resume_restores_moving_nodes_and_their_energy_exactly(tiny_experiment, tmp_path, capsys):
    """Stations walking on fading links: a run killed and resumed writes the uninterrupted run's
    rows (SNR, airtime, energy included), and the topology JSON holds each node's position at
    the last iteration's start."""
    from test_resume import EVERY, ITERATIONS, killed_and_resumed, rows

    path = tiny_experiment(name="mobile", iterations=ITERATIONS, workers=3, delivery="best_effort",
                           loss=FADING, medium="shared")
    path.write_text(path.read_text() + MOBILE)
    sets = [f"run.checkpoint_every={EVERY}", "run.flush_every=1", "run.eval_every=3", "run.threads=1"]
    with Store(tmp_path / "ref.db") as ref_store:
        exp = Experiment(load_config(path, sets[1:] + ["run.checkpoint_every=0"]), ref_store)
        rid = exp.run()
        ref = rows(ref_store, rid)
        graph = ref_store.run(rid)["graph"]
        ref_energy = ref_store.run(rid)["energy_j"]
    snr = {r["src"]: [] for r in ref["links"]}
    for r in ref["links"]:
        snr[r["src"]].append(r["snr_db"])
    assert len(set(snr["w0"])) > 3          # w0's SNR changes as it walks
    last = exp.iterations - 1
    start = ref["iterations"][last - 1]["virtual_time_s"]
    mob = exp.world.graph.graph["mobility"]
    pos = {n["id"]: n["pos"] for n in graph["nodes"]}
    assert pos["w1"] == pytest.approx(mob.position("w1", start)[0].tolist())
    got = killed_and_resumed(path, sets, tmp_path, capsys)
    for table in ("iterations", "nodes", "links", "evals", "summary"):
        assert got[table] == ref[table], table
    with Store(tmp_path / "victim.db") as store:   # the run's total, recomputed by the rewind
        assert store.run(1)["energy_j"] == pytest.approx(ref_energy, rel=1e-12)
