"""Models by name: `build_model("mlp" | "cnn" | "cnn_fc" | "resnet20" | "resnet18", input_shape,
num_classes)`, or a factory of the user's: `build_model("pkg.module:factory" |
"path/to/file.py:factory", input_shape, num_classes, options)` calls
`factory(input_shape, num_classes, **options)` (`options`: the other keys of `[model]`), which
returns an `nn.Module` that maps a batch `(B, *input_shape)` to logits `(B, num_classes)`.

`mlp`, `cnn` and `cnn_fc` have no BatchNorm and no buffers, so the workers can compute all their
gradients at once with torch.func.vmap. The ResNets use BatchNorm (running statistics are
buffers), so the worker pool computes them one worker after another.
Initialisation draws only from torch's global generator: the same torch.manual_seed gives the
same weights.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from nodes.plugins import GIVEN_PREFIX, is_reference, resolve_callable


class ModelError(ValueError):
    """Unknown model name or an input shape the model cannot take."""


class MLP(nn.Module):
    def __init__(self, input_shape, num_classes: int, hidden: tuple[int, ...] = (128, 128)):
        super().__init__()
        sizes = [math.prod(input_shape), *hidden]
        layers: list[nn.Module] = [nn.Flatten()]
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    """Two 3x3 convolutions and one linear layer (about 30k parameters for 10 classes).

    Inputs of 16 pixels or more are halved once more after the first convolution, so 28x28
    and 32x32 images cost little more than 8x8 digits; an adaptive average pool brings any
    size to 4x4 before the linear layer. No BatchNorm, no dropout: vmap over workers works
    and is bit-for-bit the same computation as a loop.
    """

    def __init__(self, input_shape, num_classes: int, width: int = 32, hidden: int = 0):
        super().__init__()
        c, h, w = input_shape
        self.conv1 = nn.Conv2d(c, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.early_pool = min(h, w) >= 16
        # hidden > 0: one more linear layer (weights grow, compute hardly: see cnn_fc)
        self.hidden = nn.Linear(2 * width * 16, hidden) if hidden else None
        self.fc = nn.Linear(hidden or 2 * width * 16, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        if self.early_pool:
            x = F.max_pool2d(x, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 4), 1)
        if self.hidden is not None:
            x = F.relu(self.hidden(x))
        return self.fc(x)


class _CifarBlock(nn.Module):
    """ResNet-20 basic block with the parameter-free "option A" shortcut of He et al. (2016):
    subsample by the stride and pad the new channels with zeros."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride, self.extra = stride, cout - cin

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.extra:
            short = F.pad(short, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))
        return F.relu(out + short)


