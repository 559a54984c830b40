"""Every baseline method: round trip within its bound, bytes by hand, error feedback, loss,
checkpoint continuation and NaN refusal."""
import io
import math

import numpy as np
import pytest
import torch

from nodes.compression import codec
from nodes.compression.base import GradientError
from nodes.compression.ideal import run_exchange
from nodes.compression.registry import METHODS, SCHEMES, build_scheme, load_all, names

# Every registered method is under contract; the LGC family has its own contract file
# (test_lgc.py: its stages need trained autoencoders before an exchange means anything).
METHODS_UNDER_TEST = [m for m in names() if not m.startswith("lgc_")]
SHAPES = [torch.Size([1000]), torch.Size([50, 20])]
N, W, PAYLOAD = 2000, 4, 1400
EF_METHODS = ["topk", "randomk", "signsgd", "powersgd"]


def make(method, **opts):
    # these tests read the PS uplinks; the other collectives are test_collectives.py's
    if method in SCHEMES and "ps" in SCHEMES[method].collectives:
        opts.setdefault("collective", "ps")
    return build_scheme(method, opts, n_workers=W, shapes=SHAPES, payload_bytes=PAYLOAD, seed=5)


def grads(it, scale=1.0):
    g = torch.Generator().manual_seed(1000 + it)
    return [scale * torch.randn(N, generator=g) for _ in range(W)]


def own(stats, w, round_=0):
    return stats.uplinks[round_][w]


def test_all_methods_registered_with_defaults():
    load_all()
    for m in METHODS_UNDER_TEST:
        assert m in METHODS
        make(m)  # defaults build without any option


# --- bytes on the wire, by hand: header 30 B, payload room 1400 - 30 = 1370 B
HAND_BYTES = {
    "none": 6 * 30 + 2000 * 4,                    # 342 floats per packet -> 6 packets
    "fp16": 3 * 30 + 2000 * 2,                    # 685 halves per packet -> 3 packets
    "randomk": 30 + 200 * 4,                      # k = 10% of 2000 = 200 values, no indices
    # 4 buckets of 512 x 6 bits (s=16: ceil(log2 33)) = 384 B + 4 B norm -> 3 per packet
    "qsgd": 2 * 30 + 4 * 4 + 2000 * 6 // 8,
    "terngrad": 30 + 4 * 4 + 2000 * 2 // 8,       # 2 bits, 4 buckets -> one packet
    "signsgd": 30 + 2 * 4 + 2000 // 8,            # 1 bit, 2 buckets of 1024 -> one packet
    # round 1: P is 50 x 2 = 100 floats; round 2: Q 20 x 2 = 40 floats + the 1000 dense ones
    "powersgd": (30 + 100 * 4) + (4 * 30 + 1040 * 4),
}


@pytest.mark.parametrize("method", sorted(HAND_BYTES))
def test_uplink_bytes_by_hand(method):
    _, st = run_exchange(make(method), 0, grads(0))
    for w in range(W):
        assert st.bits_up[w] == 8 * HAND_BYTES[method]


def test_signsgd_is_one_bit_per_element_plus_fixed_overhead():
    s = make("signsgd")
    _, st = run_exchange(s, 0, grads(0))
    msg = own(st, 0)
    per_packet = 30 + 4 * 2  # header + the two bucket scales
    assert msg.nbits == N + 8 * per_packet * len(msg.packets)


@pytest.mark.parametrize("method", ["topk", "dgc"])
def test_sparse_bits_about_k_times_32_plus_index_bits(method):
    s = make(method, ratio=0.05, **({"warmup_iterations": 0} if method == "dgc" else {}))
    _, st = run_exchange(s, 0, grads(0))
    k = 100
    for w in range(W):
        msg = own(st, w)
        body = msg.nbits - 8 * 30 * len(msg.packets)
        assert k * 32 < body <= k * (32 + math.ceil(math.log2(N)))


# --- round trips within each method's bound
def test_none_is_exact():
    g = grads(0)
    agg, _ = run_exchange(make("none"), 0, g)
    assert torch.allclose(agg, torch.stack(g).mean(0), atol=1e-6)


def test_fp16_within_half_rounding():
    g = grads(0)
    agg, st = run_exchange(make("fp16"), 0, g)
    for w in range(W):
        assert torch.equal(codec.decode(own(st, w).packets).values, g[w].half().float())
    mean = torch.stack(g).mean(0)
    assert torch.all((agg - mean).abs() <= 2 ** -10 * (mean.abs() + torch.stack(g).abs().max(0).values))


