"""Offline datasets by name: `load_dataset("digits" | "synthetic" | "cifar10" | "mnist" |
"fashion_mnist", root=..., seed=..., **options) -> Dataset`.

Nothing is ever downloaded: `digits` ships inside scikit-learn, `synthetic` is generated, and the
file datasets are read from a local folder in their standard on-disk formats (CIFAR-10 python
pickle batches, MNIST idx files, plain or gzipped). `DATASETS` lists every dataset's options with
defaults and ranges; the config validator reads it.

Inputs are standardised with statistics of the *training* split only (no test leakage).

A loader of the user's: `load_dataset("package.module:loader" | "path/to/file.py:loader", seed=...,
**options)` calls `loader(**options)` (plus `seed=` and `root=` where it takes them) and checks
what it returns (`LOADER_CONTRACT`). A split given as a map-style `torch.utils.data.Dataset` is
read by index, batch by batch (`Samples`): it need not fit in memory; only its labels are held.
"""
from __future__ import annotations

import gzip
import importlib.util
import math
import os
import pickle
import inspect
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nodes.errors import DatasetError, DatasetFileError
from nodes.plugins import GIVEN_PREFIX, is_reference, resolve, resolve_callable
from lgc_schema import Field


class Samples:
    """The inputs of a map-style dataset (items `(x, y)`), indexed like a tensor: `samples[idx]`
    with a LongTensor of any shape (or a slice) reads those items and stacks their inputs to
    `(*idx.shape, *input_shape)` on the device given by `.to(device)`. Floating inputs become
    float32; integer ones (token ids) keep their type."""

    def __init__(self, dataset, device: str | torch.device | None = None):
        self.dataset = dataset
        self.device = torch.device("cpu" if device is None else device)

    def __len__(self) -> int:
        return len(self.dataset)

    def to(self, device) -> Samples:
        return Samples(self.dataset, device)

    def item(self, i: int) -> torch.Tensor:
        return _as_input(self.dataset[int(i)][0])

    def __getitem__(self, idx) -> torch.Tensor:
        if isinstance(idx, slice):
            idx = torch.arange(*idx.indices(len(self)))
        idx = torch.as_tensor(idx, dtype=torch.int64)
        flat = idx.reshape(-1).tolist()
        xs = [self.item(i) for i in flat]
        first = xs[0] if xs else torch.zeros(0)
        out = torch.stack(xs).reshape(*idx.shape, *first.shape) if xs else first
        return out.to(self.device)

    def __repr__(self) -> str:
        return f"Samples({type(self.dataset).__name__}, {len(self)} items)"


def _as_input(x) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    return t.to(torch.float32) if t.is_floating_point() else t


@dataclass
class Dataset:
    train_x: torch.Tensor          # float32, (N, *input_shape); or Samples (a map-style dataset)
    train_y: torch.Tensor          # int64, (N,)
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    input_shape: tuple[int, ...]   # (C, H, W) for images, (D,) for vectors
    name: str = ""

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, train={len(self.train_y)}, test={len(self.test_y)}, "
                f"input_shape={self.input_shape}, num_classes={self.num_classes})")


# ----------------------------------------------------------------------------------- options
_SPLIT = Field(0.2, float, 0.01, 0.9, help="fraction of the samples held out for testing")
_MAX_TRAIN = Field(0, int, 0, None, help="keep a seeded random subset of this many training "
                                           "samples (0 = all)")
_MAX_TEST = Field(0, int, 0, None, help="keep this many test samples (0 = all)")

FASHION_MNIST_DEBIAN_ROOT = "/usr/share/datasets/fashion-mnist"

DATASETS: dict[str, dict[str, Field]] = {
    "digits": {"test_fraction": _SPLIT},
    "synthetic": {
        "n_samples": Field(2000, int, 20, None, help="samples in total (train + test)"),
        "n_features": Field(64, int, 2, None, help="vector length (ignored if image_side > 0)"),
        "image_side": Field(0, int, 0, None, help="> 0: samples are (1, side, side) images"),
        "n_classes": Field(10, int, 2, None, help="number of classes"),
        "n_informative": Field(0, int, 0, None, help="informative features (0 = half)"),
        "class_sep": Field(1.0, float, 0.0, None, help="distance between class centres: "
                                                         "smaller is harder"),
        "label_noise": Field(0.02, float, 0.0, 1.0, help="fraction of labels flipped at random"),
        "test_fraction": _SPLIT,
    },
    "cifar10": {"root": Field("data/cifar-10-batches-py", str,
                               help="folder with data_batch_1..5 and test_batch"),
                "max_train": _MAX_TRAIN, "max_test": _MAX_TEST},
    "mnist": {"root": Field("data/mnist", str, help="folder with the four idx files"),
              "max_train": _MAX_TRAIN, "max_test": _MAX_TEST},
    "fashion_mnist": {"root": Field(FASHION_MNIST_DEBIAN_ROOT, str,
                                     help="folder with the four idx files (Debian's "
                                          "dataset-fashion-mnist installs them here)"),
                      "max_train": _MAX_TRAIN, "max_test": _MAX_TEST},
}


