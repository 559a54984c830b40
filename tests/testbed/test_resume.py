"""`testbed resume`: a run killed with SIGKILL and resumed from its last checkpoint writes the
rows the uninterrupted run writes (same file, same seed), column by column except wall time.

The victim is a real process that SIGKILLs itself from its progress callback, so the kill lands
at a known iteration: after the checkpoint and after rows past it were committed (flush_every
= 1), which the resume must throw away and write again. The link is best-effort with
Gilbert-Elliott loss, so the resumed run also depends on the link layer's restored state.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from nodes.federated import sample_clients
from testbed.cli import main
from testbed.configuration.loading import load_config
from testbed.drivers.federated import client_rng
from testbed.experiment import Experiment
from testbed.records.store import Store
from testbed.run import checkpoint

ROOT = Path(__file__).resolve().parents[2]
GE = '{ model = "gilbert_elliott", p_good_to_bad = 0.1, p_bad_to_good = 0.4, loss_good = 0.02, loss_bad = 0.5 }'
# LGC-PS: warm-up 0-2, autoencoder training 3-5, the LGC stage from iteration 6
LGC = "ratio = 0.05\nwarmup_iterations = 3\nae_iterations = 3\nae_steps = 5"
METHODS = {"none": ("none", ""), "dgc": ("dgc", "ratio = 0.05\nwarmup_iterations = 4"),
           "lgc_ps": ("lgc_ps", LGC)}
# checkpoints after iterations 3 and 7; killed once 6 are done: the resume starts at iteration 4
# (LGC-PS: in its autoencoder training) and must throw away the rows of 4 and 5 already written
ITERATIONS, EVERY, KILL_AFTER = 12, 4, 6

VICTIM = textwrap.dedent("""
    import os, signal, sys
    from testbed.configuration.loading import load_config
    from testbed.experiment import Experiment
    from testbed.records.store import Store

    def progress(p):
        if p.iteration == int(sys.argv[3]):  # iterations done so far
            os.kill(os.getpid(), signal.SIGKILL)

    cfg = load_config(sys.argv[1], sys.argv[4:])
    Experiment(cfg, Store(sys.argv[2]), progress=progress).run()
