"""`testbed export RUN --format tensorboard`: the event files read back with TensorBoard's own
readers (EventAccumulator for one run, EventMultiplexer for a --logdir of runs)."""
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.plugin_event_multiplexer import (
    EventMultiplexer,
)

from testbed.cli import main as cli
from testbed.records.store import Store

# three iterations: bits (up, down), virtual and wall seconds, train loss; two evals
ROWS = [(100, 20, 0.5, 0.1, 2.0), (50, 10, 1.25, 0.2, 1.5), (50, 10, 2.0, 0.3, 1.0)]
EVALS = [(0, 0.5, 0.40, 1.9), (2, 2.0, 0.75, 0.9)]


def make_store(path, name="lgc try"):
    with Store(path) as s:
        rid = s.create_run(name, {}, method="lgc_ps")
        for i, (up, down, vt, wall, loss) in enumerate(ROWS):
            s.append_iteration(rid, {"iteration": i, "virtual_time_s": vt, "wall_time_s": wall,
                                     "train_loss": loss, "bits_up": up, "bits_down": down})
        for it, vt, acc, loss in EVALS:
            s.append_eval(rid, {"iteration": it, "virtual_time_s": vt, "test_accuracy": acc,
                                "test_loss": loss})
        s.finish_run(rid, "completed")
        return rid, s.run(rid)["started_at"]


def scalars(acc, tag):
    return [(e.step, pytest.approx(e.value)) for e in acc.Scalars(tag)]


def test_event_files_hold_every_scalar_against_iteration_and_virtual_time(tmp_path, capsys):
    rid, started = make_store(tmp_path / "runs.db")
    logdir = tmp_path / "tb"
    assert cli(["export", "lgc try", "--store", str(tmp_path / "runs.db"), "--format", "tensorboard",
                "--out", str(logdir)]) == 0
    assert f"tensorboard --logdir {logdir}" in capsys.readouterr().err
    folder = logdir / f"lgc_try_{rid}"
    acc = EventAccumulator(str(folder))
    acc.Reload()
    assert scalars(acc, "rate/bits_up") == [(0, 100), (1, 50), (2, 50)]
    assert scalars(acc, "rate/bits_down") == [(0, 20), (1, 10), (2, 10)]
    assert scalars(acc, "rate/cumulative_bits") == [(0, 120), (1, 180), (2, 240)]
    assert scalars(acc, "train/loss") == [(0, 2.0), (1, 1.5), (2, 1.0)]
    assert scalars(acc, "test/accuracy") == [(0, 0.40), (2, 0.75)]
    assert scalars(acc, "test/loss") == [(0, 1.9), (2, 0.9)]
    assert scalars(acc, "time/virtual_s") == [(0, 0.5), (1, 1.25), (2, 2.0)]
    assert scalars(acc, "time/wall_s") == [(0, 0.1), (1, 0.2), (2, 0.3)]
    # against virtual time: steps are virtual milliseconds
    assert scalars(acc, "by_virtual_ms/test_accuracy") == [(500, 0.40), (2000, 0.75)]
    assert scalars(acc, "by_virtual_ms/cumulative_bits") == [(500, 120), (1250, 180), (2000, 240)]
    # each event's wall time is the run's start plus the iteration's wall seconds
    assert [e.wall_time for e in acc.Scalars("rate/bits_up")] == pytest.approx(
        [started + 0.1, started + 0.2, started + 0.3])
    # a --logdir of several exported runs: TensorBoard sees one run per folder
    make_store(tmp_path / "other.db", name="fp32")
    assert cli(["export", "fp32", "--store", str(tmp_path / "other.db"), "--format", "tensorboard",
                "--out", str(logdir)]) == 0
    mux = EventMultiplexer().AddRunsFromDirectory(str(logdir))
    mux.Reload()
    assert sorted(mux.Runs()) == sorted([f"lgc_try_{rid}", "fp32_1"])


def test_unknown_run_is_an_error(tmp_path, capsys):
    make_store(tmp_path / "runs.db")
    assert cli(["export", "nope", "--store", str(tmp_path / "runs.db"), "--format", "tensorboard",
                "--out", str(tmp_path / "tb")]) == 2  # the user's mistake (docs/reliability.md)
    assert "no run 'nope'" in capsys.readouterr().err


def test_a_federated_run_exports_participants_and_each_steps_staleness(tmp_path):
    """Two FedBuff server steps written by hand: step 0 counted updates of staleness 0, 0, 1,
    step 1 of staleness 2, 3 (a fourth slot's update did not count: NULL). The scalars are the
    iteration rows' participants and mean; the histogram holds exactly each step's values."""
    steps = [(3, [0, 0, 1, None]), (2, [2, 3, None, None])]
    with Store(tmp_path / "runs.db") as s:
        rid = s.create_run("fedbuff", {}, method="none")
        for i, (participants, each) in enumerate(steps):
            counted = [v for v in each if v is not None]
            s.append_iteration(rid, {"iteration": i, "virtual_time_s": i + 1.0, "wall_time_s": 0.1,
                                     "train_loss": 1.0, "bits_up": 10, "bits_down": 10,
                                     "participants": participants,
                                     "staleness": sum(counted) / len(counted)},
                               [{"iteration": i, "node": f"w{k}", "staleness": v}
                                for k, v in enumerate(each)])
        s.finish_run(rid, "completed")
    assert cli(["export", "fedbuff", "--store", str(tmp_path / "runs.db"), "--format",
                "tensorboard", "--out", str(tmp_path / "tb")]) == 0
    # the accumulator keeps one histogram per tag by default; 0 keeps them all
    acc = EventAccumulator(str(tmp_path / "tb" / f"fedbuff_{rid}"), size_guidance={"histograms": 0})
    acc.Reload()
    assert scalars(acc, "federated/participants") == [(0, 3), (1, 2)]
    assert scalars(acc, "federated/staleness_mean") == [(0, 1 / 3), (1, 2.5)]
    hist = {e.step: e.histogram_value for e in acc.Histograms("federated/staleness")}
    assert sorted(hist) == [0, 1]
    assert (hist[0].num, hist[0].sum, hist[0].min, hist[0].max) == (3, 1, 0, 1)
    assert (hist[1].num, hist[1].sum, hist[1].min, hist[1].max) == (2, 5, 2, 3)
