"""The thread policy (`run.threads`, testbed.experiment.apply_threads): whatever count the
process had, a run's setup leaves one thread at the default and N at `run.threads = N`."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from testbed.configuration.loading import load_config
from testbed.experiment import Experiment
from testbed.records.store import Store

QUICKSTART = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"


@pytest.mark.parametrize("sets,expected", [((), 1), (("run.threads=2",), 2)])
def test_a_run_sets_its_thread_count(tmp_path, sets, expected):
    old = torch.get_num_threads()
    torch.set_num_threads(3)      # a count neither the default nor the override is
    try:
        cfg = load_config(QUICKSTART, ["run.iterations=1", "network.workers=2", "run.device=cpu", *sets])
        with Store(tmp_path / "s.db") as store:
            Experiment(cfg, store)
        assert torch.get_num_threads() == expected
    finally:
        torch.set_num_threads(old)
