"""layers.py: small layers sent whole and per-layer top-k, checked by hand on tiny vectors, then
through DGC, LGC-PS and LGC-RAR (what the wire carries and what the memory keeps)."""
import pytest
import torch

from nodes.compression import codec
from nodes.compression.ideal import run_exchange
from nodes.compression.layers import LayerSelection
from nodes.compression.lgc_messages import KIND_INNOVATION, by_kind
from nodes.compression.registry import build_scheme
from lgc_schema import OptionError

SHAPES = [(3,), (2, 5), (4,)]      # coordinates 0-2 | 3-12 | 13-16


def exact(x, k):
    return torch.topk(x.abs(), k, sorted=False).indices


def test_small_layers_are_always_selected_and_never_compete():
    sel = LayerSelection(SHAPES, dense_below=5)
    assert sel.dense.tolist() == [0, 1, 2, 13, 14, 15, 16]
    assert sel.sparse.tolist() == list(range(3, 13))
    v = torch.zeros(17)
    v[0], v[16] = 100.0, -50.0              # dense: largest, but not part of the top-k
    v[5], v[9], v[11] = -3.0, 2.0, 1.0
    assert sel.k(0.2) == 2                  # 20% of the 10 sparse coordinates
    assert sorted(sel.topk(v, 0.2, exact).tolist()) == [5, 9]
    assert sorted(sel.select(v, 0.2, exact).tolist()) == [0, 1, 2, 5, 9, 13, 14, 15, 16]


def test_per_layer_scope_gives_each_layer_its_share():
    v = torch.zeros(30)
    v[3], v[4] = 5.0, 4.0                    # layer 0 (coordinates 0-9): k = 1
    v[17], v[12], v[25] = 1.0, -0.5, 0.1     # layer 1 (10-29): k = 2
    glob = LayerSelection([(10,), (20,)], topk_scope="global")
    assert sorted(glob.select(v, 0.1, exact).tolist()) == [3, 4, 17]
    per = LayerSelection([(10,), (20,)], topk_scope="layer")
    assert per.k(0.1) == 3
    assert sorted(per.select(v, 0.1, exact).tolist()) == [3, 12, 17]


def test_off_by_default_and_a_threshold_above_every_layer_is_refused():
    sel = LayerSelection(SHAPES)
    assert sel.n_dense == 0 and sel.k(0.2) == 3          # round(0.2 * 17)
    with pytest.raises(ValueError, match=r"dense_below=11: .*allowed 0\.\.10"):
        LayerSelection(SHAPES, dense_below=11)


@pytest.mark.parametrize("method", ["dgc", "lgc_ps", "lgc_rar", "lgc_ablation"])
@pytest.mark.parametrize("key,value,allowed", [("dense_below", -1, ">= 0"),
                                               ("topk_scope", "model", "one of 'global', 'layer'")])
def test_bad_values_name_the_key(method, key, value, allowed):
    with pytest.raises(OptionError, match=rf"compression\.{key} = .*{allowed}"):
        build_scheme(method, {key: value}, n_workers=2, shapes=SHAPES, payload_bytes=1400)


def test_dgc_sends_the_small_layers_whole_and_keeps_nothing_of_them():
    s = build_scheme("dgc", dict(ratio=0.2, warmup_iterations=0, momentum=0.0, clip_norm=0.0,
                                 dense_below=5), n_workers=2, shapes=SHAPES, payload_bytes=1400)
    g = torch.arange(1.0, 18.0)              # |g| grows with the index: the top 2 sparse are 11, 12
    grads = [g, 2 * g]
    agg, stats = run_exchange(s, 0, grads)
    sent = {w: codec.decode(stats.uplinks[0][w].packets, 17) for w in range(2)}
    for w in range(2):
        assert torch.nonzero(sent[w].mask).reshape(-1).tolist() == [0, 1, 2, 11, 12, 13, 14, 15, 16]
        assert torch.equal(sent[w].values[sent[w].mask], grads[w][sent[w].mask])
        kept = s.memory.residuals[w]
        assert torch.equal(kept[sent[w].mask], torch.zeros(9))             # all of it went out
        assert torch.equal(kept[~sent[w].mask], grads[w][~sent[w].mask])   # the rest stays
    want = torch.zeros(17)
    want[sent[0].mask] = 1.5 * g[sent[0].mask]                            # mean of g and 2g
    assert torch.equal(agg, want)


