"""lgc_rar_scaled against figures worked out by hand.

Node j's gradient is c_j times one shared vector g, every iteration. DGC's state is linear in the
gradient and every node then picks the same top-k positions (exact selection: sample_fraction 1),
so in the fitting window node j sends c_j g_I and the nodes' mean there is mean(c) g_I. Over
their RMS, pair j is x = g_I / rms(g_I), m = (mean(c) / c_j) x, and the least-squares scalar is
    beta = sum_j mean(c)/c_j |x|^2 / sum_j |x|^2 = mean(c) * mean(1/c),
whatever g is. In the LGC stage the mean applied at the leader's positions is beta times the
leader's values as f16 carried them, and nothing else is applied.
"""
import numpy as np
import pytest
import torch

from nodes.compression.ideal import run_exchange
from nodes.compression.registry import build_scheme

C = [1.0, 2.0, 3.0, 4.0]
N = len(C)
WINDOW = 3


def scheme():
    return build_scheme("lgc_rar_scaled", dict(ratio=0.05, warmup_iterations=0, ae_iterations=WINDOW,
                                               clip_norm=0.0, sample_fraction=1.0),
                        n_workers=N, shapes=[(400,)], payload_bytes=1400, seed=0)


def grads(it):
    g = torch.randn(400, generator=torch.Generator().manual_seed(100 + it))
    return [c * g for c in C]


def test_beta_is_the_hand_worked_least_squares_scalar():
    s = scheme()
    for it in range(WINDOW):
        assert s.stage(it) == "ae_train"
        run_exchange(s, it, grads(it))
    expected = np.mean(C) * np.mean([1 / c for c in C])   # 2.5 * 0.5208 = 1.3021
    assert len(s.pairs) == N * WINDOW
    assert s.beta() == pytest.approx(expected, rel=1e-6)


def test_the_lgc_stage_applies_beta_times_the_leaders_f16_values_and_nothing_else():
    s = scheme()
    for it in range(WINDOW):
        run_exchange(s, it, grads(it))
    it = WINDOW
    assert s.stage(it) == "lgc"
    L = s.leader_of(it)
    avg, _ = run_exchange(s, it, grads(it))
    sent = torch.nonzero(avg).reshape(-1)
    assert sent.numel() == s.k_final()
    # every node was credited with avg at the sent positions: the leader's v before that
    # credit is what it kept plus avg; the broadcast carried it as f16
    before = (s.dgc.v[L][sent] + avg[sent]).numpy().astype(np.float16).astype(np.float32)
    assert torch.allclose(avg[sent], s.beta() * torch.from_numpy(before), rtol=1e-5, atol=0)
    # ... and those are the leader's top-k positions of that v (c_L g's top-k: the same for all)
    assert set(sent.tolist()) == set(torch.topk((s.dgc.v[L] + avg).abs(), sent.numel()).indices.tolist())
