"""Every method on every collective it declares: the dense ring against a node-by-node hand
simulation, PowerSGD's all-reduce against its PS exchange, the sparse/quantized methods'
all-gather against their PS mean, and the `collective` option's refusals."""
import numpy as np
import pytest
import torch

from nodes.compression.ideal import run_exchange
from nodes.compression.registry import METHODS, SCHEMES, build_scheme, load_all
from nodes.compression.ring import ring_sum

SHAPES = [torch.Size([1000]), torch.Size([50, 20])]
N_PARAMS, PAYLOAD = 2000, 1400


def make(method, workers=4, **opts):
    return build_scheme(method, opts, n_workers=workers, shapes=SHAPES, payload_bytes=PAYLOAD, seed=5)


def grads(it, workers=4, scale=1.0):
    g = torch.Generator().manual_seed(7000 + it)
    return [scale * torch.randn(N_PARAMS, generator=g) for _ in range(workers)]


# ------------------------------------------------------------------ the ring, node by node

def simulate_ring(vectors: list[np.ndarray], dtype) -> list[np.ndarray]:
    """What every node holds after a ring all-reduce, simulated the way the ring runs.

    Node i keeps its own buffer of N chunks (numpy.array_split). Reduce-scatter: at step s node
    i sends chunk (i - s) mod N to node i+1, which adds it to its own chunk of that index in
    fp32 and stores the result in the wire dtype. After N-1 steps node i holds chunk
    (i + 1) mod N complete. All-gather: at step s node i forwards chunk (i + 1 - s) mod N to
    node i+1, which overwrites its copy. Returns every node's final buffer."""
    n = len(vectors)
    bufs = [np.array_split(v.astype(dtype).copy(), n) for v in vectors]
    for s in range(n - 1):
        sent = [(i, (i - s) % n, bufs[i][(i - s) % n].copy()) for i in range(n)]  # simultaneous
        for i, c, chunk in sent:
            dst = (i + 1) % n
            bufs[dst][c] = (chunk.astype(np.float32) + bufs[dst][c].astype(np.float32)).astype(dtype)
    for s in range(n - 1):
        sent = [(i, (i + 1 - s) % n, bufs[i][(i + 1 - s) % n].copy()) for i in range(n)]
        for i, c, chunk in sent:
            bufs[(i + 1) % n][c] = chunk
    return [np.concatenate(b).astype(np.float32) for b in bufs]


@pytest.mark.parametrize("dtype,wire", [(np.float32, "f32"), (np.float16, "f16")])
@pytest.mark.parametrize("n_nodes", [2, 3, 5])
def test_ring_sum_equals_the_node_by_node_simulation(dtype, wire, n_nodes):
    rng = np.random.default_rng(n_nodes)
    # magnitudes spread over 6 decades so the order of the additions shows in the rounding
    vecs = [(rng.standard_normal(23) * 10.0 ** rng.integers(-3, 3, 23)).astype(dtype)
            for _ in range(n_nodes)]
    nodes = simulate_ring(vecs, dtype)
    for other in nodes[1:]:
        assert np.array_equal(other, nodes[0])  # every node ends with the same bytes
    got = ring_sum([v.tobytes() for v in vecs], wire).numpy()
    assert np.array_equal(got, nodes[0])


def test_f16_ring_rounds_every_hop_not_once():
    # the same data summed in fp32 and rounded once to f16 differs: hop rounding is real
    rng = np.random.default_rng(1)
    vecs = [(rng.standard_normal(64) * 100).astype(np.float16) for _ in range(5)]
    ring = ring_sum([v.tobytes() for v in vecs], "f16").numpy()
    once = np.sum([v.astype(np.float32) for v in vecs], axis=0).astype(np.float16).astype(np.float32)
    assert not np.array_equal(ring, once)
    assert np.allclose(ring, once, atol=4 * 2.0 ** -10 * np.abs(once).max())


# ------------------------------------------------------------------ dense methods on a ring

@pytest.mark.parametrize("method,dtype", [("none", np.float32), ("fp16", np.float16)])
def test_dense_allreduce_is_the_ring_sum_over_n(method, dtype):
    g = grads(0)
    s = make(method, collective="allreduce")
    agg, st = run_exchange(s, 0, g)
    assert st.phases == ["AllReduce"] and st.bits_up == {} and st.bits_down == 0
    nodes = simulate_ring([x.numpy() for x in g], dtype)
    assert torch.equal(agg, torch.from_numpy(nodes[0]) / 4)
    # bytes: 2(N-1) chunks of ceil(2000/4) = 500 values, raw (no header on the ring buffers)
    itemsize = np.dtype(dtype).itemsize
    assert st.bits_allreduce == {w: 8 * 2 * 3 * 500 * itemsize for w in range(4)}
    # the same mean the server takes, up to the order of the fp32 additions / f16 rounding
    mean = torch.stack(g).mean(0)
    tol = 1e-6 if method == "none" else 4 * 2.0 ** -10 * float(torch.stack(g).abs().max())
    assert torch.allclose(agg, mean, atol=tol)


def test_fp16_allreduce_refuses_values_beyond_half_range():
    g = grads(0)
    g[2][5] = 1e5
    with pytest.raises(ValueError, match="w2 gradient entry 1e\\+05 .* half-precision range"):
        run_exchange(make("fp16", collective="allreduce"), 0, g)


# ------------------------------------------------------------------ PowerSGD: all-reduce == PS

