"""Deadlines and device traces against hand figures: who is left out, the aggregate over the
others, the iteration's virtual time, the bits, and what a left-out worker's memory keeps."""
import json

import pytest
import torch

from nodes.compression import codec
from nodes.compression.memory import memories
from testbed.configuration.loading import load_config
from testbed.errors import ConfigError
from testbed.drivers.data_parallel import LocalGradients
from testbed.experiment import Experiment
from testbed.records.store import Store
from tests.testbed.experiment_files import experiment_file as write_experiment

BANDWIDTH, DELAY, HEADER = 10e6, 1e-3, 40
SLOW = 0.001  # w3's compute_speed: a straggler


def experiment_file(tmp_path, *, bandwidth=BANDWIDTH, **kw):
    """The shared builder's file, 4 workers, at `bandwidth` bit/s and DELAY (the hand figures')."""
    return write_experiment(tmp_path, bandwidth_mbps=bandwidth / 1e6, delay_ms=DELAY * 1e3, **kw)


class Recorder:
    """Runs an experiment keeping every iteration's gradients and applied aggregate."""

    def __init__(self, path, store_path, overrides=()):
        self.grads, self.aggs = [], []
        rec = self

        class Recording(LocalGradients):
            def __call__(self):
                grads, losses, wall = super().__call__()
                rec.grads.append([g.clone() for g in grads])
                return grads, losses, wall

        self.store = Store(store_path)
        self.exp = Experiment(load_config(path, list(overrides)), self.store, gradients=Recording)
        apply = self.exp.driver.apply_gradient
        self.exp.driver.apply_gradient = lambda it, agg: (rec.aggs.append(agg.clone()), apply(it, agg))[1]
        self.run_id = self.exp.run()
        self.store.flush()

    def iterations(self):
        return self.store.iterations(self.run_id)

    def nodes(self):
        rows = self.store.db.execute(
            "SELECT * FROM node_iterations WHERE run_id=? ORDER BY iteration, node",
            (self.run_id,)).fetchall()
        out = {}
        for r in rows:
            out.setdefault(r["iteration"], {})[r["node"]] = dict(r)
        return out


def wire_seconds(sizes):
    """Back-to-back packets on one link: serialisation of payload + header, then the delay."""
    return sum((s + HEADER) * 8 for s in sizes) / BANDWIDTH + DELAY


def test_a_deadline_leaves_the_straggler_out(tmp_path):
    """4 workers on dedicated links, w3 computes 1000x slower than the others. The deadline falls
    after the fast workers' updates have arrived and before w3 finishes computing: w3 sends
    nothing, the aggregate is the mean of w0..w2's gradients, and the iteration lasts exactly
    the deadline plus the downlink broadcast (each worker's own link: its packets back to back,
    then the propagation delay)."""
    nodes = f'[network.nodes.w3]\ncompute_speed = {SLOW}'
    probe = Experiment(load_config(experiment_file(tmp_path, nodes=nodes)), Store(tmp_path / "p.db"))
    fast = probe.driver.step_flops / 20e9
    n = sum(p.numel() for p in probe.driver.model.parameters())
    up = codec.encode_dense(torch.zeros(n), payload_bytes=probe.driver.payload_bytes, dtype="f32").sizes
    fast_done = fast + wire_seconds(up)          # when w0..w2's updates are all at the server
    slow = fast / SLOW
    deadline = (fast_done + slow) / 2
    assert fast_done < deadline < slow

    rec = Recorder(experiment_file(tmp_path, nodes=nodes, run=f"deadline_s = {deadline!r}"),
                   tmp_path / "s.db")
    down = wire_seconds(up)                       # the mean goes down as dense fp32 too
    t = 0.0
    for it, row in enumerate(rec.iterations()):
        assert row["left_out"] == 1
        assert row["virtual_time_s"] - t == pytest.approx(deadline + down, rel=1e-12)
        assert row["compute_s"] == pytest.approx(fast)
        assert row["uplink_s"] == pytest.approx(deadline - fast)
        t = row["virtual_time_s"]
        per = rec.nodes()[it]
        assert {w: r["left_out"] for w, r in per.items()} == {"w0": None, "w1": None, "w2": None,
                                                               "w3": "deadline"}
        assert per["w3"]["bits_up"] == 0 and per["w0"]["bits_up"] == 8 * sum(up)
        assert per["w3"]["compute_s"] == pytest.approx(slow)
        expected = torch.stack(rec.grads[it][:3]).mean(0)
        torch.testing.assert_close(rec.aggs[it], expected, rtol=1e-6, atol=1e-7)
    rec.store.close()


