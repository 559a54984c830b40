"""Federated arithmetic (nodes/federated.py) against hand-worked figures: the server optimizers'
updates, FedBuff's staleness weight, uniform sampling, one local step as one SGD step."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nodes.data import load_dataset
from nodes.federated import (
    ServerOptimizer,
    local_train,
    sample_clients,
    staleness_weight,
)
from nodes.models import build_model
from nodes.workers import ShardSampler, flatten


def test_fedavg_steps_by_the_mean_pseudo_gradient():
    w = torch.tensor([1.0, 2.0])
    ServerOptimizer("fedavg", lr=0.5).step(w, torch.tensor([0.2, -0.4]))
    torch.testing.assert_close(w, torch.tensor([0.9, 2.2]))


def test_fedavgm_keeps_server_momentum():
    w, opt = torch.tensor([0.0]), ServerOptimizer("fedavgm", lr=0.1, momentum=0.5)
    opt.step(w, torch.tensor([1.0]))          # m = 1, w = -0.1
    opt.step(w, torch.tensor([2.0]))          # m = 0.5 + 2 = 2.5, w = -0.1 - 0.25
    torch.testing.assert_close(w, torch.tensor([-0.35]))


def test_fedadam_is_fedopts_update_without_bias_correction():
    w, opt = torch.tensor([0.0, 0.0]), ServerOptimizer("fedadam", lr=0.1, beta1=0.9, beta2=0.99, tau=1e-3)
    opt.step(w, torch.tensor([0.5, -2.0]))
    # m = 0.1 d = (0.05, -0.2); v = 0.01 d^2 = (0.0025, 0.04); w = -0.1 m / (sqrt(v) + tau)
    torch.testing.assert_close(w, torch.tensor([-0.1 * 0.05 / 0.051, 0.1 * 0.2 / 0.201]))


@pytest.mark.parametrize("tau,weight", [(0, 1.0), (3, 0.5), (8, 1 / 3), (15, 0.25)])
def test_staleness_weight_is_one_over_root_of_one_plus_staleness(tau, weight):
    assert staleness_weight(tau, "sqrt") == pytest.approx(weight)
    assert staleness_weight(tau, "none") == 1.0


def test_sampling_draws_distinct_clients_uniformly():
    rng = np.random.default_rng(0)
    counts = np.zeros(10)
    for _ in range(3000):
        chosen = sample_clients(rng, range(10), 3)
        assert len(set(chosen)) == 3 and chosen == sorted(chosen)
        counts[chosen] += 1
    # each client is drawn with probability 3/10: 900 expected, sd ~25
    assert np.all(np.abs(counts - 900) < 5 * 25), counts
    assert sample_clients(rng, [4, 2], 3) == [2, 4]   # fewer candidates than asked: all of them


def test_one_local_step_is_one_sgd_step_on_the_clients_batch():
    ds = load_dataset("digits", seed=0)
    torch.manual_seed(0)
    model = build_model("mlp", ds.input_shape, ds.num_classes)
    w0 = flatten(model.parameters()).clone()
    idx = torch.arange(40)
    delta, loss = local_train(model, w0, ShardSampler(idx, 8, seed=5), ds.train_x, ds.train_y,
                              steps=1, lr=0.1)
    batch = ShardSampler(idx, 8, seed=5).next()   # the same batch, drawn independently
    ref = build_model("mlp", ds.input_shape, ds.num_classes)
    torch.nn.utils.vector_to_parameters(w0, ref.parameters())
    out = F.cross_entropy(ref(ds.train_x[batch]), ds.train_y[batch])
    grad = flatten(torch.autograd.grad(out, list(ref.parameters())))
    torch.testing.assert_close(delta, 0.1 * grad, rtol=1e-5, atol=1e-7)
    assert loss == pytest.approx(float(out.detach()))
    assert math.isfinite(loss)
