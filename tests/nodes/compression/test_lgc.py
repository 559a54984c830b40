"""LGC-PS and LGC-RAR: autoencoder, stages, the cross-node gain, the ring, checkpoints."""
from __future__ import annotations

import io
import math

import pytest
import torch

from nodes.compression import codec
from nodes.compression.ideal import run_exchange
from nodes.compression.lgc_autoencoder import GradientAutoencoder, n_params
from nodes.compression.lgc_common import Schedule
from nodes.compression.lgc_messages import (KIND_COMMON, KIND_INDICES, KIND_LATENT, KIND_REFRESH,
                                            KIND_WEIGHTS, by_kind)
from nodes.compression.phases import (AllGather, AllReduce, Broadcast, Members, ServerCompute,
                                     WorkerCompute)
from nodes.compression.registry import build_scheme, wire_id
from nodes.compression.ring import ring_sum

torch.set_num_threads(1)
N_COORD, N_WORKERS, PAYLOAD = 4000, 4, 1400
POS = torch.arange(N_COORD).float()


def bumps(gen: torch.Generator) -> torch.Tensor:
    """A gradient-like vector: a few smooth, localised bumps of random sign over faint noise."""
    c = 0.02 * torch.randn(N_COORD, generator=gen)
    for _ in range(10):
        mu = float(torch.randint(0, N_COORD, (1,), generator=gen))
        w = 4 + 8 * float(torch.rand(1, generator=gen))
        c += float(torch.randn(1, generator=gen)) * torch.exp(-0.5 * ((POS - mu) / w) ** 2)
    return c


def grads(t: int, correlated: bool, sigma: float = 0.03) -> list[torch.Tensor]:
    """Correlated: one shared component plus small per-node noise. Independent: one each."""
    gen = torch.Generator().manual_seed(1000 + t)
    if correlated:
        c = bumps(gen)
        return [c + sigma * torch.randn(N_COORD, generator=gen) for _ in range(N_WORKERS)]
    return [bumps(gen) for _ in range(N_WORKERS)]


LGC_OPTS = dict(ratio=0.05, warmup_iterations=0, ae_iterations=10, ae_steps=40, momentum=0.0, clip_norm=0.0,
                ae_channels="16,16", latent_ratio=0.25, innovation_ratio=0.02, latent_dtype="f16")


def scheme(method="lgc_ps", **over):
    opts = {**LGC_OPTS, **over}
    if method == "lgc_rar":
        opts.pop("innovation_ratio")
    return build_scheme(method, opts, n_workers=N_WORKERS, shapes=[(N_COORD,)],
                        payload_bytes=PAYLOAD, seed=0)


def rel_err(avg, gs):
    target = sum(gs) / len(gs)
    return float((avg - target).norm() / target.norm())


# ---------------------------------------------------------------- the autoencoder

def test_autoencoder_is_lightweight_and_its_latent_has_the_configured_ratio():
    ae = GradientAutoencoder([16, 16, 16], kernel=5, latent_ratio=0.125)
    assert 1000 < n_params(ae) < 20000
    assert ae.latent_numel(800) == 100 and ae.encode(torch.randn(2, 800)).shape == (2, 100)
    assert ae(torch.randn(3, 203)).shape == (3, 203)  # lengths that do not divide are padded
    assert len(ae.encoder_bytes()) == 4 * n_params(ae.encoder)
    ae2 = GradientAutoencoder([16, 16, 16], kernel=5, latent_ratio=0.125, seed=7)
    ae2.load_full_bytes(ae.full_bytes())
    x = torch.randn(2, 160)
    assert torch.equal(ae(x), ae2(x))


@pytest.mark.parametrize("over, key", [({"latent_ratio": 0.3}, "latent_ratio"),
                                       ({"ae_kernel": 4}, "ae_kernel"),
                                       ({"ae_channels": "16,x"}, "ae_channels"),
                                       ({"leader": 9}, "leader")])
def test_bad_options_name_the_key(over, key):
    with pytest.raises(ValueError, match=key):
        scheme(**over)


