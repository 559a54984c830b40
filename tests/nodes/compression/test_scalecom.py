"""ScaleCom's rule by hand on 3 workers: the cyclic leader's top-k positions, the mean of every
worker's memory-compensated values there, and the low-pass filtered error memory; on a ring
(all-reduce) and at a server (ps), in the ideal driver and through the loop."""
import pytest
import torch

from nodes.compression.ideal import run_exchange
from nodes.compression.registry import build_scheme

T = torch.tensor


def make(collective, beta=0.5, **opts):
    return build_scheme("scalecom", {"ratio": 1 / 3, "beta": beta, "collective": collective, **opts},
                        n_workers=3, shapes=[torch.Size([6])], payload_bytes=1400, seed=0)


# iteration 0: leader w0. |g0| = 4 1 0 3 0 2 -> top-2 positions {0, 3}
G0 = [T([4., -1., 0., 3., 0., -2.]), T([2., 5., 0., -1., 1., 0.]), T([0., 1., -2., 1., 6., 2.])]
# values at {0, 3}: w0 (4, 3), w1 (2, -1), w2 (0, 1) -> sum (6, 3), mean (2, 1)
UPDATE0 = T([2., 0., 0., 1., 0., 0.])
# memory, beta = 0.5: m = 0.5 m_old + 0.5 (m_old + g - sent) = 0.5 (g - sent) from m_old = 0
MEM0 = [T([0., -.5, 0., 0., 0., -1.]), T([0., 2.5, 0., 0., .5, 0.]), T([0., .5, -1., 0., 3., 1.])]
# iteration 1: every g = 1; h = m + 1:
#   h0 = 1 .5 1 1 1 0;  h1 = 1 3.5 1 1 1.5 1;  h2 = 1 1.5 0 1 4 2
# leader w1: top-2 of |h1| -> {1, 4} (w2's own top-2 would be {4, 5}: the leader's rule wins)
# values at {1, 4}: w0 (.5, 1), w1 (3.5, 1.5), w2 (1.5, 4) -> sum (5.5, 6.5), / 3
G1 = [torch.ones(6)] * 3
SUM1 = T([5.5, 6.5])
# memory: 0.5 m0 + 0.5 (h - sent), sent zeroes positions 1 and 4 of h
MEM1 = [T([.5, -.25, .5, .5, 0., -.5]), T([.5, 1.25, .5, .5, .25, .5]), T([.5, .25, -.5, .5, 1.5, 1.5])]


@pytest.mark.parametrize("collective,phases", [
    ("allreduce", ["Broadcast", "AllReduce"]),
    ("ps", ["Broadcast", "Uplink", "Downlink"])])
def test_three_workers_by_hand(collective, phases):
    s = make(collective)
    agg, st = run_exchange(s, 0, [g.clone() for g in G0])
    assert st.phases == phases
    assert torch.equal(agg, UPDATE0)
    for w in range(3):
        assert torch.equal(s.memory.residuals[w], MEM0[w])
    agg, st = run_exchange(s, 1, [g.clone() for g in G1])
    expected = torch.zeros(6)
    expected[[1, 4]] = SUM1 / 3
    assert torch.equal(agg, expected)
    for w in range(3):
        assert torch.equal(s.memory.residuals[w], MEM1[w])
    # the leader cycles: iteration 2's positions come from w2
    assert [s.leader_of(i) for i in range(4)] == [0, 1, 2, 0]


def test_beta_one_is_plain_error_feedback_and_a_fixed_leader_is_used_every_time():
    s = make("allreduce", beta=1.0, leader=1)
    for it in range(2):  # the pinned leader w1 chooses at iterations 0 and 1
        s.memory.residuals = [None] * 3
        agg, _ = run_exchange(s, it, [g.clone() for g in G0])
        # w1 leads: |g1| = 2 5 0 1 1 0 -> positions {0, 1}; sums 4+2+0 = 6 and -1+5+1 = 5
        assert torch.equal(agg, T([6., 5., 0., 0., 0., 0.]) / 3)
        for w in range(3):
            residual = G0[w].clone()
            residual[[0, 1]] = 0.0
            assert torch.equal(s.memory.residuals[w], residual)  # m = h - sent, nothing discounted


def test_bits_leader_indices_once_values_dense_over_k():
    s = make("allreduce")
    _, st = run_exchange(s, 0, [g.clone() for g in G0])
    # ring: 2 (N-1) chunks of ceil(2/3) = 1 f32 value per node; no index travels with the values
    assert st.bits_allreduce == {w: 8 * 2 * 2 * 1 * 4 for w in range(3)}
    assert st.bits_broadcast > 0  # the leader's positions: one small message


def test_state_dict_round_trip_continues_identically():
    a, b = make("ps"), make("ps")
    run_exchange(a, 0, [g.clone() for g in G0])
    b.load_state_dict(a.state_dict())
    x, _ = run_exchange(a, 1, [g.clone() for g in G1])
    y, _ = run_exchange(b, 1, [g.clone() for g in G1])
    assert torch.equal(x, y)


def test_bad_options_name_the_key():
    with pytest.raises(ValueError, match=r"^compression.beta = 0.0: must be a number in \(0, 1\]$"):
        make("ps", beta=0)
    with pytest.raises(ValueError, match="^compression.collective = 'allgather': must be one of "
                                         "'allreduce', 'ps'$"):
        make("allgather")
    with pytest.raises(ValueError, match=r"^compression.leader = 3: must be -1 \(cyclic\) or in \[0, 2\]$"):
        make("ps", leader=3)
