"""Split a training set across workers: iid, Dirichlet(alpha) non-iid by label, or fixed label
shards. Every sample goes to at most one worker, no worker is left empty, and the same seed
always gives the same split.
"""
from __future__ import annotations

import numpy as np
import torch

SCHEMES = ("iid", "dirichlet", "shards")
_DIRICHLET_REDRAWS = 100   # re-draw this many times before fixing up empty workers by hand


class PartitionError(ValueError):
    """Impossible split (bad scheme, too few samples for the workers asked for)."""


def split(labels, n_workers: int, scheme: str = "iid", alpha: float = 0.5,
          shards_per_worker: int = 2, seed: int = 0) -> list[torch.Tensor]:
    """Indices into `labels` for each worker (sorted LongTensors).

    - "iid": a seeded shuffle cut into near-equal parts; every sample is used.
    - "dirichlet": for each label, the share of each worker is drawn from Dirichlet(alpha);
      small alpha concentrates each label on few workers. Every sample is used.
    - "shards": each label is cut into equal single-label shards, n_workers * shards_per_worker
      in all, and every worker gets shards_per_worker shards of different labels (when
      shards_per_worker <= number of labels). With fewer shards than labels some labels are
      left out.
    """
    y = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels).astype(np.int64)
    if y.ndim != 1:
        raise PartitionError(f"labels must be 1-D, got shape {tuple(y.shape)}")
    if isinstance(n_workers, bool) or not isinstance(n_workers, (int, np.integer)) or n_workers < 1:
        raise PartitionError(f"n_workers = {n_workers!r}: must be an integer >= 1")
    if len(y) < n_workers:
        raise PartitionError(f"n_workers = {n_workers}: more workers than the {len(y)} samples")
    rng = np.random.default_rng(seed)
    if scheme == "iid":
        parts = np.array_split(rng.permutation(len(y)), n_workers)
    elif scheme == "dirichlet":
        if not alpha > 0:
            raise PartitionError(f"partition.alpha = {alpha!r}: must be > 0")
        parts = _dirichlet(y, n_workers, float(alpha), rng)
    elif scheme == "shards":
        if isinstance(shards_per_worker, bool) or not isinstance(shards_per_worker, (int, np.integer)) \
                or shards_per_worker < 1:
            raise PartitionError(f"partition.shards_per_worker = {shards_per_worker!r}: "
                                 f"must be an integer >= 1")
        parts = _shards(y, n_workers, int(shards_per_worker), rng)
    else:
        raise PartitionError(f"partition.scheme = {scheme!r} is not known; allowed: {', '.join(SCHEMES)}")
    return [torch.as_tensor(np.sort(p), dtype=torch.int64) for p in parts]


def _dirichlet(y: np.ndarray, n: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
    by_label = [rng.permutation(np.flatnonzero(y == c)) for c in np.unique(y)]
    for _ in range(_DIRICHLET_REDRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(n)]
        for idx in by_label:
            share = rng.dirichlet(np.full(n, alpha))
            cuts = np.round(np.cumsum(share)[:-1] * len(idx)).astype(int)
            for w, piece in enumerate(np.split(idx, cuts)):
                parts[w].append(piece)
        out = [np.concatenate(p) for p in parts]
        if all(len(p) > 0 for p in out):
            return out
    # Tiny alpha with many workers: move single samples from the largest workers to empty ones.
    for w in range(n):
        if len(out[w]) == 0:
            donor = int(np.argmax([len(p) for p in out]))
            out[w], out[donor] = out[donor][-1:], out[donor][:-1]
    return out


def _shards(y: np.ndarray, n: int, per_worker: int, rng: np.random.Generator) -> list[np.ndarray]:
    labels = rng.permutation(np.unique(y))
    n_shards = n * per_worker
    if n_shards < len(labels):
        labels = labels[:n_shards]       # fewer shards than labels: some labels are not used
    counts = np.array([np.sum(y == c) for c in labels])
    # Shards per label: as even as possible, the extra ones to the labels with most samples.
    per_label = np.full(len(labels), n_shards // len(labels))
    per_label[np.argsort(-counts, kind="stable")[: n_shards % len(labels)]] += 1
    shards: list[np.ndarray] = []
    for c, k, m in zip(labels, per_label, counts):
        if m < k:
            raise PartitionError(f"partition.shards_per_worker = {per_worker}: label {int(c)} has "
                                 f"{m} samples, too few for {k} shards")
        shards.extend(np.array_split(rng.permutation(np.flatnonzero(y == c)), k))
    # Shards are grouped by label; dealing them round-robin gives each worker shards of distinct
    # labels as long as no label has more shards than there are workers.
    order = rng.permutation(n)
    parts: list[list[np.ndarray]] = [[] for _ in range(n)]
    for j, shard in enumerate(shards):
        parts[order[j % n]].append(shard)
    return [np.concatenate(p) for p in parts]