def _check_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    spec = DATASETS[name]
    full = {k: o.default for k, o in spec.items()}
    for key, value in options.items():
        if key not in spec:
            allowed = ", ".join(sorted(spec)) or "none"
            raise DatasetError(f"data.{key}: option not known for dataset {name!r}; allowed: {allowed}")
        opt = spec[key]
        if opt.type is str:
            if not isinstance(value, (str, os.PathLike)):
                raise DatasetError(f"data.{key} = {value!r}: expected a path string")
            full[key] = str(value)
            continue
        ok_type = (int,) if opt.type is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type):
            raise DatasetError(f"data.{key} = {value!r}: expected {opt.allowed()}")
        if (opt.min is not None and value < opt.min) or (opt.max is not None and value > opt.max):
            raise DatasetError(f"data.{key} = {value!r} is out of range; allowed: {opt.allowed()}")
        full[key] = opt.type(value)
    return full


# ----------------------------------------------------------------------------------- helpers
def _standardise(train: np.ndarray, test: np.ndarray, axes: tuple[int, ...]):
    """Subtract the training mean, divide by the training std (per channel if axes keep it)."""
    mean = train.mean(axis=axes, keepdims=True)
    std = train.std(axis=axes, keepdims=True)
    std = np.where(std > 0, std, 1.0)
    return (train - mean) / std, (test - mean) / std


def _stratified_split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int):
    """(x_train, x_test, y_train, y_test) as scikit-learn's `train_test_split(x, y,
    test_size=test_fraction, stratify=y, random_state=seed)` returns them, the same draws from
    the same RandomState in the same order (StratifiedShuffleSplit's first split), without
    importing scikit-learn: its validation stack costs most of a second at start-up."""
    n_test = math.ceil(test_fraction * len(y))
    n_train = len(y) - n_test
    classes, y_indices, class_counts = np.unique(y, return_inverse=True, return_counts=True)
    if class_counts.min() < 2 or min(n_train, n_test) < len(classes):
        raise DatasetError(f"test_fraction {test_fraction}: {len(y)} samples of {len(classes)} "
                           f"classes (the smallest has {class_counts.min()}) cannot be split "
                           f"into train and test holding every class")
    class_indices = np.split(np.argsort(y_indices, kind="stable"), np.cumsum(class_counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(class_counts, n_train, rng)
    t_i = _approximate_mode(class_counts - n_i, n_test, rng)
    train: list[int] = []
    test: list[int] = []
    for i in range(len(classes)):
        members = class_indices[i].take(rng.permutation(class_counts[i]), mode="clip")
        train.extend(members[:n_i[i]])
        test.extend(members[n_i[i]:n_i[i] + t_i[i]])
    train_idx, test_idx = rng.permutation(train), rng.permutation(test)
    return x[train_idx], x[test_idx], y[train_idx], y[test_idx]


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.RandomState):
    """Per class, how many of `n_draws` it gets: the floor of its share, then one more for the
    largest remainders, ties broken by `rng` (scikit-learn's `utils.extmath._approximate_mode`)."""
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need_to_add)
            floored[rng.choice(inds, size=add_now, replace=False)] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def _subset(x: np.ndarray, y: np.ndarray, n: int, seed: int):
    if n <= 0 or n >= len(y):
        return x, y
    keep = np.sort(np.random.default_rng(seed).permutation(len(y))[:n])
    return x[keep], y[keep]


def _pack(name, xtr, ytr, xte, yte, num_classes, input_shape) -> Dataset:
    return Dataset(torch.as_tensor(np.ascontiguousarray(xtr), dtype=torch.float32),
                   torch.as_tensor(np.ascontiguousarray(ytr), dtype=torch.int64),
                   torch.as_tensor(np.ascontiguousarray(xte), dtype=torch.float32),
                   torch.as_tensor(np.ascontiguousarray(yte), dtype=torch.int64),
                   int(num_classes), tuple(int(s) for s in input_shape), name)


