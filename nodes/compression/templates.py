"""The templates methods are small files over: the exchange shapes every method shares.

- `DenseScheme`: every coordinate from every worker (none, fp16; `BucketScheme` below), by
  PS, all-gather or (values that add: none, fp16) ring all-reduce.
- `SparseScheme`: (index, value) messages, the union-sparse mean broadcast back (topk, dgc),
  or all-gathered and averaged at every node.
- `BucketScheme`: dense b-bit codes with per-bucket scalars (qsgd, terngrad, signsgd).
Aggregation under loss: dense methods average each coordinate over the workers whose packet for
it arrived; sparse ones divide the sum of what arrived by the number of workers (an unsent
coordinate is a zero). Random draws come from generators keyed by (seed, worker, iteration).
A method subclasses one, registers itself (registry.register) and overrides encode/select/
quantize. Error memory lives in memory.py, wire precision in precision.py.
"""
from __future__ import annotations

import torch

from nodes.compression import codec
from nodes.compression.aggregate import mean_over_arrived
from nodes.compression.base import Message, Scheme, check_finite
from nodes.compression.codec import Decoded
from nodes.compression.phases import AllGather, AllReduce, Downlink, Members, Uplink
from lgc_schema import OptionError


def counter_generator(seed: int, worker: int, iteration: int, salt: int = 0) -> torch.Generator:
    """A generator keyed by (seed, worker, iteration): random draws need no saved RNG state,
    so a run resumed from a checkpoint draws exactly what the uninterrupted run drew."""
    g = torch.Generator()
    g.manual_seed((((seed * 1_000_003 + worker) * 1_000_033 + iteration) * 31 + salt) % (2**63 - 1))
    return g


def ring_bytes(values: torch.Tensor, dtype: str) -> bytes:
    """A dense vector as a ring all-reduce carries it: raw little-endian f32 or f16."""
    return values.detach().float().cpu().numpy().astype("<f2" if dtype == "f16" else "<f4").tobytes()


def ring_mean(vectors: dict[int, torch.Tensor], dtype: str, numel: int):
    """Generator: the mean of the members' dense vectors by ring all-reduce (`vectors` keyed by
    exactly the members, see phases.Members), float32 on the CPU; zeros when nobody takes part
    (the empty round is still yielded, so the transport closes it at the deadline)."""
    summed = yield AllReduce({w: ring_bytes(v.reshape(-1), dtype) for w, v in vectors.items()}, dtype)
    if summed is None:
        return torch.zeros(numel)
    return summed.reshape(-1) / len(vectors)


def leader_among(members: list[int], preferred: int, n_workers: int) -> int | None:
    """The preferred leader if it takes part, else the next member after it in cyclic order
    (every node knows the members, so every node picks the same); None when there is none."""
    for step in range(n_workers):
        if (preferred + step) % n_workers in members:
            return (preferred + step) % n_workers
    return None


def check_leader(leader: int, n_workers: int) -> int:
    """`compression.leader` against the number of workers (what its Field cannot know)."""
    if leader >= n_workers:
        raise OptionError("compression.leader", leader,
                          f"-1 (cyclic) or in [0, {n_workers - 1}]")
    return int(leader)


def k_of(ratio: float, n: int) -> int:
    return max(1, min(n, int(round(ratio * n))))


class DenseScheme(Scheme):
    """Dense messages, every coordinate from every worker, exchanged as `collective` says:
    - "ps": each worker encodes its whole gradient, the server decodes what arrived, averages
      each coordinate over the workers whose packet for it arrived, and broadcasts the mean
      densely in `downlink` precision. The returned gradient is what the workers decode from
      that broadcast, so server and workers apply exactly the same update.
    - "allgather": every node receives every worker's message (AllGather) and takes the same
      mean itself, with no server and no downlink rounding.
    - "allreduce" (methods whose values add up on the wire: `ring_dtype` set, none and fp16):
      the raw f32/f16 vectors are summed along the ring (reduce-scatter + all-gather, each hop
      rounded to the wire dtype by `ring.ring_sum`) over the round's members (phases.Members)
      and every node divides by their number."""
    collectives = ("ps", "allgather")
    lossy_downlink = True  # the mean's packets name their coordinates
    ring_dtype: str | None = None  # wire dtype of a ring all-reduce, for methods whose values add

    # -- what a subclass changes
    def check_wire(self, worker: int, iteration: int, grad: torch.Tensor) -> None:
        """Refuse values the wire dtype cannot carry (fp16's range)."""

    def encode(self, worker: int, iteration: int, grad: torch.Tensor) -> Message:
        raise NotImplementedError

    def decode(self, worker: int, iteration: int, packets: list[bytes]) -> Decoded:
        """Decoded gradient values (in gradient units) and the mask of what arrived."""
        return codec.decode(packets, self.numel, iteration=iteration)

    # -- the exchange
    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device if grads else self.device
        if self.collective == "allreduce":
            # the values themselves go around the ring in the wire dtype; no header, no index
            members = yield Members(len(grads))
            for w in members:
                self.check_wire(w, iteration, grads[w])
            mean = yield from ring_mean({w: grads[w] for w in members}, self.ring_dtype, self.numel)
            return mean.to(out_device)
        msgs = {w: self.encode(w, iteration, g.reshape(-1).float()) for w, g in enumerate(grads)}
        if self.collective == "allgather":
            got = yield AllGather(msgs)
            mean = mean_over_arrived(
                (self.decode(w, iteration, got.get(w, [])) for w in range(len(grads))), self.numel)
            return mean.to(out_device)
        arrived = yield Uplink(msgs)
        mean = mean_over_arrived(
            (self.decode(w, iteration, arrived.get(w, [])) for w in range(len(grads))), self.numel)
        down = codec.encode_dense(mean, payload_bytes=self.payload_bytes, dtype=self.downlink_dtype,
                                  method=self.wire_id, kind=codec.KIND_AGGREGATE, iteration=iteration)
        yield Downlink(down, lossy=self.lossy_downlink)
        return codec.decode(down.packets, self.numel).values.to(out_device)


