"""The result-table scripts in tiny modes: real runs of the loop, well-formed CSV, figures that
can be checked by hand (fp32's bits from the parameter count, its transfer time at 1 Mbit/s,
the Gilbert-Elliott stationary loss, the timers adding up to the wall time)."""
from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:           # `experiments` is a folder of the repo, not installed
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from experiments.results import harness, table1_methods, table2_bandwidth, table3_loss  # noqa: E402
from experiments.results.gpu_resnet20 import write_cifar_format  # noqa: E402

pytestmark = pytest.mark.timeout(240)

N_WORKERS = 8


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def cnn_parameters() -> int:
    from nodes.data import load_dataset
    from nodes.models import build_model

    ds = load_dataset("digits", seed=0)
    return sum(p.numel() for p in build_model("cnn", ds.input_shape, ds.num_classes).parameters())


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{path} has no rows"
    width = len(rows[0])
    assert all(len(r) == width and None not in r for r in rows), f"{path}: ragged rows"
    return rows


def test_table1_tiny_writes_csv_with_fp32_bits_from_the_parameter_count(tmp_path):
    rows = table1_methods.main(["--iterations", "3", "--seeds", "0", "--methods", "fp32,topk",
                                "--out", str(tmp_path)])
    csv_rows = read_csv(tmp_path / "table1_methods.csv")
    assert (tmp_path / "table1_methods.md").read_text().count("\n| ") == len(rows) + 1  # + header
    assert [(r["topology"], r["method"]) for r in csv_rows] == \
        [("star", "fp32"), ("star", "topk"), ("ring", "fp32"), ("ring", "topk")]
    star = {r["method"]: r for r in csv_rows if r["topology"] == "star"}
    # fp32: every worker sends 32 bits per weight up, every worker receives them down; headers
    # (30 bytes in each packet of at most 1460 payload bytes) add about 2%.
    floor = 2 * N_WORKERS * 32 * cnn_parameters()
    bits = float(star["fp32"]["bits_final"])
    assert floor < bits < 1.03 * floor
    assert float(star["fp32"]["x_fp32"]) == 1.0
    # top-k at 1%: each worker sends k fp32 values plus their indices, and the broadcast mean
    # carries at least k entries to every worker: more than 16 x 32 k bits, so less than 100x
    # fp32; the indices cost bits too, so well under that
    k = math.ceil(0.01 * cnn_parameters())
    assert float(star["topk"]["bits_final"]) > 2 * N_WORKERS * 32 * k
    assert 5 < float(star["topk"]["x_fp32"]) < 100
    for r in csv_rows:
        assert r["status"] == "ok" and 0 <= float(r["acc_mean"]) <= 1
    ring = {r["method"]: r for r in csv_rows if r["topology"] == "ring"}
    # on the ring fp32 is all-reduced: each of the 8 nodes sends 2 x 7 chunks of P/8 fp32
    # values (the largest chunk) and nothing comes down from a server; top-k is all-gathered
    assert ring["fp32"]["collective"] == "allreduce" and ring["topk"]["collective"] == "allgather"
    chunk = 4 * math.ceil(cnn_parameters() / N_WORKERS)
    assert float(ring["fp32"]["bits_final"]) == N_WORKERS * 8 * 2 * (N_WORKERS - 1) * chunk
    assert (tmp_path / "table1_methods_runs.jsonl").read_text().count("\n") == len(csv_rows)


def test_table1_ring_lists_a_server_only_method_as_not_applicable(tmp_path):
    rows = table1_methods.main(["--iterations", "2", "--seeds", "0", "--methods", "lgc_ps",
                                "--topologies", "ring", "--out", str(tmp_path)])
    (row,) = rows
    assert row["status"] == "n/a" and "'lgc_ps' only exchanges through a server" in row["note"]


def test_table2_tiny_fp32_time_to_accuracy_scales_with_bandwidth(tmp_path):
    rows = table2_bandwidth.main(["--iterations", "2", "--target", "0.01", "--methods", "fp32",
                                  "--bandwidths", "1,20", "--out", str(tmp_path)])
    (row,) = read_csv(tmp_path / "table2_bandwidth.csv")
    assert (tmp_path / "table2_bandwidth.html").stat().st_size > 1000
    # any accuracy >= 1% is reached at the first evaluation (after iteration 1 of 2)
    assert row["iterations_1"] == row["iterations_20"] == "1"
    # one iteration in a shared cell: 8 uplinks of 32n bits one after another, then one
    # broadcast of 32n bits (sent once on a shared medium), plus headers and compute.
    wire = 9 * 32 * cnn_parameters()
    t1, t20 = float(row["tta_s_1"]), float(row["tta_s_20"])
    assert wire / 1e6 < t1 < 1.05 * wire / 1e6 + 0.1
    assert wire / 20e6 < t20 < 1.05 * wire / 20e6 + 0.1
    assert rows[0]["status_1"] == "reached"