# ----------------------------------------------------------------------------------- loaders
def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """(x, y) as scikit-learn's `load_digits(return_X_y=True)` returns them, read from the file
    it ships (datasets/data/digits.csv.gz: 64 pixel columns, then the label) the way it reads
    it, without importing scikit-learn (found by its import spec, which runs none of it)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError("data.dataset = 'digits' is read from scikit-learn's bundled copy; "
                           "install scikit-learn (pip install scikit-learn)")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int, copy=False)


def _load_digits(root, seed, test_fraction):
    x, y = digits_arrays()
    x = (x / 16.0).reshape(-1, 1, 8, 8)          # pixel values are 0..16
    xtr, xte, ytr, yte = _stratified_split(x, y, test_fraction, seed)
    xtr, xte = _standardise(xtr, xte, axes=(0, 1, 2, 3))
    return _pack("digits", xtr, ytr, xte, yte, 10, (1, 8, 8))


def _load_synthetic(root, seed, n_samples, n_features, image_side, n_classes, n_informative,
                    class_sep, label_noise, test_fraction):
    from sklearn.datasets import make_classification
    d = image_side * image_side if image_side > 0 else n_features
    needed = math.ceil(math.log2(n_classes)) + 1     # make_classification: classes <= 2**informative
    informative = n_informative or max(needed, d // 2)
    if not needed <= informative <= d:
        raise DatasetError(f"data.n_informative = {n_informative}: must lie in [{needed}, {d}] "
                           f"for {n_classes} classes and {d} features")
    if n_samples * test_fraction < n_classes or n_samples * (1 - test_fraction) < n_classes:
        raise DatasetError(f"data.n_samples = {n_samples}: too few for {n_classes} classes "
                           f"with test_fraction {test_fraction}")
    x, y = make_classification(n_samples=n_samples, n_features=d, n_informative=informative,
                               n_redundant=0, n_repeated=0, n_classes=n_classes,
                               n_clusters_per_class=1, class_sep=class_sep, flip_y=label_noise,
                               random_state=seed)
    shape = (1, image_side, image_side) if image_side > 0 else (d,)
    x = x.reshape(-1, *shape)
    xtr, xte, ytr, yte = _stratified_split(x, y, test_fraction, seed)
    xtr, xte = _standardise(xtr, xte, axes=tuple(range(xtr.ndim)))
    return _pack("synthetic", xtr, ytr, xte, yte, n_classes, shape)


CIFAR10_FORMAT = ("the CIFAR-10 python-batch format: pickled dicts with b'data' (uint8, N x 3072, "
                  "channel-major 3x32x32) and b'labels' (N ints), files data_batch_1..5 and test_batch")


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not path.is_file():
        raise DatasetFileError(f"cifar10: missing file {path} (expected {CIFAR10_FORMAT})")
    try:
        with open(path, "rb") as f:
            batch = pickle.load(f, encoding="bytes")   # the standard format is a pickle
    except Exception as e:
        raise DatasetFileError(f"cifar10: cannot read {path} as a pickle ({e}); expected "
                               f"{CIFAR10_FORMAT}") from None
    get = lambda key: batch.get(key.encode(), batch.get(key)) if isinstance(batch, dict) else None
    data, labels = get("data"), get("labels")
    data = None if data is None else np.asarray(data)
    if data is None or labels is None or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != 3072 or len(labels) != data.shape[0]:
        raise DatasetFileError(f"cifar10: {path} does not hold b'data' uint8 N x 3072 and "
                               f"b'labels' of length N; expected {CIFAR10_FORMAT}")
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def _load_cifar10(root, seed, max_train, max_test):
    root = Path(root)
    if not (root / "test_batch").exists() and (root / "cifar-10-batches-py").is_dir():
        root = root / "cifar-10-batches-py"          # the folder above the extracted archive
    train = [_read_cifar_batch(root / f"data_batch_{i}") for i in range(1, 6)]
    xtr = np.concatenate([b[0] for b in train])
    ytr = np.concatenate([b[1] for b in train])
    xte, yte = _read_cifar_batch(root / "test_batch")
    xtr, ytr = _subset(xtr, ytr, max_train, seed)
    xte, yte = _subset(xte, yte, max_test, seed + 1)
    xtr, xte = _standardise(xtr / 255.0, xte / 255.0, axes=(0, 2, 3))   # per channel
    return _pack("cifar10", xtr, ytr, xte, yte, 10, (3, 32, 32))


IDX_FILES = {"train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
             "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte"}
IDX_MAGIC = {3: 2051, 1: 2049}     # 0x00000803 images (3-D ubyte), 0x00000801 labels (1-D ubyte)
IDX_FORMAT = ("the MNIST idx format (big-endian magic 2051 for idx3-ubyte images, 2049 for "
              "idx1-ubyte labels, then the dimensions as uint32 and the raw uint8 data), "
              "plain or .gz")


def _find_idx(name: str, root: Path, stem: str) -> Path:
    for folder in (root, root / "raw"):
        for candidate in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
            if (folder / candidate).is_file():
                return folder / candidate
    raise DatasetFileError(f"{name}: missing file {root / stem} (or {stem}.gz) - expected "
                           f"{IDX_FORMAT}, files {', '.join(IDX_FILES.values())}")


def read_idx(path: str | Path, ndim: int, dataset: str = "idx") -> np.ndarray:
    """Read one idx file (plain or gzipped) holding a `ndim`-dimensional uint8 array."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise DatasetFileError(f"{dataset}: cannot read {path} ({e}); expected {IDX_FORMAT}") from None
    if len(raw) < 4 + 4 * ndim:
        raise DatasetFileError(f"{dataset}: {path} is too short for an idx header; expected {IDX_FORMAT}")
    magic = struct.unpack(">I", raw[:4])[0]
    if magic != IDX_MAGIC[ndim]:
        raise DatasetFileError(f"{dataset}: {path} has magic number {magic}, expected "
                               f"{IDX_MAGIC[ndim]} ({ndim}-D uint8); expected {IDX_FORMAT}")
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    body = raw[4 + 4 * ndim:]
    if len(body) != int(np.prod(dims)):
        raise DatasetFileError(f"{dataset}: {path} declares dimensions {dims} = {int(np.prod(dims))} "
                               f"bytes but holds {len(body)}; expected {IDX_FORMAT}")
    return np.frombuffer(body, dtype=np.uint8).reshape(dims)