""")

COLUMNS = {"iterations": None, "nodes": None, "links": None, "evals": None}


def rows(store: Store, run_id: int) -> dict:
    data = store.export(run_id)
    out = {t: [{k: v for k, v in r.items() if k != "wall_time_s"} for r in data[t]] for t in COLUMNS}
    run = store.run(run_id)
    out["summary"] = {k: run[k] for k in ("last_iteration", "virtual_time_s", "total_bits", "best_accuracy")}
    return out


@pytest.mark.parametrize("method", list(METHODS))
def test_resume_after_kill_minus_9_writes_the_uninterrupted_rows(tiny_experiment, tmp_path, capsys, method):
    name, options = METHODS[method]
    path = tiny_experiment(name=method, iterations=ITERATIONS, method=name, compression=options,
                           workers=3, delivery="best_effort", loss=GE)
    # One intra-op thread: with two, torch's CPU kernels can differ in the last bits from one
    # run to the next (a CI dry run on 2026-12-03 saw train_loss 2.1064089139 vs 2.1064089934
    # at iteration 9 of `none`), and the rows are compared bit for bit.
    sets = [f"run.checkpoint_every={EVERY}", "run.flush_every=1", "run.eval_every=3", "run.threads=1"]

    with Store(tmp_path / "ref.db") as ref_store:  # the uninterrupted run, without checkpoints
        cfg = load_config(path, sets[1:] + ["run.checkpoint_every=0"])
        ref = rows(ref_store, Experiment(cfg, ref_store).run())
    assert not Path(f"{tmp_path / 'ref.db'}.checkpoints").exists()
    assert sum(r["lost"] for r in ref["links"]) > 0  # the loss process mattered
    if method != "lgc_ps":  # a lossy server downlink: the resumed part starts from drifted replicas
        assert any(n["drift_norm"] > 0 for n in ref["nodes"] if n["iteration"] == EVERY - 1)
    if method == "lgc_ps":  # the resumed part crosses the switch to the LGC stage
        stages = [r["stage"] for r in ref["iterations"]]
        assert stages[EVERY] == "ae_train" and stages[-1] == "lgc"

    got = killed_and_resumed(path, sets, tmp_path, capsys)
    for table in ("iterations", "nodes", "links", "evals", "summary"):
        assert got[table] == ref[table], table


def killed_and_resumed(path, sets, tmp_path, capsys) -> dict:
    """The rows of `path` run in a process SIGKILLed after KILL_AFTER iterations, then resumed."""
    db = tmp_path / "victim.db"
    proc = subprocess.run([sys.executable, "-c", VICTIM, str(path), str(db), str(KILL_AFTER), *sets],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    with Store(db) as store:
        killed = store.run(1)
        assert killed["status"] == "failed" and killed["last_iteration"] == KILL_AFTER - 1
    saved = checkpoint.load(checkpoint.path_for(db, 1))
    assert saved["loop"]["iteration"] == EVERY - 1  # the last one before the kill

    code = main(["resume", "1", "--store", str(db), "--quiet"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"resumes after iteration {EVERY - 1}" in out.out
    with Store(db) as store:
        got = rows(store, 1)
        assert store.run(1)["status"] == "completed"
        assert [e["kind"] for e in store.events(1)].count("resume") == 1
    return got


def test_resume_with_a_device_trace_and_a_deadline(tiny_experiment, tmp_path, capsys):
    """ScaleCom on a ring (relayed through the access point): in the resumed part w1 is away
    for a while and w2 computes 10000x slower for a while, past the deadline, so the ring forms
    without them; the resumed rows equal the uninterrupted run's, who was left out included."""
    path = tiny_experiment(name="edge", iterations=ITERATIONS, method="scalecom",
                           compression='collective = "allreduce"\nratio = 0.05', workers=3,
                           delivery="best_effort", loss=GE)
    sets = [f"run.checkpoint_every={EVERY}", "run.flush_every=1", "run.eval_every=3", "run.threads=1"]
    with Store(tmp_path / "probe.db") as probe_store:  # how long an iteration lasts without them
        probe = Experiment(load_config(path, sets[1:] + ["run.iterations=2"]), probe_store)
        probe_rows = probe_store.iterations(probe.run())
    step = max(r["virtual_time_s"] - r0 for r, r0 in zip(probe_rows, [0.0, probe_rows[0]["virtual_time_s"]]))
    fast = probe.driver.step_flops / 20e9
    deadline = fast + 2 * (step - fast)      # the ring of all three would end well before it
    assert fast / 1e-4 > 2 * deadline        # w2 at 1/10000 of its speed misses it
    trace = tmp_path / "devices.json"
    trace.write_text(json.dumps({"nodes": {
        "w1": {"available": [[0, 4.5 * step], [6.5 * step, None]]},
        "w2": {"speed": [[0, 1.0], [7 * step, 1e-4], [9 * step, 1.0]]}}}))
    sets += [f"run.deadline_s={deadline!r}", f"run.device_trace={trace}"]

    with Store(tmp_path / "ref.db") as ref_store:
        ref = rows(ref_store, Experiment(load_config(path, sets[1:] + ["run.checkpoint_every=0"]),
                                         ref_store).run())
    resumed = [r["left_out"] for r in ref["nodes"] if r["iteration"] >= EVERY]
    assert "unavailable" in resumed and "deadline" in resumed   # both happen after the checkpoint
    got = killed_and_resumed(path, sets, tmp_path, capsys)
    for table in ("iterations", "nodes", "links", "evals", "summary"):
        assert got[table] == ref[table], table


def test_resume_refuses_what_it_cannot_resume(tiny_experiment, tmp_path, capsys):
    path = tiny_experiment(iterations=3)
    db = tmp_path / "s.db"
    assert main(["run", str(path), "--store", str(db), "--quiet"]) == 0
    assert main(["resume", "1", "--store", str(db)]) == 2
    assert "is completed; allowed: a stopped or failed run" in capsys.readouterr().err
    with Store(db) as s:  # a failed run that never reached its first checkpoint
        s.finish_run(1, "failed", "test")
    assert main(["resume", "1", "--store", str(db)]) == 2
    assert "has no checkpoint" in capsys.readouterr().err
    assert main(["resume", "nope", "--store", str(db)]) == 2