def test_an_update_still_on_the_air_at_the_deadline_is_left_out_but_its_bits_count(tmp_path):
    """w3's link runs at 1/10 of the rate: it computes in time but its update arrives after the
    deadline. It is left out, its bits were sent, and the uplink closes at the deadline."""
    nodes = '[[network.links]]\nsrc = "w3"\ndst = "server"\nbandwidth_mbps = 1.0'
    probe = Experiment(load_config(experiment_file(tmp_path, nodes=nodes)), Store(tmp_path / "p.db"))
    fast = probe.driver.step_flops / 20e9
    n = sum(p.numel() for p in probe.driver.model.parameters())
    up = codec.encode_dense(torch.zeros(n), payload_bytes=probe.driver.payload_bytes, dtype="f32").sizes
    deadline = fast + 2 * wire_seconds(up)       # w0..w2 in time; w3 needs 10x their wire time
    rec = Recorder(experiment_file(tmp_path, nodes=nodes, run=f"deadline_s = {deadline!r}",
                                   iterations=1), tmp_path / "s.db")
    per = rec.nodes()[0]
    assert per["w3"]["left_out"] == "deadline" and per["w3"]["bits_up"] == 8 * sum(up)
    assert per["w3"]["uplink_done_s"] > deadline
    row = rec.iterations()[0]
    assert row["compute_s"] + row["uplink_s"] == pytest.approx(deadline)
    torch.testing.assert_close(rec.aggs[0], torch.stack(rec.grads[0][:3]).mean(0), rtol=1e-6, atol=1e-7)
    rec.store.close()


@pytest.mark.parametrize("method,options", [("topk", "ratio = 0.05"), ("dgc", "warmup_iterations = 0")])
def test_a_left_out_worker_keeps_its_whole_compensated_gradient(tmp_path, method, options):
    """First iteration, memories start at zero: what a worker had is its (clipped) gradient.
    w3 is left out at the deadline, so its memory keeps all of it (DGC: v and the momentum u
    both equal the clipped gradient); the others kept only what they did not send."""
    nodes = f'[network.nodes.w3]\ncompute_speed = {SLOW}'
    probe = Experiment(load_config(experiment_file(tmp_path, nodes=nodes)), Store(tmp_path / "p.db"))
    fast = probe.driver.step_flops / 20e9
    n = sum(p.numel() for p in probe.driver.model.parameters())
    dense = codec.encode_dense(torch.zeros(n), payload_bytes=probe.driver.payload_bytes, dtype="f32").sizes
    deadline = fast + wire_seconds(dense)  # w0..w2's sparse messages (< dense) are in time
    assert deadline < fast / SLOW          # w3 is still computing
    rec = Recorder(experiment_file(tmp_path, method=method, options=options, nodes=nodes, iterations=1,
                                   run=f"deadline_s = {deadline!r}"), tmp_path / "s.db")
    assert [r["left_out"] for r in rec.nodes()[0].values()] == [None, None, None, "deadline"]
    (memory,) = memories(rec.exp.driver.scheme)
    g = [x.reshape(-1).float() for x in rec.grads[0]]
    if method == "dgc":
        g = [rec.exp.driver.scheme.clip(x) for x in g]
        torch.testing.assert_close(memory.u[3], g[3], rtol=0, atol=0)
    torch.testing.assert_close(memory.residuals[3], g[3], rtol=0, atol=0)
    for w in range(3):  # the others sent their top coordinates and kept the rest
        kept = memory.residuals[w]
        sent = kept == 0
        assert 0 < int(sent.sum()) < kept.numel()
        torch.testing.assert_close(kept[~sent], g[w][~sent], rtol=0, atol=0)
    rec.store.close()


def test_bad_deadline_and_trace_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"run\.deadline_s = -1\.0: must be"):
        load_config(experiment_file(tmp_path), ["run.deadline_s=-1.0"])
    with pytest.raises(ConfigError, match=r"run\.device_trace = 'nope\.json'.*no such file"):
        load_config(experiment_file(tmp_path), ["run.device_trace=nope.json"])
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"nodes": {"w0": {"available": [[5, 2]]}}}))
    with pytest.raises(ConfigError, match=r"nodes\.w0\.available\[0\] = \[5, 2\]"):
        load_config(experiment_file(tmp_path), [f"run.device_trace={bad}"])
    bad.write_text(json.dumps({"nodes": {"w9": {"speed": [[0, 1.0]]}}}))
    with pytest.raises(ConfigError, match=r"'w9' is not a worker"):
        Experiment(load_config(experiment_file(tmp_path), [f"run.device_trace={bad}"]),
                   Store(tmp_path / "s.db"))


