"""ring_sum on real bytes (f16 rounding hop by hop) and the ideal driver's accounting."""
import numpy as np
import pytest
import torch

from nodes.compression import codec
from nodes.compression.base import Message, Scheme
from nodes.compression.ideal import run_exchange
from nodes.compression.phases import AllReduce, Broadcast, Downlink, ServerCompute, Uplink
from nodes.compression.ring import allreduce_bytes_per_node, ring_chunks, ring_sum


def test_chunks_cover_the_vector():
    assert ring_chunks(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]


def test_f32_ring_sums_exactly_small_integers():
    vecs = [np.arange(10, dtype="<f4") * (i + 1) for i in range(4)]
    out = ring_sum([v.tobytes() for v in vecs], "f32")
    assert out.dtype == torch.float32
    assert out.tolist() == (np.arange(10) * 10).tolist()


def test_f16_rounds_at_every_hop():
    # node 0 holds 2048 everywhere, the others 1; f16 spacing at 2048 is 2 (ties to even).
    # chunk c starts at node c and visits c+1, c+2, c+3:
    #   c=0: 2048 +1 -> 2048 +1 -> 2048 +1 -> 2048
    #   c=1: 1+1=2, +1=3, +2048=2051 -> 2052
    #   c=2: 1+1=2, +2048=2050, +1=2051 -> 2052
    #   c=3: 1+2048=2049 -> 2048, +1 -> 2048, +1 -> 2048
    vecs = [np.full(4, 2048.0 if i == 0 else 1.0, dtype="<f2") for i in range(4)]
    assert ring_sum([v.tobytes() for v in vecs], "f16").tolist() == [2048.0, 2052.0, 2052.0, 2048.0]


def test_ring_bad_input():
    with pytest.raises(ValueError, match="'f64' not allowed"):
        ring_sum([b"\0" * 4], "f64")
    with pytest.raises(ValueError, match="one length"):
        ring_sum([b"\0" * 4, b"\0" * 8], "f32")


def test_allreduce_bytes_per_node():
    # 10 floats over 4 nodes: largest chunk 3 floats, 2 x 3 steps
    assert allreduce_bytes_per_node(40, 4, 4) == 2 * 3 * 3 * 4
    assert allreduce_bytes_per_node(40, 1, 4) == 0


class _Toy(Scheme):
    """A hand-written protocol exercising every phase the driver knows."""
    name = "toy"

    def exchange(self, iteration, grads):
        arrived = yield Uplink({w: codec.encode_dense(g, payload_bytes=130, iteration=iteration)
                                for w, g in enumerate(grads)})
        self.arrived = arrived
        yield ServerCompute(0.25)
        total = yield AllReduce({w: g.numpy().astype("<f4").tobytes() for w, g in enumerate(grads)})
        yield Broadcast(0, Message([b"x" * 10]))
        yield Downlink(Message([b"y" * 7, b"z" * 3]))
        return total / len(grads)


def test_ideal_driver_accounting_and_loss_callback():
    grads = [torch.arange(100, dtype=torch.float32) + w for w in range(4)]
    s = _Toy(n_workers=4, shapes=[torch.Size([100])], payload_bytes=130)
    agg, st = run_exchange(s, 3, grads, deliver=lambda w, p: p[1:] if w == 2 else p)
    # 100 floats at (130 - 30) / 4 = 25 per packet: 4 packets of 130 bytes per worker
    assert st.bits_up == {w: 8 * 4 * 130 for w in range(4)}
    assert st.packets_up == 16 and st.packets_lost == 1
    assert len(s.arrived[2]) == 3 and len(s.arrived[1]) == 4
    assert st.bits_allreduce == {w: 8 * 2 * 3 * 25 * 4 for w in range(4)}
    assert st.bits_broadcast == 80 and st.bits_down == 80 and st.compute_s == 0.25
    assert st.phases == ["Uplink", "ServerCompute", "AllReduce", "Broadcast", "Downlink"]
    assert torch.equal(agg, torch.arange(100, dtype=torch.float32) + 1.5)
    assert len(st.wall_s) == 6


def test_driver_refuses_non_phases():
    class Bad(Scheme):
        def exchange(self, iteration, grads):
            yield "hello"
            return torch.zeros(1)
    with pytest.raises(TypeError, match="yielded 'hello'"):
        run_exchange(Bad(n_workers=1, shapes=[torch.Size([1])], payload_bytes=100), 0, [torch.zeros(1)])
