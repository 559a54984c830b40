"""Deadlines and device traces on the collectives without a server, against hand figures.

A ring cannot finish without each of its nodes, so it is formed over the round's members (the
present workers whose compute ended before the deadline), at the deadline if someone is still
computing then; a present worker left off it is handed the result afterwards. An all-gather
runs from each member's compute end to every present node, and a message not yet whole
everywhere at the deadline is left out by every node. Left-out workers keep in their error
memory all they had. Routes go around an away worker where the topology allows."""
import math

import numpy as np
import pytest
import torch

from channels.config import validate_network
from nodes.compression.base import Message
from nodes.compression.memory import memories
from nodes.compression.phases import AllGather, AllReduce, Broadcast, Members
from nodes.compression.templates import leader_among
from testbed.configuration.loading import load_config
from testbed.emulation.edge_network import build_network
from testbed.emulation.transport import EmulatedTransport
from testbed.errors import TransportError
from testbed.experiment import Experiment
from testbed.records.store import Store
from tests.testbed.test_deadlines import SLOW, Recorder, experiment_file, trace_file

T = (1460 + 40) * 8 / 10e6   # one full packet (1460 B payload + 40 B header) at 10 Mbit/s
D = 1e-3                     # propagation delay


def transport(topology, workers=4, **link):
    table = validate_network({"topology": topology, "workers": workers, "medium": "dedicated",
                              "link": {"bandwidth_mbps": 10.0, "delay_ms": D * 1e3, **link}})
    return EmulatedTransport(build_network(table, 0))


def buffers(members, values_per_node):
    return {w: np.full(values_per_node, w + 1, dtype="<f4").tobytes() for w in members}


# ------------------------------------------------------------------ ring all-reduce, by hand

