"""`testbed run FED.toml --launcher torchrun`: a federated round's clients spread over Gloo
ranks on loopback (slot k on rank k mod N), compared with the in-process run of the same file.

The in-process run (testbed/drivers/federated.py, never touching torch.distributed) is the reference:
equal rows, every column of every table but wall time, losses included, mean that each rank
trained its clients from the same weights with the same batches, that the clients' error
memories followed them from rank to rank, and that the deltas' bytes, the seeded loss pattern
and the virtual clock are what one process computes.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("channels.network", reason="the link layer (channels/network.py) is not there")

from test_torchrun import ROOT, assert_same_rows, last_run, run_torchrun  # noqa: E402

from nodes.federated import sample_clients  # noqa: E402
from testbed.configuration.loading import load_config  # noqa: E402
from testbed.drivers.federated import client_rng  # noqa: E402
from testbed.experiment import Experiment  # noqa: E402
from testbed.records.store import Store  # noqa: E402

pytestmark = pytest.mark.e2e

CLIENTS, PER_ROUND, ROUNDS = 8, 4, 6
FILE = """
[run]
name = "fed-{name}"
seed = 5
iterations = {rounds}
eval_every = 3
flush_every = 1
device = "cpu"
[data]
dataset = "digits"
batch_size = 16
partition = "dirichlet"
alpha = 0.5
[model]
name = "cnn"
[optim]
lr = 0.05
[compression]
method = "{method}"
{options}
[federated]
clients = {clients}
clients_per_round = {per_round}
local_steps = 2
mode = "{mode}"
concurrency = {per_round}
buffer_size = 2
[network]
topology = "star"
medium = "shared"
[network.link]
bandwidth_mbps = 10.0
delay_ms = 1.0
delivery = "best_effort"
loss = {{ model = "bernoulli", p = 0.05 }}
"""
OPTIONS = {"topk": "ratio = 0.05", "none": ""}


def write(folder, method: str, mode: str = "sync"):
    path = folder / f"fed_{method}_{mode}.toml"
    path.write_text(textwrap.dedent(FILE.format(
        name=f"{method}-{mode}", method=method, options=OPTIONS[method], mode=mode,
        rounds=ROUNDS, clients=CLIENTS, per_round=PER_ROUND)))
    return path


def in_process(path, db) -> dict:
    with Store(db) as store:
        run_id = Experiment(load_config(path, []), store).run()
        return store.export(run_id)


def moved_clients() -> set[int]:
    """Clients drawn again into a slot of the other parity (rank, with 2 ranks): their error
    memories must travel between the ranks. Replayed from the driver's own draw."""
    rng, last, moved = client_rng(5), {}, set()
    for _ in range(ROUNDS):
        for slot, c in enumerate(sample_clients(rng, range(CLIENTS), PER_ROUND)):
            if c in last and last[c] % 2 != slot % 2:
                moved.add(c)
            last[c] = slot
    return moved


@pytest.mark.parametrize("method,mode,nproc", [("topk", "sync", 2), ("none", "sync", 3),
                                               ("topk", "fedbuff", 2)])
def test_a_rounds_clients_over_ranks_give_the_in_process_rows(tmp_path, method, mode, nproc):
    path = write(tmp_path, method, mode)
    ref = in_process(path, tmp_path / "ref.db")
    # not vacuous: packets were lost, every round moved bits, and (sync) a client's memory moved
    assert sum(r["lost"] for r in ref["links"]) > 0
    assert all(r["bits_up"] > 0 for r in ref["iterations"])
    if mode == "sync":
        assert moved_clients()
    proc, _ = run_torchrun(path, tmp_path / "dist.db", argv=["run", str(path), "--nproc", str(nproc)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{nproc} processes" in proc.stdout
    got = last_run(tmp_path / "dist.db")
    assert got["run"]["status"] == "completed"
    event = [e for e in got["events"] if e["kind"] == "distributed"]
    assert event and event[0]["detail"]["world_size"] == nproc
    assert len(got["iterations"]) == ROUNDS
    assert_same_rows(ref, got, exact=True)


def test_more_processes_than_clients_of_an_exchange_is_a_one_line_error(tmp_path):
    path = write(tmp_path, "none")
    proc = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(path), "--store",
                           str(tmp_path / "s.db"), "--launcher", "torchrun", "--nproc", "5"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("testbed: error: --nproc = 5: must be 1 to 4, the clients of "
                                   "one exchange (rank r runs slots k with k mod nproc = r)")
