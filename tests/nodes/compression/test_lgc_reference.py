"""LGC-PS with the reference's structure (decoders = "per_node", latent_pull): node j's credit
from node j's own decoder and innovation, traced by hand from what went on the wire; the pull
term as its closed form; and what the pull does to the latents."""
import pytest
import torch

from nodes.compression import codec
from nodes.compression.ideal import run_exchange
from nodes.compression.lgc_autoencoder import GradientAutoencoder
from nodes.compression.lgc_messages import KIND_INDICES, KIND_INNOVATION, by_kind
from nodes.compression.lgc_trainer import AETrainer
from nodes.compression.registry import build_scheme
from nodes.compression.testing import record_compensated

N, n = 3, 200


def per_node_scheme(**over):
    opts = dict(ratio=0.05, innovation_ratio=0.2, warmup_iterations=1, ae_iterations=1, ae_steps=0,
                momentum=0.0, clip_norm=0.0, latent_dtype="f32", ae_channels="4", latent_ratio=0.5,
                ae_kernel=3, decoders="per_node", **over)
    return build_scheme("lgc_ps", opts, n_workers=N, shapes=[(n,)], payload_bytes=1400, seed=0)


def set_joins(ae):
    """Node j's join ignores its decoder and outputs c_j = j + 1 plus its side input one place
    to the right: out[i] = (j + 1) + side[i + 1]."""
    with torch.no_grad():
        for j, join in enumerate(ae.joins):
            join.weight.zero_()
            join.weight[0, 1, 2] = 1.0          # kernel 3, padding 1: tap 2 reads i + 1
            join.bias.fill_(j + 1.0)


def test_each_node_is_credited_by_its_own_decoder_with_its_own_innovation():
    s = per_node_scheme()
    gen = torch.Generator().manual_seed(1)
    for it in range(2):                        # warm-up, AE training (the AE ships after it)
        run_exchange(s, it, [torch.randn(n, generator=gen) for _ in range(N)])
    assert s.stage(2) == "lgc" and s.worker_ae.nodes == N
    set_joins(s.deployed)
    set_joins(s.worker_ae)
    had = record_compensated(s)                # what each node had before it was credited
    agg, stats = run_exchange(s, 2, [torch.randn(n, generator=gen) for _ in range(N)])

    # what the wire says: the leader's positions in the AE's order, its scale, each innovation
    up = stats.uplinks[0]
    L = s.leader_of(2)
    d = codec.decode(by_kind(up[L].packets)[KIND_INDICES])
    scale = d.scalars[0]
    pos = s.read_positions(by_kind(up[L].packets)[KIND_INDICES])[0]
    assert pos.numel() == s.k_final() == 10
    innov = [codec.decode(by_kind(up[j].packets)[KIND_INNOVATION], n) for j in range(N)]
    assert all(int(i.mask.sum()) == 2 for i in innov)          # ceil(0.2 * 10)
    assert int(innov[L].mask[pos].sum()) == 2                  # the leader's own lie in I
    # and one of them informs its left neighbour through the side input (not a vacuous test)
    assert any(innov[L].mask[pos[m + 1]] and not innov[L].mask[pos[m]] for m in range(len(pos) - 1))

    total = torch.zeros(n)
    for j in range(N):
        want = torch.zeros(n)
        for m, p in enumerate(pos.tolist()):
            nxt = pos[m + 1] if m + 1 < len(pos) else None
            side = innov[j].values[nxt] / scale if nxt is not None and innov[j].mask[nxt] else 0.0
            want[p] = scale * ((j + 1) + side)
        want[innov[j].mask] = innov[j].values[innov[j].mask]   # its own innovation, exactly
        assert torch.allclose(had[j] - s.memory.residuals[j], want, atol=1e-5), j
        total += want
    assert torch.allclose(agg, total / N, atol=1e-5)


def test_the_pull_is_the_relative_spread_of_one_iterations_latents():
    ae = GradientAutoencoder([4], kernel=3, latent_ratio=0.5, seed=0)
    tr = AETrainer(ae, lr=1e-3, batch=4, buffer=16, seed=0, pull=0.5)
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))
    groups = torch.tensor([7, 7, 9, 9])
    with torch.no_grad():
        z = ae.encode(x)
        rec = float(((ae(x) - x) ** 2).mean())
        spread = sum(float(((z[a:a + 2] - z[a:a + 2].mean(0)) ** 2).sum()) for a in (0, 2))
        want = rec + 0.5 * spread / float((z ** 2).sum())
        assert float(tr.objective(x, x, None, groups)) == pytest.approx(want, rel=1e-6)
        tr.pull = 0.0
        assert float(tr.objective(x, x, None, groups)) == pytest.approx(rec, rel=1e-6)


def test_training_with_the_pull_brings_the_nodes_latents_together():
    """Eight 'nodes' per iteration: a shared profile plus each node's own noise. With the pull
    the spread of their latents (relative to their size) ends far below training without it."""
    gen = torch.Generator().manual_seed(0)
    profile = torch.linspace(2, -2, 64)

    def spread(ae, xs):
        with torch.no_grad():
            z = ae.encode(xs)
            return float(((z - z.mean(0)) ** 2).sum() / (z ** 2).sum())

    data = [[profile * (1 + 0.2 * float(torch.randn(1, generator=gen))) + torch.randn(64, generator=gen)
             for _ in range(8)] for _ in range(12)]
    held = torch.stack([profile + torch.randn(64, generator=gen) for _ in range(8)])
    out = {}
    for pull in (0.0, 1.0):
        ae = GradientAutoencoder([8, 8], kernel=5, latent_ratio=0.25, seed=0)
        tr = AETrainer(ae, lr=3e-3, batch=16, buffer=512, seed=0, pull=pull)
        for g, xs in enumerate(data):
            for x in xs:
                tr.add(x, x, group=g)
        tr.train(150)
        out[pull] = spread(ae, held)
    assert out[1.0] < 0.5 * out[0.0], out
