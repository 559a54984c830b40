"""Datasets: the bundled and generated ones, and the on-disk loaders on files written here in
the exact CIFAR-10 python-batch and MNIST idx formats."""
import gzip
import os
import pickle
import struct

import numpy as np
import pytest
import torch

from nodes.data import (DATASETS, DatasetError, DatasetFileError, _stratified_split, digits_arrays,
                        load_dataset)


# ------------------------------------------------------------------------------ digits
def test_digits_shapes_split_and_standardisation():
    from sklearn.datasets import load_digits
    raw_y = load_digits().target
    ds = load_dataset("digits", seed=0)
    assert ds.input_shape == (1, 8, 8) and ds.num_classes == 10 and ds.name == "digits"
    assert ds.train_x.dtype == torch.float32 and ds.train_y.dtype == torch.int64
    assert ds.train_x.shape[1:] == (1, 8, 8)
    assert len(ds.train_y) + len(ds.test_y) == 1797
    assert len(ds.test_y) == 360                      # ceil(0.2 * 1797)
    # Stratified: every class keeps ~20 % of its samples in the test split.
    for c in range(10):
        n_c = int((raw_y == c).sum())
        assert abs(int((ds.test_y == c).sum()) - 0.2 * n_c) <= 1
        assert int((ds.train_y == c).sum()) + int((ds.test_y == c).sum()) == n_c
    # Standardised with training statistics: train mean 0, std 1.
    assert abs(float(ds.train_x.mean())) < 1e-5
    assert abs(float(ds.train_x.std()) - 1) < 1e-3


def test_digits_split_is_seeded():
    a, b, c = (load_dataset("digits", seed=s) for s in (3, 3, 4))
    assert torch.equal(a.test_y, b.test_y) and torch.equal(a.train_x, b.train_x)
    assert not torch.equal(a.test_y, c.test_y)


def test_digits_test_fraction_option():
    ds = load_dataset("digits", test_fraction=0.5)
    assert len(ds.test_y) == 899                      # ceil(0.5 * 1797)


def test_digits_arrays_are_scikit_learns_exactly():
    from sklearn.datasets import load_digits
    x, y = digits_arrays()
    ref_x, ref_y = load_digits(return_X_y=True)
    assert x.dtype == ref_x.dtype and y.dtype == ref_y.dtype
    assert np.array_equal(x, ref_x) and np.array_equal(y, ref_y)


@pytest.mark.parametrize("labels, fraction", [
    *(("digits", f) for f in (0.2, 0.5, 0.33, 0.01, 0.9)),
    *(("unbalanced", f) for f in (0.2, 0.5, 0.33, 0.9))])   # 0.01 of 319: a test split of 4 < 7 classes
def test_stratified_split_is_train_test_splits(labels, fraction):
    """The split scikit-learn's train_test_split(stratify=y, random_state=seed) makes, sample
    for sample, on the digits and on labels whose class shares leave tied remainders."""
    from sklearn.model_selection import train_test_split
    if labels == "digits":
        x, y = digits_arrays()
    else:
        y = np.repeat(np.arange(7), [3, 3, 50, 50, 11, 200, 2])
        x = np.arange(len(y) * 2, dtype=float).reshape(len(y), 2)
    for seed in range(4):
        ours = _stratified_split(x, y, fraction, seed)
        ref = train_test_split(x, y, test_size=fraction, stratify=y, random_state=seed)
        for a, b in zip(ours, ref):
            assert np.array_equal(a, b)


def test_a_split_that_cannot_hold_every_class_on_both_sides_is_refused_by_name():
    """Where scikit-learn's split raises (a class of one sample; fewer test samples than
    classes), ours says so as a dataset error, naming the fraction."""
    y = np.array([0, 0, 0, 1, 1, 1, 2])
    with pytest.raises(DatasetError, match="test_fraction 0.5"):
        _stratified_split(np.zeros((7, 1)), y, 0.5, 0)
    with pytest.raises(DatasetError, match="test_fraction 0.1"):
        _stratified_split(np.zeros((8, 1)), np.repeat([0, 1, 2, 3], 2), 0.1, 0)


