"""One rule for the files an experiment names (testbed.paths), the same for run, sweep, probe
and resume; the [network] table and the device trace checked once."""
import json
import textwrap

import pytest

import channels.config
import testbed.emulation.device_trace
from channels.config import ValidNetwork, validate_network
from channels.topology import build_topology
from testbed.commands.probe import load_participation, load_probe_config
from testbed.configuration.loading import config_from_stored, load_config
from testbed.emulation.device_trace import DeviceTrace
from testbed.experiment import Experiment
from testbed.records.store import Store

GRAPH = {"directed": False, "multigraph": False, "graph": {},
         "nodes": [{"id": "server", "role": "server"}, {"id": "w0"}, {"id": "w1"}],
         "links": [{"source": "w0", "target": "server"}, {"source": "w1", "target": "server"}]}


def experiment(folder):
    folder.mkdir()
    (folder / "g.json").write_text(json.dumps(GRAPH))
    (folder / "cell.trace").write_text("1\n2\n")
    (folder / "devices.json").write_text(json.dumps({"nodes": {"w1": {"available": [[10, None]]}}}))
    path = folder / "e.toml"
    path.write_text(textwrap.dedent("""
        [run]
        iterations = 1
        device_trace = "devices.json"
        [data]
        dataset = "digits"
        [model]
        name = "mlp"
        [network]
        topology = "file"
        file = "g.json"
        medium = "dedicated"
        [network.link]
        trace = "cell.trace"
        """))
    return path


def test_run_and_probe_find_every_file_beside_the_experiment_file(tmp_path, monkeypatch):
    path = experiment(tmp_path / "exp")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    want = {k: str((tmp_path / "exp" / name).resolve())
            for k, name in (("file", "g.json"), ("trace", "cell.trace"), ("devices", "devices.json"))}
    cfg = load_config(path)
    got = {"file": cfg.network["file"], "trace": cfg.network["link"]["trace"],
           "devices": cfg.run.device_trace}
    assert got == want
    _, net = load_probe_config(str(path))
    assert (net["file"], net["link"]["trace"]) == (want["file"], want["trace"])
    _, devices = load_participation(str(path))
    assert not devices.available("w1", 0.0) and devices.available("w1", 10.0)


def test_a_stored_run_names_its_files_from_any_directory_and_an_old_one_beside_its_store(
        tmp_path, monkeypatch):
    path = experiment(tmp_path / "exp")
    stored = load_config(path).as_dict()
    monkeypatch.chdir(tmp_path)
    assert config_from_stored(stored, source="s").network["file"] == str(tmp_path / "exp" / "g.json")
    # an older store kept the name as written: looked up beside the store (here: exp/)
    old = {**stored, "network": {**stored["network"], "file": "g.json"}}
    cfg = config_from_stored(old, source="s", base=tmp_path / "exp")
    assert cfg.network["file"] == str(tmp_path / "exp" / "g.json")
    # found nowhere: kept as given (reading the graph then names network.file)
    assert config_from_stored(old, source="s", base=tmp_path).network["file"] == "g.json"


def test_a_valid_network_is_not_checked_again(monkeypatch):
    net = validate_network({"workers": 3, "link": {"bandwidth_mbps": 5}})
    assert isinstance(net, ValidNetwork) and validate_network(net) is net

    def boom(*a, **k):
        raise AssertionError("validated twice")
    monkeypatch.setattr(channels.config, "check_table", boom)
    assert build_topology(net, 0).number_of_nodes() == 4
    with pytest.raises(AssertionError, match="validated twice"):   # a raw table still is
        build_topology({"workers": 3}, 0)


def test_the_device_trace_is_parsed_once_by_the_validator(tmp_path, monkeypatch):
    path = experiment(tmp_path / "exp")
    cfg = load_config(path)
    assert isinstance(cfg.devices, DeviceTrace)

    def boom(*a, **k):
        raise AssertionError("parsed twice")
    monkeypatch.setattr(testbed.emulation.device_trace, "load_device_trace", boom)
    exp = Experiment(cfg, Store(tmp_path / "s.db"))
    assert exp.world.devices is cfg.devices
