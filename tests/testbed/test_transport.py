"""The emulated transport against hand computations: an all-gather's completion time on
dedicated links and on a shared (TDMA) cell, its bit accounting, and that it is made whole
under loss; and the one drive() loop shared with the ideal transport."""
import pytest
import torch

from channels.config import validate_network
from nodes.compression.base import Message, Scheme
from nodes.compression.phases import AllGather, Downlink, ServerCompute, Uplink
from nodes.compression.transport import drive
from testbed.emulation.edge_network import build_network
from testbed.emulation.transport import EmulatedTransport

T = (1460 + 40) * 8 / 10e6     # one full packet at 10 Mbit/s: 1.2 ms
D = 5e-3                       # propagation delay


def transport(medium="dedicated", workers=3, seed=0, **link):
    table = validate_network({"topology": "star", "workers": workers, "medium": medium,
                              "link": {"bandwidth_mbps": 10.0, "delay_ms": 5.0,
                                       "delivery": "best_effort", **link}})
    t = EmulatedTransport(build_network(table, seed))
    t.begin(0, 0.0, {w: 0.0 for w in t.workers})
    return t


def full(k, fill=1):
    return Message([bytes([fill]) * 1460] * k)


@pytest.mark.parametrize("medium", ["dedicated", "shared"])
def test_allgather_completion_time_by_hand(medium):
    """3 workers, k full packets each, on a star (workers reach each other through the AP).
    Dedicated: the uplinks run in parallel (packet j at the AP at j*T + D); each AP->worker
    link then carries the other two workers' 2k packets back to back from T + D, so the last
    arrives at T + D + 2k*T + D. Shared TDMA: the cell first carries all 3k uplink packets
    (3k*T), then the AP sends each packet once to both others (multicast), 3k more back to
    back: 6k*T + D (the relayed packets are ready before the cell frees, as D < 3k*T)."""
    k, n = 5, 3
    t = transport(medium)
    got = t.carry(AllGather({w: full(k, w + 1) for w in range(n)}))
    expected = ((n - 1) * k + 1) * T + 2 * D if medium == "dedicated" else 2 * n * k * T + D
    assert t.clock == pytest.approx(expected, abs=1e-12)
    assert t.timing.uplink_s == pytest.approx(expected, abs=1e-12)
    assert got == {w: full(k, w + 1).packets for w in range(n)}


def test_allgather_bits_sender_up_receivers_down():
    t = transport()
    msgs = {0: Message([b"a" * 100]), 1: Message([b"b" * 1460, b"b" * 7]), 2: Message([b"c" * 33])}
    t.carry(AllGather(msgs))
    sizes = {f"w{w}": 8 * m.nbytes for w, m in msgs.items()}
    assert t.traffic.bits_up == sizes
    assert t.traffic.bits_down == {w: sum(sizes.values()) - sizes[w] for w in sizes}


def test_allgather_is_made_whole_on_lossy_best_effort_links():
    """30% loss on every link, best effort: every worker still gets every other worker's
    packets (the result is every message whole) because missed packets are resent."""
    k, n = 20, 3
    t = transport(loss={"model": "bernoulli", "p": 0.3}, seed=4)
    msgs = {w: full(k, w + 1) for w in range(n)}
    got = t.carry(AllGather(msgs))
    assert got == {w: m.packets for w, m in msgs.items()}
    links = t.traffic.links
    assert sum(r["lost"] for r in links.values()) > 0
    # without resends the AP would send each worker 2k relayed packets; it sent more
    down = {w: links[("server", f"w{w}")]["packets"] for w in range(n)}
    assert all(p > (n - 1) * k for p in down.values()), down


class _Toy(Scheme):
    name = "toy"

    def exchange(self, iteration, grads):
        got = yield Uplink({w: Message([b"x" * 1460] * 2) for w in range(self.n_workers)})
        yield ServerCompute(0.5)
        yield Downlink(Message([b"y" * 1460]))
        return torch.zeros(1) + sum(len(p) for p in got.values())


def test_drive_charges_phases_to_the_split_of_the_iteration():
    """Uplink: 2 packets per worker on its own link (2T + D); the server computes 0.5 s;
    the downlink: 1 packet to each worker on its own link (T + D)."""
    t = transport(workers=2)
    agg = drive(_Toy(n_workers=2, shapes=[torch.Size([1])], payload_bytes=1460), 0,
                [torch.zeros(1)] * 2, t)
    assert agg.item() == 4
    assert t.timing.uplink_s == pytest.approx(2 * T + D)
    assert t.timing.aggregation_s == pytest.approx(0.5)
    assert t.timing.downlink_s == pytest.approx(T + D)
    assert t.clock == pytest.approx(3 * T + 2 * D + 0.5)
    assert t.traffic.bits_down == {"w0": 8 * 1460, "w1": 8 * 1460}


def test_unknown_phase_is_refused():
    t = transport()
    with pytest.raises(TypeError, match="yielded 'hello'"):
        t.carry("hello")