def test_linear_encoder_sums_codes_exactly():
    ae = GradientAutoencoder([8, 8], kernel=3, latent_ratio=0.25, linear_encoder=True)
    x = torch.randn(4, 120)
    with torch.no_grad():
        assert torch.allclose(ae.encode(x).sum(0), ae.encode(x.sum(0, keepdim=True))[0], atol=1e-5)


# ---------------------------------------------------------------- training and the cross-node gain

def held_out_pairs(correlated=True):
    """(x, target) pairs built by hand the way the server builds them: a node's top-k values
    over their RMS, and the nodes' mean at those positions over the same RMS."""
    xs, ts = [], []
    k = math.ceil(0.05 * N_COORD)
    for t in range(200, 204):
        gs = grads(t, correlated)
        mean = sum(gs) / N_WORKERS
        for g in gs:
            idx = torch.sort(torch.topk(g.abs(), k).indices).values
            s = float(g[idx].pow(2).mean().sqrt())
            xs.append(g[idx] / s)
            ts.append(mean[idx] / s)
    return torch.stack(xs), torch.stack(ts)


def test_reconstruction_error_falls_during_the_ae_training_stage():
    sch = scheme()
    x, t = held_out_pairs()
    before = sch.trainer.loss(x, t)
    for it in range(10):
        run_exchange(sch, it, grads(it, True))
    after = sch.trainer.loss(x, t)
    assert sch.trainer.steps_done == 10 * 40
    assert after < 0.25 * before, (before, after)


def one_shot(sch, state, gs):
    """One LGC exchange from the trained state with empty residuals (no memory between trials)."""
    sch.load_state_dict(state)
    for w in range(N_WORKERS):
        sch.dgc.u[w].zero_()
        sch.dgc.v[w].zero_()
    avg, st = run_exchange(sch, 10, gs)
    assert st.phases == ["WorkerCompute", "Uplink", "ServerCompute", "Downlink"]
    return rel_err(avg, gs), st.bits_up_total


def topk_bits_for_error(target_err, trials):
    """Fewest uplink bits with which per-node top-k reaches `target_err` on the same gradients."""
    for ratio in (0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.2):
        res = []
        for gs in trials:
            tk = build_scheme("topk", {"ratio": ratio}, n_workers=N_WORKERS, shapes=[(N_COORD,)],
                              payload_bytes=PAYLOAD, seed=0)
            avg, st = run_exchange(tk, 0, gs)
            res.append((rel_err(avg, gs), st.bits_up_total))
        if sum(e for e, _ in res) / len(res) <= target_err:
            return sum(b for _, b in res) / len(res)
    return float("inf")


@pytest.mark.parametrize("correlated", [True, False])
def test_lgc_ps_saves_bits_only_when_gradients_share_a_component(correlated):
    sch = scheme()
    for it in range(10):  # AE-training stage on this kind of gradients
        run_exchange(sch, it, grads(it, correlated))
    assert sch.stage(10) == "lgc"
    state = sch.state_dict()
    trials = [grads(100 + t, correlated) for t in range(4)]
    res = [one_shot(sch, state, gs) for gs in trials]
    err = sum(e for e, _ in res) / len(res)
    bits = sum(b for _, b in res) / len(res)
    needed = topk_bits_for_error(err, trials)
    if correlated:
        # the leader's code stands for every node: top-k needs several times the bits
        assert err < 0.5 and needed > 3 * bits, (err, bits, needed)
    else:
        # one node's code says nothing about the others: top-k gets there with no more bits
        assert err > 0.6 and needed <= bits, (err, bits, needed)


def test_lgc_ps_copes_with_lost_packets():
    sch = scheme()
    for it in range(10):
        run_exchange(sch, it, grads(it, True))
    drop_first = lambda w, pk: pk[1:]  # noqa: E731  (the leader loses part of its indices)
    avg, st = run_exchange(sch, 10, grads(10, True), deliver=drop_first)
    assert st.packets_lost == N_WORKERS and torch.isfinite(avg).all()


# ---------------------------------------------------------------- LGC-RAR

