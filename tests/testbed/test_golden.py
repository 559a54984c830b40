"""Nothing changes for a user: the rows the orchestrator wrote before it was rebuilt around one
loop (recorded on that code by tests/testbed/golden/record.py, committed as fixtures) are the
rows it writes now, every column of every table but wall time, for data-parallel, federated
sync and FedBuff runs, the torchrun equivalence runs' in-process references and resumed runs;
and a store and a checkpoint written by that code open and resume.

Each run is rebuilt from the configuration its fixture stored (`testbed resume` rebuilds a run
the same way), run in this process, exported as `testbed export --format json` exports it, and
compared as tests/testbed/golden/compare.py says: exact where no float reduction reaches,
losses and norms within a tolerance measured across torch's CPU kernel paths, and a trajectory
that a rounding tie sent another way compared by its totals from there on. So the fixtures,
recorded on one CPU, hold on any."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.recorded

sys.path.insert(0, str(Path(__file__).parent / "golden"))
import compare  # noqa: E402  (tests/testbed/golden/compare.py)

from testbed.cli import main  # noqa: E402
from testbed.records.store import Store  # noqa: E402

FAST = ["torchrun_topk_2", "torchrun_dgc_4", "torchrun_lgc_ps_2", "torchrun_lgc_rar_2",
        "torchrun_scalecom_2", "torchrun_topk_allgather_2", "torchrun_lgc_ablation_2",
        "torchrun_fed_topk_sync", "torchrun_fed_none_sync", "torchrun_fed_topk_fedbuff",
        *[pytest.param(name, marks=pytest.mark.skipif(
            not Path("/usr/share/datasets/fashion-mnist").exists(),
            reason="Fashion-MNIST (Debian's dataset-fashion-mnist) is not installed"))
          for name in ("fed_fashion_sync", "fed_fashion_fedbuff")]]
SLOW = ["quickstart", "torchrun_quickstart_2"]   # 500 iterations each


def copy(doc):
    return json.loads(json.dumps(doc))


# ------------------------------------------------------------------ the comparison itself
def test_the_comparison_sees_one_changed_value():
    ref = compare.fixture("torchrun_topk_2")
    assert compare.differences(ref, copy(ref)) == []
    changed = copy(ref)
    changed["links"][5]["lost"] += 1
    assert compare.differences(ref, changed) == [
        f".links[5].lost: {ref['links'][5]['lost']!r}, now {ref['links'][5]['lost'] + 1!r}"]


def test_a_loss_is_compared_within_its_tolerance_and_a_time_exactly():
    ref = compare.fixture("torchrun_topk_2")
    loss, tol = ref["iterations"][4]["train_loss"], compare.TOLERANCE["train_loss"]
    for factor, seen in ((1 + tol / 10, False), (1 + 10 * tol, True), (1 - 10 * tol, True)):
        changed = copy(ref)
        changed["iterations"][4]["train_loss"] = loss * factor
        assert bool(compare.mismatches(ref, changed)) is seen, factor
    changed = copy(ref)
    changed["iterations"][4]["compute_s"] *= 1.000001     # an exact column: any change is seen
    assert compare.mismatches(ref, changed) == [
        f".iterations[4].compute_s: {ref['iterations'][4]['compute_s']!r}, "
        f"now {changed['iterations'][4]['compute_s']!r}"]


def test_a_parting_is_accepted_only_after_rounding_and_within_the_bands():
    ref = compare.fixture("torchrun_topk_2")
    parted = copy(ref)   # iteration 6 sends 16 bits more: another trajectory from there
    for row in parted["iterations"][6:]:
        row["bits_up"] += 16
    for row in parted["iterations"][7:]:   # the loss of iteration 6 was computed before its exchange
        row["train_loss"] *= 1.01
    assert any("bit-identical" in m for m in compare.mismatches(ref, parted))
    parted["iterations"][2]["train_loss"] *= 1 + 1e-7    # rounding seen before the parting
    assert compare.mismatches(ref, parted) == []
    parted["iterations"][7]["bits_up"] *= 2               # but the totals must stay in the band
    assert [m for m in compare.mismatches(ref, parted) if "bits_up" in m and "beyond" in m]
    early = copy(ref)   # before the parting everything is exact: a time changed at iteration 1
    early["iterations"][2]["train_loss"] *= 1 + 1e-7
    early["iterations"][1]["uplink_s"] *= 1.000001
    early["iterations"][6]["bits_up"] += 16
    assert [m for m in compare.mismatches(ref, early) if m.startswith(".iterations[1].uplink_s")]


def test_a_mutation_of_the_compute_time_fails_a_golden_run(tmp_path, monkeypatch):
    """A real run with each worker's compute time 1.000001 times longer is not its fixture's."""
    from testbed.emulation import world_at
    seconds = world_at.compute_seconds
    monkeypatch.setattr(world_at, "compute_seconds", lambda *a, **k: seconds(*a, **k) * 1.000001)
    got = compare.rerun("torchrun_topk_2", tmp_path)
    assert [m for m in compare.mismatches(compare.fixture("torchrun_topk_2"), got)
            if ".compute_s" in m]


# ------------------------------------------------------------------ the fixtures' runs
def run_again(name: str, tmp_path) -> None:
    got = compare.rerun(name, tmp_path)
    found = compare.mismatches(compare.fixture(name), got)
    assert not found, found[:10]


@pytest.mark.parametrize("name", FAST)
def test_the_rows_of_the_code_before_the_loop(name, tmp_path):
    run_again(name, tmp_path)


@pytest.mark.slow  # 500 iterations of the quickstart's CNN, about half a minute each
@pytest.mark.parametrize("name", SLOW)
def test_the_quickstart_rows_of_the_code_before_the_loop(name, tmp_path):
    run_again(name, tmp_path)


@pytest.mark.parametrize("name", sorted(compare.RESUMED))
def test_an_old_store_and_checkpoint_open_and_resume(name, tmp_path, capsys):
    """A run stopped by the old code (its store and checkpoint as it left them) resumes here
    and writes the rows the old code wrote when it resumed it."""
    stopped_after, checkpointed = compare.RESUMED[name]
    db = compare.stopped_store(name, tmp_path)
    ref = compare.fixture(name)
    with Store(db) as store:   # the old store opens: the stopped run, its rows up to the stop
        before = compare.exported(store, 1)
    assert before["run"]["status"] == "stopped"
    assert [r["iteration"] for r in before["iterations"]] == list(range(stopped_after))
    assert not compare.differences(ref["iterations"][:checkpointed + 1],
                                   before["iterations"][:checkpointed + 1])
    assert main(["resume", "1", "--store", str(db), "--quiet"]) == 0
    assert f"resumes after iteration {checkpointed}" in capsys.readouterr().out
    with Store(db) as store:
        got = compare.exported(store, 1)
    found = compare.mismatches(ref, got)
    assert not found, found[:10]
