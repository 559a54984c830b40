"""Ring all-reduce on the real bytes: reduce-scatter then all-gather, chunk by chunk.

With N nodes the vector is cut into N chunks. Chunk c starts at node c and travels the ring
c -> c+1 -> ... -> c-1; every node adds its own chunk to the partial sum it received and sends
the result on *serialised in the wire dtype*, so with f16 the rounding of every hop happens as
it would on a real ring (the sum is not the same as one fp32 sum rounded once). The all-gather
then copies the finished chunks unchanged.
"""
from __future__ import annotations

import numpy as np
import torch

_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2")}


def ring_chunks(n: int, n_nodes: int) -> list[tuple[int, int]]:
    """[start, end) of each node's chunk (as numpy.array_split cuts: sizes differ by <= 1)."""
    q, r = divmod(int(n), n_nodes)
    starts = np.concatenate(([0], np.cumsum([q + (i < r) for i in range(n_nodes)])))
    return [(int(starts[i]), int(starts[i + 1])) for i in range(n_nodes)]


def ring_sum(buffers: list[bytes], dtype: str = "f32") -> torch.Tensor:
    """Sum equal-length dense vectors given as bytes, in ring order; returns float32."""
    if dtype not in _DTYPES:
        raise ValueError(f"ring dtype {dtype!r} not allowed; allowed 'f32', 'f16'")
    if not buffers:
        raise ValueError("ring_sum needs at least one buffer")
    dt = _DTYPES[dtype]
    lengths = {len(b) for b in buffers}
    if len(lengths) != 1 or next(iter(lengths)) % dt.itemsize:
        raise ValueError(f"ring buffers must have one length, a multiple of {dt.itemsize} bytes; "
                         f"got {sorted(lengths)}")
    vecs = [np.frombuffer(b, dtype=dt) for b in buffers]
    n_nodes, n = len(vecs), vecs[0].size
    out = np.empty(n, dtype=np.float32)
    for c, (a, b) in enumerate(ring_chunks(n, n_nodes)):
        partial = vecs[c][a:b]
        for hop in range(1, n_nodes):
            node = (c + hop) % n_nodes
            # the receiver adds in fp32 and serialises the result back to the wire dtype
            partial = (partial.astype(np.float32) + vecs[node][a:b].astype(np.float32)).astype(dt)
        out[a:b] = partial
    return torch.from_numpy(out)


def allreduce_bytes_per_node(nbytes: int, n_nodes: int, itemsize: int = 4) -> int:
    """Bytes each node sends in a ring all-reduce of an nbytes buffer: 2 (N-1) chunks, counted
    at the largest chunk (the ring moves in lock step)."""
    if n_nodes <= 1:
        return 0
    chunk = max(b - a for a, b in ring_chunks(nbytes // itemsize, n_nodes))
    return 2 * (n_nodes - 1) * chunk * itemsize