# --------------------------------------------------------------------------- synthetic
def _nearest_centroid_accuracy(ds):
    x = ds.train_x.flatten(1)
    cents = torch.stack([x[ds.train_y == c].mean(0) for c in range(ds.num_classes)])
    pred = torch.cdist(ds.test_x.flatten(1), cents).argmin(1)
    return float((pred == ds.test_y).float().mean())


def test_synthetic_options_shapes_and_seed():
    ds = load_dataset("synthetic", n_samples=500, n_features=20, n_classes=4, seed=1)
    assert ds.input_shape == (20,) and ds.num_classes == 4
    assert len(ds.train_y) == 400 and len(ds.test_y) == 100
    assert set(ds.train_y.tolist()) == {0, 1, 2, 3}
    again = load_dataset("synthetic", n_samples=500, n_features=20, n_classes=4, seed=1)
    assert torch.equal(ds.train_x, again.train_x)
    img = load_dataset("synthetic", n_samples=300, image_side=6, n_classes=3)
    assert img.input_shape == (1, 6, 6) and img.train_x.shape[1:] == (1, 6, 6)


def test_synthetic_difficulty_follows_class_sep():
    common = dict(n_samples=1000, n_features=16, n_classes=4, label_noise=0.0, seed=0)
    easy = _nearest_centroid_accuracy(load_dataset("synthetic", class_sep=3.0, **common))
    hard = _nearest_centroid_accuracy(load_dataset("synthetic", class_sep=0.2, **common))
    assert easy > 0.9 and hard < 0.6 and easy > hard + 0.3


# ------------------------------------------------------------------------------ cifar10
def _write_cifar(folder, n_per_batch=4, n_test=6, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name, n in [*((f"data_batch_{i}", n_per_batch) for i in range(1, 6)), ("test_batch", n_test)]:
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size=n)]
        with open(folder / name, "wb") as f:
            pickle.dump({b"batch_label": name.encode(), b"data": data, b"labels": labels}, f)
        batches[name] = (data, labels)
    return batches


def test_cifar10_reads_python_batches_channel_major(tmp_path):
    batches = _write_cifar(tmp_path / "cifar-10-batches-py")
    ds = load_dataset("cifar10", root=tmp_path / "cifar-10-batches-py")
    assert ds.input_shape == (3, 32, 32) and len(ds.train_y) == 20 and len(ds.test_y) == 6
    raw = np.concatenate([batches[f"data_batch_{i}"][0] for i in range(1, 6)]).astype(np.float64) / 255
    labels = sum((batches[f"data_batch_{i}"][1] for i in range(1, 6)), [])
    assert ds.train_y.tolist() == labels
    assert ds.test_y.tolist() == batches["test_batch"][1]
    # Row layout: 1024 red, 1024 green, 1024 blue values, each 32x32 row-major; standardised
    # per channel with the training mean and std, computed here by hand.
    for c in range(3):
        chan = raw[:, c * 1024:(c + 1) * 1024]
        mean, std = chan.mean(), chan.std()
        for i, r, col in [(0, 0, 0), (7, 5, 31), (19, 31, 2)]:
            expected = (raw[i, c * 1024 + r * 32 + col] - mean) / std
            assert abs(float(ds.train_x[i, c, r, col]) - expected) < 1e-5


def test_cifar10_root_may_be_the_parent_folder_and_subsets(tmp_path):
    _write_cifar(tmp_path / "cifar-10-batches-py")
    ds = load_dataset("cifar10", root=tmp_path, max_train=7, max_test=2, seed=3)
    assert len(ds.train_y) == 7 and len(ds.test_y) == 2


def test_cifar10_missing_file_names_path_and_format(tmp_path):
    _write_cifar(tmp_path)
    os.remove(tmp_path / "data_batch_3")
    with pytest.raises(DatasetFileError) as e:
        load_dataset("cifar10", root=tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "data_batch_3") in msg and "python-batch" in msg and "3072" in msg


def test_cifar10_wrong_contents_are_refused(tmp_path):
    _write_cifar(tmp_path)
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f)
    with pytest.raises(DatasetFileError, match="test_batch.*3072"):
        load_dataset("cifar10", root=tmp_path)


# -------------------------------------------------------------------------------- mnist
def _idx_bytes(array: np.ndarray) -> bytes:
    magic = {3: 2051, 1: 2049}[array.ndim]
    return struct.pack(f">I{array.ndim}I", magic, *array.shape) + array.astype(np.uint8).tobytes()