def test_gilbert_elliott_rate_is_the_stationary_loss():
    text = table3_loss.loss_table("bursty", 0.05)
    enter = float(text.split("p_good_to_bad=")[1].split(",")[0])
    exit_ = table3_loss.BURST_EXIT
    assert enter / (enter + exit_) == pytest.approx(0.05, rel=1e-5)
    assert table3_loss.loss_table("bernoulli", 0.2) == '{model="bernoulli", p=0.2}'
    assert table3_loss.loss_table("bursty", 0.0) == '{model="none"}'


def test_table3_tiny_loses_about_the_given_share_of_uplink_packets(tmp_path):
    table3_loss.main(["--iterations", "4", "--methods", "fp16", "--rates", "0,0.2",
                      "--out", str(tmp_path)])
    rows = {(r["loss_model"], r["rate"]): r for r in read_csv(tmp_path / "table3_loss.csv")}
    assert set(rows) == {("none", "0.0"), ("bernoulli", "0.2"), ("bursty", "0.2")}
    assert float(rows[("none", "0.0")]["measured_up_loss"]) == 0.0
    # fp16: 8 workers x ~40 packets x 4 iterations ~ 1300 uplink packets: 20% +- 4 points
    assert abs(float(rows[("bernoulli", "0.2")]["measured_up_loss"]) - 0.2) < 0.04
    assert all(r["status"] == "ok" for r in rows.values())


def test_a_table_runs_wall_split_pieces_add_up_to_no_more_than_the_wall_time():
    spec = harness.TableRun("cost", "experiments/quickstart.toml", ["run.iterations=3"])
    r = harness.run_one(spec)
    assert r.status == "completed" and r.iterations == 3
    assert all(v > 0 for k, v in r.timers.items() if k != "eval") and r.timers["eval"] > 0
    assert sum(r.timers.values()) <= r.wall_s
    assert len(r.codec_s) == 3 and all(s > 0 for s in r.codec_s)
    assert sum(r.codec_s) == pytest.approx(r.timers["compression"])


def test_refused_combination_is_reported_not_raised():
    spec = harness.TableRun("ring-ps", "experiments/results_ring.toml",
                           ["compression.method=lgc_ps", "run.iterations=1"])
    r = harness.run_one(spec)
    assert r.status == "refused" and "parameter server" in r.note and r.iterations == 0 and r.method == "lgc_ps"


def test_generated_cifar_format_loads_with_the_cifar10_loader(tmp_path):
    from nodes.data import load_dataset

    write_cifar_format(tmp_path, per_batch=20, n_test=10)
    ds = load_dataset("cifar10", root=str(tmp_path))
    assert tuple(ds.train_x.shape) == (100, 3, 32, 32) and tuple(ds.test_x.shape) == (10, 3, 32, 32)
    assert ds.num_classes == 10 and int(ds.train_y.max()) <= 9
    assert math.isclose(float(ds.train_x.mean()), 0.0, abs_tol=1e-4)   # standardised


def test_table_edge_tiny_writes_each_run_and_resumes(tmp_path, capsys):
    """2 stations, fp32, 4 iterations: the TDMA run, then the trace alone and with the deadline
    on TDMA, and with the deadline on CSMA (the same trace and deadline); the trace's w0 takes
    2 fp32 iterations per step; a second call runs nothing new."""
    import json

    from experiments.results import table_edge

    args = ["--iterations", "4", "--eval-every", "2", "--stations", "2", "--methods", "fp32",
            "--sharings", "tdma", "--out", str(tmp_path)]
    table_edge.main(args)
    rows = [json.loads(line) for line in (tmp_path / "table_edge.jsonl").read_text().splitlines()]
    assert [(r["sharing"], r["edge"], r["status"]) for r in rows] == [
        ("tdma", "", "completed"), ("tdma", "trace", "completed"), ("tdma", "trace+deadline", "completed"),
        ("csma", "trace+deadline", "completed")]
    it = rows[0]["median_iteration_s"]
    trace = json.loads((tmp_path / "table_edge_trace_2.json").read_text())
    assert table_edge.step_seconds() / trace["nodes"]["w0"]["speed"][0][1] == pytest.approx(2 * it)
    assert rows[2]["deadline_s"] == rows[3]["deadline_s"] == pytest.approx(1.5 * it)
    table_edge.main(args)  # resumes: every run is on disk already
    assert len((tmp_path / "table_edge.jsonl").read_text().splitlines()) == 4
    table = table_edge.render(tmp_path / "table_edge.jsonl", 0.8)
    assert "| TDMA + trace + deadline | CSMA + trace + deadline |" in table and "| 2 | fp32 |" in table


@pytest.mark.skipif(not Path("/usr/share/datasets/fashion-mnist").exists(),
                    reason="Debian's dataset-fashion-mnist is not installed (make data)")
