"""Nothing changes for a user: the rows the orchestrator wrote before it was rebuilt around one
loop (recorded on that code by tests/testbed/golden/record.py, committed as fixtures) are the
rows it writes now, every column of every table but wall time, for data-parallel, federated
sync and FedBuff runs, the torchrun equivalence runs' in-process references and resumed runs;
and a store and a checkpoint written by that code open and resume.

Each run is rebuilt from the configuration its fixture stored (`testbed resume` rebuilds a run
the same way), run in this process, exported as `testbed export --format json` exports it, and
compared value by value (NaN equals NaN: a round without a loss)."""
from __future__ import annotations

import importlib.util
import json
import lzma
import math
from pathlib import Path

import pytest

from testbed import checkpoint
from testbed.cli import main
from testbed.config import config_from_stored
from testbed.experiment import Experiment
from testbed.store import Store

GOLDEN = Path(__file__).parent / "golden"
_spec = importlib.util.spec_from_file_location("golden_record", GOLDEN / "record.py")
record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record)

FAST = ["torchrun_topk_2", "torchrun_dgc_4", "torchrun_lgc_ps_2", "torchrun_lgc_rar_2",
        "torchrun_scalecom_2", "torchrun_topk_allgather_2", "torchrun_lgc_ablation_2",
        "torchrun_fed_topk_sync", "torchrun_fed_none_sync", "torchrun_fed_topk_fedbuff",
        *[pytest.param(name, marks=pytest.mark.skipif(
            not Path("/usr/share/datasets/fashion-mnist").exists(),
            reason="Fashion-MNIST (Debian's dataset-fashion-mnist) is not installed"))
          for name in ("fed_fashion_sync", "fed_fashion_fedbuff")]]
SLOW = ["quickstart", "torchrun_quickstart_2"]   # 500 iterations each


def fixture(name: str) -> dict:
    return json.loads(lzma.decompress((GOLDEN / "rows" / f"{name}.json.xz").read_bytes()))


# columns added since the fixtures were recorded, NULL in runs of their kinds (a Flower run's
# reply counts): a row that holds them NULL is the fixture's row
ADDED_NULL = {"iterations": ("replies_ok", "replies_failed", "replies_lost", "replies_late")}


def exported(store: Store, run_id: int) -> dict:
    """`testbed export --format json`'s document, wall clock and the ADDED_NULL columns that
    are NULL dropped as in the fixtures."""
    data = record.without_wall(json.loads(json.dumps(store.export(run_id), indent=1, default=str)))
    for table, columns in ADDED_NULL.items():
        data[table] = [{k: v for k, v in row.items() if not (k in columns and v is None)}
                       for row in data[table]]
    return data


def differences(a, b, where: str = "") -> list[str]:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} rows, now {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r}, now {b!r}"]


# options added since the fixtures were recorded, at defaults that keep the old behaviour: the
# stored configuration of a new run names them, the rows must not change
ADDED_AT_DEFAULT = {("network", "csma", "preamble_detection"): False}


def without_added(config: dict) -> dict:
    """A stored configuration less the ADDED_AT_DEFAULT keys that hold their default."""
    config = json.loads(json.dumps(config))
    for path, default in ADDED_AT_DEFAULT.items():
        table = config
        for key in path[:-1]:
            table = table.get(key) if isinstance(table, dict) else None
        if isinstance(table, dict) and table.get(path[-1], default) == default:
            table.pop(path[-1], None)
    return config


def test_the_comparison_sees_one_changed_value():
    ref = fixture("torchrun_topk_2")
    assert differences(ref, json.loads(json.dumps(ref))) == []
    changed = json.loads(json.dumps(ref))
    changed["links"][5]["lost"] += 1
    assert differences(ref, changed) == [f".links[5].lost: {ref['links'][5]['lost']!r}, now "
                                         f"{ref['links'][5]['lost'] + 1!r}"]


def run_again(name: str, tmp_path) -> None:
    """The fixture's run again; `run.device = "auto"` (the quickstart's) on the CPU, where the
    fixture ran, so that a machine with a GPU compares like with like."""
    ref = fixture(name)
    stored = json.loads(json.dumps(ref["run"]["config"]))
    stored["run"]["device"] = "cpu"
    cfg = config_from_stored(stored, source=f"golden {name}")
    with Store(tmp_path / "now.db") as store:
        got = exported(store, Experiment(cfg, store).run())
    got["run"]["config"]["run"]["device"] = ref["run"]["config"]["run"]["device"]
    got["run"]["config"] = without_added(got["run"]["config"])
    assert not differences(ref, got), differences(ref, got)[:10]


@pytest.mark.parametrize("name", FAST)
def test_the_rows_of_the_code_before_the_loop(name, tmp_path):
    run_again(name, tmp_path)


@pytest.mark.slow  # 500 iterations of the quickstart's CNN, about half a minute each
@pytest.mark.parametrize("name", SLOW)
def test_the_quickstart_rows_of_the_code_before_the_loop(name, tmp_path):
    run_again(name, tmp_path)


@pytest.mark.parametrize("name,stopped_after,checkpointed", [("resume_topk", 6, 3),
                                                             ("resume_fedbuff", 5, 3)])
def test_an_old_store_and_checkpoint_open_and_resume(name, stopped_after, checkpointed, tmp_path,
                                                     capsys):
    """A run stopped by the old code (its store and checkpoint as it left them) resumes here
    and writes the rows the old code wrote when it resumed it."""
    db = tmp_path / "old.db"
    db.write_bytes(lzma.decompress((GOLDEN / "rows" / f"{name}.stopped.db.xz").read_bytes()))
    saved = checkpoint.path_for(db, 1)
    saved.parent.mkdir()
    saved.write_bytes(lzma.decompress((GOLDEN / "rows" / f"{name}.stopped.pt.xz").read_bytes()))
    ref = fixture(name)
    with Store(db) as store:   # the old store opens: the stopped run, its rows up to the stop
        before = exported(store, 1)
    assert before["run"]["status"] == "stopped"
    assert [r["iteration"] for r in before["iterations"]] == list(range(stopped_after))
    assert not differences(ref["iterations"][:checkpointed + 1],
                           before["iterations"][:checkpointed + 1])
    assert main(["resume", "1", "--store", str(db), "--quiet"]) == 0
    assert f"resumes after iteration {checkpointed}" in capsys.readouterr().out
    with Store(db) as store:
        got = exported(store, 1)
    assert not differences(ref, got), differences(ref, got)[:10]
