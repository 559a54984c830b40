"""Bring your own, through the testbed: a model factory and a loader named in an experiment file
(paths beside the file), their options from [model] and [data], in process, in a sweep, resumed
and federated; a model whose FLOPs cannot be counted charges measured time and says so; and the
Python API (testbed.api) gives back the rows that `testbed export` prints for the same run."""
import contextlib
import io
import json
import textwrap

import pytest
import torch
from torch import nn

from testbed import api
from testbed.cli import main
from testbed.configuration.loading import config_from_stored, load_config
from testbed.records.store import Store

USER = '''
import torch
from torch import nn
from torch.utils.data import Dataset

class Net(nn.Module):
    def __init__(self, input_shape, num_classes, hidden=16):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0], hidden), nn.ReLU(),
                                  nn.Linear(hidden, num_classes))
    def forward(self, x):
        return self.body(x)

class Gate(nn.Module):
    """Only element-wise work: nothing for the FLOP counter."""
    def __init__(self, input_shape, num_classes, **unused):
        super().__init__()
        self.w = nn.Parameter(torch.ones(num_classes))
    def forward(self, x):
        return x[:, :self.w.numel()] * self.w

class Blobs(Dataset):
    """Made from the index on demand: four Gaussian blobs in 6 dimensions."""
    def __init__(self, n, seed):
        self.n, self.seed = n, seed
        self.targets = torch.arange(n) % 4
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 100003 + i)
        y = int(self.targets[i])
        return torch.randn(6, generator=g) * 0.5 + torch.eye(6)[y] * 2, y

def blobs(seed=0, n_train=256, n_test=64):
    test = Blobs(n_test, seed + 1)
    xs = torch.stack([test[i][0] for i in range(n_test)])
    return {"train": Blobs(n_train, seed), "test": (xs, test.targets.clone()), "num_classes": 4}
'''

EXPERIMENT = '''
[run]
name = "mine"
iterations = 6
eval_every = 3
checkpoint_every = 3
[data]
dataset = "parts/user.py:blobs"
batch_size = 8
n_train = 200
[model]
name = "parts/user.py:Net"
hidden = 12
[compression]
method = "topk"
ratio = 0.2
[network]
topology = "star"
workers = 2
medium = "dedicated"
'''


@pytest.fixture
def experiment(tmp_path, monkeypatch):
    """An experiment file whose model and loader live in parts/ beside it; the working
    directory is elsewhere, so only the file's folder can resolve them."""
    folder = tmp_path / "exp"
    (folder / "parts").mkdir(parents=True)
    (folder / "parts" / "user.py").write_text(USER)
    path = folder / "mine.toml"
    path.write_text(textwrap.dedent(EXPERIMENT))
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return path


def cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def test_references_resolve_beside_the_file_and_options_reach_them(experiment):
    cfg = load_config(experiment)
    user = experiment.parent / "parts" / "user.py"
    assert cfg.model.name == f"{user}:Net" and cfg.model.options == {"hidden": 12}
    assert cfg.data.dataset == f"{user}:blobs" and cfg.data.options == {"n_train": 200}
    # what the store keeps names the same objects from any directory
    assert config_from_stored(cfg.as_dict(), source=cfg.source) == cfg
    again = api.load(cfg, {"run.iterations": 2, "model.hidden": 5})   # a config, overridden
    assert again.run.iterations == 2 and again.model.options == {"hidden": 5}
    assert (again.data, again.compression) == (cfg.data, cfg.compression) and cfg.run.iterations == 6
    run = api.run(experiment, store="s.db")
    assert run.status == "completed" and len(run.rows()) == 6
    info = run.export()["run"]["config"]
    assert info["model"] == {"name": f"{user}:Net", "hidden": 12}


def test_the_api_rows_equal_the_cli_export_of_the_same_run(experiment):
    run = api.run(experiment, store="s.db", overrides={"run.iterations": 4}, name="api")
    code, out, _ = cli(["export", "api", "--store", "s.db"])
    assert code == 0
    exported = json.loads(out)
    assert exported == json.loads(json.dumps(run.export(), default=str))
    for table in api.TABLES:
        assert json.loads(json.dumps(run.rows(table), default=str)) == exported[table], table
    assert len(run.rows()) == 4
    assert list(run.column("evals", "test_accuracy")) == [e["test_accuracy"] for e in exported["evals"]]
    # and a CLI run of the same file with the same settings has the same rows, bar timestamps
    code, _, err = cli(["run", experiment, "--store", "s.db", "--set", "run.iterations=4",
                        "--name", "cli", "--quiet"])
    assert code == 0, err
    mine = api.open_run("s.db", "cli").rows("evals")
    assert [(e["iteration"], e["test_accuracy"]) for e in mine] == \
        [(e["iteration"], e["test_accuracy"]) for e in run.rows("evals")]


def test_a_dict_a_model_object_and_a_data_object_through_the_api(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(1)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    before = [p.detach().clone() for p in net.parameters()]
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(80, 64, generator=g), torch.arange(80) % 10
    data = {"train": (x, y), "test": (x[:20], y[:20]), "num_classes": 10}
    tables = {"run": {"iterations": 3, "eval_every": 3}, "network": {"workers": 2},
              "compression": {"method": "none"}}
    run = api.run(tables, store="d.db", model=net, dataset=data, name="objects")
    assert run.status == "completed" and len(run.rows()) == 3
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))   # trained in place
    assert run.config["model"]["name"] == "<given>:Sequential"
    assert run.config["data"]["dataset"] == "<given>:dict"


def test_a_model_whose_flops_cannot_be_counted_charges_measured_time(experiment, capfd):
    run = api.run(experiment, store="s.db", overrides={"model.name": "parts/user.py:Gate",
                                                       "run.iterations": 2})
    err = capfd.readouterr().err
    assert "note: run.compute_time = 'flops': the FLOP counter found no matrix product" in err
    assert run.config["run"]["compute_time"] == "measured"
    assert all(r["virtual_time_s"] > 0 for r in run.rows())


def test_a_sweep_over_a_factory_option_and_a_resume(experiment):
    code, out, err = cli(["sweep", experiment, "--store", "s.db", "--grid", "model.hidden=4,8",
                          "--quiet"])
    assert code == 0, err
    for hidden in (4, 8):
        run = api.open_run("s.db", f"mine[hidden={hidden}]")
        assert run.status == "completed" and run.config["model"]["hidden"] == hidden
    # stopped after 4 iterations (its checkpoint: after 3), resumed: the uninterrupted rows
    full = api.run(experiment, store="full.db").rows()
    with Store("r.db") as st:
        exp = api.build_experiment(load_config(experiment), st)
        calls = iter(range(100))
        exp.should_stop = lambda: next(calls) >= 4
        exp.run()
    assert len(api.open_run("r.db", 1).rows()) == 4
    code, out, err = cli(["resume", "1", "--store", "r.db", "--quiet"])
    assert code == 0 and "resumes after iteration 2" in out, err
    again = api.open_run("r.db", 1).rows()
    assert [r["train_loss"] for r in again] == [r["train_loss"] for r in full]


def test_a_federated_run_on_a_map_style_dataset(experiment):
    run = api.run(experiment, store="f.db", overrides={
        "federated.clients": 6, "federated.clients_per_round": 2, "federated.local_steps": 2,
        "data.partition": "shards", "data.shards_per_worker": 1, "run.iterations": 3,
        "network.workers": 2})
    assert run.status == "completed" and len(run.rows()) == 3