def test_fashion_table_writes_each_run_and_skips_finished_ones(tmp_path, capsys):
    from experiments.results import table_fashion
    from nodes.models import build_model

    args = ["--iterations", "3", "--seeds", "0", "--methods", "fp32,topk", "--runs",
            str(tmp_path / "runs"), "--out", str(tmp_path)]
    rows = table_fashion.main(args)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["fp32_s0.json", "topk_s0.json"]
    fp32 = next(r for r in rows if r["method"] == "fp32")
    # fp32 uplink by hand: 8 workers x the 139k weights in f32, plus 30-byte packet headers on
    # packets of about 1.4 kB (under 3%)
    n = sum(p.numel() for p in build_model("cnn_fc", (1, 28, 28), 10).parameters())
    assert fp32["n"] == 1 and fp32["up_x_fp32"] == 1.0
    assert 8 * 32 * n < fp32["up_final"] < 8 * 32 * n * 1.03
    capsys.readouterr()
    table_fashion.main(args)                      # everything is on disk: nothing runs again
    assert "0 runs to do (2 already on disk)" in capsys.readouterr().out


def test_federated_comparison_rows_share_the_federated_files_data_and_cell(tmp_path):
    """table_federated's dp rows: experiments/dp_fashion.toml is fed_fashion.toml's data,
    model, optimizer and cell with 10 workers, and a round is 5 of its iterations; the het
    rows' device trace is the testbed's format, seeded, log-normal (median 1, sigma 1)."""
    import statistics

    from experiments.results import table_federated as tf
    from testbed.configuration.loading import load_config
    from testbed.emulation.device_trace import load_device_trace

    s = tf.spec("dp_topk", seed=2, rounds=40)
    assert s.config == tf.DP_BASE and "run.iterations=200" in s.overrides
    assert "run.eval_every=20" in s.overrides and "run.seed=2" in s.overrides
    dp, fed = load_config(ROOT / tf.DP_BASE), load_config(ROOT / tf.BASE)
    assert dp.federated is None and dp.network["workers"] == fed.federated.clients_per_round
    assert (dp.data, dp.model, dp.optim) == (fed.data, fed.model, fed.optim)
    assert dp.network["link"] == fed.network["link"] and dp.network["medium"] == fed.network["medium"]
    assert fed.federated.clients_per_round * fed.federated.local_steps == \
        tf.DP_PER_ROUND * dp.network["workers"]   # a round's local steps = 5 iterations' gradients

    trace = load_device_trace(tf.make_trace(tmp_path / "t.json"))
    logs = [math.log(trace.speed(f"c{c}", 0.0)) for c in range(100)]
    assert sorted(trace.nodes) == sorted(f"c{c}" for c in range(100))
    assert abs(statistics.fmean(logs)) < 0.35 and 0.75 < statistics.stdev(logs) < 1.25
    assert tf.make_trace(tmp_path / "u.json").read_text() == (tmp_path / "t.json").read_text()


def test_fashion_rows_state_the_ratio_to_dgc_on_the_same_schedule(tmp_path):
    """Each row's whole-run uplink against the DGC row of its schedule (with or without DGC's
    warm-up) and collective (ring rows: DGC all-gathered on the ring); none where that DGC row
    has no runs."""
    import json

    from experiments.results import table_fashion as T

    assert [T.same_schedule(m) for m in ("lgc_ps", "lgc_ps_nowarmup", "topk", "lgc_rar", "lgc_rar_nowarmup",
                                         "scalecom", "lgc_rar_scaled", "dgc_ring_nowarmup")] == [
        "dgc", "dgc_nowarmup", "dgc_nowarmup", "dgc_ring", "dgc_ring_nowarmup", "dgc_ring_nowarmup", "dgc_ring",
        "dgc_ring_nowarmup"]
    up = {"dgc": 600, "dgc_nowarmup": 450, "dgc_ring": 600, "lgc_ps_nowarmup": 45, "lgc_rar_nowarmup": 50}
    for label, bits in up.items():
        run = {"status": "completed", "iterations": 4, "final_accuracy": 0.9, "up_final": bits, "total_final": bits,
               "bits_up": [bits] * 4, "bits": [bits] * 4, "wall_s": 1.0,
               "evals": [{"iteration": 3, "test_accuracy": 0.9, "virtual_time_s": 1.0}]}
        (tmp_path / f"{label}_s0.json").write_text(json.dumps(run))
    rows = {r["method"]: r for r in T.rows_of(list(up), [0], 4, tmp_path)}
    assert rows["lgc_ps_nowarmup"]["run_up_x_sched"] == 10.0 and rows["lgc_ps_nowarmup"]["run_up_x_dgc"] == 600 / 45
    assert rows["dgc_ring"]["run_up_x_sched"] == 1.0
    assert "run_up_x_sched" not in rows["lgc_rar_nowarmup"]     # no DGC on the ring without warm-up: '-'