def test_lgc_rar_warms_up_as_dgc_itself():
    """Before its LGC stage, LGC-RAR is DGC all-gathered: with the same options and gradients
    its messages are DGC's (collective allgather) byte for byte but the header's method byte,
    through DGC's sparsity warm-up (iterations 0-3) and AE training (4-5), and so is the
    aggregate. Shared positions (a Broadcast from the leader) only from the LGC stage."""
    common = dict(ratio=0.05, momentum=0.9, clip_norm=10.0, warmup_iterations=4)
    rar = scheme("lgc_rar", **common, ae_iterations=2, ae_steps=2)
    dgc = build_scheme("dgc", {**common, "collective": "allgather"}, n_workers=N_WORKERS,
                       shapes=[(N_COORD,)], payload_bytes=PAYLOAD, seed=0)
    ids = {wire_id("lgc_rar"), wire_id("dgc")}
    for it in range(7):
        gs = grads(it, False)
        got, want = [], []
        a = drive(rar, it, gs, got)
        if it == 6:  # the LGC stage: the leader's positions go out first
            assert rar.stage(it) == "lgc" and isinstance(got[0], Broadcast)
            break
        b = drive(dgc, it, gs, want)
        assert [type(p) for p in want] == [AllGather]
        assert isinstance(got[0], AllGather) and not any(isinstance(p, AllReduce) for p in got)
        for w in range(N_WORKERS):
            mine, theirs = got[0].messages[w].packets, want[0].messages[w].packets
            assert len(mine) == len(theirs) > 0
            for p, q in zip(mine, theirs):
                assert p[1:] == q[1:] and {p[0], q[0]} == ids
        assert torch.equal(a, b), it



def drive(sch, it, gs, record):
    """Run one exchange, summing AllReduce buffers with ring_sum and keeping every phase."""
    gen = sch.exchange(it, gs)
    result = None
    try:
        while True:
            phase = gen.send(result)
            if isinstance(phase, Members):  # every worker takes part (no traffic to record)
                result = list(range(phase.n_workers))
                continue
            record.append(phase)
            if isinstance(phase, AllReduce):
                result = ring_sum([phase.buffers[w] for w in sorted(phase.buffers)], phase.dtype)
            elif isinstance(phase, Broadcast):  # receivers get the packets that travelled
                result = list(phase.message.packets)
            elif isinstance(phase, AllGather):  # every message reaches every node whole
                result = {w: list(m.packets) for w, m in phase.messages.items()}
            else:
                result = None
    except StopIteration as stop:
        return stop.value


def test_lgc_rar_decodes_the_sum_of_the_latents_that_travelled_the_ring():
    sch = scheme("lgc_rar", ratio=0.05, ae_iterations=3, ae_steps=10)
    for it in range(3):
        drive(sch, it, grads(it, True), [])
    assert sch.stage(3) == "lgc" and sch.worker_ae is not None
    phases = []
    avg = drive(sch, 3, grads(3, True), phases)
    assert [type(p) for p in phases] == [Broadcast, WorkerCompute, AllReduce]
    bc, ar = phases[0], phases[2]
    assert bc.src == 3 % N_WORKERS  # cyclic leader
    idx, s = sch.read_positions(bc.message.packets)  # in the leader's value order
    assert torch.equal(torch.sort(idx).values, torch.unique(idx))
    k = idx.numel()
    assert k == math.ceil(0.05 * N_COORD) or k == round(0.05 * N_COORD)
    assert ar.dtype == "f16" and set(ar.buffers) == set(range(N_WORKERS))
    assert all(len(b) == 2 * sch.worker_ae.latent_numel(k) for b in ar.buffers.values())
    # by hand: add the four latents as they are on the wire, decode once, rescale
    lat = [torch.frombuffer(bytearray(b), dtype=torch.float16).float() for b in ar.buffers.values()]
    total = ring_sum(list(ar.buffers.values()), "f16")
    assert torch.allclose(total, sum(lat), atol=2e-2 * float(sum(lat).abs().max()))
    with torch.no_grad():
        expect = s * sch.worker_ae.decode(total[None] / N_WORKERS, k)[0]
    assert torch.allclose(avg[idx], expect, atol=1e-6)
    off = torch.ones(N_COORD, dtype=torch.bool)
    off[idx] = False
    assert torch.count_nonzero(avg[off]) == 0


