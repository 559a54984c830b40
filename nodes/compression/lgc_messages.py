"""LGC's messages: the kinds inside one LGC message and how positions, weights, sparse values
and aggregates become packets and back (nodes.compression.codec carries the bits). Shared by
LGC-PS, LGC-RAR, the ablation and ScaleCom's shared positions."""
from __future__ import annotations

import math

import torch

from nodes.compression import codec
from nodes.compression.base import Message

# Message kinds inside one LGC message (the codec's `kind` byte; the method byte says LGC)
KIND_SPARSE, KIND_AGGREGATE = codec.KIND_GRADIENT, codec.KIND_AGGREGATE
KIND_INDICES, KIND_LATENT, KIND_INNOVATION, KIND_WEIGHTS, KIND_COMMON = 10, 11, 12, 13, 14
KIND_MEAN_AT_POSITIONS = 15   # per-node decoders' downlink: the mean at I, in the relayed order
KIND_REFRESH = 16             # LGC-PS's coder refresh: a node's memory at the last leader's positions

ORDERS = ("value", "magnitude", "sign", "index")
INDEX_CODINGS = ("ordered", "sorted_ranks")

def join(*messages: Message) -> Message:
    return Message([p for m in messages for p in m.packets])


def by_kind(packets: list[bytes]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for p in packets:
        out.setdefault(codec.read_header(p).kind, []).append(p)
    return out


def all_arrived(packets: list[bytes]) -> bool:
    """True when every packet the headers announce is here (needed to line up ranks)."""
    if not packets:
        return False
    return len({codec.read_header(p).index for p in packets}) == codec.read_header(packets[0]).count


def indices_message(idx: torch.Tensor, n: int, *, payload_bytes: int, method: int, iteration: int,
                    scale: float) -> Message:
    """Positions only (ScaleCom's shared positions): 1-bit codes (the codec needs a value per
    index); the scale the receivers need travels as a per-packet scalar."""
    return codec.encode_sparse(idx, torch.zeros(idx.numel(), dtype=torch.int64), n,
                               payload_bytes=payload_bytes, dtype="bits", bits=1, method=method,
                               kind=KIND_INDICES, iteration=iteration, scalars=(scale,))


def read_indices(packets: list[bytes], n: int) -> tuple[torch.Tensor, float] | None:
    """Sorted indices and scale, or None when part of them was lost (ranks cannot be lined up)."""
    if not all_arrived(packets):
        return None
    d = codec.decode(packets, n)
    return torch.nonzero(d.mask).reshape(-1), float(d.scalars[0])


def order_of(values: torch.Tensor, order: str) -> torch.Tensor:
    """Permutation that lays the values out for the autoencoder so that neighbours are similar:
    "value" (descending signed value: a smooth monotone curve), "magnitude" (descending |value|),
    "sign" (the positive values in index order, then the negative ones) or "index" (as the
    parameters lie in the model)."""
    if order == "sign":
        return torch.cat([torch.nonzero(values >= 0).reshape(-1), torch.nonzero(values < 0).reshape(-1)])
    if order == "value":
        return torch.argsort(values, descending=True, stable=True)
    if order == "magnitude":
        return torch.argsort(values.abs(), descending=True, stable=True)
    return torch.arange(values.numel(), device=values.device)


def positions_message(ordered: torch.Tensor, n: int, *, order: str, coding: str, payload_bytes: int,
                      method: int, iteration: int, scale: float) -> Message:
    """The leader's top-k positions in the order the autoencoder reads them, and the RMS scale.

    - order "index": sorted positions, delta varints (the codec wants a value per index: 1 bit);
    - order "sign": the same sorted positions, the 1 bit per index saying the sign's segment;
    - coding "ordered": the position list itself in that order, ceil(log2 n) bits per entry;
    - coding "sorted_ranks": sorted positions (delta varints) with each one's rank in the order,
      ceil(log2 k) bits per entry.
    The permutation rides on the index list that is sent anyway: no other message carries it.
    """
    k = ordered.numel()
    common = dict(payload_bytes=payload_bytes, method=method, kind=KIND_INDICES, iteration=iteration,
                  scalars=(scale,))
    if order in ("index", "sign"):
        # "sign": ordered = positives then negatives, each sorted; 1 marks the second segment
        codes = torch.zeros(k, dtype=torch.int64)
        if order == "sign" and k:
            split = int(torch.nonzero(ordered[1:] < ordered[:-1]).reshape(-1)[:1].add(1).sum()) or k
            codes[split:] = 1
        return codec.encode_sparse(ordered, codes, n, dtype="bits", bits=1, **common)
    if coding == "ordered":
        return codec.encode_dense(ordered.to(torch.int64), dtype="bits", bits=codec.index_bits(n),
                                  **common)
    ranks = torch.arange(k, dtype=torch.int64)  # paired with ordered; the codec sorts the pairs
    return codec.encode_sparse(ordered, ranks, n, dtype="bits", bits=max(1, (k - 1).bit_length()),
                               **common)


def read_positions(packets: list[bytes], n: int, *, order: str, coding: str
                   ) -> tuple[torch.Tensor, float] | None:
    """Positions in the sender's order and its scale, or None when part of them was lost."""
    if not all_arrived(packets):
        return None
    d = codec.decode(packets)
    if order == "index":
        return torch.nonzero(d.mask).reshape(-1), float(d.scalars[0])
    if order == "sign":
        pos = torch.nonzero(d.mask).reshape(-1)
        neg = d.values[pos] > 0
        return torch.cat([pos[~neg], pos[neg]]), float(d.scalars[0])
    if coding == "ordered":
        return d.values.to(torch.int64), float(d.scalars[0])
    pos = torch.nonzero(d.mask).reshape(-1)
    out = torch.empty_like(pos)
    out[d.values[pos].to(torch.int64)] = pos
    return out, float(d.scalars[0])


def weights_message(data: bytes, *, payload_bytes: int, method: int, iteration: int) -> Message:
    w = torch.frombuffer(bytearray(data), dtype=torch.float32)
    return codec.encode_dense(w, payload_bytes=payload_bytes, dtype="f32", method=method,
                              kind=KIND_WEIGHTS, iteration=iteration)


def sparse_message(idx: torch.Tensor, vals: torch.Tensor, n: int, *, payload_bytes: int, method: int,
                   iteration: int, kind: int = KIND_SPARSE, dtype: str = "f32",
                   scalars: tuple = ()) -> Message:
    return codec.encode_sparse(idx, vals, n, payload_bytes=payload_bytes, dtype=dtype, method=method,
                               kind=kind, iteration=iteration, scalars=scalars)


def aggregate_message(avg: torch.Tensor, *, payload_bytes: int, method: int, iteration: int) -> Message:
    """What the server broadcasts back: the sparse average (its non-zero coordinates)."""
    idx = torch.nonzero(avg).reshape(-1)
    return sparse_message(idx, avg[idx], avg.numel(), payload_bytes=payload_bytes, method=method,
                          iteration=iteration, kind=KIND_AGGREGATE)


def rms(x: torch.Tensor) -> float:
    s = float(x.pow(2).mean().sqrt()) if x.numel() else 0.0
    return s if s > 0 and math.isfinite(s) else 1.0