def _write_mnist(folder, gz: bool, n_train=12, n_test=5, side=28, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"train-images-idx3-ubyte": rng.integers(0, 256, (n_train, side, side)),
              "train-labels-idx1-ubyte": rng.integers(0, 10, n_train),
              "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, side, side)),
              "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test)}
    for name, arr in arrays.items():
        blob = _idx_bytes(arr)
        if gz:
            with gzip.open(folder / (name + ".gz"), "wb") as f:
                f.write(blob)
        else:
            (folder / name).write_bytes(blob)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reads_idx_files(tmp_path, gz):
    arrays = _write_mnist(tmp_path, gz)
    ds = load_dataset("mnist", root=tmp_path)
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert ds.train_y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()
    assert ds.test_y.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    raw = arrays["train-images-idx3-ubyte"] / 255.0
    mean, std = raw.mean(), raw.std()
    for i, r, c in [(0, 0, 0), (11, 27, 3), (5, 14, 20)]:
        assert abs(float(ds.train_x[i, 0, r, c]) - (raw[i, r, c] - mean) / std) < 1e-5
    raw_test = arrays["t10k-images-idx3-ubyte"] / 255.0     # test uses the *training* statistics
    assert abs(float(ds.test_x[4, 0, 9, 9]) - (raw_test[4, 9, 9] - mean) / std) < 1e-5


def test_fashion_mnist_reads_the_same_format(tmp_path):
    arrays = _write_mnist(tmp_path / "raw", gz=True, side=10)
    ds = load_dataset("fashion_mnist", root=tmp_path)      # files in root/raw are found too
    assert ds.name == "fashion_mnist" and ds.input_shape == (1, 10, 10)
    assert ds.train_y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()


def test_fashion_mnist_defaults_to_debians_folder():
    assert DATASETS["fashion_mnist"]["root"].default == "/usr/share/datasets/fashion-mnist"
    if os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.skip("dataset-fashion-mnist is installed here")
    with pytest.raises(DatasetFileError, match="/usr/share/datasets/fashion-mnist"):
        load_dataset("fashion_mnist")


def test_mnist_missing_file_names_path_and_format(tmp_path):
    _write_mnist(tmp_path, gz=False)
    os.remove(tmp_path / "t10k-labels-idx1-ubyte")
    with pytest.raises(DatasetFileError) as e:
        load_dataset("mnist", root=tmp_path)
    assert str(tmp_path / "t10k-labels-idx1-ubyte") in str(e.value) and "idx" in str(e.value)


def test_mnist_bad_magic_and_truncated_file(tmp_path):
    _write_mnist(tmp_path, gz=False)
    labels = tmp_path / "train-labels-idx1-ubyte"
    labels.write_bytes(struct.pack(">II", 2051, 12) + bytes(12))      # images' magic on labels
    with pytest.raises(DatasetFileError, match="magic number 2051, expected 2049"):
        load_dataset("mnist", root=tmp_path)
    labels.write_bytes(struct.pack(">II", 2049, 12) + bytes(5))
    with pytest.raises(DatasetFileError, match="declares dimensions"):
        load_dataset("mnist", root=tmp_path)


# ------------------------------------------------------------------------------ options
def test_datasets_table_lists_options_with_defaults():
    assert set(DATASETS) == {"digits", "synthetic", "cifar10", "mnist", "fashion_mnist"}
    assert DATASETS["digits"]["test_fraction"].default == 0.2
    assert DATASETS["synthetic"]["class_sep"].default > 0


def test_bad_names_and_options_are_clear_errors():
    with pytest.raises(DatasetError, match="'imagenet'.*allowed: digits"):
        load_dataset("imagenet")
    with pytest.raises(DatasetError, match="data.bogus.*allowed: test_fraction"):
        load_dataset("digits", bogus=1)
    with pytest.raises(DatasetError, match=r"data.test_fraction = 1.5 is out of range"):
        load_dataset("digits", test_fraction=1.5)
    with pytest.raises(DatasetError, match="data.n_classes = 'ten'"):
        load_dataset("synthetic", n_classes="ten")
    with pytest.raises(DatasetError, match="data.root"):
        load_dataset("digits", root="/tmp")