def test_a_checkpoint_is_replaced_whole(tmp_path):
    path = checkpoint.path_for(tmp_path / "s.db", 3)
    checkpoint.save(path, {"iteration": 1, "x": list(range(5))})
    checkpoint.save(path, {"iteration": 2, "x": list(range(7))})
    assert checkpoint.load(path) == {"format": checkpoint.FORMAT, "iteration": 2, "x": list(range(7))}
    assert [p.name for p in path.parent.iterdir()] == ["run-3.pt"]  # no temporary file left


FEDERATED = """
[run]
seed = 0
iterations = {iterations}
compute_time = "flops"
[data]
dataset = "digits"
batch_size = 16
partition = "dirichlet"
alpha = 0.5
[model]
name = "mlp"
[optim]
lr = 0.1
momentum = 0.5
[compression]
method = "topk"
ratio = 0.05
[federated]
clients = 8
local_steps = 2
{federated}
[network]
topology = "star"
medium = "shared"
[network.link]
bandwidth_mbps = 20.0
delay_ms = 1.0
delivery = "best_effort"
loss = {loss}
"""
# sync: FedAdam's moments and top-k's per-client memories; fedbuff: 4 in flight, 2 per step,
# so clients of every step are in flight across the checkpoint with stale pseudo-gradients
FEDERATED_MODES = {
    "sync": "clients_per_round = 3\nserver_optimizer = 'fedadam'\nserver_lr = 0.03",
    "fedbuff": "mode = 'fedbuff'\nclients_per_round = 2\nconcurrency = 4\nbuffer_size = 2\nserver_optimizer = 'fedavgm'"}


@pytest.mark.parametrize("mode", list(FEDERATED_MODES))
def test_a_federated_run_resumed_after_kill_minus_9_writes_the_uninterrupted_rows(tmp_path, capsys, mode):
    path = tmp_path / f"{mode}.toml"
    path.write_text(FEDERATED.format(iterations=ITERATIONS, federated=FEDERATED_MODES[mode], loss=GE))
    sets = [f"run.checkpoint_every={EVERY}", "run.flush_every=1", "run.eval_every=3", "run.threads=1"]
    with Store(tmp_path / "ref.db") as ref_store:
        exp = Experiment(load_config(path, sets[1:] + ["run.checkpoint_every=0"]), ref_store)
        ref = rows(ref_store, exp.run())
    assert sum(r["lost"] for r in ref["links"]) > 0   # the loss process mattered
    late = [r for r in ref["iterations"] if r["iteration"] >= EVERY]
    if mode == "fedbuff":   # stale updates count after the checkpoint
        assert any(r["staleness"] > 0 for r in late)
    else:   # clients drawn before the checkpoint take part again after it (the draws replayed)
        rng = client_rng(0)
        drawn = [sample_clients(rng, range(8), 3) for _ in range(ITERATIONS)]
        assert set(sum(drawn[:EVERY], [])) & set(sum(drawn[EVERY:], []))
    got = killed_and_resumed(path, sets, tmp_path, capsys)
    for table in ("iterations", "nodes", "links", "evals", "summary"):
        assert got[table] == ref[table], table


