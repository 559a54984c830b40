"""Top-k and DGC: selection, error feedback, DGC's momentum correction and warm-up."""
import math

import pytest
import torch

from nodes.compression import codec
from nodes.compression.dgc import DGC, sampled_topk
from nodes.compression.ideal import run_exchange
from nodes.compression.registry import build_scheme

SHAPES = [torch.Size([40, 25]), torch.Size([1000])]  # 2000 coordinates


def make(method, **opts):
    return build_scheme(method, opts, n_workers=3, shapes=SHAPES, payload_bytes=500, seed=3)


def grads(it, n=2000, w=3):
    g = torch.Generator().manual_seed(100 + it)
    return [torch.randn(n, generator=g) for _ in range(w)]


def test_topk_sends_the_k_largest_of_grad_plus_residual():
    s = make("topk", ratio=0.05)  # k = 100
    g = grads(0)
    _, st = run_exchange(s, 0, g)
    for w in range(3):
        d = codec.decode(st.uplinks[0][w].packets)
        want = torch.topk(g[w].abs(), 100).indices
        assert set(torch.nonzero(d.mask).flatten().tolist()) == set(want.tolist())
        assert torch.equal(d.values[want], g[w][want])


@pytest.mark.parametrize("values", ["f32", "f16"])
def test_topk_error_feedback_invariant(values):
    s = make("topk", ratio=0.02, values=values)
    for it in range(4):
        old = [r.clone() if r is not None else torch.zeros(2000) for r in s.state_dict()["residuals"]]
        g = grads(it)
        _, st = run_exchange(s, it, g)
        new = s.state_dict()["residuals"]
        for w in range(3):
            sent = codec.decode(st.uplinks[0][w].packets).values
            assert torch.allclose(g[w] + old[w], sent + new[w], atol=1e-6)


def test_topk_aggregate_is_the_mean_of_what_was_sent():
    s = make("topk", ratio=0.01)
    g = grads(0)
    agg, st = run_exchange(s, 0, g)
    sent = sum(codec.decode(st.uplinks[0][w].packets).values for w in range(3)) / 3
    assert torch.allclose(agg, sent)
    # the downlink carries the union of the workers' coordinates, nothing else
    down = codec.decode(st.downlinks[0].packets)
    assert int(down.mask.sum()) == int((sent != 0).sum()) <= 3 * 20


def test_topk_bits_per_iteration_near_k_32_plus_index_bits():
    s = make("topk", ratio=0.05)
    _, st = run_exchange(s, 0, grads(0))
    k, n = 100, 2000
    for w in range(3):
        msg = st.uplinks[0][w]
        body = msg.nbits - 8 * codec.HEADER_BYTES * len(msg.packets)
        assert k * 32 < body <= k * (32 + math.ceil(math.log2(n)))


def test_sampled_topk_is_the_exact_top_k():
    x = torch.randn(200_000, generator=torch.Generator().manual_seed(0))
    for k in (1, 200, 2000):
        got = sampled_topk(x, k, 0.01, torch.Generator().manual_seed(k))
        assert set(got.tolist()) == set(torch.topk(x.abs(), k).indices.tolist())


def test_dgc_warmup_densities():
    s = make("dgc", ratio=0.001, warmup_iterations=8)
    # four stages of 2 iterations at 25%, 6.25%, 1.5625%, 0.390625% of 2000, then 0.1%
    want = [500, 500, 125, 125, 31, 31, 8, 8, 2, 2]
    sent = []
    for it in range(10):
        _, st = run_exchange(s, it, grads(it))
        sent.append(int(codec.decode(st.uplinks[0][0].packets).mask.sum()))
    assert sent == want
    assert s.stage(7) == "warmup" and s.stage(8) == "sparse"
    assert DGC.handles_momentum is True


def test_dgc_momentum_correction_and_masking_by_hand():
    m = 0.9
    s = make("dgc", ratio=0.01, warmup_iterations=0, momentum=m, clip_norm=0.0)
    u = [torch.zeros(2000) for _ in range(3)]
    v = [torch.zeros(2000) for _ in range(3)]
    for it in range(5):
        g = grads(it)
        _, st = run_exchange(s, it, g)
        state = s.state_dict()
        for w in range(3):
            u[w] = m * u[w] + g[w]
            v[w] = v[w] + u[w]
            top = torch.topk(v[w].abs(), 20).indices
            d = codec.decode(st.uplinks[0][w].packets)
            assert set(torch.nonzero(d.mask).flatten().tolist()) == set(top.tolist())
            assert torch.allclose(d.values[top], v[w][top])
            u[w][top] = 0
            v[w][top] = 0
            assert torch.allclose(state["u"][w], u[w], atol=1e-5)
            assert torch.allclose(state["v"][w], v[w], atol=1e-5)


def test_dgc_local_clipping_caps_norm_at_clip_over_sqrt_n():
    s = make("dgc", ratio=1.0, warmup_iterations=0, momentum=0.0, clip_norm=3.0)
    g = [torch.full((2000,), 10.0) for _ in range(3)]
    _, st = run_exchange(s, 0, g)
    sent = codec.decode(st.uplinks[0][1].packets).values
    assert math.isclose(float(sent.norm()), 3.0 / math.sqrt(3), rel_tol=1e-5)


def test_dgc_bad_option_named():
    with pytest.raises(ValueError, match="momentum"):
        make("dgc", momentum=1.5)