def _load_idx_dataset(name: str):
    def load(root, seed, max_train, max_test):
        root = Path(root)
        arrays = {key: read_idx(_find_idx(name, root, stem), 3 if key.endswith("x") else 1, name)
                  for key, stem in IDX_FILES.items()}
        for split in ("train", "test"):
            if len(arrays[f"{split}_x"]) != len(arrays[f"{split}_y"]):
                raise DatasetFileError(f"{name}: {split} images and labels in {root} differ in "
                                       f"count ({len(arrays[f'{split}_x'])} vs "
                                       f"{len(arrays[f'{split}_y'])})")
        xtr, ytr = _subset(arrays["train_x"], arrays["train_y"].astype(np.int64), max_train, seed)
        xte, yte = _subset(arrays["test_x"], arrays["test_y"].astype(np.int64), max_test, seed + 1)
        h, w = xtr.shape[1:]
        xtr, xte = _standardise(xtr[:, None] / 255.0, xte[:, None] / 255.0, axes=(0, 1, 2, 3))
        return _pack(name, xtr, ytr, xte, yte, 10, (1, h, w))
    return load


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "digits": _load_digits,
    "synthetic": _load_synthetic,
    "cifar10": _load_cifar10,
    "mnist": _load_idx_dataset("mnist"),
    "fashion_mnist": _load_idx_dataset("fashion_mnist"),
}


def load_dataset(name: str, *, root: str | os.PathLike | None = None, seed: int = 0,
                 **options: Any) -> Dataset:
    """Load a dataset by name. `root` (or the option of the same name) points file datasets
    at their folder; `seed` fixes every random split and subset."""
    if is_reference(name):
        return _load_reference(name, root, int(seed), options)
    if name not in _LOADERS:
        raise DatasetError(f"data.name = {name!r} is not known; allowed: {', '.join(_LOADERS)}")
    if root is not None:
        if "root" not in DATASETS[name]:
            raise DatasetError(f"data.root = {str(root)!r}: dataset {name!r} is not read from files")
        options = {**options, "root": root}
    full = _check_options(name, options)
    return _LOADERS[name](full.pop("root", None), int(seed), **full)


