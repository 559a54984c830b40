"""How the checkpoints here were made: on commit 8c27528 (format 1: every part's keys side by
side), from that commit's tree, `python make.py OUT`. A data-parallel run (the quickstart, 20
iterations) and a FedBuff run (tests/testbed/test_resume.py's FEDERATED), each stopped after
iteration 14 with its checkpoint after iteration 9. tests/testbed/test_resume.py resumes them."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from testbed.configuration.loading import load_config
from testbed.experiment import Experiment
from testbed.store import Store
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
sys.path.insert(0, "tests/testbed"); 
from test_resume import FEDERATED, FEDERATED_MODES
fed = out / "federated.toml"
fed.write_text(FEDERATED.format(iterations=20, federated=FEDERATED_MODES["fedbuff"], loss='{ model = "none" }'))
for name, path, sets in [("dp", "experiments/quickstart.toml", ["run.iterations=20", "run.eval_every=5"]),
                         ("fed", str(fed), [])]:
    db = out / f"{name}.db"
    calls = iter(range(100))
    with Store(db) as s:
        cfg = load_config(path, sets + ["run.checkpoint_every=10", "run.flush_every=1", "run.threads=1"])
        Experiment(cfg, s, should_stop=lambda: next(calls) == 15).run()
        print(name, s.run(1)["status"], s.run(1)["last_iteration"])