def test_lgc_rar_trains_without_extra_traffic_and_ships_the_whole_ae_once():
    """AE training is DGC's all-gather (lgc_common.Schedule, as LGC-PS's); w0 trains on what it
    received and broadcasts the AE after the last AE-training iteration; then the ring."""
    sch = scheme("lgc_rar", ae_iterations=2, ae_steps=5)
    seen = []
    for it in range(4):
        rec = []
        drive(sch, it, grads(it, True), rec)
        seen.append(rec)
    assert [type(p) for p in seen[0]] == [AllGather, ServerCompute]
    assert [type(p) for p in seen[1]] == [AllGather, ServerCompute, Broadcast]
    assert [type(p) for p in seen[2]] == [Broadcast, WorkerCompute, AllReduce]
    weights = seen[1][2].message
    floats = n_params(sch.ae)
    per = (PAYLOAD - codec.HEADER_BYTES) // 4
    assert weights.nbytes == 4 * floats + codec.HEADER_BYTES * math.ceil(floats / per)
    assert all(codec.read_header(p).kind == KIND_WEIGHTS for p in weights.packets)
    assert sum(isinstance(p, Broadcast) and p.src == 0 and len(p.message.packets) > 1
               for rec in seen for p in rec) == 1


# ---------------------------------------------------------------- stages, cost, checkpoints

def test_stages_switch_at_the_configured_iterations():
    sched = Schedule(warmup_iters=3, ae_iters=2, retrain_every=4, retrain_iters=1)
    expect = ["warmup"] * 3 + ["ae_train"] * 2 + ["lgc"] * 3 + ["ae_train"] + ["lgc"] * 3 + ["ae_train"]
    assert [sched.stage(i) for i in range(13)] == expect
    sch = scheme(warmup_iterations=3, ae_iterations=2, retrain_every=4, retrain_iterations=1, ae_steps=2)
    kinds = []
    for it in range(13):
        _, st = run_exchange(sch, it, grads(it, True))
        kinds.append(st.phases)
        if it == 0:  # DGC's sparsity warm-up: 25% of the coordinates at first
            sent = codec.decode(st.uplinks[0][0].packets, N_COORD).mask.sum()
            assert int(sent) == N_COORD // 4
    assert [sch.stage(i) for i in range(13)] == expect
    warm, train, ship, lgc = (["Uplink", "Downlink"], ["Uplink", "ServerCompute", "Downlink"],
                              ["Uplink", "ServerCompute", "Downlink", "Downlink"],
                              ["WorkerCompute", "Uplink", "ServerCompute", "Downlink"])
    assert kinds == [warm] * 3 + [train, ship] + [lgc] * 3 + [ship] + [lgc] * 3 + [ship]
    assert sch.ships == 3


def test_ae_training_time_is_its_flops_over_ae_gflops():
    sch = scheme(ae_channels="4", ae_kernel=3, latent_ratio=0.5, ae_steps=3, ae_batch=2,
                 ae_gflops=2.0, ae_iterations=2)
    _, st = run_exchange(sch, 0, grads(0, True))
    k = round(0.05 * N_COORD)  # 200, a multiple of the stride: no padding
    h = k // 2
    # by hand: conv 1->4 (k3, /2), 1x1 4->1 | 1x1 1->4, convT 4->4 (k3, x2), 1x1 4->1
    fwd = 2 * (1 * 4 * 3 * h + 4 * 1 * h + 1 * 4 * h + 4 * 4 * 3 * h + 4 * 1 * k)
    samples = N_WORKERS  # one pair per node: batch = min(ae_batch, samples) = 2
    flops = 3 * fwd * min(2, samples) * 3
    assert st.compute_s == pytest.approx(flops / 2e9, rel=1e-12)


@pytest.mark.parametrize("method,extra", [("lgc_ps", {}), ("lgc_rar", {}),
                                          ("lgc_ps", dict(decoders="per_node", latent_pull=1.0)),
                                          ("lgc_ps", dict(ae_refresh_every=2, ae_refresh_steps=2))])
