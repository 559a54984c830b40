"""The SNR of fading links, from the link layer's report to the store's `links.snr_db` column.

Hand figure: a fading link without fading or shadowing has the mean SNR of the log-distance
model, SNR = P_tx - (L_ref + 10 n log10 d) - (N_0 + 10 log10 B + NF)
           = 20 - (40 + 30 log10 10) - (-174 + 10 log10 20e6 + 7) = 43.9897 dB (defaults, d = 10 m).
"""
import math
import sqlite3

import numpy as np
import pytest

from channels.network import Network
from channels.topology import build_topology
from testbed.configuration.loading import load_config
from testbed.experiment import Experiment
from testbed.records.store import Store

SNR_DB = 20 - (40 + 30 * math.log10(10)) - (-174 + 10 * math.log10(20e6) + 7)
STEADY = '{ model = "fading", fading = "none", shadowing_db = 0.0 }'


def test_a_fading_link_reports_its_snr_and_other_links_none():
    assert SNR_DB == pytest.approx(43.9897, abs=1e-4)
    for loss, expected in (({"model": "fading", "fading": "none", "shadowing_db": 0.0}, SNR_DB),
                           ({"model": "bernoulli", "p": 0.0}, None)):
        cfg = {"topology": "star", "workers": 1, "medium": "dedicated",
               "link": {"bandwidth_mbps": 10.0, "delay_ms": 1.0, "loss": loss}}
        net = Network(build_topology(cfg, 0), medium="dedicated", rng=np.random.default_rng(0))
        st = net.transfer("w0", "server", [1000] * 5, at=0.0).links[("w0", "server")]
        assert st.snr_samples == (5 if expected else 0)
        assert st.snr_db == (pytest.approx(expected) if expected else None)


def test_experiment_rows_carry_the_snr_of_fading_links(tiny_experiment, tmp_path):
    path = tiny_experiment(loss=STEADY, iterations=3)
    with Store(tmp_path / "runs.db") as store:
        rid = Experiment(load_config(path), store).run()
        rows = store.links(rid)
    assert rows and all(r["snr_db"] == pytest.approx(SNR_DB) for r in rows)
    path = tiny_experiment(name="plain", iterations=2)
    with Store(tmp_path / "runs.db") as store:
        rid = Experiment(load_config(path), store).run()
        assert {r["snr_db"] for r in store.links(rid)} == {None}


def test_a_store_written_before_the_column_gains_it(tmp_path):
    db = sqlite3.connect(tmp_path / "old.db")
    db.execute("CREATE TABLE links (run_id INTEGER NOT NULL, iteration INTEGER NOT NULL, src TEXT "
               "NOT NULL, dst TEXT NOT NULL, bytes INTEGER, packets INTEGER, lost INTEGER, "
               "retransmitted INTEGER, busy_s REAL, PRIMARY KEY (run_id, iteration, src, dst))")
    db.execute("INSERT INTO links VALUES (1, 0, 'w0', 'server', 10, 1, 0, 0, 0.1)")
    db.commit()
    db.close()
    with Store(tmp_path / "old.db") as store:
        assert store.links(1) == [{"iteration": 0, "src": "w0", "dst": "server", "bytes": 10,
                                   "packets": 1, "lost": 0, "retransmitted": 0, "busy_s": 0.1,
                                   "snr_db": None, "collisions": 0, "retries": 0}]
