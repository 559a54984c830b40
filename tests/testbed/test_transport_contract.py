"""The declared contracts of the transport path: the loop runs on any transport that
implements `begin`/`end` (it stores what `end()`'s IterationReport says, nothing else), and the
link layer is reached only through `channels.link_layer.LinkLayer`."""
import pytest

from channels.link_layer import LinkLayer
from nodes.compression.ideal import IdealTransport
from testbed.configuration.loading import load_config
from testbed.emulation.iteration_report import IterationReport, IterationTiming, Traffic
from testbed.experiment import Experiment
from testbed.records.store import Store


class HandMadeTransport(IdealTransport):
    """Ideal delivery, and a per-iteration report written by hand: iteration i lasts
    1.5 s of virtual time, w0 sends 100 + i bits up, w1 receives 7 bits, w1 is left out
    at iteration 2."""

    def begin(self, iteration, start, ready, *, present=None, deadline=None):
        self.it, self.start = iteration, start

    def end(self):
        left_out = {"w1": "deadline"} if self.it == 2 else {}
        return IterationReport(
            clock=self.start + 1.5, timing=IterationTiming(compute_s=0.5, uplink_s=1.0),
            traffic=Traffic(bits_up={"w0": 100 + self.it}, bits_down={"w1": 7}), left_out=left_out)


def test_the_loop_stores_what_the_iteration_report_says(tiny_experiment, tmp_path):
    cfg = load_config(tiny_experiment(iterations=4), [])
    with Store(tmp_path / "s.db") as store:
        rid = Experiment(cfg, store, transport=lambda exp: HandMadeTransport()).run()
        rows, nodes = store.iterations(rid), store.node_iterations(rid)
    assert [r["virtual_time_s"] for r in rows] == pytest.approx([1.5, 3.0, 4.5, 6.0])
    assert [r["bits_up"] for r in rows] == [100, 101, 102, 103]
    assert [r["bits_down"] for r in rows] == [7] * 4
    assert [(r["compute_s"], r["uplink_s"]) for r in rows] == [(0.5, 1.0)] * 4
    assert [r["left_out"] for r in rows] == [0, 0, 1, 0]
    who = {(r["iteration"], r["node"]): r["left_out"] for r in nodes}
    assert who[2, "w1"] == "deadline" and who[2, "w0"] is None and who[1, "w1"] is None


def test_a_transport_without_a_clock_says_so(tiny_experiment, tmp_path):
    """The ideal transport carries phases but keeps no virtual clock: the loop refuses it."""
    assert not hasattr(IdealTransport(), "begin")
    cfg = load_config(tiny_experiment(iterations=2), [])
    with Store(tmp_path / "s.db") as store, pytest.raises(TypeError, match="IdealTransport has no virtual clock"):
        Experiment(cfg, store, transport=lambda world: IdealTransport())


def test_the_network_and_the_rank_zero_link_are_link_layers(tiny_experiment):
    pytest.importorskip("torch.distributed")
    from testbed.distributed.transport import RankZeroLink
    from testbed.emulation.edge_network import build_network

    net = build_network(load_config(tiny_experiment(), []).network, 0).network
    assert isinstance(net, LinkLayer)
    assert isinstance(RankZeroLink(comm=None, network=net), LinkLayer)
    # every method of the protocol is the network's own, none the protocol's empty stub
    for name in ("gather", "broadcast", "allgather", "ring_allreduce", "set_away", "payload_bytes"):
        assert getattr(type(net), name) is not getattr(LinkLayer, name)
        assert getattr(RankZeroLink, name) is not getattr(LinkLayer, name)
