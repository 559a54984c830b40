"""The wire format every compression method shares.

A message is a list of self-contained packets. Each packet is

    header (30 bytes) | scalars (nscalars x f32) | [indices] | values

header  = method id, message kind, flags, value bits, index bits, nscalars (6 x u8),
          iteration, packet index, packet count, n (length of the vector), start, count (6 x u32)
flags   = layout (dense range / sparse) | value encoding (f32 / f16 / b-bit codes) | index coding
dense   = the values of coordinates [start, start + count)
sparse  = `count` (index, value) pairs; the first index is `start`, the others are sent either as
          delta varints or as fixed-width offsets from `start` (bit-packed, width in the header),
          whichever is smaller for that packet (flagged per packet)
codes   = unsigned b-bit integers, bit-packed (signs, ternary, QSGD levels); their meaning (norm,
          scale) travels in the per-packet scalars

Because every packet names its own coordinates, decoding any subset of the packets recovers
exactly the coordinates they carry; `decode` returns the values and a mask of what arrived.
Everything is vectorised in numpy: packing 1M floats takes milliseconds.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from nodes.compression.base import Message

HEADER = struct.Struct("<6B6I")
HEADER_BYTES = HEADER.size  # 30
# The same header as a numpy record, to write or read a message's headers in one call.
_HEADER_DTYPE = np.dtype([("method", "u1"), ("kind", "u1"), ("flags", "u1"), ("vbits", "u1"),
                          ("ibits", "u1"), ("nscalars", "u1"), ("iteration", "<u4"),
                          ("index", "<u4"), ("count", "<u4"), ("n", "<u4"), ("start", "<u4"),
                          ("entries", "<u4")])
assert _HEADER_DTYPE.itemsize == HEADER_BYTES

DENSE, SPARSE = 0, 1
F32, F16, BITS = 0, 1, 2
VARINT, FIXED = 0, 1
# Message kinds (one byte in the header): what a message carries within an iteration.
KIND_GRADIENT, KIND_AGGREGATE = 0, 1   # worker -> server, server -> workers
KIND_P, KIND_Q, KIND_P_MEAN, KIND_Q_MEAN = 2, 3, 4, 5  # PowerSGD's two rounds
_VALUE_NAMES = {"f32": F32, "f16": F16, "bits": BITS}
_U32_MAX = 2**32 - 1

# One byte on the wire names the method: the id each method pins in registry.register (the
# class's `wire_id`); 255 is "no method" (raw codec use). The codec knows no method names.


class CodecError(ValueError):
    """Bad input to the codec or a malformed packet."""


def method_id(method: int) -> int:
    """The header's method byte: a registered method's wire id (`Scheme.wire_id`), 255 for none."""
    if isinstance(method, bool) or not isinstance(method, int) or not 0 <= method <= 255:
        raise CodecError(f"method id {method!r}: must be an integer in 0..255 (a Scheme's wire_id)")
    return method


def _flags(layout: int, venc: int, icode: int) -> int:
    return layout | (venc << 1) | (icode << 3)


def _unflags(f: int) -> tuple[int, int, int]:
    return f & 1, (f >> 1) & 3, (f >> 3) & 1


# ---------------------------------------------------------------- bit packing and varints

def bit_length(x: int) -> int:
    return int(x).bit_length()


def index_bits(n: int) -> int:
    """ceil(log2 n): the fixed width that can name any of n coordinates."""
    return max(1, (int(n) - 1).bit_length())


def pack_uint(values: np.ndarray, width: int) -> bytes:
    """Bit-pack unsigned ints of `width` bits each (MSB first), padded to a whole byte."""
    if width == 0 or values.size == 0:
        return b""
    if not 1 <= width <= 32:
        raise CodecError(f"bit width {width} not allowed; allowed 0..32")
    if width == 1:  # signs: the common case, one call
        return np.packbits(values.astype(np.uint8)).tobytes()
    if width == 8:
        return values.astype(np.uint8).tobytes()
    if width < 8:
        # 8 codes of `width` bits are exactly `width` bytes: build one 64-bit word per 8 codes
        m = values.size
        v = np.zeros(-(-m // 8) * 8, dtype=np.uint64)
        v[:m] = values
        g = v.reshape(-1, 8)
        word = np.zeros(g.shape[0], dtype=np.uint64)
        for j in range(8):
            word |= g[:, j] << np.uint64(width * (7 - j))
        out = word.astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - width:]
        return out.reshape(-1)[: -(-(m * width) // 8)].tobytes()
    else:
        be = values.astype(">u4").view(np.uint8).reshape(-1, 4)
        bits = np.unpackbits(be, axis=1)[:, 32 - width:]
    return np.packbits(bits.reshape(-1)).tobytes()


def unpack_uint(buf: bytes | np.ndarray, width: int, count: int) -> np.ndarray:
    """Inverse of pack_uint: `count` unsigned ints of `width` bits (uint32)."""
    if width == 0 or count == 0:
        return np.zeros(count, dtype=np.uint32)
    raw = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else buf
    need = (count * width + 7) // 8
    if raw.size < need:
        raise CodecError(f"packet truncated: {raw.size} bytes for {count} codes of {width} bits")
    if width == 1:
        return np.unpackbits(raw[:need])[:count].astype(np.uint32)
    if width == 8:
        return raw[:count].astype(np.uint32)
    if width < 8:
        groups = -(-count // 8)
        buf8 = np.zeros((groups, 8), dtype=np.uint8)
        flat = np.zeros(groups * width, dtype=np.uint8)
        flat[:need] = raw[:need]
        buf8[:, 8 - width:] = flat.reshape(groups, width)
        word = buf8.view(">u8").reshape(-1).astype(np.uint64)
        mask = np.uint64((1 << width) - 1)
        codes = np.stack([(word >> np.uint64(width * (7 - j))) & mask for j in range(8)], axis=1)
        return codes.reshape(-1)[:count].astype(np.uint32)
    bits = np.unpackbits(raw[:need])[: count * width].reshape(count, width)
    padded = np.zeros((count, 32), dtype=np.uint8)
    padded[:, 32 - width:] = bits
    return np.packbits(padded, axis=1).view(">u4").reshape(-1).astype(np.uint32)


_VARINT_STEPS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)  # 2^7 .. 2^63


def varint_lengths(values: np.ndarray) -> np.ndarray:
    """Bytes each LEB128 varint takes (7 payload bits per byte, at least one byte): one more
    than the number of powers 2^7k it reaches (one search, not nine comparisons)."""
    return np.searchsorted(_VARINT_STEPS, values.astype(np.uint64), side="right") + 1


def encode_varints(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """LEB128 varints of unsigned ints, vectorised. Returns (bytes, per-value lengths)."""
    v = values.astype(np.uint64)
    lens = varint_lengths(v)
    offs = np.cumsum(lens) - lens
    out = np.zeros(int(lens.sum()), dtype=np.uint8)
    for j in range(int(lens.max(initial=0))):
        sel = lens > j
        byte = ((v[sel] >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        byte |= np.where(lens[sel] - 1 > j, 0x80, 0).astype(np.uint8)
        out[offs[sel] + j] = byte
    return out.tobytes(), lens


def decode_varints(buf: bytes | np.ndarray, count: int) -> np.ndarray:
    """Decode exactly `count` varints from the start of buf (vectorised)."""
    return _varints(buf, count)[0]


def _varints(buf: bytes | np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """`decode_varints`, and the bytes the `count` varints took."""
    if count == 0:
        return np.zeros(0, dtype=np.uint64), 0
    raw = np.frombuffer(buf, dtype=np.uint8) if isinstance(buf, (bytes, bytearray, memoryview)) else buf
    ends = np.flatnonzero(raw < 0x80)
    if ends.size < count:
        raise CodecError(f"packet truncated: {ends.size} varints where {count} were announced")
    ends = ends[:count]
    raw = raw[: ends[-1] + 1]
    starts = np.concatenate(([0], ends[:-1] + 1))
    pos = np.arange(raw.size) - np.repeat(starts, ends - starts + 1)
    parts = (raw & 0x7F).astype(np.uint64) << (7 * pos).astype(np.uint64)
    return np.add.reduceat(parts, starts), raw.size


# ---------------------------------------------------------------- encoding

def _as_numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu").numpy()
    return np.asarray(x)


def _value_spec(dtype: str, bits: int | None) -> tuple[int, int]:
    if dtype not in _VALUE_NAMES:
        raise CodecError(f"value dtype {dtype!r} not allowed; allowed 'f32', 'f16', 'bits'")
    venc = _VALUE_NAMES[dtype]
    if venc == BITS:
        if bits is None or not 1 <= int(bits) <= 24:
            raise CodecError(f"bits={bits!r} not allowed for dtype 'bits'; allowed 1..24")
        return venc, int(bits)
    return venc, 32 if venc == F32 else 16


def _value_bytes(values: np.ndarray, venc: int, vbits: int) -> bytes:
    if venc == F32:
        return values.astype("<f4").tobytes()
    if venc == F16:
        return values.astype("<f2").tobytes()
    v = values.astype(np.int64)
    if v.size and (v.min() < 0 or v.max() >= (1 << vbits)):
        raise CodecError(f"codes out of range for {vbits} bits: [{v.min()}, {v.max()}]")
    return pack_uint(v, vbits)


def _scalars_bytes(scalars: Sequence[float]) -> bytes:
    if len(scalars) > 255:
        raise CodecError(f"{len(scalars)} scalars per packet; allowed at most 255")
    return np.asarray(scalars, dtype="<f4").tobytes()


def _room(payload_bytes: int, nscalars: int) -> int:
    room = int(payload_bytes) - HEADER_BYTES - 4 * nscalars
    if room <= 0:
        raise CodecError(f"payload_bytes={payload_bytes} leaves no room after the {HEADER_BYTES}-byte "
                         f"header and {nscalars} scalars; allowed > {HEADER_BYTES + 4 * nscalars}")
    return room


def _check_n(n: int) -> None:
    if not 0 <= n <= _U32_MAX:
        raise CodecError(f"vector length n={n} not allowed; allowed 0..{_U32_MAX}")


def encode_dense(values, *, payload_bytes: int, dtype: str = "f32", bits: int | None = None,
                 method: int = 255, kind: int = 0, iteration: int = 0,
                 scalars: Sequence[float] = (), start: int = 0, n: int | None = None,
                 group: int | None = None, group_scalars=None) -> Message:
    """Values of coordinates [start, start + len(values)) of an n-vector, in packets.

    dtype "f32"/"f16" sends floats; "bits" sends unsigned integer codes of `bits` bits each.
    `scalars` (e.g. a norm) are repeated in every packet so each one decodes alone.
    Bucketed methods pass `group` (coordinates per bucket) and `group_scalars` (one row of
    scalars per bucket): packets are then cut on bucket borders and each carries the rows of
    the buckets it holds, after the shared `scalars` (see Decoded.segments).
    """
    v = _as_numpy(values).reshape(-1)
    n = start + v.size if n is None else int(n)
    _check_n(n)
    if start < 0 or start + v.size > n:
        raise CodecError(f"dense range [{start}, {start + v.size}) outside a vector of n={n}")
    venc, vbits = _value_spec(dtype, bits)
    gs = None
    if group is not None:
        group = int(group)
        gs = np.asarray(group_scalars, dtype="<f4").reshape(-(-v.size // group) if v.size else 0, -1)
        if group < 1 or (venc == BITS and group * vbits % 8):
            raise CodecError(f"group={group} not allowed; allowed >= 1 (and group x bits a multiple of 8)")
    room = _room(payload_bytes, len(scalars))
    if gs is not None:  # whole buckets per packet, with their scalars
        row = gs.shape[1] * 4
        per_group = row + group * vbits // 8 + (1 if group * vbits % 8 else 0)
        per = (room // per_group) * group
        if per < 1:
            raise CodecError(f"payload_bytes={payload_bytes} cannot hold one bucket of {group} {dtype} values")
    elif venc == BITS:
        per = (room * 8 // vbits) // 8 * 8  # a multiple of 8 codes: packets cut on byte borders
    else:
        per = room * 8 // vbits
    if per < 1:
        raise CodecError(f"payload_bytes={payload_bytes} cannot hold one {dtype} value")
    body = _value_bytes(v, venc, vbits)
    sc = _scalars_bytes(scalars)
    mid, flags = method_id(method), _flags(DENSE, venc, VARINT)
    count = max(1, -(-v.size // per))
    if gs is None:
        return Message(_dense_packets(body, sc, per * vbits // 8, v.size, per, count,
                                      (mid, kind, flags, vbits if venc == BITS else 0, 0,
                                       len(sc) // 4, iteration % 2**32), n, start))
    return Message(_dense_packets_one_by_one(body, sc, gs, group, vbits, venc, v.size, per, count,
                                             mid, kind, flags, iteration, n, start))


def _dense_packets(body: bytes, sc: bytes, size: int, m: int, per: int, count: int,
                   fixed: tuple, n: int, start: int) -> list[bytes]:
    """encode_dense's packets without buckets, built as one array: every packet but the last
    holds `per` values (`size` bytes of `body`), the last the rest; `fixed` the header's first
    seven fields (the same in every packet)."""
    heads = np.zeros(count, dtype=_HEADER_DTYPE)
    for name, value in zip(_HEADER_DTYPE.names, fixed):
        heads[name] = value
    heads["index"] = np.arange(count)
    heads["count"], heads["n"] = count, n
    heads["start"] = start + per * np.arange(count, dtype=np.int64)
    heads["entries"] = per
    heads["entries"][-1] = m - per * (count - 1)
    full, width = count - 1, HEADER_BYTES + len(sc) + size
    rows = np.empty((full, width), dtype=np.uint8)
    rows[:, :HEADER_BYTES] = heads[:full].view(np.uint8).reshape(full, HEADER_BYTES)
    rows[:, HEADER_BYTES:HEADER_BYTES + len(sc)] = np.frombuffer(sc, dtype=np.uint8)
    rows[:, HEADER_BYTES + len(sc):] = np.frombuffer(body, dtype=np.uint8, count=full * size).reshape(full, size)
    flat = rows.tobytes()
    return [flat[i:i + width] for i in range(0, full * width, width)] + \
        [heads[full:].tobytes() + sc + body[full * size:]]


def _dense_packets_one_by_one(body, sc, gs, group, vbits, venc, m, per, count, mid, kind, flags,
                              iteration, n, start) -> list[bytes]:
    """encode_dense's packets one at a time: bucketed messages (each packet carries its
    buckets' scalars), and the reference `_dense_packets` is tested against."""
    packets = []
    for p in range(count):
        a, b = p * per, min(m, (p + 1) * per)
        lo, hi = a * vbits // 8, -(-(b * vbits) // 8)
        psc = sc
        if gs is not None:
            psc = sc + gs[a // group: -(-b // group)].tobytes()
        nsc = len(psc) // 4
        if nsc > 255:
            raise CodecError(f"{nsc} scalars in one packet; allowed at most 255 (use larger buckets)")
        head = HEADER.pack(mid, kind, flags, vbits if venc == BITS else 0, 0, nsc,
                           iteration % 2**32, p, count, n, start + a, b - a)
        packets.append(head + psc + body[lo:hi])
    return packets


def encode_sparse(indices, values, n: int, *, payload_bytes: int, dtype: str = "f32",
                  bits: int | None = None, method: int = 255, kind: int = 0,
                  iteration: int = 0, scalars: Sequence[float] = ()) -> Message:
    """(index, value) pairs of an n-vector; indices need not be sorted but must be unique.

    Per packet the indices go as delta varints or as fixed-width offsets, whichever is smaller.
    """
    idx = _as_numpy(indices).reshape(-1).astype(np.int64)
    v = _as_numpy(values).reshape(-1)
    n = int(n)
    _check_n(n)
    if idx.size != v.size:
        raise CodecError(f"{idx.size} indices but {v.size} values")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise CodecError(f"indices outside [0, {n}): min {idx.min()}, max {idx.max()}")
    order = np.argsort(idx, kind="stable")
    idx, v = idx[order], v[order]
    if idx.size > 1 and not np.all(np.diff(idx) > 0):
        raise CodecError("duplicate indices in a sparse message")
    venc, vbits = _value_spec(dtype, bits)
    room = _room(payload_bytes, len(scalars))
    sc = _scalars_bytes(scalars)
    mid = method_id(method)
    k = idx.size
    W = index_bits(n)
    if k == 0:  # an empty message still says "nothing from me this iteration"
        head = HEADER.pack(mid, kind, _flags(SPARSE, venc, VARINT), vbits if venc == BITS else 0,
                           0, len(scalars), iteration % 2**32, 0, 1, n, 0, 0)
        return Message([head + sc])
    # Global delta varints: the bytes of entries a+1..b-1 are contiguous for packet [a, b).
    deltas = np.diff(idx)
    vbuf, vlens = encode_varints(deltas)  # vlens[j] is the varint of entry j+1
    S = np.concatenate(([0, 0], np.cumsum(vlens)))  # S[i] = bytes of varints of entries 1..i-1
    vraw = _value_bytes(v, venc, vbits)  # also range-checks b-bit codes
    vb = vbits // 8 if venc != BITS else 0

    def vbytes(m: int) -> int:
        return -(-(m * vbits) // 8)

    def fixed_fits(m: int) -> bool:
        return -(-((m - 1) * W) // 8) + vbytes(m) <= room

    bounds = []
    a = 0
    while a < k:
        # fixed-width bound with the global width W (a packet's own width is never larger)
        m_fix = min(k - a, (room * 8 + W) // (W + vbits) + 1)
        while m_fix > 0 and not fixed_fits(m_fix):
            m_fix -= 1
        # varint bound: largest b with S[b] - S[a+1] + vbytes(b - a) <= room
        target = room + S[a + 1]
        hi = min(k, a + room * 8 // vbits)
        b = a + int(np.searchsorted(S[a + 1:hi + 1] + (np.arange(a + 1, hi + 1) - a) * vbits / 8.0,
                                    target, side="right"))
        while b > a and S[b] - S[a + 1] + vbytes(b - a) > room:
            b -= 1
        m = max(m_fix, b - a)
        if m < 1:
            raise CodecError(f"payload_bytes={payload_bytes} cannot hold one sparse entry")
        bounds.append((a, a + m))
        a += m
    packets = []
    count = len(bounds)
    for p, (a, b) in enumerate(bounds):
        m = b - a
        first = int(idx[a])
        var_len = int(S[b] - S[a + 1]) if m > 1 else 0
        w = bit_length(int(idx[b - 1]) - first) if m > 1 else 0
        fix_len = -(-((m - 1) * w) // 8)
        if fix_len < var_len:
            icode, ibits, ibody = FIXED, w, pack_uint((idx[a + 1:b] - first).astype(np.uint64), w)
        else:
            lo = int(S[a + 1]) if m > 1 else 0
            icode, ibits, ibody = VARINT, 0, vbuf[lo:lo + var_len]
        if venc == BITS:
            body = pack_uint(v[a:b].astype(np.int64), vbits)
        else:
            body = vraw[a * vb:b * vb]
        head = HEADER.pack(mid, kind, _flags(SPARSE, venc, icode), vbits if venc == BITS else 0,
                           ibits, len(scalars), iteration % 2**32, p, count, n, first, m)
        packets.append(head + sc + ibody + body)
    return Message(packets)


# ---------------------------------------------------------------- decoding

@dataclass
class Header:
    method: int
    kind: int
    layout: int
    venc: int
    icode: int
    vbits: int
    ibits: int
    nscalars: int
    iteration: int
    index: int
    count: int
    n: int
    start: int
    entries: int


def read_header(packet: bytes) -> Header:
    if len(packet) < HEADER_BYTES:
        raise CodecError(f"packet of {len(packet)} bytes is shorter than the {HEADER_BYTES}-byte header")
    mid, kind, flags, vbits, ibits, nsc, it, pi, pc, n, start, cnt = HEADER.unpack_from(packet)
    layout, venc, icode = _unflags(flags)
    if venc == F32:
        vbits = 32
    elif venc == F16:
        vbits = 16
    elif venc != BITS or vbits == 0:
        raise CodecError(f"packet with unknown value encoding (flags {flags:#x}, bits {vbits})")
    return Header(mid, kind, layout, venc, icode, vbits, ibits, nsc, it, pi, pc, n, start, cnt)


@dataclass
class Decoded:
    """What a set of packets said: the vector (zeros where nothing arrived) and its mask."""
    values: torch.Tensor          # float32, length n (b-bit codes as floats)
    mask: torch.Tensor            # bool, True where a coordinate arrived
    scalars: tuple[float, ...]    # the per-packet scalars (of the first packet that arrived)
    packets_received: int
    packets_expected: int         # from the headers (0 if nothing arrived)
    iteration: int | None = None
    kind: int | None = None
    per_packet_scalars: list[tuple[float, ...]] = field(default_factory=list)
    # (first coordinate, number of coordinates, scalars) of every packet that arrived
    segments: list[tuple[int, int, tuple[float, ...]]] = field(default_factory=list)

    @property
    def missing(self) -> torch.Tensor:
        return ~self.mask


def _decode_one(pkt: bytes, h: Header, values: np.ndarray, mask: np.ndarray) -> tuple[float, ...]:
    off = HEADER_BYTES
    if len(pkt) < off + 4 * h.nscalars:
        raise CodecError(f"packet truncated: {len(pkt)} bytes cannot hold {h.nscalars} scalars")
    sc = tuple(float(x) for x in np.frombuffer(pkt, dtype="<f4", count=h.nscalars, offset=off))
    off += 4 * h.nscalars
    m = h.entries
    if h.layout == DENSE:
        if h.start + m > values.size:
            raise CodecError(f"dense packet range [{h.start}, {h.start + m}) outside n={values.size}")
        coords = slice(h.start, h.start + m)
    else:
        if m == 0:
            return sc
        if h.icode == VARINT:
            raw = np.frombuffer(pkt, dtype=np.uint8, offset=off)
            d, ilen = _varints(raw, m - 1)
            rel = np.concatenate(([0], np.cumsum(d, dtype=np.uint64)))
        else:
            ilen = -(-((m - 1) * h.ibits) // 8)
            if len(pkt) - off < ilen:
                raise CodecError(f"packet truncated: {len(pkt) - off} bytes for {m - 1} indices")
            rel = np.concatenate(([0], unpack_uint(np.frombuffer(pkt, np.uint8, ilen, off), h.ibits, m - 1)))
        coords = h.start + rel.astype(np.int64)
        off += ilen
        if coords[-1] >= values.size:
            raise CodecError(f"sparse packet index {coords[-1]} outside n={values.size}")
    if len(pkt) - off < -(-(m * h.vbits) // 8):
        raise CodecError(f"packet truncated: {len(pkt) - off} bytes for {m} values of {h.vbits} bits")
    if h.venc == F32:
        vals = np.frombuffer(pkt, dtype="<f4", count=m, offset=off)
    elif h.venc == F16:
        vals = np.frombuffer(pkt, dtype="<f2", count=m, offset=off)
    else:
        vals = unpack_uint(np.frombuffer(pkt, dtype=np.uint8, offset=off), h.vbits, m)
    values[coords] = vals
    mask[coords] = True
    return sc


def _decode_dense_fast(packets: list, n: int | None, iteration: int | None) -> Decoded | None:
    """`decode` of dense f32/f16 packets whose ranges are in order and do not overlap (a
    dense message as it arrives, whole or in part): the headers read as one record array and
    the values as one buffer, not packet by packet. The same Decoded as the general path;
    None for anything else (or anything wrong: the general path then says what)."""
    lens = np.array(list(map(len, packets)), dtype=np.int64)
    if not packets or np.any(lens < HEADER_BYTES):
        return None
    h = np.frombuffer(b"".join(p[:HEADER_BYTES] for p in packets), dtype=_HEADER_DTYPE)
    flags = h["flags"]
    venc = (flags >> 1) & 3
    if np.any(flags & 1) or np.any(venc > F16) or np.any(venc != venc[0]):
        return None   # sparse, b-bit codes or mixed encodings
    n = int(h["n"][0]) if n is None else int(n)
    if np.any(h["n"] != n) or (iteration is not None and np.any(h["iteration"] != iteration % 2**32)):
        return None
    vsize = 4 if venc[0] == F32 else 2
    start, m = h["start"].astype(np.int64), h["entries"].astype(np.int64)
    body = HEADER_BYTES + 4 * h["nscalars"].astype(np.int64)
    if np.any(lens < body + vsize * m) or np.any(start + m > n) or np.any(start[1:] < start[:-1] + m[:-1]):
        return None   # truncated, out of range, or out of order / overlapping
    values = np.zeros(n, dtype=np.float32)
    mask = np.zeros(n, dtype=bool)
    b0, b1 = body.tolist(), (body + vsize * m).tolist()
    vals = np.frombuffer(b"".join(p[a:b] for p, a, b in zip(packets, b0, b1)),
                         dtype="<f4" if vsize == 4 else "<f2")
    lo, hi = int(start[0]), int(start[-1] + m[-1])
    if hi - lo == vals.size:   # contiguous: one slice
        values[lo:hi] = vals
        mask[lo:hi] = True
    else:
        coords = np.repeat(start - np.cumsum(m) + m, m) + np.arange(vals.size)
        values[coords] = vals
        mask[coords] = True
    nsc = h["nscalars"].tolist()
    if not any(nsc):
        per = [()] * len(packets)
    else:
        per = [tuple(np.frombuffer(p, dtype="<f4", count=k, offset=HEADER_BYTES).tolist())
               for p, k in zip(packets, nsc)]
    segs = list(zip(start.tolist(), m.tolist(), per))
    return Decoded(torch.from_numpy(values), torch.from_numpy(mask), per[0], len(packets),
                   int(h["count"][0]), int(h["iteration"][0]), int(h["kind"][0]), per, segs)


def decode(packets: Iterable[bytes], n: int | None = None, *, iteration: int | None = None) -> Decoded:
    """Decode whichever packets arrived. `n` is needed only when none may arrive.

    With `iteration` given, a packet from another iteration is an error (stale delivery).
    """
    packets = list(packets)
    fast = _decode_dense_fast(packets, n, iteration)
    return fast if fast is not None else _decode_packets(packets, n, iteration)


def _decode_packets(packets: list, n: int | None, iteration: int | None) -> Decoded:
    """`decode` packet by packet: any layout and encoding, and every error named."""
    heads = [read_header(p) for p in packets]
    if n is None:
        if not heads:
            raise CodecError("no packets arrived and no vector length n was given")
        n = heads[0].n
    values = np.zeros(int(n), dtype=np.float32)
    mask = np.zeros(int(n), dtype=bool)
    per, segs = [], []
    for pkt, h in zip(packets, heads):
        if h.n != n:
            raise CodecError(f"packet {h.index} is for a vector of n={h.n}, expected n={n}")
        if iteration is not None and h.iteration != iteration % 2**32:
            raise CodecError(f"packet {h.index} is from iteration {h.iteration}, expected {iteration}")
        per.append(_decode_one(pkt, h, values, mask))
        segs.append((h.start, h.entries, per[-1]))
    return Decoded(torch.from_numpy(values), torch.from_numpy(mask), per[0] if per else (),
                   len(packets), heads[0].count if heads else 0,
                   heads[0].iteration if heads else None, heads[0].kind if heads else None, per, segs)
