"""The LGC table's whole-run accounting and the run files' provenance, on hand-made run files."""
import json
import subprocess

import pytest

from experiments.results import table_fashion as T
from experiments.results.harness import ROOT, TableRun
from experiments.results.provenance import marks, provenance


def write(runs, label, seed, bits_up, bits, evals, final=2, commit="c" * 40):
    run = {"status": "completed", "note": "", "iterations": len(bits_up), "evals": evals,
           "final_accuracy": evals[-1]["test_accuracy"],
           "up_final": sum(bits_up[final:]) / len(bits_up[final:]),
           "total_final": sum(bits[final:]) / len(bits[final:]),
           "bits_up": bits_up, "bits": bits, "wall_s": 1.0, "overrides": [],
           "provenance": {"commit": commit, "clean": True}}
    (runs / f"{label}_s{seed}.json").write_text(json.dumps(run))


def ev(it, acc, t, j):
    return {"iteration": it, "test_accuracy": acc, "virtual_time_s": t, "energy_j": j}


def test_whole_run_and_stage_ratios_time_and_joules_from_hand_made_runs(tmp_path):
    """DGC: 4 iterations, a costly warm-up (100, 100) then 10 a iteration; the LGC row: the same
    warm-up, then 2. LGC stage ratio 10/2 = 5; whole run (100+100+10+10)/4 = 55 against
    (100+100+2+2)/4 = 51: 55/51. Time to 0.9: the first evaluation at or above it."""
    evals_dgc = [ev(1, 0.85, 10.0, 5.0), ev(3, 0.91, 20.0, 9.0)]
    evals_lgc = [ev(1, 0.90, 7.0, 4.0), ev(3, 0.92, 9.0, 6.0)]
    write(tmp_path, "dgc", 0, [100, 100, 10, 10], [200, 200, 20, 20], evals_dgc)
    write(tmp_path, "lgc_scaled", 0, [100, 100, 2, 2], [300, 100, 4, 4], evals_lgc)
    write(tmp_path, "fp32", 0, [50] * 4, [100] * 4, [ev(1, 0.90, 1.0, 1.0), ev(3, 0.93, 2.0, 2.0)],
          commit=None)
    rows = {r["method"]: r for r in T.rows_of(["fp32", "dgc", "lgc_scaled"], [0], 4, tmp_path, 0.9)}
    lgc = rows["lgc_scaled"]
    assert lgc["up_x_dgc"] == pytest.approx(5.0)
    assert lgc["up_run"] == pytest.approx(51.0) and lgc["total_run"] == pytest.approx(102.0)
    assert lgc["run_up_x_dgc"] == pytest.approx(55 / 51)
    assert lgc["run_tot_x_dgc"] == pytest.approx(110 / 102)
    assert lgc["run_up_x_scaled"] == pytest.approx(1.0)
    assert rows["dgc"]["run_up_x_scaled"] == pytest.approx(51 / 55)
    assert (lgc["t_target"], lgc["j_target"]) == (7.0, 4.0)
    assert (rows["dgc"]["t_target"], rows["dgc"]["j_target"]) == (20.0, 9.0)
    assert lgc["d_acc"] == pytest.approx(-0.01) and lgc["window_gain"] == pytest.approx(0.02)
    assert lgc["commit"] == "ccccccc (older code)"
    assert rows["fp32"]["commit"] == "unrecorded (older code)"


def test_a_run_file_records_the_commit_the_tree_and_the_effective_options():
    """The commit is git's own; an old option name (density) is recorded under its new one
    (ratio), with every default filled in; the seed as the run reads it."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=ROOT).stdout.strip()
    p = provenance(TableRun("x", T.PLATEAU_BASE, ['compression.method="lgc_scaled"',
                                                 "compression.density=0.02", "run.seed=3"]))
    assert p["commit"] == head and p["clean"] in (True, False)
    eff = p["effective"]
    assert eff["seed"] == 3 and eff["method"] == "lgc_scaled"
    assert eff["options"]["ratio"] == 0.02 and "density" not in eff["options"]
    assert eff["options"]["common_source"] == "memory"
    assert eff["network"]["sharing"] == "csma" and eff["network"]["loss"]["p"] == 0.01
    assert p["versions"]["torch"] and p["versions"]["numpy"]
    assert marks(p, head).startswith(head[:7]) and "older" not in marks(p, head)


def test_a_row_stays_current_across_commits_that_leave_the_code_alone():
    """d641f0a changed only pyproject.toml and the Makefile after 4cae26c (same code: current);
    4cae26c renamed the option schema's package after 5b737c3 (other code: older)."""
    if any(subprocess.run(["git", "cat-file", "-e", c], cwd=ROOT).returncode for c in
           ("5b737c3", "4cae26c", "d641f0a")):
        pytest.skip("the history of this checkout does not reach the commits compared")
    full = {c: subprocess.run(["git", "rev-parse", c], capture_output=True, text=True,
                              cwd=ROOT).stdout.strip() for c in ("5b737c3", "4cae26c", "d641f0a")}
    assert "older" not in marks({"commit": full["4cae26c"], "clean": True}, full["d641f0a"])
    assert marks({"commit": full["5b737c3"], "clean": True}, full["4cae26c"]).endswith("(older code)")


