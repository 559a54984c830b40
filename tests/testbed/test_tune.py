"""`testbed tune`: its mistakes are one line each (exit 2, nothing written); a tiny study
completes with every trial an ordinary run of the store, tagged with the study and trial, whose
rows equal `testbed run` of the same point; a study stopped by SIGTERM, or left with a trial
running by a process that is gone, finishes when the same command is given again without
running a completed trial twice; a pruned trial's run is `pruned` in the store and in
`testbed runs`; the pruner ends a run that is worse than the trials before it."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from testbed.cli import main  # noqa: E402
from testbed.configuration.loading import load_config  # noqa: E402
from testbed.records.store import Store  # noqa: E402
from testbed.sweeps import Point  # noqa: E402
from testbed.tune.trial import run_trial  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "experiments" / "quickstart.toml"
# runs of a second or so: 2 workers, an MLP, an evaluation every 2 iterations
TINY = ["run.iterations=6", "run.eval_every=2", "run.device=cpu", "model.name=mlp",
        "network.workers=2", "run.checkpoint_every=0"]
SETS = sum((["--set", s] for s in TINY), [])
BW = ["--param", "network.link.bandwidth_mbps=0.5:50:log"]


def tune(tmp_path, *args, store="t.db", name="s", trials=3):
    return main(["tune", str(QUICK), "--store", str(tmp_path / store), "--name", name,
                 "--trials", str(trials), "--quiet", *SETS, *args])


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("args, says", [
    (["--param", "network.link.bandwith_mbps=1:5", "--objective", "final_accuracy"],
     "did you mean 'network.link.bandwidth_mbps'"),
    (["--param", "network.link.bandwidth_mbps=5:5", "--objective", "final_accuracy"],
     "LOW 5 >= HIGH 5; allowed: LOW < HIGH"),
    (["--param", "network.link.bandwidth_mbps=0:50:log", "--objective", "final_accuracy"],
     "a log range must lie above 0"),
    (["--param", "network.link.bandwidth_mbps=0:50", "--objective", "final_accuracy"],
     "network.link.bandwidth_mbps = 0.0: must be a number > 0"),
    ([*BW, "--objective", "final_acuracy"],
     "--objective final_acuracy: unknown objective (did you mean 'final_accuracy'?); allowed: "
     "final_accuracy, best_accuracy, virtual_s_to_target, joules_to_target, "
     "joules_to_target_max, bits_up, bits_down, wall_s, or a searched key: "
     "network.link.bandwidth_mbps"),
    ([*BW, "--objective", "final_accuracy", "--constraint", "joules<=3"],
     "--constraint joules: unknown objective"),
    ([*BW, "--objective", "virtual_s_to_target"], "needs a target accuracy"),
    ([*BW, "--objective", "bits_up", "--objective", "final_accuracy", "--write-best", "b.toml"],
     "the result is a Pareto front, not one best trial"),
    (["--param", "data.batch_size=8:64", "--objective", "final_accuracy"], "add :int"),
])
def test_a_mistake_is_one_line_and_nothing_is_written(tmp_path, capsys, args, says):
    assert tune(tmp_path, *args) == 2
    line = one_error_line(capsys)
    assert line.startswith("testbed: error: ") and says in line, line
    assert list(tmp_path.iterdir()) == []


def runs_of(path: Path) -> list[dict]:
    with Store(path, readonly=True) as s:
        return s.runs()


def test_a_tiny_study_completes_its_trials_are_runs_and_the_best_is_written(tmp_path, capsys):
    best_file = tmp_path / "best.toml"
    code = tune(tmp_path, *BW, "--objective", "bits_down", "--objective", "final_accuracy:max",
                "--trials", "3", name="pair")
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "Pareto front" in out and "reproduce with:" in out
    runs = runs_of(tmp_path / "t.db")
    assert [(r["name"], r["sweep"], r["trial"], r["status"]) for r in runs] == [
        (f"pair[trial={i}]", "pair", i, "completed") for i in range(3)]
    assert all(set(r["sweep_params"]) == {"bandwidth_mbps"} for r in runs)
    # one objective: the best trial, written as an experiment file
    code = tune(tmp_path, *BW, "--objective", "virtual_s_to_target", "--target", "0.2",
                "--write-best", str(best_file), "--trials", "2", name="one")
    out = capsys.readouterr().out
    assert code == 0 and "best trial (min virtual_s_to_target)" in out
    assert main(["runs", "--store", str(tmp_path / "t.db")]) == 0
    listing = capsys.readouterr().out
    assert "one[trial=0]" in listing and "one[trial=1]" in listing
    line = next(s for s in out.splitlines() if s.strip().startswith("testbed run "))
    sets = line.split("--set ")[1:]
    written = tomllib.loads(best_file.read_text())
    bw = float(next(s for s in sets if s.startswith("network.link.bandwidth_mbps=")).split("=")[1])
    assert written["network"]["link"]["bandwidth_mbps"] == bw
    assert written["run"]["target_accuracy"] == 0.2 and written["model"]["name"] == "mlp"
    assert load_config(best_file).as_dict() == load_config(QUICK, [s.strip() for s in sets]).as_dict()


def comparable(path: Path, run_id: int) -> dict:
    with Store(path, readonly=True) as s:
        its = s.iterations(run_id)
        for r in its:
            r.pop("wall_time_s")
        config = s.run(run_id)["config"]
        config["run"].pop("name")
        return {"config": config, "iterations": its, "nodes": s.node_iterations(run_id),
                "links": s.links(run_id), "evals": s.evals(run_id),
                "events": [(e["iteration"], e["kind"], e["detail"]) for e in s.events(run_id)]}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_trials_rows_equal_testbed_run_of_the_same_point(tmp_path, capsys, jobs):
    """In this process (--jobs 1) and in the sweep engine's worker processes (--jobs 2), with
    a seed: the best trial's `testbed run --set ...` line gives the same rows (all but wall
    time; the run's name aside)."""
    assert tune(tmp_path, *BW, "--param", "compression.ratio=0.01,0.1", "--objective",
                "bits_up", "--trials", jobs, "--jobs", jobs, "--seeds", "3") == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.strip().startswith("testbed run "))
    sets = [s.strip() for s in line.split("--set ")[1:]]
    assert "run.seed=3" in sets
    assert main(["run", str(QUICK), "--store", str(tmp_path / "alone.db"), "--quiet",
                 *sum((["--set", s] for s in sets), [])]) == 0
    best = int(out.split("runs\n")[1].splitlines()[1].split()[-1])   # the table's runs column
    trial = comparable(tmp_path / "t.db", best)
    alone = comparable(tmp_path / "alone.db", 1)
    assert trial == alone


