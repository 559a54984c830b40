"""Issue 23: every registered method trains on the quickstart with nothing but
`--set compression.method=M`: the file's other options set aside, the method's known-good
values (registry KNOWN_GOOD) in their place, its collective the first the star can carry.

The file's full budget (500 iterations, its link layer, loss and all), with 2 workers instead of
4 and one evaluation at the end to keep the suite short; the floor is the issue's, 85% test
accuracy (a digits CNN at chance is 10%). The same loop with the file's 4 workers, as a user runs
it, is in docs/results.md.
"""
from pathlib import Path

import pytest
import torch

from nodes.compression.registry import names
from testbed.configuration.loading import load_config
from testbed.experiment import Experiment
from testbed.records.store import Store

QUICKSTART = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"
FLOOR = 0.85
SHORTER = ["network.workers=2", "run.eval_every=500", "run.device=cpu", "run.threads=1",
           "run.checkpoint_every=0"]


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    yield
    torch.set_num_threads(old)


@pytest.mark.slow
@pytest.mark.parametrize("method", names())
def test_every_method_trains_on_the_quickstart_with_only_the_switch(method, tmp_path):
    cfg = load_config(QUICKSTART, [f"compression.method={method}", *SHORTER])
    assert cfg.run.iterations == 500 and cfg.compression.method == method
    with Store(tmp_path / "runs.db") as store:
        run_id = Experiment(cfg, store).run()
        assert store.run(run_id)["status"] == "completed"
        final = store.evals(run_id)[-1]
    assert final["iteration"] == cfg.run.iterations - 1   # iterations count from 0
    assert final["test_accuracy"] >= FLOOR, (method, final)