def _powersgd_pair(workers, values="f32"):
    return (make("powersgd", workers=workers, collective="ps", values=values),
            make("powersgd", workers=workers, collective="allreduce", values=values))


def test_powersgd_allreduce_equals_ps_bit_for_bit_with_two_workers():
    # with 2 nodes every ring chunk adds the same two numbers the server adds: identical floats,
    # so the update, the error memories and the warm-started Q agree exactly for 3 iterations
    ps, ar = _powersgd_pair(2)
    for it in range(3):
        g = grads(it, workers=2)
        a_ps, st_ps = run_exchange(ps, it, [x.clone() for x in g])
        a_ar, st_ar = run_exchange(ar, it, [x.clone() for x in g])
        assert st_ps.phases == ["Uplink", "Downlink", "Uplink", "Downlink"]
        assert st_ar.phases == ["AllReduce", "AllReduce"]
        assert torch.equal(a_ps, a_ar)
        for e1, e2 in zip(ps.memory.residuals, ar.memory.residuals):
            assert torch.equal(e1, e2)
        for q1, q2 in zip(ps.q, ar.q):
            assert torch.equal(q1, q2)


@pytest.mark.parametrize("values,tol", [("f32", 1e-5), ("f16", 2e-2)])
def test_powersgd_allreduce_equals_ps_with_four_workers(values, tol):
    ps, ar = _powersgd_pair(4, values)
    for it in range(3):
        g = grads(it)
        a_ps, _ = run_exchange(ps, it, [x.clone() for x in g])
        a_ar, st = run_exchange(ar, it, [x.clone() for x in g])
        scale = float(a_ps.abs().max())
        assert torch.allclose(a_ps, a_ar, atol=tol * scale), float((a_ps - a_ar).abs().max())
    # the ring carries P (50 x 2) then Q (20 x 2) + the 1000 dense values, raw
    item = 4 if values == "f32" else 2
    assert st.bits_allreduce[0] == 8 * item * 2 * 3 * (25 + 260)


def test_randomk_allreduce_sums_the_shared_positions_like_the_server():
    # the positions are shared, so the k values line up: summed on the ring they give the
    # server's mean (downlink f32: the broadcast adds no rounding); 2 workers: bit for bit
    ps = make("randomk", workers=2, collective="ps")
    ar = make("randomk", workers=2, collective="allreduce")
    for it in range(3):
        g = grads(it, workers=2)
        a_ps, _ = run_exchange(ps, it, [x.clone() for x in g])
        a_ar, st = run_exchange(ar, it, [x.clone() for x in g])
        assert st.phases == ["AllReduce"] and torch.equal(a_ps, a_ar)
        assert int((a_ar != 0).sum()) <= 200  # k = 10% of 2000 positions
        for r1, r2 in zip(ps.memory.residuals, ar.memory.residuals):
            assert torch.equal(r1, r2)


# ------------------------------------------------------------------ all-gather == the PS mean

GATHER = {"topk": {"ratio": 0.05}, "dgc": {"ratio": 0.05, "warmup_iterations": 0},
          "qsgd": {"downlink": "f32"}, "terngrad": {"downlink": "f32"},
          "signsgd": {"downlink": "f32"}, "none": {}, "fp16": {"downlink": "f32"}}


@pytest.mark.parametrize("method", sorted(GATHER))
def test_allgather_gives_every_node_the_servers_mean(method):
    """Same seeds, same gradients: every node's local mean of the gathered messages is what
    the server broadcasts (downlink in f32 so the broadcast adds no rounding of its own), and
    each worker sends the very message it sends to the server."""
    ps = make(method, collective="ps", **GATHER[method])
    ag = make(method, collective="allgather", **GATHER[method])
    for it in range(3):
        g = grads(it)
        a_ps, st_ps = run_exchange(ps, it, [x.clone() for x in g])
        a_ag, st_ag = run_exchange(ag, it, [x.clone() for x in g])
        assert st_ag.phases == ["AllGather"] and st_ag.bits_down == 0
        assert st_ag.bits_up == st_ps.bits_up
        assert st_ag.bits_broadcast == sum(st_ps.bits_up.values()) * 3  # to the 3 other nodes
        assert torch.equal(a_ps, a_ag)


# ------------------------------------------------------------------ the option itself

def test_every_method_declares_its_collectives_and_the_option_lists_them():
    load_all()
    expect = {"none": ("ps", "allreduce", "allgather"), "fp16": ("ps", "allreduce", "allgather"),
              "powersgd": ("allreduce", "ps"), "topk": ("ps", "allgather"), "dgc": ("ps", "allgather"),
              "qsgd": ("ps", "allgather"), "terngrad": ("ps", "allgather"),
              "signsgd": ("ps", "allgather"), "randomk": ("ps", "allreduce"), "lgc_ps": ("ps",),
              "lgc_rar": ("allreduce",)}
    for method, collectives in expect.items():
        assert SCHEMES[method].collectives == collectives
        opt = METHODS[method]["collective"]
        assert opt.choices == collectives and opt.default == collectives[0]
        assert make(method).collective == collectives[0]
    # a method declared after the fact gets the field too (the registry adds it)
    assert set(SCHEMES) == set(METHODS) and all("collective" in METHODS[m] for m in METHODS)


def test_a_collective_the_method_cannot_use_is_one_line_naming_the_allowed():
    with pytest.raises(ValueError) as err:
        make("topk", collective="allreduce")
    assert str(err.value) == "compression.collective = 'allreduce': must be one of 'ps', 'allgather'"