class SparseScheme(Scheme):
    """Exchange of sparse (index, value) messages, which cannot be summed on the way.

    "ps": the server broadcasts the union-sparse mean; "allgather": every node receives every
    worker's message and takes the same mean itself (no server, no downlink rounding).
    The mean divides by the number of workers: a coordinate a worker did not send is a zero
    from that worker, and a lost packet's coordinates count as zeros too (best effort).
    """
    collectives = ("ps", "allgather")
    lossy_downlink = True  # the union-sparse mean's packets name their coordinates

    def select(self, worker: int, iteration: int, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(indices, values as sent) of one worker; updates that worker's state."""
        raise NotImplementedError

    def encode(self, worker: int, iteration: int, grad: torch.Tensor) -> Message:
        idx, vals = self.select(worker, iteration, grad)
        return codec.encode_sparse(idx, vals, self.numel, payload_bytes=self.payload_bytes,
                                   dtype=self.values_dtype, method=self.wire_id, iteration=iteration)

    def decode(self, worker: int, iteration: int, packets: list[bytes]) -> torch.Tensor:
        return codec.decode(packets, self.numel, iteration=iteration).values

    def exchange(self, iteration, grads):
        check_finite(grads, iteration)
        out_device = grads[0].device if grads else self.device
        msgs = {w: self.encode(w, iteration, g.reshape(-1).float()) for w, g in enumerate(grads)}
        arrived = yield (AllGather(msgs) if self.collective == "allgather" else Uplink(msgs))
        total = torch.zeros(self.numel)
        for w in range(len(grads)):
            total += self.decode(w, iteration, arrived.get(w, []))
        mean = total / max(1, len(grads))
        if self.collective == "allgather":
            return mean.to(out_device)
        down = self.encode_aggregate(iteration, mean)
        yield Downlink(down, lossy=self.lossy_downlink)
        return codec.decode(down.packets, self.numel).values.to(out_device)

    def encode_aggregate(self, iteration: int, mean: torch.Tensor) -> Message:
        nz = torch.nonzero(mean, as_tuple=True)[0]
        return codec.encode_sparse(nz, mean[nz], self.numel, payload_bytes=self.payload_bytes,
                                   dtype=self.downlink_dtype, method=self.wire_id,
                                   kind=codec.KIND_AGGREGATE, iteration=iteration)


class BucketScheme(DenseScheme):
    """Dense b-bit codes per coordinate, `nscalars` float scalars per bucket (`bucket`
    coordinates, a multiple of 8 so packets cut on bucket borders stay byte-aligned)."""
    downlink_dtype = "f16"
    bits: int = 1
    nscalars: int = 1

    def __init__(self, *, bucket: int, **kw):
        super().__init__(**kw)
        self.bucket = int(bucket)

    def quantize(self, worker: int, iteration: int, x: torch.Tensor, valid: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (buckets, bucket) zero-padded; valid: coordinates per bucket.
        Returns (integer codes like x, scalars (buckets, nscalars))."""
        raise NotImplementedError

    def dequantize(self, codes: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        """codes (m,), per-coordinate scalars (m, nscalars) -> values (m,)."""
        raise NotImplementedError

    def stage(self, iteration):
        return "quantized"

    def _buckets(self, grad: torch.Tensor):
        n, b = grad.numel(), self.bucket
        nb = -(-n // b)
        x = torch.zeros(nb * b, dtype=grad.dtype, device=grad.device)
        x[:n] = grad
        valid = torch.full((nb,), b, dtype=grad.dtype, device=grad.device)
        if nb:
            valid[-1] = n - (nb - 1) * b
        return x.view(nb, b), valid

    def quantize_flat(self, worker, iteration, grad) -> tuple[torch.Tensor, torch.Tensor]:
        x, valid = self._buckets(grad)
        codes, scalars = self.quantize(worker, iteration, x, valid)
        return codes.reshape(-1)[: grad.numel()], scalars

    def sent_values(self, codes: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        """What the wire carries, decoded locally (scalars rounded to f32 as on the wire)."""
        per = scalars.float().repeat_interleave(self.bucket, dim=0)[: codes.numel()]
        return self.dequantize(codes, per)

    def encode_codes(self, iteration, codes, scalars):
        return codec.encode_dense(codes.cpu().numpy(), payload_bytes=self.payload_bytes,
                                  dtype="bits", bits=self.bits, method=self.wire_id,
                                  iteration=iteration, group=self.bucket,
                                  group_scalars=scalars.float().cpu().numpy())

    def encode(self, worker, iteration, grad):
        codes, scalars = self.quantize_flat(worker, iteration, grad)
        return self.encode_codes(iteration, codes, scalars)

    def decode(self, worker, iteration, packets) -> Decoded:
        d = codec.decode(packets, self.numel, iteration=iteration)
        nb = -(-self.numel // self.bucket)
        rows = torch.zeros(nb, self.nscalars)
        for start, _, sc in d.segments:  # packets hold whole buckets, their scalars in order
            r = torch.tensor(sc, dtype=torch.float32).view(-1, self.nscalars)
            first = start // self.bucket
            rows[first:first + len(r)] = r
        per = rows.repeat_interleave(self.bucket, dim=0)[: self.numel]
        d.values = torch.where(d.mask, self.dequantize(d.values, per), torch.zeros(()))
        return d