def trace_file(tmp_path, nodes):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"nodes": nodes}))
    return path


def test_a_device_trace_removes_a_worker_for_ten_iterations(tmp_path):
    """w1 is away from iteration 3 to 12 (the trace's interval ends fall between iteration
    starts of the run without a trace; on dedicated links w1's absence does not change any
    iteration's duration, so those starts hold in the run with it). In those iterations w1
    sends and receives nothing, every other node's bits are what they were without the trace,
    and the aggregate is the mean over w0, w2, w3; elsewhere w1 takes part as usual."""
    path = experiment_file(tmp_path, iterations=16)
    base = Recorder(path, tmp_path / "a.db")
    starts = [0.0] + [r["virtual_time_s"] for r in base.iterations()]
    away = range(3, 13)
    trace = trace_file(tmp_path, {"w1": {"available": [[0, (starts[2] + starts[3]) / 2],
                                                      [(starts[12] + starts[13]) / 2, None]]}})
    rec = Recorder(path, tmp_path / "b.db", [f"run.device_trace={trace}"])
    rows, base_rows = rec.iterations(), base.iterations()
    nodes, base_nodes = rec.nodes(), base.nodes()
    for it in range(16):
        assert rows[it]["virtual_time_s"] == pytest.approx(base_rows[it]["virtual_time_s"], rel=1e-12)
        w1 = nodes[it]["w1"]
        if it in away:
            assert (w1["bits_up"], w1["bits_down"], w1["left_out"]) == (0, 0, "unavailable")
            assert rows[it]["left_out"] == 1
            lost = base_nodes[it]["w1"]
            assert rows[it]["bits_up"] == base_rows[it]["bits_up"] - lost["bits_up"]
            assert rows[it]["bits_down"] == base_rows[it]["bits_down"] - lost["bits_down"]
            present = [0, 2, 3]
        else:
            assert w1["left_out"] is None and w1["bits_up"] == base_nodes[it]["w1"]["bits_up"] > 0
            assert rows[it]["left_out"] == 0
            present = [0, 1, 2, 3]
        for w in ("w0", "w2", "w3"):
            assert nodes[it][w]["bits_up"] == base_nodes[it][w]["bits_up"]
            assert nodes[it][w]["bits_down"] == base_nodes[it][w]["bits_down"]
        expected = torch.stack([rec.grads[it][w] for w in present]).mean(0)
        torch.testing.assert_close(rec.aggs[it], expected, rtol=1e-6, atol=1e-7)
    base.store.close()
    rec.store.close()


def test_an_away_worker_keeps_its_error_memory_untouched(tmp_path):
    """top-k: w1 away for iterations 1-2 (from the first iteration's end on): its residual after
    iteration 2 is the one it had after iteration 0."""
    path = experiment_file(tmp_path, method="topk", options="ratio = 0.05", iterations=1)
    first = Recorder(path, tmp_path / "a.db")
    t1 = first.iterations()[0]["virtual_time_s"]
    (mem0,) = memories(first.exp.driver.scheme)
    trace = trace_file(tmp_path, {"w1": {"available": [[0, t1], [1e9, None]]}})
    rec = Recorder(path, tmp_path / "b.db", [f"run.device_trace={trace}", "run.iterations=3"])
    (mem,) = memories(rec.exp.driver.scheme)
    assert [rec.nodes()[it]["w1"]["left_out"] for it in range(3)] == [None, "unavailable", "unavailable"]
    torch.testing.assert_close(mem.residuals[1], mem0.residuals[1], rtol=0, atol=0)
    assert not torch.equal(mem.residuals[0], mem0.residuals[0])  # the others went on
    first.store.close()
    rec.store.close()


