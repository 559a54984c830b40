"""A user's model factory and data loader, named by `module:name` or `file.py:name`: resolved,
called with their options, their results checked (one line per mistake), and a map-style
Dataset read by index gives the same batches, gradients and evaluation as the same samples held
as tensors."""
import sys

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset as TorchDataset

from nodes.data import Samples, check_loaded, load_dataset
from nodes.errors import DatasetError
from nodes.models import ModelError, build_model
from nodes.partition import split
from nodes.plugins import PluginError, resolve
from nodes.workers import WorkerPool, evaluate

USER = '''
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, input_shape, num_classes, hidden=8):
        super().__init__()
        self.hidden = hidden
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0] * input_shape[1], hidden),
                                  nn.ReLU(), nn.Linear(hidden, num_classes))
    def forward(self, x):
        return self.body(x)

def not_a_module(input_shape, num_classes):
    return "a string"

def elementwise(input_shape, num_classes):
    return ScaleOnly(num_classes)

class ScaleOnly(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.w = nn.Parameter(torch.ones(k))
    def forward(self, x):
        return x.flatten(1)[:, :self.w.numel()] * self.w

NUMBER = 3

def tensors(seed=0, n=40, shift=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, 3, generator=g)
    y = (torch.arange(n) + shift) % 3
    return {"train": (x, y), "test": (x[:10], y[:10]), "num_classes": 3}
'''


