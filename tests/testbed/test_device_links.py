"""Each device's own link (a device trace's uplink_mbps / downlink_mbps, FedScale's
communication capacity): every packet runs at the rate in force when its transmission starts,
against hand figures (a step in the middle of one transfer: tests/channels/test_rate_steps.py)."""
import json

import pytest

from testbed.cli import main as cli
from testbed.configuration.loading import load_config
from testbed.errors import ConfigError
from testbed.experiment import Experiment
from testbed.records.store import Store
from tests.testbed.experiment_files import experiment_file


def experiment(tmp_path, nodes: dict, iterations=6):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"nodes": nodes}))
    return experiment_file(tmp_path, iterations=iterations, workers=2, run=f'device_trace = "{trace}"')


def test_a_transfers_time_follows_the_traces_rate(tmp_path):
    # w0's uplink runs at 2 Mb/s until t = 0.5 s, then at 8; its downlink at 4 throughout;
    # w1 is not traced and keeps the [network] 10 Mb/s. Iteration 0 spans 0-0.66 s, its
    # uplinks end before 0.5 s: each iteration's packets all started on one side of the step
    path = experiment(tmp_path, {"w0": {"uplink_mbps": [[0, 2.0], [0.5, 8.0]], "downlink_mbps": [[0, 4.0]]}})
    store = Store(tmp_path / "runs.db")
    rid = Experiment(load_config(path), store).run()
    store.flush()
    starts = [0.0] + [r["virtual_time_s"] for r in store.iterations(rid)]
    seen = set()
    for r in store.links(rid):
        rate = r["bytes"] * 8 / r["busy_s"] / 1e6     # bits on the wire / airtime
        t = starts[r["iteration"]]
        want = {("w0", "server"): 2.0 if t < 0.5 else 8.0, ("server", "w0"): 4.0}.get((r["src"], r["dst"]), 10.0)
        assert rate == pytest.approx(want, rel=1e-9), (r["iteration"], r["src"], r["dst"])
        seen.add(want)
    assert seen == {2.0, 8.0, 4.0, 10.0}     # the run crossed the step at 0.5 s
    store.close()


def test_probe_runs_the_transfer_at_the_traced_rate(tmp_path, capsys):
    path = experiment(tmp_path, {"w0": {"uplink_mbps": [[0, 2.0]]}})
    assert cli(["probe", str(path), "--payload-bytes", str(5 * 1460), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # 5 packets of 1500 B on the wire at 2 Mb/s, then the 1 ms delay
    assert out["completion_s"] == pytest.approx(5 * 1500 * 8 / 2e6 + 1e-3)


def test_bad_rates_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"nodes.w0.uplink_mbps\[0\] = 0: must be a positive number"):
        load_config(experiment(tmp_path, {"w0": {"uplink_mbps": [[0, 0]]}}))
    with pytest.raises(ConfigError, match=r"nodes.w0.downlink_mbps\[1\] = \[0, 3\]: times must start at 0 and increase"):
        load_config(experiment(tmp_path, {"w0": {"downlink_mbps": [[0, 1], [0, 3]]}}))
