"""The vectorised fast engine and the per-packet SimPy engine agree on small cases."""
import itertools

import numpy as np
import pytest

from channels_helpers import make_net

LOSSES = [
    {"model": "none"},
    {"model": "bernoulli", "p": 0.15},
    {"model": "gilbert_elliott", "p_good_to_bad": 0.1, "p_bad_to_good": 0.3, "loss_good": 0.02, "loss_bad": 0.6},
    {"model": "fading", "fading": "rayleigh", "coherence_ms": 3.0, "rate": "mcs", "distance_m": 30.0},
    {"model": "fading", "fading": "rician", "coherence_ms": 1.0, "outage_snr_db": 27.0, "distance_m": 25.0},
]


def _same(a, b):
    assert a.end_s == pytest.approx(b.end_s, rel=1e-12, abs=1e-12)
    assert len(a.flows) == len(b.flows)
    for fa, fb in zip(a.flows, b.flows):
        assert (fa.src, fa.dst) == (fb.src, fb.dst)
        assert np.array_equal(fa.arrived, fb.arrived)
        assert np.allclose(fa.arrival_s, fb.arrival_s, rtol=1e-12, atol=1e-12, equal_nan=True)
        assert (fa.packets_sent, fa.packets_lost, fa.retransmissions, fa.bytes_on_wire) == \
               (fb.packets_sent, fb.packets_lost, fb.retransmissions, fb.bytes_on_wire)
    assert a.links.keys() == b.links.keys()
    for k in a.links:
        la, lb = a.links[k], b.links[k]
        assert (la.bytes, la.packets, la.lost, la.retransmitted, la.collisions, la.retries) == \
               (lb.bytes, lb.packets, lb.lost, lb.retransmitted, lb.collisions, lb.retries)
        assert la.busy_s == pytest.approx(lb.busy_s, rel=1e-9)
        assert la.snr_samples == lb.snr_samples
        assert la.snr_db_sum == pytest.approx(lb.snr_db_sum, rel=1e-9)


CASES = list(itertools.product(["dedicated", "shared-tdma", "shared-ofdma", "shared-csma"], range(len(LOSSES)),
                               ["reliable", "best_effort"]))


@pytest.mark.parametrize("medium,loss,delivery", CASES)
def test_gather_then_broadcast_agree(medium, loss, delivery):
    med, _, sharing = medium.partition("-")
    rng = np.random.default_rng([len(medium), loss, len(delivery)])
    sends = {f"w{i}": [int(x) for x in rng.integers(1, 1461, size=rng.integers(0, 40))] for i in range(4)}
    at = {w: float(rng.choice([0.0, 0.0, rng.uniform(0, 0.02)])) for w in sends}
    reps = []
    for engine in ("fast", "simpy"):
        net = make_net(workers=4, medium=med, sharing=sharing or "tdma", engine=engine, seed=7,
                       delivery=delivery, retry_limit=30, loss=LOSSES[loss], ack_bytes=14)
        g = net.gather(sends, "server", at=at)
        b = net.broadcast("server", list(sends), [1200] * 25, at=g.end_s)
        t = net.transfer("w1", "server", [800] * 30, at=b.end_s + 0.001)
        reps.append((g, b, t))
    for x, y in zip(*reps):
        _same(x, y)


@pytest.mark.parametrize("loss", [0, 1, 2])
def test_ring_allreduce_agrees(loss):
    reps = [make_net(topology="ring", workers=4, engine=e, seed=3, loss=LOSSES[loss])
            .ring_allreduce([f"w{i}" for i in range(4)], 50_000, at=0.5) for e in ("fast", "simpy")]
    _same(*reps)


def test_trace_agrees(tmp_path):
    tr = tmp_path / "t"
    tr.write_text("\n".join(str(x) for x in [1, 1, 2, 4, 4, 4, 7, 9, 12]) + "\n")
    reps = []
    for e in ("fast", "simpy"):
        net = make_net(trace=str(tr), engine=e, seed=1, loss={"model": "bernoulli", "p": 0.3}, retry_limit=40)
        reps.append([net.transfer("w0", "server", [1000] * 60, at=0.0),
                     net.gather({"w1": [500] * 20, "w2": [900] * 10}, "server", at={"w1": 0.003, "w2": 0.05})])
    for x, y in zip(*reps):
        _same(x, y)
