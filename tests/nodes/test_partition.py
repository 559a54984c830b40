"""Splits across workers: disjoint, non-empty, seeded, and with the label mix each scheme
promises."""
import numpy as np
import pytest
import torch

from nodes.partition import PartitionError, split


def _labels(per_class=(30,) * 10, seed=0):
    y = np.concatenate([np.full(n, c) for c, n in enumerate(per_class)])
    return torch.as_tensor(np.random.default_rng(seed).permutation(y))


def _check_disjoint(parts, n_total, all_used=True):
    flat = torch.cat(parts)
    assert len(torch.unique(flat)) == len(flat), "a sample went to two workers"
    assert all(len(p) > 0 for p in parts), "a worker got no samples"
    assert int(flat.min()) >= 0 and int(flat.max()) < n_total
    if all_used:
        assert len(flat) == n_total


def _total_variation(y, part, k):
    local = np.bincount(y[part.numpy()], minlength=k) / len(part)
    glob = np.bincount(y, minlength=k) / len(y)
    return 0.5 * np.abs(local - glob).sum()


def test_iid_uses_everything_in_equal_parts_with_the_global_label_mix():
    y = _labels(per_class=(200, 100, 300, 150, 250))
    parts = split(y, 4, "iid", seed=0)
    _check_disjoint(parts, len(y))
    assert sorted(len(p) for p in parts) == [250, 250, 250, 250]
    assert max(_total_variation(y.numpy(), p, 5) for p in parts) < 0.12   # sampling noise at 250 per worker


def test_same_seed_same_split_other_seed_other_split():
    y = _labels()
    for scheme in ("iid", "dirichlet", "shards"):
        a, b, c = (split(y, 5, scheme, seed=s) for s in (1, 1, 2))
        assert all(torch.equal(p, q) for p, q in zip(a, b))
        assert not all(torch.equal(p, q) for p, q in zip(a, c))


def test_dirichlet_small_alpha_is_skewed_large_alpha_is_not():
    y = _labels(per_class=(100,) * 10)
    skew = split(y, 5, "dirichlet", alpha=0.1, seed=0)
    flat = split(y, 5, "dirichlet", alpha=1000.0, seed=0)
    for parts in (skew, flat):
        _check_disjoint(parts, len(y))
    tv_skew = np.mean([_total_variation(y.numpy(), p, 10) for p in skew])
    tv_flat = np.mean([_total_variation(y.numpy(), p, 10) for p in flat])
    assert tv_skew > 0.45 and tv_flat < 0.05
    # With alpha 0.1 most of each worker's data comes from few labels.
    top2 = [np.sort(np.bincount(y.numpy()[p.numpy()], minlength=10))[-2:].sum() / len(p) for p in skew]
    assert np.mean(top2) > 0.6


def test_dirichlet_never_leaves_a_worker_empty():
    y = _labels(per_class=(30, 30))                # 60 samples, 2 labels, 40 workers
    parts = split(y, 40, "dirichlet", alpha=0.001, seed=0)
    _check_disjoint(parts, len(y))


def test_shards_give_each_worker_exactly_its_number_of_labels():
    y = _labels(per_class=(30,) * 10)
    parts = split(y, 5, "shards", shards_per_worker=2, seed=0)   # 10 shards: one per label
    _check_disjoint(parts, len(y))
    for p in parts:
        assert len(np.unique(y[p].numpy())) == 2 and len(p) == 60


def test_shards_cut_labels_into_equal_single_label_pieces():
    counts = (40, 31, 30, 35, 30, 33, 36, 30, 42, 30)
    y = _labels(per_class=counts)
    parts = split(y, 10, "shards", shards_per_worker=3, seed=4)  # 30 shards: 3 per label
    _check_disjoint(parts, len(y))
    for p in parts:
        held = np.bincount(y[p].numpy(), minlength=10)
        assert (held > 0).sum() == 3
        for label in np.flatnonzero(held):
            assert abs(held[label] - counts[label] / 3) < 1       # a third of that label


def test_shards_with_fewer_shards_than_labels_leave_labels_out():
    y = _labels(per_class=(30,) * 10)
    parts = split(y, 4, "shards", shards_per_worker=2, seed=0)   # 8 shards, 10 labels
    _check_disjoint(parts, len(y), all_used=False)
    assert len(torch.cat(parts)) == 8 * 30
    assert all(len(np.unique(y[p].numpy())) == 2 for p in parts)


def test_bad_requests_are_clear_errors():
    y = _labels(per_class=(3, 3))
    with pytest.raises(PartitionError, match="'zipf'.*allowed: iid, dirichlet, shards"):
        split(y, 2, "zipf")
    with pytest.raises(PartitionError, match="n_workers = 7: more workers than the 6 samples"):
        split(y, 7)
    with pytest.raises(PartitionError, match="alpha"):
        split(y, 2, "dirichlet", alpha=0)
    with pytest.raises(PartitionError, match="label .* has 3 samples, too few for 4 shards"):
        split(y, 4, "shards", shards_per_worker=2)
