"""Models by name (shapes, parameter counts by hand, seeded init) and the FLOP count of a
training step against a hand count."""
import pytest
import torch
from torch import nn

from nodes.flops import step_flops, train_step_flops
from nodes.models import MODELS, ModelError, build_model, vmap_safe


def _count(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name,shape", [("mlp", (64,)), ("mlp", (1, 8, 8)), ("cnn", (1, 8, 8)),
                                        ("cnn", (1, 28, 28)), ("cnn", (3, 32, 32)),
                                        ("resnet20", (3, 32, 32)), ("resnet18", (3, 32, 32))])
def test_models_map_a_batch_to_class_scores(name, shape):
    model = build_model(name, shape, 7)
    assert model(torch.randn(2, *shape)).shape == (2, 7)


def test_names():
    assert set(MODELS) == {"mlp", "cnn", "cnn_fc", "resnet20", "resnet18"}


def test_cnn_parameter_count_by_hand():
    # conv1 1->32 3x3 + bias, conv2 32->64 3x3 + bias, linear 64*4*4 -> 10 + bias
    hand = (1 * 32 * 9 + 32) + (32 * 64 * 9 + 64) + (64 * 16 * 10 + 10)
    assert _count(build_model("cnn", (1, 8, 8), 10)) == hand == 29066
    # the 4x4 adaptive pool makes the size independent of the image side
    assert _count(build_model("cnn", (1, 28, 28), 10)) == hand


def test_cnn_fc_parameter_count_by_hand():
    # conv1 1->16 3x3 + bias, conv2 16->32 3x3 + bias, linear 32*4*4 -> 256 + bias, 256 -> 10 + bias
    hand = (1 * 16 * 9 + 16) + (16 * 32 * 9 + 32) + (32 * 16 * 256 + 256) + (256 * 10 + 10)
    assert _count(build_model("cnn_fc", (1, 28, 28), 10)) == hand == 138698


def test_resnet20_parameter_count_by_hand():
    conv = lambda cin, cout: cin * cout * 9
    bn = lambda c: 2 * c
    stem = conv(3, 16) + bn(16)
    block = lambda cin, cout: conv(cin, cout) + bn(cout) + conv(cout, cout) + bn(cout)
    stages = (3 * block(16, 16) + block(16, 32) + 2 * block(32, 32)
              + block(32, 64) + 2 * block(64, 64))                # option-A shortcuts: no weights
    fc = 64 * 10 + 10
    assert _count(build_model("resnet20", (3, 32, 32), 10)) == stem + stages + fc == 269722


def test_resnet18_size():
    n = _count(build_model("resnet18", (3, 32, 32), 10))
    assert 11_000_000 < n < 11_300_000                           # ~11.2M as in He et al.


def test_init_is_deterministic_under_manual_seed():
    def weights(seed):
        torch.manual_seed(seed)
        return [p.detach().clone() for p in build_model("cnn", (1, 8, 8), 10).parameters()]
    a, b, c = weights(5), weights(5), weights(6)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


def test_vmap_safe_only_without_batchnorm():
    assert vmap_safe(build_model("cnn", (1, 8, 8), 10))
    assert vmap_safe(build_model("mlp", (64,), 10))
    assert not vmap_safe(build_model("resnet20", (3, 32, 32), 10))
    assert not vmap_safe(nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)))


def test_bad_names_and_shapes_are_clear_errors():
    with pytest.raises(ModelError, match="'vgg'.*allowed: mlp, cnn, cnn_fc, resnet20, resnet18"):
        build_model("vgg", (1, 8, 8), 10)
    with pytest.raises(ModelError, match=r"'cnn' needs an image input_shape.*\(64,\)"):
        build_model("cnn", (64,), 10)
    with pytest.raises(ModelError, match="num_classes = 1"):
        build_model("mlp", (4,), 1)


# ---------------------------------------------------------------------------------- FLOPs
def test_flops_of_a_linear_layer_by_hand():
    B, i, o = 8, 20, 5
    forward, backward = step_flops(nn.Linear(i, o), (i,), B)
    assert forward == 2 * B * i * o                 # one multiply-add per weight per sample
    # Backward: the weight gradient (x^T dy) costs the same; the input needs no gradient.
    assert backward == 2 * B * i * o
    assert train_step_flops(nn.Linear(i, o), (i,), B) == 4 * B * i * o


def test_flops_of_two_layers_count_the_hidden_input_gradient():
    B, a, h, k = 4, 10, 7, 3
    model = nn.Sequential(nn.Linear(a, h), nn.ReLU(), nn.Linear(h, k))
    forward = 2 * B * (a * h + h * k)
    backward = 2 * B * (a * h + h * k) + 2 * B * h * k   # + dL/dhidden through layer 2
    assert step_flops(model, (a,), B) == (forward, backward)


def test_flops_scale_with_batch_and_leave_the_model_alone():
    model = build_model("resnet20", (3, 32, 32), 10)
    before = [b.clone() for b in model.buffers()]
    f2, f4 = train_step_flops(model, (3, 32, 32), 2), train_step_flops(model, (3, 32, 32), 4)
    assert f4 == 2 * f2
    assert all(torch.equal(x, y) for x, y in zip(before, model.buffers()))   # BN stats untouched
    assert all(p.grad is None for p in model.parameters())
    # ResNet-20's forward by hand: multiply-adds of every conv (cin*cout*9 per output pixel)
    # and the classifier, 2 FLOPs each (the familiar "41M" figure counts multiply-adds).
    conv = lambda cin, cout, side: cin * cout * 9 * side * side
    macs = (conv(3, 16, 32) + 6 * conv(16, 16, 32)
            + conv(16, 32, 16) + 5 * conv(32, 32, 16)
            + conv(32, 64, 8) + 5 * conv(64, 64, 8) + 64 * 10)
    assert step_flops(model, (3, 32, 32), 1)[0] == 2 * macs == 81_102_080


class _ValueDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):                       # reads a value: impossible on the meta device
        return self.fc(x) if float(x.sum()) >= 0 else self.fc(-x)


def test_flops_fall_back_to_a_real_run_and_are_cached(monkeypatch):
    import nodes.flops as flops
    monkeypatch.setattr(flops, "CPU_COUNT_LIMIT", 0)     # every step tried on the meta device
    model = _ValueDependent()
    assert flops.step_flops(model, (6,), 3) == (2 * 3 * 6 * 4, 2 * 3 * 6 * 4)
    monkeypatch.setattr(flops, "_count", lambda *a: (_ for _ in ()).throw(AssertionError("recounted")))
    assert flops.train_step_flops(model, (6,), 3) == 4 * 3 * 6 * 4      # from the cache


@pytest.mark.parametrize("name,shape", [("cnn", (1, 8, 8)), ("resnet20", (3, 32, 32))])
def test_flops_counted_on_the_cpu_and_on_the_meta_device_agree(monkeypatch, name, shape):
    """A small step is counted by computing it on zeros, a large one on the meta device: the
    same figures either way."""
    import nodes.flops as flops
    model = build_model(name, shape, 10)
    figures = {}
    for limit in (0, float("inf")):
        monkeypatch.setattr(flops, "CPU_COUNT_LIMIT", limit)
        monkeypatch.setattr(flops, "_CACHE", {})
        figures[limit] = step_flops(model, shape, 3)
    assert figures[0] == figures[float("inf")]