def test_state_dict_round_trip_mid_run_reproduces_the_continuation(method, extra):
    opts = dict(warmup_iterations=2, ae_iterations=3, ae_steps=5, momentum=0.9, clip_norm=10.0,
                retrain_every=3, retrain_iterations=1, **extra)
    a = scheme(method, **opts)
    outs = {}
    for it in range(9):
        if it == 3:  # in the middle of AE training
            buf = io.BytesIO()
            torch.save(a.state_dict(), buf)
        outs[it] = run_exchange(a, it, grads(it, True))[0]
    b = scheme(method, **opts)
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=False))
    for it in range(3, 9):
        got = run_exchange(b, it, grads(it, True))[0]
        assert torch.equal(got, outs[it]), it
    assert b.stage(5) == "lgc" and b.ships == a.ships


def test_lgc_ps_leader_message_carries_indices_latent_and_innovation():
    sch = scheme(leader=2)
    for it in range(10):
        run_exchange(sch, it, grads(it, True))
    _, st = run_exchange(sch, 10, grads(10, True))
    up = st.uplinks[0]
    kinds = {w: set(by_kind(m.packets)) for w, m in up.items()}
    assert KIND_INDICES in kinds[2] and KIND_LATENT in kinds[2]
    assert all(KIND_LATENT not in kinds[w] for w in (0, 1, 3))
    k = round(0.05 * N_COORD)
    lat = codec.decode(by_kind(up[2].packets)[KIND_LATENT])
    assert lat.values.numel() == k // 4  # latent_ratio 0.25
    # non-leaders send only their innovation: ceil(0.02 * k) = 4 (index, value) pairs
    assert all(int(codec.decode(up[w].packets, N_COORD).mask.sum()) == 4 for w in (0, 1, 3))
    assert up[0].nbytes < up[2].nbytes / 5


# ---------------------------------------------------------------- in-use figures, coder refresh

def test_in_use_figures_by_hand():
    """lgc_ablation credits every node with the leader's f16 values at its positions: beta, the
    scalar fit's error and the credit's error against the nodes' mean memory there, by hand
    from the memories before the exchange (momentum 0, no clipping: v + g)."""
    sch = build_scheme("lgc_ablation", dict(ratio=0.05, warmup_iterations=1, ae_iterations=1,
                                            momentum=0.0, clip_norm=0.0, leader=1),
                       n_workers=N_WORKERS, shapes=[(N_COORD,)], payload_bytes=PAYLOAD, seed=0)
    for it in range(3):
        run_exchange(sch, it, grads(it, True))
    assert sch.stage(2) == "lgc" and set(sch.eval_metrics()) == {"lgc_beta", "lgc_scalar_error",
                                                                 "lgc_coder_error"}
    gs = grads(3, False)
    before = [sch.dgc.v[w] + gs[w] for w in range(N_WORKERS)]
    _, st = run_exchange(sch, 3, gs)
    c = codec.decode(by_kind(st.uplinks[0][1].packets)[KIND_COMMON], N_COORD)
    idx = torch.nonzero(c.mask).reshape(-1)
    m = sum(b[idx] for b in before).double() / N_WORKERS
    x = before[1][idx].double()
    beta = float(x @ m / (x @ x))
    got = sch.eval_metrics()
    assert got["lgc_beta"] == pytest.approx(beta, rel=1e-6)
    assert got["lgc_scalar_error"] == pytest.approx(float((m - beta * x).norm() / m.norm()), rel=1e-6)
    assert got["lgc_coder_error"] == pytest.approx(float((c.values[idx] - m).norm() / m.norm()),
                                                   rel=1e-6)
    assert sch.eval_metrics() == {}   # taken: the next evaluation starts afresh


