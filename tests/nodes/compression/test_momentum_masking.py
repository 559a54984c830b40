"""`momentum_masking` (DGC and the LGC family): false keeps the momentum u where a coordinate is
sent. It changes what the workers keep, never what goes on the wire at a given memory state;
false is DGC's momentum correction without the mask, checked against a hand computation."""
import pytest
import torch

from nodes.compression.ideal import IdealTransport
from nodes.compression.phases import AllGather, AllReduce, Broadcast, Downlink, Uplink
from nodes.compression.registry import build_scheme, methods
from nodes.compression.transport import drive

SHAPES = [torch.Size([40, 25]), torch.Size([1000])]  # 2000 coordinates
W = 4
FAMILY = ["dgc", "lgc_ps", "lgc_rar", "lgc_ablation"]


def test_every_method_of_the_family_declares_the_option_with_masking_on_by_default():
    for m in FAMILY:
        assert methods()[m]["momentum_masking"].default is True, m


class Recording(IdealTransport):
    """Every byte every phase put on the wire, in order."""

    def __init__(self):
        super().__init__()
        self.wire: list[bytes] = []

    def carry(self, phase):
        if isinstance(phase, (Uplink, AllGather)):
            for w in sorted(phase.messages):
                self.wire += list(phase.messages[w].packets)
        elif isinstance(phase, (Downlink, Broadcast)):
            self.wire += list(phase.message.packets)
        elif isinstance(phase, AllReduce):
            self.wire += [phase.buffers[w] for w in sorted(phase.buffers)]
        return super().carry(phase)


def grads(it, n=2000):
    g = torch.Generator().manual_seed(100 + it)
    return [torch.randn(n, generator=g) for _ in range(W)]


def build(method, masking):
    opts = dict(ratio=0.02, momentum_masking=masking)
    if method != "dgc":
        opts.update(warmup_iterations=1, ae_iterations=1)
    if method in ("lgc_ps", "lgc_rar"):
        opts.update(ae_steps=2, ae_channels="8,8", latent_ratio=0.25)
    return build_scheme(method, opts, n_workers=W, shapes=SHAPES, payload_bytes=500, seed=3)


def wire_of(scheme, it, gs):
    t = Recording()
    agg = drive(scheme, it, gs, t)
    return t.wire, agg


@pytest.mark.parametrize("method", FAMILY)
def test_no_bit_on_the_wire_changes_at_the_same_memory(method):
    """Iteration 0 from fresh state (DGC's warm-up for the LGC family), then the first LGC-stage
    iteration (iteration 2) from one and the same state loaded into both: identical bytes in every
    phase and the same aggregate. The memories then differ (u kept where sent)."""
    on, off = build(method, True), build(method, False)
    for it in range(2):
        a, agg_a = wire_of(on, it, grads(it))
        b, agg_b = wire_of(off, it, grads(it))
        if it == 0:
            assert a == b and torch.equal(agg_a, agg_b)
    state = on.state_dict()
    off.load_state_dict(state)
    if method != "dgc":
        assert on.stage(2) == "lgc"
    a, agg_a = wire_of(on, 2, grads(2))
    b, agg_b = wire_of(off, 2, grads(2))
    assert a == b and len(a) > 0
    assert torch.equal(agg_a, agg_b)
    u_on = (on.dgc if method != "dgc" else on).u
    u_off = (off.dgc if method != "dgc" else off).u
    # masked: u is zero where sent; unmasked: u is kept there, so the two differ
    assert any(not torch.equal(x, y) for x, y in zip(u_on, u_off))


def test_masking_off_is_momentum_correction_without_the_mask_by_hand():
    """One worker, 6 coordinates, exact top-2 (sample_fraction 1), no clipping, m = 0.5, over 3
    iterations: u = m u + g; v = v + u; the two largest |v| are sent and leave v; u is kept."""
    m = 0.5
    gs = [[1.0, -4.0, 0.5, 3.0, 0.0, 2.0],
          [2.0, 1.0, -1.0, 0.25, 6.0, 1.0],
          [0.5, 0.5, 0.5, -8.0, 0.5, 0.5]]
    u = [0.0] * 6
    v = [0.0] * 6
    expect_sent = []
    for g in gs:  # DGC's two lines by hand, then the top-2 of |v| and no mask
        u = [m * a + b for a, b in zip(u, g)]
        v = [a + b for a, b in zip(v, u)]
        top = sorted(range(6), key=lambda i: -abs(v[i]))[:2]
        expect_sent.append({i: v[i] for i in top})
        for i in top:
            v[i] = 0.0
    def run(masking):
        s = build_scheme("dgc", dict(ratio=2 / 6, momentum=m, clip_norm=0.0, warmup_iterations=0,
                                     sample_fraction=1.0, momentum_masking=masking),
                         n_workers=1, shapes=[torch.Size([6])], payload_bytes=500, seed=0)
        out = []
        for it, g in enumerate(gs):
            agg = drive(s, it, [torch.tensor(g)], IdealTransport())
            out.append({i: float(agg[i]) for i in torch.nonzero(agg).reshape(-1).tolist()})
        return s, out

    s, sent = run(False)
    for it in range(3):
        assert sent[it] == pytest.approx(expect_sent[it], abs=1e-6)
    assert s.u[0].tolist() == pytest.approx(u, abs=1e-6)
    assert s.v[0].tolist() == pytest.approx(v, abs=1e-6)
    # the hand computation tells the variants apart: the masked default sends otherwise
    _, masked = run(True)
    assert masked != sent
