"""Bring your own, from a package of one's own: a throw-away package made here (a model factory,
a data loader and one compressor registered through the `lgc_testbed.methods` entry point) and
the example plugin (examples/byo/plugin) are pip-installed into this venv, and uninstalled again
when the module's tests end (the venv is shared: its `testbed methods` must not keep them).

The quickstart runs with `--set model.name=... data.dataset=... compression.method=...` in
process and under torchrun with equal rows (the in-process run is the reference, as in
test_torchrun.py); `testbed methods` lists both outside methods with their origin; and the
example plugin's method passes the exported error-feedback check.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testbed.records.store import Store
from tests.e2e.test_torchrun import assert_same_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
DIST, PLUGIN_DIST = "byo-throwaway", "lgc-example-plugin"

FILES = {
    "pyproject.toml": f'''
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{DIST}"
        version = "0.3"
        [project.entry-points."lgc_testbed.methods"]
        half_ef = "byo_throwaway.methods"
        [tool.setuptools]
        packages = ["byo_throwaway"]
        ''',
    "byo_throwaway/__init__.py": "",
    "byo_throwaway/models.py": '''
        import math
        from torch import nn

        def wide(input_shape, num_classes, hidden=24):
            return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.Tanh(),
                                 nn.Linear(hidden, num_classes))
        ''',
    "byo_throwaway/data.py": '''
        import torch
        from torch.utils.data import Dataset

        class Stripes(Dataset):
            def __init__(self, n, seed):
                self.n, self.seed = n, seed
                self.targets = torch.arange(n) % 3
            def __len__(self):
                return self.n
            def __getitem__(self, i):
                g = torch.Generator().manual_seed(self.seed * 7919 + i)
                y = int(self.targets[i])
                x = torch.randn(1, 6, 6, generator=g) * 0.3
                x[0, 2 * y:2 * y + 2] += 1.0
                return x, y

        def stripes(seed=0, n_train=480):
            test = Stripes(90, seed + 1)
            return {"train": Stripes(n_train, seed), "test": test, "num_classes": 3}
        ''',
    "byo_throwaway/methods.py": '''
        """`half_ef`: every coordinate as an f16 with the rounding error kept (error feedback)."""
        from nodes.compression import codec
        from nodes.compression.memory import ErrorMemory
        from nodes.compression.registry import register
        from nodes.compression.templates import DenseScheme

        @register("half_ef", wire_id=201)
        class HalfEF(DenseScheme):
            def __init__(self, **kw):
                super().__init__(**kw)
                self.memory = ErrorMemory(self.n_workers, self.device)
            def encode(self, worker, iteration, grad):
                p = self.memory.compensate(worker, grad)
                self.memory.update(worker, p, p.half().float())
                return codec.encode_dense(p, payload_bytes=self.payload_bytes, dtype="f16",
                                          method=self.wire_id, iteration=iteration)
        ''',
}
SETS = ["model.name=byo_throwaway.models:wide", "data.dataset=byo_throwaway.data:stripes",
        "compression.method=half_ef", "run.iterations=4", "run.eval_every=2", "run.flush_every=1",
        'run.device="cpu"']


def pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Both packages built from copies (no build files left in the tree) and installed."""
    folder = tmp_path_factory.mktemp("byo")
    package = folder / "throwaway"
    for name, text in FILES.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(textwrap.dedent(text))
    plugin = folder / "plugin"
    shutil.copytree(ROOT / "examples" / "byo" / "plugin", plugin)
    try:
        for source in (package, plugin):
            done = pip("install", "--no-deps", "--no-build-isolation", str(source))
            assert done.returncode == 0, done.stderr
        yield folder
    finally:
        pip("uninstall", "-y", DIST, PLUGIN_DIST)


def cli_in(folder: Path, *argv: str, limit_s: float = 400) -> subprocess.CompletedProcess:
    """`python -m testbed.cli ARGV` from a folder where neither package's source lies: what is
    found is what pip installed."""
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "testbed.cli", *argv], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=limit_s)


def test_methods_lists_the_outside_methods_with_their_origin(installed):
    out = cli_in(installed, "methods")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for name, origin in (("half_ef", f"from: {DIST} 0.3 (entry point half_ef = byo_throwaway.methods)"),
                         ("int8ef", f"from: {PLUGIN_DIST} 0.1.0 (entry point int8ef = "
                                    "lgc_example_plugin.int8ef)")):
        row = next(i for i, line in enumerate(lines) if line.split()[:1] == [name])
        assert lines[row + 2].strip() == origin
    detail = cli_in(installed, "methods", "int8ef")
    assert detail.returncode == 0 and "bucket" in detail.stdout and "from: lgc-example-plugin" in detail.stdout


@pytest.mark.slow   # four torchrun ranks start torch: about a minute on a busy 2-core machine
def test_the_quickstart_with_all_three_of_ones_own_in_process_and_under_torchrun(installed):
    quickstart = str(ROOT / "experiments" / "quickstart.toml")
    sets = [a for kv in SETS for a in ("--set", kv)]
    local = cli_in(installed, "run", quickstart, "--store", "local.db", "--quiet", *sets)
    assert local.returncode == 0, local.stderr
    dist = cli_in(installed, "run", quickstart, "--store", "dist.db", "--quiet", "--launcher",
                   "torchrun", *sets)
    assert dist.returncode == 0, dist.stdout + dist.stderr
    with Store(installed / "local.db") as a, Store(installed / "dist.db") as b:
        ref, got = a.export(1), b.export(1)
    assert ref["run"]["config"]["model"]["name"] == "byo_throwaway.models:wide"
    assert ref["run"]["method"] == "half_ef" and len(ref["iterations"]) == 4
    assert all(r["bits_up"] > 0 for r in ref["iterations"])
    assert_same_rows(ref, got)


def test_the_example_plugin_runs_and_keeps_its_error_memory(installed):
    """The exported check, as a plugin author runs it, in a fresh interpreter."""
    code = ("from nodes.compression.testing import check_error_feedback; "
            "check_error_feedback('int8ef', {'downlink': 'f32'}); print('ok')")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], cwd=installed, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
