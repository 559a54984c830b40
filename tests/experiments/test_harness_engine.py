"""The results harness through the sweep engine: with a store, every run lands in it as a member
of the table's sweep, and the same list of runs again runs nothing: the RunResults come back from
the store, equal in every figure the tables read to the ones the runs returned."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:           # `experiments` is a folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

from experiments.results import harness  # noqa: E402
from testbed.records.store import Store  # noqa: E402

TABLE_FIGURES = ("status", "iterations", "evals", "bits", "bits_up", "stages", "virtual_time_s",
                 "virtual_s", "packets", "lost", "packets_up", "lost_up", "method")


def test_a_table_run_again_with_its_store_reads_its_runs_back_instead_of_running_them(tmp_path):
    specs = [harness.TableRun(f"t[{m}]", "experiments/quickstart.toml",
                             ["run.iterations=2", "run.eval_every=1", "model.name=mlp", "network.workers=2",
                              "run.device=cpu", f"compression.method={m}"], tags={"method": m})
             for m in ("none", "topk")]
    store = str(tmp_path / "t.db")
    lines: list[str] = []
    first = harness.run_many(specs, store=store, sweep="t", log=lines.append)
    assert [r.status for r in first] == ["completed", "completed"] and first[0].timers
    with Store(store, readonly=True) as s:
        assert [(r["name"], r["sweep"], r["sweep_params"]) for r in s.runs()] == [
            ("t[none]", "t", {"method": "none"}), ("t[topk]", "t", {"method": "topk"})]
    lines.clear()
    again = harness.run_many(specs, store=store, sweep="t", log=lines.append)
    assert all("completed before" in line for line in lines) and len(lines) == 2
    for a, b in zip(first, again):
        assert {k: getattr(a, k) for k in TABLE_FIGURES} == {k: getattr(b, k) for k in TABLE_FIGURES}
        assert a.iterations == 2 and len(a.evals) == 2 and a.bits[0] > 0
    with Store(store, readonly=True) as s:
        assert len(s.runs()) == 2                     # nothing ran again
