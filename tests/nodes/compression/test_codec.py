"""The wire format: sizes computed by hand, exact round trips, packet loss."""
import time

import numpy as np
import pytest
import torch

from nodes.compression import codec
from nodes.compression.codec import CodecError, decode, encode_dense, encode_sparse

H = 30  # header bytes, by the layout in codec's docstring: 6 x u8 + 6 x u32


def test_header_is_thirty_bytes():
    assert codec.HEADER_BYTES == H


@pytest.mark.parametrize("value,expected", [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"),
                                            (300, b"\xac\x02"), (2**32 - 1, b"\xff\xff\xff\xff\x0f")])
def test_varint_known_bytes(value, expected):
    buf, lens = codec.encode_varints(np.array([value]))
    assert buf == expected and lens.tolist() == [len(expected)]
    assert codec.decode_varints(buf, 1).tolist() == [value]


def test_varint_lengths_at_every_boundary():
    """Each 7-bit step up to 2^64 - 1, against the byte count of LEB128 written out by hand."""
    def by_hand(x: int) -> int:
        n = 1
        while x >= 128:
            x >>= 7
            n += 1
        return n
    edges = sorted({e for k in range(1, 10) for e in (2**(7 * k) - 1, 2**(7 * k))} | {0, 1, 2**64 - 1})
    v = np.array(edges, dtype=np.uint64)
    assert codec.varint_lengths(v).tolist() == [by_hand(x) for x in edges]


def test_varints_vectorised_round_trip():
    v = np.random.default_rng(0).integers(0, 2**32, 5000, dtype=np.uint64)
    buf, lens = codec.encode_varints(v)
    assert len(buf) == lens.sum()
    assert np.array_equal(codec.decode_varints(buf, v.size), v)


def test_bit_packing_known_bytes():
    assert codec.pack_uint(np.array([1, 0, 1]), 1) == bytes([0b10100000])
    assert codec.pack_uint(np.array([5, 1]), 3) == bytes([0b10100100])
    assert codec.pack_uint(np.array([3, 0, 2]), 2) == bytes([0b11001000])
    for w in (1, 2, 3, 5, 8, 11, 17, 24):
        v = np.random.default_rng(w).integers(0, 2**w, 333)
        assert np.array_equal(codec.unpack_uint(codec.pack_uint(v, w), w, v.size), v)


def test_dense_f32_sizes_by_hand_and_exact():
    x = torch.randn(1000)
    msg = encode_dense(x, payload_bytes=430)  # (430 - 30) / 4 = 100 values per packet
    assert msg.sizes == [430] * 10
    d = decode(msg.packets)
    assert torch.equal(d.values, x) and bool(d.mask.all())
    assert d.packets_expected == 10 and d.packets_received == 10


def test_dense_f16_rounds_like_torch_half():
    x = torch.randn(777)
    msg = encode_dense(x, payload_bytes=230, dtype="f16")  # 100 halves per packet
    assert len(msg.packets) == 8 and msg.nbytes == 8 * H + 777 * 2
    assert torch.equal(decode(msg.packets).values, x.half().float())


def test_bit_field_sizes_by_hand():
    codes = np.random.default_rng(1).integers(0, 2, 1000)
    # room = 50 - 30 - 4 (one scalar) = 16 bytes = 128 one-bit codes per packet
    msg = encode_dense(codes, payload_bytes=50, dtype="bits", bits=1, scalars=[0.25])
    assert len(msg.packets) == 8
    assert msg.nbytes == 8 * (H + 4) + 125
    d = decode(msg.packets)
    assert np.array_equal(d.values.numpy(), codes) and d.scalars == (0.25,)


def test_sparse_varint_chosen_when_smaller():
    # deltas 7, 290, 1 -> varints of 1 + 2 + 1 = 4 bytes; fixed: offsets up to 298 -> 9 bits x 3 = 4 bytes
    msg = encode_sparse([3, 10, 300, 301], [1.0, -2.0, 3.0, 4.0], 1000, payload_bytes=1400)
    assert msg.sizes == [H + 4 + 16]
    assert codec.read_header(msg.packets[0]).icode == codec.VARINT
    d = decode(msg.packets)
    assert d.values[[3, 10, 300, 301]].tolist() == [1.0, -2.0, 3.0, 4.0]
    assert int(d.mask.sum()) == 4