def test_speeds_from_the_trace_set_compute_time(tmp_path):
    """w2 (compute_speed 3 in the network) runs at 0.5 until 2.5 iterations' time, then at 2;
    w0 at 0.25 throughout; w1 is not in the trace (speed 1). The trace's speed replaces
    compute_speed: each compute_s is step FLOPs / (20 GFLOP/s x the speed at the iteration's
    start), the iteration's the slowest of them."""
    path = experiment_file(tmp_path, iterations=6, nodes='[network.nodes.w2]\ncompute_speed = 3.0')
    rec0 = Recorder(path, tmp_path / "a.db", ["run.iterations=1"])
    t1 = rec0.iterations()[0]["virtual_time_s"]  # iteration 1 starts here (speeds change below)
    switch = 2.5 * t1
    trace = trace_file(tmp_path, {"w2": {"speed": [[0, 0.5], [switch, 2.0]]},
                                  "w0": {"speed": [[0, 0.25]]}})
    rec = Recorder(path, tmp_path / "b.db", [f"run.device_trace={trace}"])
    flops = rec.exp.driver.step_flops
    starts = [0.0] + [r["virtual_time_s"] for r in rec.iterations()]
    for it in range(6):
        w2 = 0.5 if starts[it] < switch else 2.0
        assert rec.nodes()[it]["w2"]["compute_s"] == pytest.approx(flops / (20e9 * w2), rel=1e-12)
        assert rec.nodes()[it]["w0"]["compute_s"] == pytest.approx(flops / (20e9 * 0.25), rel=1e-12)
        assert rec.nodes()[it]["w1"]["compute_s"] == pytest.approx(flops / 20e9, rel=1e-12)
        assert rec.iterations()[it]["compute_s"] == pytest.approx(flops / (20e9 * min(w2, 0.25)))
    assert any(s >= switch for s in starts[:6]) and starts[1] < switch  # both speeds were used
    rec0.store.close()
    rec.store.close()


def test_on_a_shared_cell_a_late_update_holds_the_air_until_it_is_sent(tmp_path):
    """Transport alone, TDMA cell, 3 workers x 5 full packets (T = 1.2 ms each), delay 0.1 ms,
    all ready at 0: the cell takes turns w0, w1, w2, so w0's last packet is the 13th on the
    air (13T + d), w1's the 14th, w2's the 15th. A deadline at 14.5T + d leaves w2 out; the
    uplink closes at the deadline, but w2's last packet holds the cell until 15T, so the
    server's one-packet broadcast goes out then: the iteration ends at 16T + d."""
    from channels.config import validate_network
    from nodes.compression.base import Message
    from nodes.compression.phases import Downlink, Uplink
    from testbed.emulation.edge_network import build_network
    from testbed.emulation.transport import EmulatedTransport

    T, d = (1460 + 40) * 8 / 10e6, 1e-4
    table = validate_network({"topology": "star", "workers": 3, "medium": "shared",
                              "link": {"bandwidth_mbps": 10.0, "delay_ms": d * 1e3}})
    t = EmulatedTransport(build_network(table, 0))
    deadline = 14.5 * T + d
    t.begin(0, 0.0, {w: 0.0 for w in t.workers}, deadline=deadline)
    got = t.carry(Uplink({w: Message([bytes([w]) * 1460] * 5) for w in range(3)}))
    assert sorted(got) == [0, 1] and t.left_out == {"w2": "deadline"}
    assert t.clock == pytest.approx(deadline) and t.timing.uplink_s == pytest.approx(deadline)
    assert t.traffic.bits_up["w2"] == 8 * 5 * 1460  # it was on the air
    t.carry(Downlink(Message([b"m" * 1460])))
    assert t.clock == pytest.approx(16 * T + d)
    assert t.timing.downlink_s == pytest.approx(16 * T + d - deadline)


def test_a_store_written_before_left_out_gains_the_columns(tmp_path):
    """A store made by the schema without `left_out` is opened, written and read with it."""
    import sqlite3

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE iterations (run_id INTEGER NOT NULL, iteration INTEGER NOT NULL, stage TEXT,
            virtual_time_s REAL, wall_time_s REAL, train_loss REAL, bits_up INTEGER,
            bits_down INTEGER, compute_s REAL, uplink_s REAL, aggregation_s REAL,
            downlink_s REAL, PRIMARY KEY (run_id, iteration));
        CREATE TABLE node_iterations (run_id INTEGER NOT NULL, iteration INTEGER NOT NULL,
            node TEXT NOT NULL, bits_up INTEGER, bits_down INTEGER, compute_s REAL,
            uplink_done_s REAL, PRIMARY KEY (run_id, iteration, node));
        INSERT INTO iterations (run_id, iteration) VALUES (7, 0);""")
    db.commit()
    db.close()
    store = Store(path)
    rid = store.create_run("r", {})
    store.append_iteration(rid, {"iteration": 0, "left_out": 1},
                           nodes=[{"iteration": 0, "node": "w1", "left_out": "deadline"}])
    store.flush()
    assert store.iterations(rid)[0]["left_out"] == 1
    assert store.node_iterations(rid)[0]["left_out"] == "deadline"
    assert store.iterations(7)[0]["left_out"] is None  # old rows: unknown
    store.close()