def test_lgc_ps_refresh_sends_the_memories_at_the_leaders_positions_and_trains_on_their_mean():
    """ae_refresh_every = 2: at the first LGC iteration t every node keeps its memory at the
    leader's positions (before crediting); at t + 1 each sends it (k f16 values, counted in its
    uplink bits), the server trains on (leader's / s -> mean / s) alone (AE training's pairs are
    dropped) and ships the AE after the aggregate. t + 1 keeps nothing (not a refresh iteration)."""
    sch = scheme(ae_iterations=3, ae_steps=5, leader=2, ae_refresh_every=2, ae_refresh_steps=3)
    for it in range(3):
        run_exchange(sch, it, grads(it, True))
    t = sch.sched.lgc_start
    gs = grads(t, True)
    before = [sch.dgc.v[w] + gs[w] for w in range(N_WORKERS)]   # momentum 0, no clipping
    _, st = run_exchange(sch, t, gs)
    ordered, s = sch.read_positions(by_kind(st.uplinks[0][2].packets)[KIND_INDICES])
    k = ordered.numel()
    twin = scheme(ae_iterations=3, ae_steps=5, leader=2, ae_refresh_every=2, ae_refresh_steps=3)
    twin.load_state_dict(sch.state_dict())   # a checkpoint holds the kept memories
    plain, st2 = run_exchange(sch, t + 1, grads(t + 1, True))
    assert torch.equal(run_exchange(twin, t + 1, grads(t + 1, True))[0], plain)
    assert st2.phases == ["WorkerCompute", "Uplink", "ServerCompute", "ServerCompute", "Downlink",
                          "Downlink"]
    sent = []
    for w in range(N_WORKERS):
        pk = by_kind(st2.uplinks[0][w].packets)[KIND_REFRESH]
        d = codec.decode(pk)
        assert torch.equal(d.values, before[w][ordered].to(torch.float16).float())
        sent.append(d.values)
        assert sum(len(p) for p in pk) == 2 * k + codec.HEADER_BYTES * len(pk)
    x, target = sch.trainer.inputs, sch.trainer.targets
    assert len(x) == 1   # AE training's pairs are gone: the target changed
    assert torch.allclose(x[0], sent[2] / s) and torch.allclose(target[0], sum(sent) / N_WORKERS / s)
    assert codec.read_header(st2.downlinks[1].packets[0]).kind == KIND_WEIGHTS and sch.ships == 2
    # t + 1 kept nothing, so t + 2 carries no refresh
    _, st3 = run_exchange(sch, t + 2, grads(t + 2, True))
    assert all(KIND_REFRESH not in by_kind(m.packets) for m in st3.uplinks[0].values())


# ---------------------------------------------------------------- the AE's input order on the wire

@pytest.mark.parametrize("order", ["value", "magnitude", "sign", "index"])
@pytest.mark.parametrize("coding", ["ordered", "sorted_ranks"])
def test_positions_travel_in_the_order_the_autoencoder_reads_them(order, coding):
    from nodes.compression.lgc_messages import order_of, positions_message, read_positions
    gen = torch.Generator().manual_seed(3)
    idx = torch.sort(torch.randperm(5000, generator=gen)[:300]).values
    vals = torch.randn(300, generator=gen)
    ordered = idx[order_of(vals, order)]
    if order == "value":  # by hand: descending signed values
        assert torch.all(vals[order_of(vals, order)][:-1] >= vals[order_of(vals, order)][1:])
    if order == "sign":   # positives, then negatives, each in index order
        pos, neg = idx[vals >= 0], idx[vals < 0]
        assert torch.equal(ordered, torch.cat([pos, neg]))
    m = positions_message(ordered, 5000, order=order, coding=coding, payload_bytes=400,
                          method=wire_id("lgc_ps"), iteration=0, scale=2.0)
    back, s = read_positions(m.packets, 5000, order=order, coding=coding)
    assert torch.equal(back, ordered) and s == 2.0
    if order in ("value", "magnitude") and coding == "ordered":
        # by hand: per packet a header, the f32 scale and 13 bits (log2 5000) per position
        heads = [codec.read_header(p) for p in m.packets]
        assert sum(h.entries for h in heads) == 300
        assert all(len(p) == codec.HEADER_BYTES + 4 + math.ceil(13 * h.entries / 8)
                   for p, h in zip(m.packets, heads))
    if order in ("index", "sign"):  # delta varints + 1 bit each, independent of the order
        plain = positions_message(idx, 5000, order="index", coding=coding, payload_bytes=400,
                                  method=wire_id("lgc_ps"), iteration=0, scale=2.0)
        assert m.nbytes == plain.nbytes
    # a lost packet: the order cannot be rebuilt, the receiver says so
    if len(m.packets) > 1:
        assert read_positions(m.packets[1:], 5000, order=order, coding=coding) is None
