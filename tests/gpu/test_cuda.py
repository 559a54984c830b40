"""On a machine with a CUDA GPU (`make gpu-check`): `device = "auto"` picks it, a run trains
there, and torchrun's ranks talk over NCCL with the rows of the same run in one process.

What must equal what: on the GPU, kernels differ from the CPU's (cuDNN picks convolution
algorithms, reductions run in other orders), so a GPU run is compared with the CPU run of the
same file by its shape and totals (tests/testbed/golden/compare.py's BANDS, widened: see
TOTALS), and the NCCL ranks with the in-process run on the same GPU model, row by row (sizes,
counts and virtual times exact, losses to float tolerance), as the Gloo ranks are on the CPU
(tests/e2e/test_torchrun.py).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
# a GPU run against the CPU run of the same file: relative, and the accuracy in points of 1
TOTALS = {"bits_up": 0.05, "bits_down": 0.05, "test_accuracy": 0.05}


@pytest.fixture(autouse=True)
def _gpu():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")


def test_auto_picks_the_gpu_and_a_model_runs_there():
    import torch

    from nodes.device import resolve_device
    device = resolve_device("auto")
    assert device.type == "cuda"
    x = torch.ones(4, 3, device=device)
    assert (x @ torch.ones(3, 2, device=device)).sum().item() == 24.0


def _totals(doc: dict) -> dict:
    it = doc["iterations"]
    return {"bits_up": sum(r["bits_up"] for r in it), "bits_down": sum(r["bits_down"] for r in it),
            "test_accuracy": doc["evals"][-1]["test_accuracy"]}


def test_the_quickstart_trains_on_the_gpu_as_on_the_cpu(tmp_path):
    from test_torchrun import run_in_process
    path = ROOT / "experiments" / "quickstart.toml"
    sets = ("run.iterations=200", "run.eval_every=50")
    gpu = run_in_process(path, tmp_path / "gpu.db", (*sets, "run.device=auto"))
    cpu = run_in_process(path, tmp_path / "cpu.db", (*sets, "run.device=cpu"))
    start = next(e for e in gpu["events"] if e["kind"] == "start")
    assert start["detail"]["device"].startswith("cuda")
    assert gpu["run"]["status"] == "completed"
    assert len(gpu["iterations"]) == len(cpu["iterations"]) == 200
    assert all(math.isfinite(r["train_loss"]) for r in gpu["iterations"])
    a, b = _totals(cpu), _totals(gpu)
    for key, band in TOTALS.items():
        off = abs(a[key] - b[key]) if key == "test_accuracy" else abs(a[key] - b[key]) / a[key]
        assert off <= band, (key, a[key], b[key])


def test_nccl_ranks_give_the_rows_of_the_run_in_one_process(tmp_path):
    import torch
    if torch.cuda.device_count() < 2:
        pytest.skip(f"NCCL needs one GPU per rank; this machine has {torch.cuda.device_count()}")
    from test_torchrun import assert_same_rows, last_run, run_in_process, run_torchrun, write_file
    path = write_file(tmp_path, "topk", 2)
    sets = ("run.device=cuda",)
    ref = run_in_process(path, tmp_path / "ref.db", sets)
    proc, _ = run_torchrun(path, tmp_path / "dist.db", sets=sets, limit_s=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = last_run(tmp_path / "dist.db")
    dist = [e for e in got["events"] if e["kind"] == "distributed"]
    assert dist and dist[0]["detail"]["backend"] == "nccl"
    assert_same_rows(ref, got)
