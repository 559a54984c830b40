"""The worker pool: gradients against plain autograd, vmap == sequential, seeded epoch-wise
batches, epoch bookkeeping, evaluation by hand, device resolution, and one short training run
of the small CNN on digits with 4 workers averaging plain gradients."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nodes.data import load_dataset
from nodes.device import resolve_device
from nodes.models import build_model
from nodes.partition import split
from nodes.workers import (ShardSampler, WorkerPool, assign, evaluate, flatten, param_shapes,
                           set_gradients, unflatten)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", seed=0)


def _cnn(seed=0):
    torch.manual_seed(seed)
    return build_model("cnn", (1, 8, 8), 10)


# --------------------------------------------------------------------------- flat vectors
def test_flatten_unflatten_round_trip_and_assign():
    model = _cnn()
    flat = flatten(model.parameters())
    assert flat.dtype == torch.float32 and flat.numel() == 29066
    back = unflatten(flat, param_shapes(model))
    assert all(torch.equal(a, b) for a, b in zip(back, model.parameters()))
    other = _cnn(seed=1)
    assign(other, flat)
    assert torch.equal(flatten(other.parameters()), flat)
    with pytest.raises(ValueError, match="does not hold 29066"):
        unflatten(flat[:-1], param_shapes(model))



def test_set_gradients_gives_each_parameter_its_own_copy_of_its_slice():
    model = _cnn()
    agg = torch.arange(29066, dtype=torch.float32)
    set_gradients(model, agg)
    grads = [p.grad for p in model.parameters()]
    assert torch.equal(flatten(grads), agg)
    agg.zero_()                                            # a copy: the step sees the old values
    assert grads[-1].flatten()[-1].item() == 29065.0
    with pytest.raises(ValueError, match="does not hold 29066"):
        set_gradients(model, agg[:-1])

# -------------------------------------------------------------------------------- sampling
def test_sampler_covers_the_shard_once_per_epoch_then_reshuffles():
    shard = torch.arange(100, 145)                       # 45 samples, batch 10: tail of 5 dropped
    s = ShardSampler(shard, 10, seed=3)
    epoch0 = [s.next() for _ in range(4)]
    seen = torch.cat(epoch0)
    assert len(torch.unique(seen)) == 40 and set(seen.tolist()) <= set(shard.tolist())
    assert s.epoch == 0
    first_of_epoch1 = s.next()
    assert s.epoch == 1 and len(first_of_epoch1) == 10
    again = ShardSampler(shard, 10, seed=3)
    assert all(torch.equal(again.next(), b) for b in epoch0)
    assert not torch.equal(ShardSampler(shard, 10, seed=4).next(), epoch0[0])


def test_small_shards_are_used_whole():
    s = ShardSampler(torch.tensor([7, 8, 9]), 32, seed=0)
    assert sorted(s.next().tolist()) == [7, 8, 9]


def test_iterations_per_epoch(digits):
    shards = [torch.arange(i * 100, (i + 1) * 100) for i in range(4)]
    pool = WorkerPool(_cnn(), digits.train_x, digits.train_y, shards, batch_size=10, seed=0)
    assert pool.iterations_per_epoch == 10           # 400 samples / (4 workers x 10)
    for _ in range(25):
        pool.gradients()
    assert pool.epoch() == 2.5 and pool.epoch(40) == 4.0
    assert all(s.epoch == 2 for s in pool.samplers)


# ------------------------------------------------------------------------------- gradients
def test_sequential_gradient_is_the_mean_loss_gradient_of_the_shard(digits):
    # A shard of exactly batch_size samples: the batch is the whole shard (in some order), so
    # the gradient must equal plain autograd on those samples.
    model = _cnn()
    shards = [torch.arange(0, 16), torch.arange(16, 32)]
    pool = WorkerPool(model, digits.train_x, digits.train_y, shards, 16, seed=0, mode="sequential")
    grads, losses = pool.gradients()
    for shard, g, loss in zip(shards, grads, losses):
        model.zero_grad()
        ref = F.cross_entropy(model(digits.train_x[shard]), digits.train_y[shard])
        ref.backward()
        assert torch.allclose(g, flatten(p.grad for p in model.parameters()), atol=1e-6)
        assert abs(loss - float(ref.detach())) < 1e-5
        assert g.dtype == torch.float32 and g.shape == (29066,)


@pytest.mark.parametrize("name,shape", [("cnn", (1, 8, 8)), ("mlp", (1, 8, 8))])
def test_vmap_gives_the_same_gradients_as_sequential(digits, name, shape):
    torch.manual_seed(0)
    model = build_model(name, shape, 10)
    # unequal shards, two smaller than the batch: vmap pads them and masks the padding out
    shards = [torch.arange(0, 5), torch.arange(5, 45), torch.arange(45, 300), torch.arange(300, 311)]
    seq = WorkerPool(model, digits.train_x, digits.train_y, shards, 16, seed=2, mode="sequential")
    vec = WorkerPool(model, digits.train_x, digits.train_y, shards, 16, seed=2, mode="vmap")
    assert vec.mode == "vmap"
    for _ in range(3):
        gs, ls = seq.gradients()
        gv, lv = vec.gradients()
        for a, b in zip(gs, gv):
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
        assert max(abs(x - y) for x, y in zip(ls, lv)) < 1e-5


def test_gradients_at_given_params_leave_the_model_alone(digits):
    model = _cnn()
    before = flatten(model.parameters())
    shards = split(digits.train_y, 2, "iid", seed=0)
    other = flatten(_cnn(seed=9).parameters())
    a = WorkerPool(model, digits.train_x, digits.train_y, shards, 8, seed=1)
    b = WorkerPool(model, digits.train_x, digits.train_y, shards, 8, seed=1)
    ga, _ = a.gradients(other)                                   # one flat vector
    gb, _ = b.gradients(unflatten(other, param_shapes(model)))   # or a list of tensors
    assert all(torch.equal(x, y) for x, y in zip(ga, gb))
    assert torch.equal(flatten(model.parameters()), before)
    gc, _ = WorkerPool(model, digits.train_x, digits.train_y, shards, 8, seed=1).gradients()
    assert not torch.allclose(ga[0], gc[0])                      # the params did matter


def test_same_seed_same_gradients_and_resume_from_state(digits):
    shards = split(digits.train_y, 3, "iid", seed=0)
    make = lambda seed: WorkerPool(_cnn(), digits.train_x, digits.train_y, shards, 8, seed=seed)
    a, b, c = make(1), make(1), make(2)
    run_a = [a.gradients()[0] for _ in range(3)]
    run_b = [b.gradients()[0] for _ in range(3)]
    assert all(torch.equal(x, y) for ga, gb in zip(run_a, run_b) for x, y in zip(ga, gb))
    assert not torch.equal(c.gradients()[0][0], run_a[0][0])
    state = a.state_dict()
    next_a = a.gradients()[0]
    fresh = make(1)
    fresh.load_state_dict(state)
    assert fresh.iteration == 3
    assert all(torch.equal(x, y) for x, y in zip(fresh.gradients()[0], next_a))


def test_auto_picks_vmap_only_where_the_model_allows_it(digits):
    shards = split(digits.train_y, 2, "iid", seed=0)
    cnn = WorkerPool(_cnn(), digits.train_x, digits.train_y, shards, 8, seed=0, mode="auto")
    assert cnn.mode == "vmap" and cnn.fallback_reason is None
    x = torch.randn(40, 3, 8, 8)
    y = torch.randint(0, 10, (40,))
    resnet = build_model("resnet20", (3, 8, 8), 10)
    pool = WorkerPool(resnet, x, y, [torch.arange(20), torch.arange(20, 40)], 4, seed=0, mode="auto")
    assert pool.mode == "sequential" and "BatchNorm" in pool.fallback_reason
    grads, losses = pool.gradients()
    assert len(grads) == 2 and all(torch.isfinite(g).all() for g in grads)
    with pytest.raises(ValueError, match="mode = 'vmap' needs a model without buffers"):
        WorkerPool(resnet, x, y, [torch.arange(40)], 4, seed=0, mode="vmap")


def test_bad_pool_arguments_are_clear_errors(digits):
    with pytest.raises(ValueError, match="'threads'.*allowed: sequential, vmap, auto"):
        WorkerPool(_cnn(), digits.train_x, digits.train_y, [torch.arange(4)], 2, mode="threads")
    with pytest.raises(ValueError, match="worker w1 is empty"):
        WorkerPool(_cnn(), digits.train_x, digits.train_y, [torch.arange(4), torch.arange(0)], 2)
    with pytest.raises(ValueError, match="worker w0 indexes outside"):
        WorkerPool(_cnn(), digits.train_x, digits.train_y, [torch.tensor([5000])], 2)


# ------------------------------------------------------------------------------ evaluation
def test_evaluate_against_a_hand_computed_loss_and_accuracy():
    model = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))                  # logits = inputs
    x = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0], [0.0, 0.5]])
    y = torch.tensor([0, 1, 1, 0])                        # the last two are wrong
    nll = lambda logits, k: math.log(sum(math.exp(v) for v in logits)) - logits[k]
    hand = (nll([2, 0], 0) + nll([0, 1], 1) + nll([3, 0], 1) + nll([0, 0.5], 0)) / 4
    loss, acc = evaluate(model, x, y, batch_size=3)       # batches of 3 + 1
    assert acc == 0.5 and abs(loss - hand) < 1e-6
    assert model.training                                 # mode restored


# ----------------------------------------------------------------------------------- device
def test_device_resolution():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="'tpu' is not known; allowed: auto, cpu, cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device = 'cuda' but no CUDA GPU is available"):
            resolve_device("cuda")


# --------------------------------------------------------------------------------- training
def test_cnn_on_digits_with_4_workers_reaches_90_percent(digits):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _train_and_check(digits)
    finally:
        torch.set_num_threads(threads)


def _train_and_check(digits, seed=0):
    model = _cnn(seed=seed)
    pool = WorkerPool(model, digits.train_x, digits.train_y, split(digits.train_y, 4, "iid", seed=seed),
                      batch_size=32, seed=seed, mode="auto")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(80):                                   # ~7 epochs, a few seconds
        grads, _ = pool.gradients()
        mean = torch.stack(grads).mean(0)                 # plain averaging, no compression
        for p, g in zip(model.parameters(), unflatten(mean, pool.shapes)):
            p.grad = g.clone()
        opt.step()
    _, accuracy = pool.evaluate(digits.test_x, digits.test_y)
    assert accuracy >= 0.90
    return accuracy


class _DataDependent(nn.Module):
    """No buffers, but Python control flow on a tensor's value: vmap cannot trace it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc(x if float(x.sum()) > -1e9 else -x)


def test_auto_falls_back_to_sequential_when_vmap_fails(digits):
    torch.manual_seed(0)
    shards = split(digits.train_y, 2, "iid", seed=0)
    auto = WorkerPool(_DataDependent(), digits.train_x, digits.train_y, shards, 8, seed=0, mode="auto")
    assert auto.mode == "vmap"                           # nothing in the model says otherwise
    grads, _ = auto.gradients()
    assert auto.mode == "sequential" and auto.fallback_reason.startswith("vmap failed")
    torch.manual_seed(0)
    seq = WorkerPool(_DataDependent(), digits.train_x, digits.train_y, shards, 8, seed=0,
                     mode="sequential")
    assert all(torch.allclose(a, b) for a, b in zip(grads, seq.gradients()[0]))  # same batches
    forced = WorkerPool(_DataDependent(), digits.train_x, digits.train_y, shards, 8, mode="vmap")
    with pytest.raises(RuntimeError):
        forced.gradients()