# ------------------------------------------------------------------------ the user's loaders
LOADER_CONTRACT = (
    "a loader returning nodes.data.Dataset or a dict with 'train' and 'test' (each an (inputs, "
    "labels) pair of tensors or arrays, or a map-style torch.utils.data.Dataset of (x, y) "
    "items), 'num_classes' (an integer >= 2) and optionally 'input_shape'")


def _takes(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def _load_reference(name: str, root, seed: int, options: dict) -> Dataset:
    key = "data.dataset"
    obj = resolve(key, name) if name.startswith(GIVEN_PREFIX) else resolve_callable(key, name)
    if callable(obj) and not isinstance(obj, (dict, Dataset)):
        kwargs = dict(options)
        if _takes(obj, "seed"):
            kwargs["seed"] = int(seed)
        if root is not None:
            kwargs["root"] = str(root)
        try:
            obj = obj(**kwargs)
        except (DatasetError, DatasetFileError):
            raise
        except Exception as e:
            raise DatasetError(f"{key} = {name!r}: the loader called with {kwargs} raised "
                               f"{type(e).__name__}: {' '.join(str(e).split())}; expected "
                               f"{LOADER_CONTRACT}") from None
    return check_loaded(name, obj)


def _split(name: str, which: str, part):
    """(inputs, labels) of one split: tensors, or Samples and the labels read once."""
    bad = DatasetError(f"data.dataset = {name!r}: {which!r} is a {type(part).__name__}; "
                       f"expected {LOADER_CONTRACT}")
    if isinstance(part, (tuple, list)):
        if len(part) != 2:
            raise bad
        x, y = (_as_input(v) for v in part)
        if x.dim() < 1 or len(x) != len(y):
            raise DatasetError(f"data.dataset = {name!r}: the {which} split has {len(x)} inputs "
                               f"but {len(y)} labels; expected as many labels as inputs")
        return x, y
    if hasattr(part, "__getitem__") and hasattr(part, "__len__"):
        targets = getattr(part, "targets", None)
        y = _as_input(targets) if targets is not None else             _as_input([int(part[i][1]) for i in range(len(part))])
        if len(y) != len(part):
            raise DatasetError(f"data.dataset = {name!r}: the {which} split has {len(part)} "
                               f"items but {len(y)} targets; expected as many labels as inputs")
        return Samples(part), y
    raise bad


def check_loaded(name: str, obj) -> Dataset:
    """A loader's result checked against LOADER_CONTRACT, as a Dataset."""
    if isinstance(obj, Dataset):
        obj = {"train": (obj.train_x, obj.train_y), "test": (obj.test_x, obj.test_y),
               "num_classes": obj.num_classes, "input_shape": obj.input_shape}
    if not isinstance(obj, dict) or not {"train", "test", "num_classes"} <= set(obj):
        raise DatasetError(f"data.dataset = {name!r}: the loader returned "
                           f"{type(obj).__name__}; expected {LOADER_CONTRACT}")
    k = obj["num_classes"]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise DatasetError(f"data.dataset = {name!r}: num_classes = {k!r}; expected an integer >= 2")
    splits = {which: _split(name, which, obj[which]) for which in ("train", "test")}
    shapes = {}
    for which, (x, y) in splits.items():
        if len(y) == 0:
            raise DatasetError(f"data.dataset = {name!r}: the {which} split is empty; expected "
                               f"at least one sample")
        if y.is_floating_point() or y.dim() != 1:
            raise DatasetError(f"data.dataset = {name!r}: the {which} labels are "
                               f"{tuple(y.shape)} {y.dtype}; expected one integer per sample")
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or hi >= k:
            raise DatasetError(f"data.dataset = {name!r}: a {which} label is "
                               f"{lo if lo < 0 else hi}; expected labels in 0..{k - 1} "
                               f"(num_classes = {k})")
        shapes[which] = tuple(x.item(0).shape) if isinstance(x, Samples) else tuple(x.shape[1:])
    shape = tuple(int(s) for s in obj.get("input_shape") or shapes["train"])
    for which, got in shapes.items():
        if got != shape:
            raise DatasetError(f"data.dataset = {name!r}: a {which} input has shape {got}; "
                               f"expected input_shape {shape}")
    (xtr, ytr), (xte, yte) = splits["train"], splits["test"]
    return Dataset(xtr, ytr.to(torch.int64), xte, yte.to(torch.int64), int(k), shape, name)
