"""Deadlines and device traces against hand figures: who is left out, the aggregate over the
others, the iteration's virtual time, the bits, and what a left-out worker's memory keeps."""
import json
import math
import textwrap

import pytest
import torch

from nodes.compression import codec
from nodes.compression.memory import memories
from testbed.config import ConfigError, load_config
from testbed.experiment import Experiment, LocalGradients
from testbed.store import Store

BANDWIDTH, DELAY, HEADER = 10e6, 1e-3, 40
SLOW = 0.001  # w3's compute_speed: a straggler


def experiment_file(tmp_path, *, method="none", options="", iterations=2, run="", nodes=""):
    path = tmp_path / "e.toml"
    path.write_text(textwrap.dedent(f"""
        [run]
        seed = 0
        iterations = {iterations}
        eval_every = 100
        compute_time = "flops"
        {run}
        [data]
        dataset = "digits"
        batch_size = 16
        [model]
        name = "mlp"
        [compression]
        method = "{method}"
        {options}
        [network]
        topology = "star"
        workers = 4
        medium = "dedicated"
        [network.link]
        bandwidth_mbps = {BANDWIDTH / 1e6}
        delay_ms = {DELAY * 1e3}
        delivery = "reliable"
        {nodes}
        """))
    return path


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

        class Exp(Experiment):
            def apply_gradient(self, it, agg):
                rec.aggs.append(agg.clone())
                super().apply_gradient(it, agg)

        self.store = Store(store_path)
        self.exp = Exp(load_config(path, list(overrides)), self.store, gradients=Recording)
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
    fast = probe.step_flops / 20e9
    n = sum(p.numel() for p in probe.model.parameters())
    up = codec.encode_dense(torch.zeros(n), payload_bytes=probe.payload_bytes, dtype="f32").sizes
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
    fast = probe.step_flops / 20e9
    n = sum(p.numel() for p in probe.model.parameters())
    up = codec.encode_dense(torch.zeros(n), payload_bytes=probe.payload_bytes, dtype="f32").sizes
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
    fast = probe.step_flops / 20e9
    n = sum(p.numel() for p in probe.model.parameters())
    dense = codec.encode_dense(torch.zeros(n), payload_bytes=probe.payload_bytes, dtype="f32").sizes
    deadline = fast + wire_seconds(dense)  # w0..w2's sparse messages (< dense) are in time
    assert deadline < fast / SLOW          # w3 is still computing
    rec = Recorder(experiment_file(tmp_path, method=method, options=options, nodes=nodes, iterations=1,
                                   run=f"deadline_s = {deadline!r}"), tmp_path / "s.db")
    assert [r["left_out"] for r in rec.nodes()[0].values()] == [None, None, None, "deadline"]
    (memory,) = memories(rec.exp.scheme)
    g = [x.reshape(-1).float() for x in rec.grads[0]]
    if method == "dgc":
        g = [rec.exp.scheme.clip(x) for x in g]
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