def test_a_fedbuff_run_stopped_after_nobody_was_available_resumes_with_its_pending_download(tmp_path, capsys):
    """Every client is away for 1.5 virtual seconds from between server steps 3 and 4: the
    slots are not refilled, the buffer empties, and steps pass idle (a second each) until the
    clients are back; the idle step that draws them again leaves their download to the next
    row. The run is stopped by request (the stop control) right after that idle step and
    resumed from its checkpoint; its rows equal the uninterrupted run's."""
    path = tmp_path / "fedbuff.toml"
    path.write_text(FEDERATED.format(iterations=ITERATIONS, loss='{ model = "none" }', federated=(
        FEDERATED_MODES["fedbuff"] + "\nsampler = 'available'")))
    sets = ["run.flush_every=1", "run.eval_every=3", "run.threads=1"]
    with Store(tmp_path / "probe.db") as probe_store:
        probe = Experiment(load_config(path, sets), probe_store)
        times = [r["virtual_time_s"] for r in probe_store.iterations(probe.run())]
    away = (times[3] + times[4]) / 2
    trace = tmp_path / "devices.json"
    trace.write_text(json.dumps({"nodes": {f"c{c}": {"available": [[0, away], [away + 1.5, None]]}
                                           for c in range(8)}}))
    sets += [f"run.device_trace={trace}"]
    with Store(tmp_path / "ref.db") as ref_store:
        ref = rows(ref_store, Experiment(load_config(path, sets + ["run.checkpoint_every=0"]),
                                                  ref_store).run())
    idle = [r["iteration"] for r in ref["iterations"] if r["participants"] == 0]
    assert idle and idle[-1] + 2 < ITERATIONS, idle
    back = idle[-1]   # its clients' download is in the next row
    assert ref["iterations"][back + 1]["bits_down"] > 0 and ref["iterations"][back]["bits_down"] == 0

    db = tmp_path / "stopped.db"
    calls = iter(range(ITERATIONS))
    with Store(db) as store:   # stopped before step back + 1: the last checkpoint is after `back`
        exp = Experiment(load_config(path, sets + ["run.checkpoint_every=1"]), store,
                                  should_stop=lambda: next(calls) == back + 1)
        exp.run()
        assert store.run(1)["status"] == "stopped" and exp.driver.pending is not None
    assert checkpoint.load(checkpoint.path_for(db, 1))["loop"]["iteration"] == back
    assert main(["resume", "1", "--store", str(db), "--quiet"]) == 0, capsys.readouterr().err
    with Store(db) as store:
        got = rows(store, 1)
        assert store.run(1)["status"] == "completed"
    for table in ("iterations", "nodes", "links", "evals", "summary"):
        assert got[table] == ref[table], table


def test_a_federated_run_is_not_resumed_under_torchrun(tmp_path, capsys):
    path = tmp_path / "sync.toml"
    path.write_text(FEDERATED.format(iterations=3, loss='{ model = "none" }',
                                     federated=FEDERATED_MODES["sync"]))
    db = tmp_path / "s.db"
    calls = iter(range(3))
    with Store(db) as store:
        Experiment(load_config(path, ["run.checkpoint_every=1"]), store,
                            should_stop=lambda: next(calls) == 2).run()
    assert main(["resume", "1", "--store", str(db), "--launcher", "torchrun"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("is federated: --launcher torchrun resumes data-parallel runs only; "
                        "allowed: --launcher local") and "\n" not in err


@pytest.mark.parametrize("name", ["dp", "fed"])
def test_a_checkpoint_of_the_earlier_flat_layout_resumes(tmp_path, capsys, name):
    """Checkpoints written before each part's keys had a prefix of their own (format 1, recorded
    as checkpoint_format_1/make.py says: stopped after iteration 14, checkpoint after 9) read
    into today's layout, the driver's state in full, and the run resumes to its end."""
    src = Path(__file__).parent / "checkpoint_format_1"
    db = tmp_path / f"{name}.db"
    shutil.copy(src / db.name, db)
    shutil.copytree(src / f"{db.name}.checkpoints", tmp_path / f"{db.name}.checkpoints")
    flat = torch.load(checkpoint.path_for(db, 1), weights_only=False)
    assert flat["format"] == 1 and flat["iteration"] == 9
    state = checkpoint.load(checkpoint.path_for(db, 1))
    assert state["loop"] == {"iteration": 9, "clock": flat["clock"], "accuracy": flat["accuracy"],
                             "stage": flat["stage"], "wall_time_s": flat["wall_time_s"]}
    assert set(state["driver"]) == set(flat) - {"format", "iteration", "clock", "accuracy", "stage",
                                                "wall_time_s", "network", "torch_rng", "numpy_rng"}
    assert all(torch.equal(state["driver"]["model"][k], v) for k, v in flat["model"].items())
    assert torch.equal(state["rng"]["torch"], flat["torch_rng"])
    if name == "fed":
        assert state["driver"]["federated"]["stage"] == flat["stage"]
    assert main(["resume", "1", "--store", str(db), "--quiet"]) == 0, capsys.readouterr().err
    with Store(db) as store:
        rows = store.iterations(1)
        assert store.run(1)["status"] == "completed"
    assert [r["iteration"] for r in rows] == list(range(20))
    assert rows[9]["virtual_time_s"] == flat["clock"] < rows[10]["virtual_time_s"]