def test_a_ring_forms_at_the_deadline_without_the_straggler():
    """Mesh (every pair adjacent), dedicated links. w0..w2 are ready at 1 ms, w3 computes until
    1 s, the deadline is 0.5 s. The ring is formed at the deadline over w0, w1, w2 and carries
    3 x 2 full packets of f32: each of its 2(3-1) = 4 steps moves one 2-packet chunk per link,
    2T + D, so it ends at 0.5 + 4(2T + D). Then w2 (the member before w3) sends w3 the result,
    6 packets back to back: 6T + D more, as downlink time. The sum is w0 + w1 + w2's."""
    t = transport("mesh")
    t.begin(0, 0.0, {"w0": 1e-3, "w1": 1e-3, "w2": 1e-3, "w3": 1.0}, deadline=0.5)
    members = t.carry(Members(4))
    assert members == [0, 1, 2] and t.left_out == {"w3": "deadline"}
    total = t.carry(AllReduce(buffers(members, 3 * 2 * 1460 // 4)))
    assert torch.equal(total, torch.full((3 * 2 * 1460 // 4,), 1.0 + 2 + 3))
    ring_end = 0.5 + 4 * (2 * T + D)
    assert t.clock == pytest.approx(ring_end + 6 * T + D, abs=1e-12)
    assert t.timing.compute_s == pytest.approx(1e-3)            # the members' compute
    assert t.timing.uplink_s == pytest.approx(ring_end - 1e-3)   # the wait for the deadline included
    assert t.timing.downlink_s == pytest.approx(6 * T + D)
    chunk_bits = 8 * 2 * 1460
    assert t.traffic.bits_up == {"w0": 4 * chunk_bits, "w1": 4 * chunk_bits,
                                 "w2": 4 * chunk_bits + 3 * chunk_bits}   # + the hand-over
    assert t.traffic.bits_down == {"w3": 3 * chunk_bits}


def test_a_ring_without_an_away_worker_starts_when_its_members_are_ready():
    """w3 is away (device trace), nobody is still computing: no wait for the deadline, no
    hand-over (an away worker receives nothing). 3 members ready at 1 ms: 1 ms + 4(2T + D)."""
    t = transport("mesh")
    t.begin(0, 0.0, {w: 1e-3 for w in ("w0", "w1", "w2", "w3")}, present=["w0", "w1", "w2"],
            deadline=0.5)
    members = t.carry(Members(4))
    t.carry(AllReduce(buffers(members, 3 * 2 * 1460 // 4)))
    assert t.left_out == {"w3": "unavailable"}
    assert t.clock == pytest.approx(1e-3 + 4 * (2 * T + D), abs=1e-12)
    assert "w3" not in t.traffic.bits_up and "w3" not in t.traffic.bits_down


def test_a_ring_over_anyone_but_the_members_is_refused():
    t = transport("mesh")
    t.begin(0, 0.0, {"w0": 0.0, "w1": 0.0, "w2": 0.0, "w3": 1.0}, deadline=0.5)
    with pytest.raises(TransportError, match=r"ring all-reduce over w0, w1, w2, w3, but the members .* w0, w1, w2"):
        t.carry(AllReduce(buffers(range(4), 8)))
    with pytest.raises(TransportError, match=r"a broadcast from w3, which takes no part .*deadline"):
        t.carry(Broadcast(3, Message([b"x" * 10])))


def test_an_empty_ring_closes_at_the_deadline():
    t = transport("mesh")
    t.begin(0, 0.0, {w: 1.0 for w in ("w0", "w1", "w2", "w3")}, deadline=0.5)
    assert t.carry(Members(4)) == []
    assert t.carry(AllReduce({})) is None
    assert t.clock == 0.5 and t.timing.uplink_s == 0.5 and t.traffic.bits_up == {}


# ------------------------------------------------------------------ all-gather, by hand

def test_an_all_gather_leaves_out_a_message_still_on_its_way_at_the_deadline():
    """Star, dedicated links, one full packet per worker. w0 and w1 are ready at 0: their
    packets are at the AP at T + D and everywhere by 3T + 2D (the AP->w2 link sends both).
    w2 is ready at 10 ms (before the deadline): its packet is at the AP at 10 ms + T + D and
    at w0, w1 at 10 ms + 2T + 2D. The deadline at 10 ms + T + D finds it on the way: every
    node leaves it out, its bits count, the exchange closes at the deadline."""
    t = transport("star", workers=3)
    t2 = 0.010
    deadline = t2 + T + D
    t.begin(0, 0.0, {"w0": 0.0, "w1": 0.0, "w2": t2}, deadline=deadline)
    got = t.carry(AllGather({w: Message([bytes([w]) * 1460]) for w in range(3)}))
    assert sorted(got) == [0, 1] and t.left_out == {"w2": "deadline"}
    assert t.clock == pytest.approx(deadline, abs=1e-12)
    assert t.timing.compute_s == pytest.approx(t2) and t.timing.uplink_s == pytest.approx(T + D)
    bits = 8 * 1460
    assert t.traffic.bits_up == {"w0": bits, "w1": bits, "w2": bits}
    assert t.traffic.bits_down == {"w0": 2 * bits, "w1": 2 * bits, "w2": 2 * bits}


def test_an_all_gather_straggler_still_computing_sends_nothing_but_receives():
    """w2 computes until 0.8 s, past the 0.5 s deadline: it sends nothing, still receives
    w0's and w1's packets, and the nodes wait for the deadline before they go on."""
    t = transport("star", workers=3)
    t.begin(0, 0.0, {"w0": 0.0, "w1": 0.0, "w2": 0.8}, deadline=0.5)
    got = t.carry(AllGather({w: Message([bytes([w]) * 1460]) for w in range(3)}))
    assert sorted(got) == [0, 1] and t.left_out == {"w2": "deadline"}
    assert t.clock == 0.5 and t.timing.uplink_s == 0.5
    bits = 8 * 1460
    assert t.traffic.bits_up == {"w0": bits, "w1": bits}
    assert t.traffic.bits_down == {"w0": bits, "w1": bits, "w2": 2 * bits}


def test_what_a_lossy_all_gather_resends_goes_out_at_once_not_after_the_straggler():
    """Best effort, 30% loss: w0's and w1's lost packets are resent as soon as their first
    spread ends (a few ms), not when w2, a receiver still computing, would have been ready
    (0.8 s): both are whole long before the 0.5 s deadline."""
    t = transport("star", workers=3, delivery="best_effort", loss={"model": "bernoulli", "p": 0.3})
    t.begin(0, 0.0, {"w0": 0.0, "w1": 0.0, "w2": 0.8}, deadline=0.5)
    got = t.carry(AllGather({w: Message([bytes([w]) * 1460] * 5) for w in range(3)}))
    assert sum(row["lost"] for row in t.traffic.links.values()) > 0   # there was something to resend
    assert sorted(got) == [0, 1] and t.left_out == {"w2": "deadline"}


def test_alone_a_node_sends_nothing():
    """Every other worker away: a leader's broadcast and an all-gather reach nobody, so they
    put nothing on the air and count no bits."""
    t = transport("mesh")
    t.begin(0, 0.0, {w: 1e-3 for w in ("w0", "w1", "w2", "w3")}, present=["w2"])
    message = Message([b"x" * 1460] * 3)
    assert t.carry(Broadcast(2, message)) == message.packets
    assert t.carry(AllGather({w: message for w in range(4)})) == {2: message.packets}
    assert t.traffic.bits_up == {} and t.traffic.bits_down == {} and t.traffic.links == {}


def test_the_leader_is_the_next_member_when_the_preferred_one_is_out():
    assert leader_among([0, 1, 3], 2, 4) == 3
    assert leader_among([0, 1], 2, 4) == 0       # cyclic
    assert leader_among([2], 2, 4) == 2
    assert leader_among([], 1, 4) is None


# ------------------------------------------------------------------ in a run

def test_a_device_trace_removes_a_worker_for_ten_iterations_on_a_ring(tmp_path):
    """Dense ring all-reduce (method none) on a mesh. w1 is away from iteration 3 to 12: in
    those iterations it sends and receives nothing, the others each send 2(3-1) chunks of
    ceil(n/3) f32 values instead of 2(4-1) chunks of ceil(n/4), and the aggregate is the mean
    of w0, w2, w3's gradients; elsewhere every worker takes part."""
    # an iteration lasts `full` with 4 workers on the ring and `three` with 3 (measured by two
    # short runs), so iteration i of the traced run starts at 3 full + (i - 3) three for
    # i in 3..13; the trace's interval ends fall midway between starts
    path = experiment_file(tmp_path, iterations=16, options='collective = "allreduce"', topology="mesh")
    runs = [Recorder(path, tmp_path / "a.db", ["run.iterations=1"]),
            Recorder(path, tmp_path / "b.db", ["run.iterations=1", "run.device_trace="
                                               f"{trace_file(tmp_path, {'w1': {'available': []}})}"])]
    full, three = (r.iterations()[0]["virtual_time_s"] for r in runs)
    for r in runs:
        r.store.close()
    assert three < full
    away = range(3, 13)
    trace = trace_file(tmp_path, {"w1": {"available": [[0, 2.5 * full], [3 * full + 9.5 * three, None]]}})
    rec = Recorder(path, tmp_path / "c.db", [f"run.device_trace={trace}"])
    n = sum(p.numel() for p in rec.exp.driver.model.parameters())
    ring_bits = {m: 8 * 2 * (m - 1) * math.ceil(n / m) * 4 for m in (3, 4)}
    rows, nodes = rec.iterations(), rec.nodes()
    for it in range(16):
        present = [0, 2, 3] if it in away else [0, 1, 2, 3]
        assert rows[it]["left_out"] == 4 - len(present)
        w1 = nodes[it]["w1"]
        if it in away:
            assert (w1["bits_up"], w1["bits_down"], w1["left_out"]) == (0, 0, "unavailable")
        else:
            assert (w1["bits_up"], w1["left_out"]) == (ring_bits[4], None)
        for w in present:
            assert nodes[it][f"w{w}"]["bits_up"] == ring_bits[len(present)]
        assert rows[it]["bits_up"] == len(present) * ring_bits[len(present)]
        expected = torch.stack([rec.grads[it][w] for w in present]).mean(0)
        torch.testing.assert_close(rec.aggs[it], expected, rtol=1e-6, atol=1e-7)
    rec.store.close()


# method, options, how to read what a worker had from its gradient (memories start at zero)
LEFT_OUT = {
    "randomk": ('collective = "allreduce"\nratio = 0.1', None),
    "powersgd": ('collective = "allreduce"', None),
    "scalecom": ('collective = "allreduce"\nratio = 0.05', None),
    "lgc_rar": ("ratio = 0.05\nwarmup_iterations = 5", "dgc"),    # DGC's warm-up: v = clipped g
    "topk": ('collective = "allgather"\nratio = 0.05', None),
    "dgc": ('collective = "allgather"\nratio = 0.05\nwarmup_iterations = 0', "self"),
}


def _had(scheme, how, g):
    if how == "self":
        return scheme.clip(g)
    if how == "dgc":
        return scheme.dgc.clip(g)
    return g


@pytest.mark.parametrize("method", list(LEFT_OUT))
def test_a_straggler_left_out_keeps_all_it_had(tmp_path, method):
    """First iteration on a mesh, w3 computes 1000x slower and the deadline falls between:
    on a ring it is formed without w3, in an all-gather w3 sends nothing. w3's memory keeps
    exactly its whole (clipped) gradient; it gets the same aggregate as the others."""
    options, how = LEFT_OUT[method]
    nodes = f'[network.nodes.w3]\ncompute_speed = {SLOW}'
    path = experiment_file(tmp_path, method=method, options=options, nodes=nodes, iterations=1,
                           topology="mesh")
    probe = Experiment(load_config(path), Store(tmp_path / "p.db"))
    fast = probe.driver.step_flops / 20e9
    deadline = (fast + fast / SLOW) / 2
    rec = Recorder(path, tmp_path / "s.db", [f"run.deadline_s={deadline!r}"])
    assert [r["left_out"] for r in rec.nodes()[0].values()] == [None, None, None, "deadline"]
    assert rec.nodes()[0]["w3"]["bits_up"] == 0
    (memory,) = memories(rec.exp.driver.scheme)
    had = _had(rec.exp.driver.scheme, how, rec.grads[0][3].reshape(-1).float())
    torch.testing.assert_close(memory.residuals[3], had, rtol=0, atol=0)
    if how is not None:  # DGC's momentum is kept too
        torch.testing.assert_close(memory.u[3], had, rtol=0, atol=0)
    for w in range(3):  # the members sent part of what they had and kept the rest
        g = _had(rec.exp.driver.scheme, how, rec.grads[0][w].reshape(-1).float())
        assert not torch.equal(memory.residuals[w], g)
    rec.store.close()


def test_a_round_nobody_makes_closes_at_the_deadline_and_everyone_keeps_all(tmp_path):
    """PowerSGD on a ring, the deadline before anyone's compute ends: no ring, a zero
    aggregate, the iteration lasts the deadline, every memory keeps the whole gradient and the
    warm-start Q stays as it was (a zero Q would never leave zero)."""
    path = experiment_file(tmp_path, method="powersgd", options='collective = "allreduce"',
                           iterations=1, topology="mesh")
    probe = Experiment(load_config(path), Store(tmp_path / "p.db"))
    deadline = probe.driver.step_flops / 20e9 / 2
    q0 = [q.clone() for q in probe.driver.scheme.q]
    rec = Recorder(path, tmp_path / "s.db", [f"run.deadline_s={deadline!r}"])
    row = rec.iterations()[0]
    assert row["left_out"] == 4 and row["bits_up"] == 0 and row["bits_down"] == 0
    assert row["virtual_time_s"] == pytest.approx(deadline) and row["uplink_s"] == pytest.approx(deadline)
    assert not torch.any(rec.aggs[0])
    (memory,) = memories(rec.exp.driver.scheme)
    for w in range(4):
        torch.testing.assert_close(memory.residuals[w], rec.grads[0][w].reshape(-1).float(), rtol=0, atol=0)
    assert all(torch.equal(a, b) for a, b in zip(rec.exp.driver.scheme.q, q0))
    rec.store.close()


def test_a_ring_re_formed_without_an_away_worker_routes_around_it():
    """Ring topology w0-w1-w2-w3-w0, w2 away: the ring is w0 -> w1 -> w3 -> w0, and the hop
    w1 -> w3 (two hops either way round) goes through w0, not through w2. Each of the 2(3-1)
    = 4 steps moves one 2-packet chunk w1 -> w0 -> w3: 8 packets on each of those links, and
    none on a link of w2."""
    t = transport("ring")
    t.begin(0, 0.0, {w: 0.0 for w in ("w0", "w1", "w2", "w3")}, present=["w0", "w1", "w3"])
    members = t.carry(Members(4))
    t.carry(AllReduce(buffers(members, 3 * 2 * 1460 // 4)))
    assert not [link for link in t.traffic.links if "w2" in link]
    assert t.traffic.links[("w1", "w0")]["packets"] == 4 * 2
    assert t.traffic.links[("w0", "w3")]["packets"] == 4 * 2
    t.begin(1, t.clock, {w: t.clock for w in ("w0", "w1", "w2", "w3")})  # w2 back: routes as before
    assert t.edge_network.network.path("w1", "w3") in (["w1", "w2", "w3"], ["w1", "w0", "w3"])
    assert t.edge_network.network.path("w1", "w2") == ["w1", "w2"]
    # with no way around (w1 and w3 both away), w0 -> w2 still goes through one of them
    t.edge_network.network.set_away(["w1", "w3"])
    assert len(t.edge_network.network.path("w0", "w2")) == 3