def test_sparse_fixed_width_chosen_when_smaller():
    # deltas 200 x 3 -> 6 varint bytes; fixed: offsets up to 600 -> 10 bits x 3 = 30 bits = 4 bytes
    msg = encode_sparse([600, 0, 400, 200], [4.0, 1.0, 3.0, 2.0], 1000, payload_bytes=1400)
    h = codec.read_header(msg.packets[0])
    assert h.icode == codec.FIXED and h.ibits == 10 and h.start == 0
    assert msg.sizes == [H + 4 + 16]
    assert decode(msg.packets).values[[0, 200, 400, 600]].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_sparse_bits_values():
    idx = np.array([5, 9, 4000])
    msg = encode_sparse(idx, [3, 0, 7], 5000, payload_bytes=100, dtype="bits", bits=3, scalars=[2.0])
    d = decode(msg.packets)
    assert d.values[idx].tolist() == [3.0, 0.0, 7.0] and d.scalars == (2.0,)


@pytest.mark.parametrize("density", [0.001, 0.05, 0.5, 1.0])
@pytest.mark.parametrize("dtype,bits", [("f32", None), ("f16", None), ("bits", 3)])
def test_every_packet_fits_and_round_trips(density, dtype, bits):
    rng = np.random.default_rng(7)
    n = 20000
    k = max(1, int(density * n))
    idx = rng.choice(n, k, replace=False)
    vals = rng.integers(0, 8, k) if dtype == "bits" else rng.standard_normal(k).astype(np.float32)
    msg = encode_sparse(idx, vals, n, payload_bytes=257, dtype=dtype, bits=bits)
    assert max(msg.sizes) <= 257
    d = decode(msg.packets)
    want = np.zeros(n, np.float32)
    want[idx] = vals.astype(np.float16) if dtype == "f16" else vals
    assert np.array_equal(d.values.numpy(), want)
    assert np.array_equal(np.flatnonzero(d.mask.numpy()), np.sort(idx))


def test_sparse_index_cost_near_k_times_index_bits():
    # uniformly spread indices: k (32 + index bits) is an upper bound, headers aside
    rng = np.random.default_rng(3)
    n, k = 100_000, 1000
    msg = encode_sparse(rng.choice(n, k, replace=False), np.ones(k, np.float32), n, payload_bytes=1472)
    body_bits = msg.nbits - 8 * H * len(msg.packets)
    assert body_bits <= k * (32 + codec.index_bits(n))
    assert body_bits >= k * 32 + (k - 1) * 8 - 8 * len(msg.packets)  # a varint is >= 1 byte


