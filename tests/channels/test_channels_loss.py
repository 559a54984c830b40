"""Loss processes and delivery, against closed forms worked out in each test."""
import math

import numpy as np
import pytest

from channels.errors import DeliveryError
from channels.loss import GilbertElliott
from channels_helpers import make_net


def test_reliable_bernoulli_mean_time_matches_geometric_retries():
    # One packet; each try takes s; a loss is known rto = 2d + margin after the try ends.
    # K ~ Geometric(1-p) tries: T = K s + (K-1) rto + d, E[T] = s/(1-p) + rto p/(1-p) + d.
    p, s, d, margin = 0.3, 1500 * 8 / 10e6, 0.005, 0.001
    rto = 2 * d + margin
    times = []
    for seed in range(400):
        net = make_net(seed=seed, delivery="reliable", retry_limit=60, rto_margin_ms=1.0,
                       loss={"model": "bernoulli", "p": p})
        times.append(net.transfer("w0", "server", [1460], at=0.0).end_s)
    times = np.array(times)
    expected = s / (1 - p) + rto * p / (1 - p) + d
    se = times.std(ddof=1) / math.sqrt(times.size)
    assert abs(times.mean() - expected) < 3 * se


def test_reliable_bernoulli_transmissions_are_geometric():
    # 2000 packets: transmissions per packet ~ Geometric(1-p), mean 1/(1-p), var p/(1-p)^2.
    p, n = 0.2, 2000
    net = make_net(seed=3, delivery="reliable", retry_limit=50, loss={"model": "bernoulli", "p": p})
    f = net.transfer("w0", "server", [1460] * n, at=0.0).flows[0]
    assert f.arrived.all()
    se = math.sqrt(n * p / (1 - p) ** 2)
    assert abs(f.packets_sent - n / (1 - p)) < 3 * se
    assert f.retransmissions == f.packets_sent - n


def test_best_effort_bernoulli_reports_exactly_what_arrived():
    p, n = 0.25, 4000
    net = make_net(seed=5, delivery="best_effort", loss={"model": "bernoulli", "p": p})
    f = net.transfer("w0", "server", [1000] * n, at=0.0).flows[0]
    assert f.packets_sent == n and f.retransmissions == 0
    assert np.isnan(f.arrival_s[~f.arrived]).all() and np.isfinite(f.arrival_s[f.arrived]).all()
    assert f.packets_lost == (~f.arrived).sum()
    assert abs((~f.arrived).mean() - p) < 3 * math.sqrt(p * (1 - p) / n)


def test_full_loss_best_effort_loses_everything():
    net = make_net(delivery="best_effort", loss={"model": "bernoulli", "p": 1.0})
    rep = net.transfer("w0", "server", [1460] * 7, at=0.0)
    f = rep.flows[0]
    assert not f.arrived.any() and f.packets_lost == 7 and rep.lost_fraction == 1.0
    assert rep.end_s == pytest.approx(7 * 1.2e-3 + 0.005)


@pytest.mark.timeout(20)
def test_full_loss_reliable_gives_up_after_retry_limit():
    net = make_net(delivery="reliable", retry_limit=3, loss={"model": "bernoulli", "p": 1.0})
    with pytest.raises(DeliveryError, match=r"after 4 transmissions"):
        net.transfer("w0", "server", [1460] * 50, at=0.0)
    net = make_net(delivery="reliable", retry_limit=2, engine="simpy", loss={"model": "bernoulli", "p": 1.0})
    with pytest.raises(DeliveryError, match="retry_limit"):
        net.transfer("w0", "server", [1460] * 5, at=0.0)


def test_gilbert_elliott_long_run_loss_is_stationary_value():
    pgb, pbg, lg, lb = 0.02, 0.2, 0.01, 0.6
    stationary = (pbg * lg + pgb * lb) / (pgb + pbg)          # = 0.0636...
    ge = GilbertElliott(pgb, pbg, lg, lb, seed=11)
    n = 400_000
    lost = np.concatenate([ge.draw(np.zeros(n // 4)) for _ in range(4)])
    # losses are correlated: bound by the batch-means standard error
    batches = lost.reshape(400, -1).mean(axis=1)
    se = batches.std(ddof=1) / math.sqrt(batches.size)
    assert abs(lost.mean() - stationary) < 3 * se
    # bursts: P(loss | previous loss) is well above the mean
    assert lost[1:][lost[:-1]].mean() > 2 * stationary


def test_gilbert_elliott_through_a_link():
    loss = {"model": "gilbert_elliott", "p_good_to_bad": 0.05, "p_bad_to_good": 0.25,
            "loss_good": 0.0, "loss_bad": 0.5}
    stationary = 0.05 * 0.5 / 0.30
    net = make_net(seed=2, delivery="best_effort", loss=loss, bandwidth_mbps=100.0)
    f = net.transfer("w0", "server", [1460] * 60000, at=0.0).flows[0]
    batches = (~f.arrived).reshape(200, -1).mean(axis=1)
    se = batches.std(ddof=1) / math.sqrt(batches.size)
    assert abs(batches.mean() - stationary) < 3 * se


def test_draws_do_not_depend_on_chunking():
    a = GilbertElliott(0.1, 0.3, 0.05, 0.7, seed=4)
    b = GilbertElliott(0.1, 0.3, 0.05, 0.7, seed=4)
    whole = a.draw(np.zeros(10000))
    parts = np.concatenate([b.draw(np.zeros(k)) for k in [1, 7, 4096, 1, 5000, 895]])
    assert np.array_equal(whole, parts)


def test_same_seed_same_report():
    kw = dict(workers=4, medium="shared", delivery="reliable", loss={"model": "bernoulli", "p": 0.1})
    r = [make_net(seed=9, **kw).gather({f"w{i}": [1460] * 200 for i in range(4)}, "server", at=0.0) for _ in range(2)]
    assert r[0].end_s == r[1].end_s
    assert all(np.array_equal(a.arrival_s, b.arrival_s, equal_nan=True) for a, b in zip(r[0].flows, r[1].flows))
    r2 = make_net(seed=10, **kw).gather({f"w{i}": [1460] * 200 for i in range(4)}, "server", at=0.0)
    assert r2.end_s != r[0].end_s