def test_a_run_file_lists_the_files_its_run_imported_and_not_the_report():
    """The files a run is made by: the testbed's modules it loaded, the harness that ran it;
    not the table scripts that tabulate it."""
    import testbed.experiment  # noqa: F401  (what every run imports)
    p = provenance(TableRun("x", T.PLATEAU_BASE, []))
    assert "testbed/experiment.py" in p["files"] and "experiments/results/harness.py" in p["files"]
    assert "experiments/results/table_fashion.py" not in p["files"]
    assert "experiments/results/provenance.py" not in p["files"]
    assert all((ROOT / f).is_file() for f in p["files"])


def test_an_experiment_file_reads_the_same_whatever_its_comments_but_not_its_values():
    from experiments.results.provenance import settings
    text = (ROOT / T.PLATEAU_BASE).read_text()
    overrides = ["run.seed=3", 'compression.method="dgc"']
    commented = "# a comment changed\n" + text.replace("iterations = 4800", "iterations = 4800   # more")
    assert settings(commented, overrides) == settings(text, overrides)
    assert settings(text.replace("iterations = 4800", "iterations = 4801"), overrides) != \
        settings(text, overrides)
    assert settings(text, overrides)["run"]["seed"] == 3   # the run's overrides applied


def test_a_row_whose_run_files_changed_is_older_and_one_whose_report_changed_is_not():
    """Between 4883b71 and 1f8f9ca only report code, documents and tests changed (current);
    a row listing a file that changed between 5b737c3 and 4883b71 is older."""
    if any(subprocess.run(["git", "cat-file", "-e", c], cwd=ROOT).returncode for c in
           ("5b737c3", "4883b71", "1f8f9ca")):
        pytest.skip("the history of this checkout does not reach the commits compared")
    full = {c: subprocess.run(["git", "rev-parse", c], capture_output=True, text=True,
                              cwd=ROOT).stdout.strip() for c in ("5b737c3", "4883b71", "1f8f9ca")}
    prov = {"commit": full["4883b71"], "clean": True, "config": T.PLATEAU_BASE,
            "overrides": ["run.seed=0"], "files": ["testbed/run/loop.py", "nodes/compression/dgc.py"]}
    assert "older" not in marks(prov, full["1f8f9ca"])
    assert "older" not in marks({**prov, "files": None}, full["1f8f9ca"])   # the RUN_CODE rule
    assert marks({**prov, "commit": full["5b737c3"]}, full["4883b71"]).endswith("(older code)")


def test_lgc_is_also_compared_with_the_per_node_baseline_that_sends_least(tmp_path):
    """top-k (no warm-up) sends 30 a iteration, DGC 55, DGC without its warm-up 40: top-k is the
    baseline; a row at 4 a iteration is 7.5x below it and 55/4 below DGC."""
    evals = [ev(1, 0.9, 1.0, 1.0), ev(3, 0.91, 2.0, 2.0)]
    write(tmp_path, "topk", 0, [30] * 4, [60] * 4, evals)
    write(tmp_path, "dgc", 0, [100, 100, 10, 10], [200] * 4, evals)
    write(tmp_path, "dgc_nowarmup", 0, [40] * 4, [80] * 4, evals)
    write(tmp_path, "lgc_scaled_nowarmup", 0, [6, 6, 2, 2], [12] * 4, evals)
    rows = {r["method"]: r for r in T.rows_of(["topk", "dgc", "dgc_nowarmup", "lgc_scaled_nowarmup"],
                                              [0], 4, tmp_path, 0.9)}
    lgc = rows["lgc_scaled_nowarmup"]
    assert lgc["best_per_node"] == "topk" and lgc["run_up_x_best"] == pytest.approx(7.5)
    assert lgc["run_up_x_dgc"] == pytest.approx(55 / 4)
    assert rows["dgc"]["run_up_x_best"] == pytest.approx(30 / 55)
    assert T.options("dgc_nowarmup", 234, 117)["warmup_iterations"] == 0
    assert T.options("lgc_ps_nowarmup", 234, 117) == {**T.options("lgc_ps", 234, 117), "warmup_iterations": 0}


def test_a_change_to_comments_and_docstrings_keeps_the_code_the_same():
    from experiments.results.provenance import _code_at, code_of
    before = 'def f():\n    """Old words."""\n    return 1  # one\n'
    reworded = 'def f():\n    """New words,\n    two lines."""\n    # a new comment\n    return 1\n'
    assert code_of(reworded) == code_of(before)
    assert code_of(before.replace("return 1", "return 2")) != code_of(before)
    assert code_of('def f():\n    """Only words."""\n') == code_of("def f():\n    pass\n")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    assert _code_at(head, "testbed/run/loop.py") == code_of((ROOT / "testbed/run/loop.py").read_text()) or \
        subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "testbed/run/loop.py"], cwd=ROOT).returncode
    assert _code_at(head, "no/such/file.py") is None


def test_an_option_help_text_is_documentation_but_its_default_is_code():
    from experiments.results.provenance import code_of
    before = 'KEYS = {"p": Field(0.5, float, min=0)}\n'
    helped = 'KEYS = {"p": Field(0.5, float, min=0,\n                      help="a probability")}\n'
    assert code_of(helped) == code_of(before)
    assert code_of(helped.replace("help=", "noun=")) != code_of(before)
    assert code_of(before.replace("0.5", "0.6")) != code_of(before)
    assert code_of('x = lgc_schema.Field(1, help="h")\n') == code_of("x = lgc_schema.Field(1)\n")
    assert code_of('x = Other(1, help="h")\n') != code_of("x = Other(1)\n")