def lgc(method, **over):
    opts = dict(ratio=0.2, warmup_iterations=1, ae_iterations=1, momentum=0.0, clip_norm=0.0,
                dense_below=5, **over)
    if method != "lgc_ablation":
        opts.update(ae_steps=2, latent_dtype="f32", ae_channels="4", latent_ratio=0.5)
    return build_scheme(method, opts, n_workers=2, shapes=[(3,), (40,), (4,)], payload_bytes=1400)


@pytest.mark.parametrize("method", ["lgc_ps", "lgc_ablation", "lgc_rar"])
def test_lgc_credits_the_small_layers_exactly_what_they_sent(method):
    """In every stage the 7 coordinates of the two small layers reach the aggregate as the mean
    of what the nodes had there, and only the wire's rounding stays behind (LGC-PS's innovations
    are f16; LGC-RAR's ring is f32 before the LGC stage and latent_dtype, f32 here, in it)."""
    s = lgc(method, **({} if method == "lgc_rar" else {"innovation_ratio": 0.25}))
    gen = torch.Generator().manual_seed(0)
    dense = torch.tensor([0, 1, 2, 43, 44, 45, 46])
    assert s.k_final() == 8                  # 20% of the 40 sparse coordinates
    kept = [torch.zeros(7), torch.zeros(7)]  # momentum 0: a node has its gradient + what it kept
    for it in range(4):                      # warm-up, AE training, LGC, LGC
        grads = [torch.randn(47, generator=gen) for _ in range(2)]
        agg, stats = run_exchange(s, it, grads)
        had = [g[dense] + r for g, r in zip(grads, kept)]
        f16 = s.stage(it) == "lgc" and method != "lgc_rar"   # lgc_rar: in latent_dtype, f32 here
        sent = [h.half().float() if f16 else h for h in had]
        assert torch.allclose(agg[dense], (sent[0] + sent[1]) / 2, atol=1e-6), (method, it)
        kept = [h - x for h, x in zip(had, sent)]
        for w in range(2):
            assert torch.allclose(s.memory.residuals[w][dense], kept[w], atol=1e-6)
        if method != "lgc_rar" and f16:      # the small layers travel with each node's innovation
            for w in range(2):
                d = codec.decode(by_kind(stats.uplinks[0][w].packets)[KIND_INNOVATION], 47)
                assert set(dense.tolist()) <= set(torch.nonzero(d.mask).reshape(-1).tolist())
                assert d.mask.sum() == 7 + 2   # and ceil(0.25 * 8) = 2 of the sparse layers


def test_small_layers_sent_whole_keep_their_momentum():
    """Momentum factor masking is for top-k coordinates that waited; a layer sent every
    iteration keeps u, so it trains with plain momentum SGD: m g1 + g2 on the second step (a
    masked top-k coordinate sends g2 alone)."""
    s = build_scheme("dgc", dict(ratio=0.1, warmup_iterations=0, momentum=0.5, clip_norm=0.0,
                                 dense_below=5), n_workers=1, shapes=SHAPES, payload_bytes=1400)
    g1, g2 = torch.full((17,), 0.01), torch.full((17,), 0.02)
    g1[0], g2[0] = 1.0, 3.0          # a small layer's coordinate
    g1[12], g2[12] = 5.0, 7.0        # the top-1 of the sparse layer both times
    run_exchange(s, 0, [g1])
    agg, _ = run_exchange(s, 1, [g2])
    assert float(agg[0]) == pytest.approx(0.5 * 1.0 + 3.0)
    assert float(agg[12]) == pytest.approx(7.0)