@pytest.fixture
def user(tmp_path, monkeypatch):
    (tmp_path / "user_pkg").mkdir()
    (tmp_path / "user_pkg" / "__init__.py").write_text("")
    (tmp_path / "user_pkg" / "parts.py").write_text(USER)
    (tmp_path / "loose.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("user_pkg")]:
        del sys.modules[name]


def test_module_and_file_references_name_the_same_object(user):
    assert resolve("model.name", "user_pkg.parts:NUMBER") == 3
    assert resolve("model.name", f"{user}/loose.py:NUMBER") == 3
    a = build_model("user_pkg.parts:Net", (2, 3), 3, {"hidden": 5})
    b = build_model(f"{user}/loose.py:Net", (2, 3), 3)
    assert isinstance(a, nn.Module) and a.hidden == 5 and b.hidden == 8
    assert a(torch.zeros(4, 2, 3)).shape == (4, 3)


def test_a_module_in_the_working_directory_is_found_as_under_python_m(tmp_path, monkeypatch):
    """`python -m` (every torchrun rank) has the working directory on sys.path; the console
    script does not: a module there is found either way."""
    (tmp_path / "cwd_user_mod.py").write_text("NUMBER = 7\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert resolve("model.name", "cwd_user_mod:NUMBER") == 7
    sys.modules.pop("cwd_user_mod", None)


@pytest.mark.parametrize("ref,words", [
    ("no_such_pkg.mod:Net", "module 'no_such_pkg.mod' cannot be imported (ModuleNotFoundError"),
    ("user_pkg.parts:Absent", "module 'user_pkg.parts' has no attribute 'Absent'"),
    ("user_pkg.parts:NUMBER", "names a int, which is not callable"),
    ("missing/file.py:Net", "file missing/file.py does not exist"),
])
def test_a_reference_that_names_nothing_usable_is_one_line(user, ref, words):
    with pytest.raises(PluginError) as e:
        build_model(ref, (2, 3), 3)
    text = str(e.value)
    assert text.startswith(f"model.name = {ref!r}: ") and words in text and "\n" not in text
    assert text.endswith("expected 'package.module:name' or 'path/to/file.py:name'")


def test_a_factory_that_returns_no_module_or_rejects_its_options_is_one_line(user):
    with pytest.raises(ModelError, match=r"the factory returned a str; expected a torch.nn.Module"):
        build_model("user_pkg.parts:not_a_module", (2, 3), 3)
    with pytest.raises(ModelError, match=r"raised TypeError: .*unexpected keyword argument 'width'"):
        build_model("user_pkg.parts:Net", (2, 3), 3, {"width": 4})
    with pytest.raises(ModelError, match=r"model.width: option not known for the built-in model 'mlp'"):
        build_model("mlp", (2, 3), 3, {"width": 4})


def test_a_loader_gets_its_options_and_the_seed(user):
    ds = load_dataset("user_pkg.parts:tensors", seed=5, n=30)
    x, _ = resolve("data.dataset", "user_pkg.parts:tensors")(seed=5, n=30)["train"]
    assert len(ds.train_y) == 30 and ds.input_shape == (2, 3) and ds.num_classes == 3
    torch.testing.assert_close(ds.train_x, x, rtol=0, atol=0)


@pytest.mark.parametrize("bad,words", [
    ({"train": (torch.zeros(5, 2), torch.zeros(4, dtype=torch.long))},
     "the train split has 5 inputs but 4 labels; expected as many labels as inputs"),
    ({"train": (torch.zeros(5, 2), torch.tensor([0, 1, 2, 3, 0]))},
     "a train label is 3; expected labels in 0..2 (num_classes = 3)"),
    ({"test": (torch.zeros(2, 2), torch.tensor([0, -1]))},
     "a test label is -1; expected labels in 0..2"),
    ({"test": (torch.zeros(2, 5), torch.tensor([0, 1]))},
     "a test input has shape (5,); expected input_shape (2,)"),
    ({"num_classes": 1}, "num_classes = 1; expected an integer >= 2"),
    ({"train": (torch.zeros(5, 2), torch.full((5,), 0.5))}, "the train labels are (5,) torch.float32"),
])
def test_a_loader_whose_result_breaks_the_contract_is_one_line(bad, words):
    good = {"train": (torch.zeros(5, 2), torch.tensor([0, 1, 2, 0, 1])),
            "test": (torch.zeros(2, 2), torch.tensor([0, 1])), "num_classes": 3}
    with pytest.raises(DatasetError) as e:
        check_loaded("m:f", {**good, **bad})
    assert str(e.value).startswith("data.dataset = 'm:f': ") and words in str(e.value)
    assert "\n" not in str(e.value)


class Indexed(TorchDataset):
    """A map-style dataset over tensors that counts the items read (no `targets`)."""

    def __init__(self, x, y):
        self.x, self.y, self.reads = x, y, 0

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        self.reads += 1
        return self.x[i].numpy().astype("float64"), int(self.y[i])


def test_samples_index_like_the_tensor_they_stand_for():
    x = torch.randn(20, 3, 2)
    s = Samples(Indexed(x, torch.zeros(20, dtype=torch.long)))
    idx = torch.tensor([[3, 1], [19, 0]])
    torch.testing.assert_close(s[idx], x[idx], rtol=0, atol=0)
    torch.testing.assert_close(s[4:9], x[4:9], rtol=0, atol=0)
    assert s[idx].dtype == torch.float32 and len(s) == 20


def test_a_map_style_dataset_trains_and_evaluates_as_its_tensors_do():
    """Same partition, same batches, same gradients and the same evaluation, read by index;
    a training iteration reads only its batches' items."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 2, 3, generator=g), torch.arange(64) % 3
    mapped = Indexed(x, y)
    ds = check_loaded("m:f", {"train": mapped, "test": Indexed(x[:16], y[:16]), "num_classes": 3})
    assert isinstance(ds.train_x, Samples) and ds.input_shape == (2, 3)
    torch.testing.assert_close(ds.train_y, y, rtol=0, atol=0)
    shards = split(ds.train_y, 4, "dirichlet", alpha=0.5, seed=1)
    assert [s.tolist() for s in shards] == [s.tolist() for s in split(y, 4, "dirichlet", alpha=0.5, seed=1)]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(6, 3))
    pools = [WorkerPool(model, tx, y, shards, batch_size=5, seed=2, mode=mode)
             for tx in (x, ds.train_x) for mode in ("sequential",)]
    mapped.reads = 0
    for _ in range(3):
        (ga, la), (gb, lb) = pools[0].gradients(), pools[1].gradients()
        for a, b in zip(ga, gb):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert la == lb
    assert mapped.reads == 3 * 4 * 5   # iterations x workers x batch: nothing else was read
    assert evaluate(model, ds.test_x, ds.test_y, batch_size=7) == evaluate(model, x[:16], y[:16], batch_size=7)


def test_the_vmap_pool_reads_a_map_style_dataset_too():
    x, y = torch.randn(40, 6), torch.arange(40) % 2
    ds = check_loaded("m:f", {"train": Indexed(x, y), "test": (x, y), "num_classes": 2})
    torch.manual_seed(0)
    model = nn.Linear(6, 2)
    shards = split(y, 2, seed=0)
    a = WorkerPool(model, x, y, shards, batch_size=4, seed=0, mode="vmap").gradients()[0]
    b = WorkerPool(model, ds.train_x, ds.train_y, shards, batch_size=4, seed=0, mode="vmap").gradients()[0]
    for u, v in zip(a, b):
        torch.testing.assert_close(u, v, rtol=0, atol=0)


def test_the_example_files_follow_the_contract():
    """examples/byo: the transformer factory and the waves loader, whose training split is a
    Dataset that makes each sample from its index."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples" / "byo"
    ds = load_dataset(f"{root}/data.py:waves", seed=0, n_train=50, n_test=20)
    assert isinstance(ds.train_x, Samples) and ds.input_shape == (16, 2) and ds.num_classes == 4
    model = build_model(f"{root}/model.py:TinyTransformer", ds.input_shape, 4, {"d_model": 16})
    assert model(ds.train_x[torch.arange(3)]).shape == (3, 4)