def _bucket_rows(x, b):
    pad = torch.zeros(-(-x.numel() // b) * b)
    pad[: x.numel()] = x
    return pad.view(-1, b)


def test_qsgd_error_below_norm_over_s_and_unbiased():
    s = make("qsgd", levels=4, bucket=256)
    g = grads(0)
    _, st = run_exchange(s, 0, g)
    for w in range(W):
        dec = codec.decode(own(st, w).packets)
        got = s.decode(w, 0, own(st, w).packets).values
        norms = _bucket_rows(g[w], 256).norm(dim=1).repeat_interleave(256)[:N]
        assert torch.all((got - g[w]).abs() <= norms / 4 + 1e-5)
        assert set(np.unique(dec.values.numpy()).astype(int)) <= set(range(9))  # 2s+1 codes
    # unbiased: the mean of many independent roundings converges to the gradient
    acc = torch.zeros(N)
    reps = 300
    for it in range(reps):
        _, st = run_exchange(s, it, [g[0]] * W)
        acc += s.decode(0, it, own(st, 0).packets).values
    norms = _bucket_rows(g[0], 256).norm(dim=1).repeat_interleave(256)[:N]
    assert torch.all((acc / reps - g[0]).abs() <= 5 * (norms / 4) / math.sqrt(reps))


def test_terngrad_values_are_signed_bucket_max():
    s = make("terngrad", clip_sigma=0.0, bucket=512)
    g = grads(0)
    _, st = run_exchange(s, 0, g)
    got = s.decode(1, 0, own(st, 1).packets).values
    scale = _bucket_rows(g[1], 512).abs().amax(dim=1).repeat_interleave(512)[:N]
    nz = got != 0
    assert torch.allclose(got[nz].abs(), scale[nz])
    assert torch.all(torch.sign(got[nz]) == torch.sign(g[1][nz]))
    # P(sent) = |g| / scale: the count of non-zeros is near its expectation
    expect = float((g[1].abs() / scale).sum())
    assert abs(int(nz.sum()) - expect) < 5 * math.sqrt(expect)


def test_terngrad_clipping_at_sigma():
    s = make("terngrad", clip_sigma=1.0)
    g = grads(0)
    _, st = run_exchange(s, 0, g)
    got = s.decode(0, 0, own(st, 0).packets).values
    assert float(got.abs().max()) <= float(g[0].std()) * 1.0001


def test_signsgd_is_sign_times_mean_magnitude():
    s = make("signsgd")
    g = grads(0)
    _, st = run_exchange(s, 0, g)  # first iteration: residual is zero, p = g
    got = s.decode(2, 0, own(st, 2).packets).values
    rows = _bucket_rows(g[2], 1024)
    scale = torch.tensor([float(rows[0].abs().sum()) / 1024, float(rows[1].abs().sum()) / (N - 1024)])
    want = torch.where(g[2] >= 0, 1.0, -1.0) * scale.repeat_interleave(1024)[:N]
    assert torch.allclose(got, want)


def test_powersgd_exact_on_shared_rank_one_matrices():
    gen = torch.Generator().manual_seed(0)
    low = (torch.randn(50, 1, generator=gen) @ torch.randn(1, 20, generator=gen)).reshape(-1)
    g = [torch.cat([torch.randn(1000, generator=gen), low]) for _ in range(W)]
    agg, st = run_exchange(make("powersgd", rank=2), 0, g)
    assert st.phases == ["Uplink", "Downlink", "Uplink", "Downlink"]
    assert torch.allclose(agg, torch.stack(g).mean(0), atol=1e-4)


@pytest.mark.parametrize("method", ["topk", "randomk", "dgc"])
def test_sparse_aggregate_is_mean_of_what_was_sent(method):
    s = make(method)
    agg, st = run_exchange(s, 0, grads(0))
    sent = sum(codec.decode(own(st, w).packets).values for w in range(W)) / W
    if method == "randomk":  # dense over the shared positions
        sent_full = torch.zeros(N)
        sent_full[s.indices(0)] = sent[: s.k]
        sent = sent_full
    assert torch.allclose(agg, sent, atol=1e-7)


# --- error feedback: grad + old residual = sent + new residual
def _residuals(s):
    st = s.state_dict()
    res = st.get("residuals", st.get("errors"))
    return [torch.zeros(N) if r is None else r.clone() for r in res]


@pytest.mark.parametrize("method", ["topk", "randomk", "signsgd"])
def test_error_feedback_invariant_per_worker(method):
    s = make(method)
    for it in range(4):
        old = _residuals(s)
        g = grads(it)
        _, st = run_exchange(s, it, g)
        new = _residuals(s)
        for w in range(W):
            if method == "randomk":
                sent = torch.zeros(N)
                sent[s.indices(it)] = codec.decode(own(st, w).packets).values
            elif method == "signsgd":
                sent = s.decode(w, it, own(st, w).packets).values
            else:
                sent = codec.decode(own(st, w).packets).values
            assert torch.allclose(g[w] + old[w], sent + new[w], atol=1e-5)


@pytest.mark.parametrize("method", EF_METHODS)
def test_error_feedback_mean_identity(method):
    # whatever each worker left in its residual, the aggregate is the mean of the rest
    s = make(method, **({"downlink": "f32"} if method == "signsgd" else {}))
    for it in range(3):
        old = _residuals(s)
        g = grads(it)
        agg, _ = run_exchange(s, it, g)
        new = _residuals(s)
        want = sum(g[w] + old[w] - new[w] for w in range(W)) / W
        assert torch.allclose(agg, want, atol=1e-4)


# --- loss: decoding copes with any subset
def test_none_with_lost_packets_averages_what_arrived():
    s = make("none")
    g = grads(0)
    drop = {0: {1}, 1: {1, 2}, 2: set(), 3: {5}}  # packets hold 342 coordinates each
    agg, st = run_exchange(s, 0, g, deliver=lambda w, p: [x for i, x in enumerate(p) if i not in drop[w]])
    assert st.packets_lost == 4
    want = torch.zeros(N)
    for c0 in range(0, N, 342):
        p = c0 // 342
        ws = [w for w in range(W) if p not in drop[w]]
        want[c0:c0 + 342] = torch.stack([g[w][c0:c0 + 342] for w in ws]).mean(0)
    assert torch.allclose(agg, want, atol=1e-6)


@pytest.mark.parametrize("method", METHODS_UNDER_TEST)
def test_third_of_packets_lost_still_decodes(method):
    s = make(method, **({"ratio": 0.3} if method in ("topk", "randomk") else {}))
    rng = np.random.default_rng(0)

    def lose(w, packets):
        keep = rng.random(len(packets)) > 1 / 3
        return [p for p, k in zip(packets, keep) if k]
    for it in range(2):
        agg, st = run_exchange(s, it, grads(it), deliver=lose)
        assert agg.shape == (N,) and bool(torch.isfinite(agg).all())


# --- checkpoints: a resumed run continues identically
@pytest.mark.parametrize("method", METHODS_UNDER_TEST)
def test_state_dict_resume_continues_identically(method):
    opts = {"warmup_iterations": 2} if method == "dgc" else {}
    a = make(method, **opts)
    for it in range(3):
        run_exchange(a, it, grads(it))
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    b = make(method, **opts)
    buf.seek(0)
    b.load_state_dict(torch.load(buf))
    for it in range(3, 6):
        ra, sa = run_exchange(a, it, grads(it))
        rb, sb = run_exchange(b, it, grads(it))
        assert torch.equal(ra, rb)
        assert [m.packets for m in sa.uplinks[0].values()] == [m.packets for m in sb.uplinks[0].values()]
    # and the state really matters (for a method that has some): a fresh scheme would not
    # continue the same way
    if a.state_dict():
        c = make(method, **opts)
        rc, _ = run_exchange(c, 6, grads(6))
        ra, _ = run_exchange(a, 6, grads(6))
        assert not torch.equal(ra, rc)


# --- bad input
@pytest.mark.parametrize("method", METHODS_UNDER_TEST)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_refused_naming_worker_and_iteration(method, bad):
    s = make(method)
    g = grads(0)
    g[2][17] = bad
    with pytest.raises(GradientError, match=r"w2 .*iteration 7"):
        run_exchange(s, 7, g)


@pytest.mark.parametrize("values,bad", [
    ([1.0, float("nan")], True), ([float("inf"), 1.0], True), ([float("inf"), float("-inf")], True),
    ([3e38, 3e38, -3e38], False),   # finite, though their float32 sum is not
    ([1e-30, -2.5], False)])
def test_check_finite_names_exactly_the_gradients_with_a_nan_or_an_infinity(values, bad):
    from nodes.compression.base import check_finite
    grads = [torch.zeros(3), torch.tensor(values, dtype=torch.float32)]
    if bad:
        with pytest.raises(GradientError, match=r"worker w1 .* at iteration 4"):
            check_finite(grads, 4)
    else:
        check_finite(grads, 4)


def test_unknown_method_and_option():
    with pytest.raises(KeyError, match="unknown compression method 'zip'"):
        make("zip")
    with pytest.raises((KeyError, TypeError, ValueError), match="ratioo"):
        make("topk", ratioo=0.1)