def optuna_trials(store: Path, name: str):
    storage = optuna.storages.RDBStorage(f"sqlite:///{store}.optuna.db")
    return optuna.load_study(study_name=name, storage=storage).get_trials()


def tune_process(tmp_path, trials: int, *extra) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "testbed.cli", "tune", str(QUICK), "--store",
                             str(tmp_path / "t.db"), "--name", "k", "--trials", str(trials),
                             "--quiet", *SETS, *BW, "--objective", "bits_up", *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def completed_runs(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        return [r for r in runs_of(path) if r["status"] == "completed"]
    except Exception:   # the store being made
        return []


def holds_run(path: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return bool(db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0])
    except sqlite3.Error:
        return False


def test_a_study_stopped_by_sigterm_finishes_on_the_same_command_without_rerunning(tmp_path, capsys):
    store = tmp_path / "t.db"
    # the runs long enough that SIGTERM finds one going on, on an idle machine too (a trial of 40
    # iterations took 0.3 s: the whole study ended between two looks)
    proc = tune_process(tmp_path, 5, "--set", "run.iterations=400")
    third = tmp_path / "t.db.points" / "0003.db"     # the third trial's run, going on
    deadline = time.monotonic() + 120
    while not (len(completed_runs(store)) >= 2 and holds_run(third)) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[0]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, out
    before = {r["trial"]: r for r in completed_runs(store)}
    states = [t.state.name for t in optuna_trials(store, "k")]
    assert states[:len(before)] == ["COMPLETE"] * len(before) and "FAIL" in states, states
    assert main(["tune", str(QUICK), "--store", str(store), "--name", "k", "--trials", "5",
                 "--quiet", *SETS, "--set", "run.iterations=400", *BW, "--objective",
                 "bits_up"]) == 0
    out = capsys.readouterr().out
    assert f"{len(before)} of 5 trials done before" in out
    runs = runs_of(store)
    done = [r for r in runs if r["status"] == "completed"]
    trials = optuna_trials(store, "k")
    assert len(done) == sum(t.state.name == "COMPLETE" for t in trials) == 5
    assert all(before[i]["id"] == r["id"] for i, r in before.items() for r in done if r["trial"] == i)
    assert len({r["trial"] for r in done}) == 5                  # no completed trial ran twice
    stopped = [r for r in runs if r["status"] == "stopped"]
    assert len(stopped) == 1                                     # the one SIGTERM cut short ...
    retry = next(t for t in trials if t.user_attrs.get("testbed:retry_of") == stopped[0]["trial"])
    assert retry.state.name == "COMPLETE"                        # ... ran again, same parameters
    assert retry.params == trials[stopped[0]["trial"]].params


def test_a_trial_left_running_by_a_dead_process_runs_again(tmp_path, capsys):
    store = tmp_path / "t.db"
    assert tune(tmp_path, *BW, "--objective", "bits_up", trials=1, name="k") == 0
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    storage = optuna.storages.RDBStorage(f"sqlite:///{store}.optuna.db")
    study = optuna.load_study(study_name="k", storage=storage)
    left = study.ask({"network.link.bandwidth_mbps": optuna.distributions.FloatDistribution(0.5, 50, log=True)})
    storage.set_trial_system_attr(left._trial_id, "testbed:pid", int(gone))
    storage.set_trial_system_attr(left._trial_id, "testbed:host", os.uname().nodename)
    capsys.readouterr()
    assert tune(tmp_path, *BW, "--objective", "bits_up", trials=2, name="k") == 0
    out = capsys.readouterr().out
    assert f"trial {left.number}: its process ended mid-run; it runs again" in out
    trials = optuna_trials(store, "k")
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert trials[2].params == left.params and trials[2].user_attrs["testbed:retry_of"] == 1
    assert [r["status"] for r in runs_of(store)] == ["completed", "completed"]


def test_a_study_name_with_another_search_space_is_refused(tmp_path, capsys):
    assert tune(tmp_path, *BW, "--objective", "bits_up", trials=1) == 0
    capsys.readouterr()
    assert tune(tmp_path, "--param", "network.link.bandwidth_mbps=1:20", "--objective",
                "bits_up", trials=2) == 2
    line = one_error_line(capsys)
    assert ("--name s: study 's' in " in line and "was made with another search space "
            "(--param); allowed: the same command as then (it resumes), or another --name" in line)
    assert len(runs_of(tmp_path / "t.db")) == 1


def test_pruned_trials_are_marked_pruned_in_the_store_and_the_listing(tmp_path, capsys):
    # an unreachable target and a budget past which every run is ended
    assert tune(tmp_path, *BW, "--objective", "virtual_s_to_target", "--target", "0.999",
                "--budget-s", "0.001", "--pruner", "none", trials=2) == 1
    out = capsys.readouterr().out
    assert "trial 0 pruned" in out and "pruned past the virtual-time budget of 0.001 s" in out
    assert "no trial completed" in out
    runs = runs_of(tmp_path / "t.db")
    assert [r["status"] for r in runs] == ["pruned", "pruned"]
    assert [t.state.name for t in optuna_trials(tmp_path / "t.db", "s")] == ["PRUNED", "PRUNED"]
    assert main(["runs", "--store", str(tmp_path / "t.db")]) == 0
    assert capsys.readouterr().out.count(" pruned ") == 2


def test_the_median_pruner_ends_a_run_worse_than_the_trials_before(tmp_path):
    """A trial's runner, given trials that reached 0.99 at every evaluation: a run that learns
    nothing (lr tiny) is pruned at its first evaluation; the same run with no trials before it
    is not."""
    history = [{"state": "COMPLETE", "steps": [[1, 0.99], [3, 0.99], [5, 0.99]]}] * 3
    point = Point(index=1, name="p", file=str(QUICK), overrides=[*TINY, "optim.lr=1e-6"],
                  extra={"pruner": "median", "startup": 2, "history": history})
    result = run_trial(point, str(tmp_path / "a.db"))
    assert result["status"] == "pruned", result
    assert result["line"].startswith("pruned by the median pruner at iteration 1")
    assert result["steps"] == [[1, result["steps"][0][1]]]
    with Store(tmp_path / "a.db", readonly=True) as s:
        run = s.runs()[0]
        assert run["status"] == "pruned" and run["last_iteration"] == 1
        assert [e["kind"] for e in s.events(run["id"])][-1] == "pruned"
    point.extra["history"] = []
    result = run_trial(point, str(tmp_path / "b.db"))
    assert result["status"] == "completed" and len(result["steps"]) == 3


def test_ray_or_optuna_missing_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert tune(tmp_path, *BW, "--objective", "bits_up", "--ray") == 2
    assert one_error_line(capsys) == ("testbed: error: --ray: Ray is not installed; install it "
                                      "with pip install 'lgc-testbed[cluster]'")
    import testbed.tune

    monkeypatch.setitem(sys.modules, "optuna", None)
    monkeypatch.delitem(sys.modules, "testbed.tune.study", raising=False)
    monkeypatch.delattr(testbed.tune, "study", raising=False)
    assert tune(tmp_path, *BW, "--objective", "bits_up") == 2
    assert one_error_line(capsys) == ("testbed: error: testbed tune: Optuna is not installed; "
                                      "install it with pip install 'lgc-testbed[tune]'")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
@pytest.mark.slow
def test_trials_as_ray_tasks_land_as_runs_equal_to_testbed_run(tmp_path, capsys):
    pytest.importorskip("ray")
    assert tune(tmp_path, *BW, "--objective", "bits_up", "--ray", "--jobs", "2", trials=2) == 0
    out = capsys.readouterr().out
    runs = runs_of(tmp_path / "t.db")
    assert sorted((r["trial"], r["status"]) for r in runs) == [(0, "completed"), (1, "completed")]
    line = next(s for s in out.splitlines() if s.strip().startswith("testbed run "))
    sets = [s.strip() for s in line.split("--set ")[1:]]
    assert main(["run", str(QUICK), "--store", str(tmp_path / "alone.db"), "--quiet",
                 *sum((["--set", s] for s in sets), [])]) == 0
    best = int(out.split("runs\n")[1].splitlines()[1].split()[-1])
    assert comparable(tmp_path / "t.db", best) == comparable(tmp_path / "alone.db", 1)