def _drop_third(packets, seed):
    keep = np.random.default_rng(seed).permutation(len(packets))[: len(packets) - len(packets) // 3]
    return [packets[i] for i in sorted(keep)], sorted(keep)


def test_dense_loss_recovers_exactly_the_arrived_ranges():
    x = torch.randn(5000)
    msg = encode_dense(x, payload_bytes=430)  # packet p holds [100 p, 100 p + 100)
    got, kept = _drop_third(msg.packets, 0)
    d = decode(got, 5000)
    want = torch.zeros(5000, dtype=torch.bool)
    for p in kept:
        want[100 * p:100 * p + 100] = True
    assert torch.equal(d.mask, want)
    assert torch.equal(d.values[want], x[want]) and bool((d.values[~want] == 0).all())


def test_sparse_loss_recovers_exactly_the_arrived_coordinates():
    rng = np.random.default_rng(5)
    n, k = 50_000, 3000
    idx = np.sort(rng.choice(n, k, replace=False))
    vals = rng.standard_normal(k).astype(np.float32)
    msg = encode_sparse(idx, vals, n, payload_bytes=300)
    assert len(msg.packets) >= 30
    # packets are cut in index order with the count in each header: rebuild who holds what
    holders, pos = [], 0
    for p in msg.packets:
        m = codec.read_header(p).entries
        holders.append(idx[pos:pos + m])
        pos += m
    assert pos == k
    got, kept = _drop_third(msg.packets, 1)
    d = decode(got, n)
    want = np.concatenate([holders[p] for p in kept])
    assert np.array_equal(np.flatnonzero(d.mask.numpy()), want)
    full = np.zeros(n, np.float32)
    full[idx] = vals
    assert np.array_equal(d.values.numpy()[want], full[want])
    assert d.packets_expected == len(msg.packets) and d.packets_received == len(got)


def _same_decoded(a, b):
    assert torch.equal(a.values, b.values) and torch.equal(a.mask, b.mask)
    assert (a.scalars, a.packets_received, a.packets_expected, a.iteration, a.kind,
            a.per_packet_scalars, a.segments) == (b.scalars, b.packets_received,
                                                  b.packets_expected, b.iteration, b.kind,
                                                  b.per_packet_scalars, b.segments)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_dense_in_one_pass_decodes_as_packet_by_packet(dtype):
    """decode's one-pass dense path against the per-packet decoder on the same packets: a
    whole message, a lossy subset, reordered and duplicated packets, per-packet scalars and
    bucket scalars, a message from a later start, and stale or foreign packets (same error)."""
    rng = np.random.default_rng(7)
    x = torch.randn(3001)
    plain = encode_dense(x, payload_bytes=430, dtype=dtype, iteration=3, kind=1).packets
    scal = encode_dense(x[:2000], payload_bytes=300, dtype=dtype, scalars=(1.5, -2.0),
                        start=1000, n=3001).packets
    groups = encode_dense(x[:1200], payload_bytes=500, dtype=dtype, group=100,
                          group_scalars=rng.standard_normal((12, 2))).packets
    keep = sorted(rng.permutation(len(plain))[:len(plain) // 2])
    cases = [(plain, None), (plain, 3001), ([plain[i] for i in keep], 3001), (plain[::-1], None),
             (plain[:3] + plain[2:], None), (scal, None), (scal[1::2], None), (groups, 1200)]
    for packets, n in cases:
        _same_decoded(decode(packets, n), codec._decode_packets(packets, n, None))
    _same_decoded(decode(plain, iteration=3), codec._decode_packets(plain, None, 3))
    for bad, n, match in [(plain, None, "iteration 3, expected 4"), (plain + groups[:1], None, "n=1200, expected n=3001"),
                          (plain, 3000, "expected n=3000"), ([plain[0], plain[1][:-1]], None, "truncated")]:
        with pytest.raises(CodecError, match=match):
            decode(bad, n, iteration=4 if "iteration" in match else None)


@pytest.mark.parametrize("dtype,bits", [("f32", None), ("f16", None), ("bits", 1), ("bits", 3),
                                        ("bits", 12)])
def test_dense_packets_built_as_one_array_are_the_packet_by_packet_bytes(dtype, bits):
    """encode_dense without buckets builds its packets as one array: byte for byte what the
    packet-by-packet builder (struct-packed headers) makes, at every size around a packet's
    capacity, with scalars, a start inside n and an iteration past 2^32."""
    rng = np.random.default_rng(3)
    venc, vbits = codec._value_spec(dtype, bits)
    room = 200 - H - 8
    per = (room * 8 // vbits) // 8 * 8 if venc == codec.BITS else room * 8 // vbits
    for m in (0, 1, per - 1, per, per + 1, 5 * per, 5 * per + 3):
        v = rng.integers(0, 1 << vbits, m) if venc == codec.BITS else rng.standard_normal(m)
        kw = dict(payload_bytes=200, dtype=dtype, bits=bits, method=7, kind=2,
                  iteration=2**32 + 5, scalars=(0.5, -3.0), start=11, n=m + 20)
        got = encode_dense(v, **kw).packets
        body = codec._value_bytes(v.astype(np.float32) if venc != codec.BITS else v, venc, vbits)
        want = codec._dense_packets_one_by_one(
            body, codec._scalars_bytes((0.5, -3.0)), None, None, vbits, venc, m, per,
            max(1, -(-m // per)), 7, 2, codec._flags(codec.DENSE, venc, codec.VARINT),
            2**32 + 5, m + 20, 11)
        assert got == want


def test_nothing_arrived():
    d = decode([], 10)
    assert not bool(d.mask.any()) and d.packets_expected == 0
    with pytest.raises(CodecError, match="no vector length"):
        decode([])


def test_bad_input_is_named():
    with pytest.raises(CodecError, match="payload_bytes=30"):
        encode_dense(torch.ones(3), payload_bytes=30)
    with pytest.raises(CodecError, match="outside"):
        encode_sparse([0, 10], [1.0, 2.0], 10, payload_bytes=100)
    with pytest.raises(CodecError, match="duplicate"):
        encode_sparse([1, 1], [1.0, 2.0], 10, payload_bytes=100)
    with pytest.raises(CodecError, match="codes out of range"):
        encode_dense(np.array([0, 4]), payload_bytes=100, dtype="bits", bits=2)
    with pytest.raises(CodecError, match="'f64' not allowed"):
        encode_dense(torch.ones(3), payload_bytes=100, dtype="f64")
    msg = encode_dense(torch.ones(100), payload_bytes=1000, iteration=4)
    with pytest.raises(CodecError, match="truncated"):
        decode([msg.packets[0][:-3]])
    with pytest.raises(CodecError, match="shorter than"):
        decode([b"abc"])
    with pytest.raises(CodecError, match="iteration 4, expected 5"):
        decode(msg.packets, iteration=5)


def test_a_million_floats_in_milliseconds():
    x = torch.randn(1_000_000)
    t = time.perf_counter()
    msg = encode_dense(x, payload_bytes=1472)
    d = decode(msg.packets)
    assert time.perf_counter() - t < 2.0  # ~30 ms here; generous for a shared machine
    assert torch.equal(d.values, x)