class _ResNet(nn.Module):
    """A stem, stages of basic blocks (the first block of every stage but the first halves the
    resolution), global average pooling and one linear layer: what ResNet-20 and -18 share."""

    def __init__(self, stem: list[nn.Module], block, widths: tuple[int, ...], blocks: int,
                 num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(*stem)
        layers, cin = [], widths[0]
        for stage, cout in enumerate(widths):
            for b in range(blocks):
                layers.append(block(cin, cout, 2 if stage > 0 and b == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(widths[-1], num_classes)
        _kaiming(self)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ResNet20(_ResNet):
    """CIFAR ResNet-20: 3 stages x 3 blocks, widths 16/32/64, ~0.27M parameters."""

    def __init__(self, input_shape, num_classes: int, blocks: int = 3):
        stem = [nn.Conv2d(input_shape[0], 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
        super().__init__(stem, _CifarBlock, (16, 32, 64), blocks, num_classes)


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.short(x))


class ResNet18(_ResNet):
    """ResNet-18 (4 stages x 2 basic blocks, widths 64..512, ~11M parameters). Inputs up to
    64 pixels get the CIFAR stem (3x3 conv, no max-pool) so 32x32 images are not shrunk to
    nothing; larger inputs get the ImageNet stem (7x7 stride 2 + max-pool)."""

    def __init__(self, input_shape, num_classes: int):
        c, h, w = input_shape
        if min(h, w) <= 64:
            stem = [nn.Conv2d(c, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
        else:
            stem = [nn.Conv2d(c, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                    nn.MaxPool2d(3, 2, 1)]
        super().__init__(stem, _BasicBlock, (64, 128, 256, 512), 2, num_classes)


def _kaiming(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def _image_shape(name: str, input_shape, min_side: int) -> tuple[int, int, int]:
    if len(input_shape) != 3 or min(input_shape[1:]) < min_side:
        raise ModelError(f"model {name!r} needs an image input_shape (C, H, W) with H, W >= "
                         f"{min_side}; got {tuple(input_shape)}")
    return tuple(input_shape)


MODELS: dict[str, Callable[[tuple, int], nn.Module]] = {
    "mlp": lambda shape, k: MLP(shape, k),
    "cnn": lambda shape, k: SmallCNN(_image_shape("cnn", shape, 4), k),
    # half-width convolutions and a 256-unit hidden layer: 139k weights on 28x28x1 (the
    # Fashion-MNIST experiments) at about a third of the cnn's FLOPs per step
    "cnn_fc": lambda shape, k: SmallCNN(_image_shape("cnn_fc", shape, 4), k, width=16, hidden=256),
    "resnet20": lambda shape, k: ResNet20(_image_shape("resnet20", shape, 8), k),
    "resnet18": lambda shape, k: ResNet18(_image_shape("resnet18", shape, 8), k),
}


def build_model(name: str, input_shape, num_classes: int, options: dict | None = None) -> nn.Module:
    """The model `name` names; `options`: keyword arguments of a factory of the user's."""
    if is_reference(name):
        return _build_factory(name, input_shape, num_classes, dict(options or {}))
    if name not in MODELS:
        raise ModelError(f"model.name = {name!r} is not known; allowed: {', '.join(MODELS)}, "
                         f"or a factory 'package.module:name' or 'path/to/file.py:name'")
    if options:
        raise ModelError(f"model.{next(iter(options))}: option not known for the built-in model "
                         f"{name!r} (options go to a factory of one's own); allowed: name")
    shape = tuple(int(s) for s in input_shape)
    if not shape or min(shape) < 1:
        raise ModelError(f"model {name!r}: input_shape = {tuple(input_shape)} must be non-empty "
                         f"positive sizes")
    if isinstance(num_classes, bool) or int(num_classes) != num_classes or num_classes < 2:
        raise ModelError(f"model {name!r}: num_classes = {num_classes!r} must be an integer >= 2")
    return MODELS[name](shape, int(num_classes))


def _build_factory(name: str, input_shape, num_classes: int, options: dict) -> nn.Module:
    factory = resolve_callable("model.name", name)
    if isinstance(factory, nn.Module):
        if name.startswith(GIVEN_PREFIX):   # a model object handed to the Python API: as it is
            return factory
        raise ModelError(f"model.name = {name!r} names a module instance; expected a factory "
                         f"(a class or function: factory(input_shape, num_classes, **options))")
    shape = tuple(int(s) for s in input_shape)
    try:
        model = factory(shape, int(num_classes), **options)
    except Exception as e:
        raise ModelError(f"model.name = {name!r}: {name.rsplit(':', 1)[1]}{shape, int(num_classes)} "
                         f"with options {options} raised {type(e).__name__}: "
                         f"{' '.join(str(e).split())}; expected factory(input_shape, num_classes, "
                         f"**[model] options) -> nn.Module") from None
    if not isinstance(model, nn.Module):
        raise ModelError(f"model.name = {name!r}: the factory returned a {type(model).__name__}; "
                         f"expected a torch.nn.Module")
    if not any(True for _ in model.parameters()):
        raise ModelError(f"model.name = {name!r}: the factory's module has no parameters; "
                         f"expected a torch.nn.Module with trainable parameters")
    return model


def vmap_safe(model: nn.Module) -> bool:
    """True if the model's training step is a pure function of (params, batch): no buffers
    (BatchNorm running statistics are updated in place) and no random layers (dropout)."""
    if any(True for _ in model.buffers()):
        return False
    return not any(isinstance(m, (nn.modules.batchnorm._NormBase, nn.Dropout, nn.Dropout2d,
                                  nn.AlphaDropout)) for m in model.modules())
