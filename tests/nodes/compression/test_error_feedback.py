"""Error feedback as an invariant, for every registered method with error memory (as in
epfml/powersgd's reference test, `orig.allclose(avg + buffer)`): over the workers, what they had
(gradient plus memory, as the memory compensated it) equals what the aggregate credited them
with plus what they keep. Gradients are real ones: a small MLP on the digits data, four workers.

The LGC family runs with a one-iteration warm-up and AE training so that iterations 2-3 are
in its LGC stage (f32 latents: the ring's f16 rounding is not a credit);
tests/nodes/compression/test_lgc_real.py checks it per worker on Fashion-MNIST gradients.
"""
import pytest
import torch

from nodes.compression.ideal import run_exchange
from nodes.compression.memory import ErrorMemory
from nodes.compression.registry import build_scheme, methods, names
from nodes.compression.testing import (
    assert_error_feedback,
    check_error_feedback,
    record_compensated,
)
from nodes.data import load_dataset
from nodes.models import build_model
from nodes.partition import split
from nodes.workers import WorkerPool, param_shapes

W, PAYLOAD = 4, 1400


@pytest.fixture(scope="module")
def pool_and_shapes():
    torch.manual_seed(0)
    ds = load_dataset("digits", seed=0)
    model = build_model("mlp", ds.input_shape, ds.num_classes)
    pool = WorkerPool(model, ds.train_x, ds.train_y, split(ds.train_y, W, seed=0), batch_size=32,
                      seed=0, device="cpu", mode="sequential")
    return model, pool, param_shapes(model)


def options(method):
    """Defaults, but the broadcast in f32 so the aggregate is exactly the mean that was credited,
    and ScaleCom's memory unfiltered (beta = 1): its low-pass filter keeps only a beta share of
    the new residual by design (test_scalecom.py checks the filter by hand)."""
    fields = methods()[method]
    out = {**({"downlink": "f32"} if "downlink" in fields else {}),
           **({"beta": 1.0} if "beta" in fields else {})}
    if method.startswith("lgc_"):  # reach the LGC stage at iteration 2
        out.update(warmup_iterations=1, ae_iterations=1)
        out.update({k: v for k, v in (("ae_steps", 2), ("latent_dtype", "f32")) if k in fields})
    return out


def has_memory(method):
    s = build_scheme(method, options(method), n_workers=W, shapes=[(64, 8)], payload_bytes=PAYLOAD)
    return isinstance(getattr(s, "memory", None), ErrorMemory)


WITH_MEMORY = [m for m in names() if has_memory(m)]


def test_the_methods_with_memory_are_found():
    assert {"topk", "randomk", "dgc", "signsgd", "powersgd", "scalecom", "lgc_ps", "lgc_rar",
            "lgc_ablation", "lgc_scaled", "lgc_rar_scaled"} <= set(WITH_MEMORY)
    assert "none" not in WITH_MEMORY and "qsgd" not in WITH_MEMORY


# Options that change what is selected, on for every method that has them: the MLP's biases and
# last layer (128, 128, 1280 and 10 weights) sent whole, per-layer top-k over the two others.
LAYER_OPTIONS = {"dense_below": 2000, "topk_scope": "layer"}
# LGC-PS with the reference's structure: per-node decoders and the latent pull.
REFERENCE = {"decoders": "per_node", "latent_pull": 1.0}
# DGC's momentum kept where sent (no momentum factor masking).
UNMASKED = {"momentum_masking": False}
# LGC-PS's coder refreshed every LGC iteration (its memories at the leader's positions sent along).
REFRESH = {"ae_refresh_every": 1, "ae_refresh_steps": 2}
# lgc_scaled's scalar refitted every LGC iteration on the same kept memories.
REFIT = {"ae_refresh_every": 1}
# LGC-RAR with a non-linear decoder: every node credited with the decoded mean.
NONLINEAR = {"rar_decoder": "nonlinear"}
# lgc_scaled over the leader's momentum (beta refitted on the nodes' momenta every iteration).
MOMENTUM = {"ae_refresh_every": 1, "common_source": "momentum"}
CASES = ([(m, {}) for m in WITH_MEMORY]
         + [(m, LAYER_OPTIONS) for m in WITH_MEMORY if "dense_below" in methods()[m]]
         + [(m, REFERENCE) for m in WITH_MEMORY if "decoders" in methods()[m]]
         + [(m, UNMASKED) for m in WITH_MEMORY if "momentum_masking" in methods()[m]]
         + [(m, REFRESH if "ae_refresh_steps" in methods()[m] else REFIT) for m in WITH_MEMORY
            if "ae_refresh_every" in methods()[m]]
         + [(m, NONLINEAR) for m in WITH_MEMORY if "rar_decoder" in methods()[m]]
         + [(m, MOMENTUM) for m in WITH_MEMORY if "common_source" in methods()[m]])


def test_the_layer_options_are_covered():
    assert {m for m, extra in CASES if extra == LAYER_OPTIONS} >= {"dgc", "lgc_ps", "lgc_rar",
                                                                  "lgc_ablation"}
    assert {m for m, extra in CASES if extra == REFRESH} == {"lgc_ps"}
    assert {m for m, extra in CASES if extra == REFERENCE} == {"lgc_ps"}
    assert {m for m, extra in CASES if extra == UNMASKED} == {"dgc", "lgc_ps", "lgc_rar",
                                                              "lgc_ablation", "lgc_scaled",
                                                              "lgc_rar_scaled"}
    assert {m for m, extra in CASES if extra == REFRESH} == {"lgc_ps"}
    assert {m for m, extra in CASES if extra is REFIT} == {"lgc_scaled"}
    assert {m for m, extra in CASES if extra is NONLINEAR} == {"lgc_rar"}
    assert {m for m, extra in CASES if extra is MOMENTUM} == {"lgc_scaled"}


def case_id(method, extra):
    names = {id(LAYER_OPTIONS): "+layers", id(REFERENCE): "+reference", id(UNMASKED): "+unmasked",
             id(REFRESH): "+refresh", id(REFIT): "+refit",
             id(NONLINEAR): "+nonlinear", id(MOMENTUM): "+momentum"}
    return method + names.get(id(extra), "")


@pytest.mark.parametrize("method,extra", CASES, ids=[case_id(m, e) for m, e in CASES])
def test_what_a_worker_had_is_what_was_credited_plus_what_it_keeps(method, extra, pool_and_shapes):
    model, pool, shapes = pool_and_shapes
    s = build_scheme(method, {**options(method), **extra}, n_workers=W, shapes=shapes,
                     payload_bytes=PAYLOAD, seed=3)
    had = record_compensated(s)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    for it in range(4):
        grads, _ = pool.gradients(params)
        agg = assert_error_feedback(s, had, it, grads)   # also: something was sent
        params = params - 0.05 * agg   # train on, so later gradients meet a non-empty memory


COLLECTIVES = [(m, c) for m in WITH_MEMORY for c in build_scheme(
    m, options(m), n_workers=W, shapes=[(64, 8)], payload_bytes=PAYLOAD).collectives]


@pytest.mark.parametrize("method,collective", COLLECTIVES)
def test_a_worker_left_out_keeps_all_it_had(method, collective, pool_and_shapes):
    """Iterations 1 and 3 go without w3 (it is no member: off the ring, its message not
    carried), as a deadline leaves it out; the driver then calls keep_undelivered. What
    w3 keeps is exactly what it had, while the members sent part of theirs."""
    from nodes.compression.memory import keep_undelivered

    model, pool, shapes = pool_and_shapes
    s = build_scheme(method, {**options(method), "collective": collective}, n_workers=W,
                     shapes=shapes, payload_bytes=PAYLOAD, seed=3)
    had = record_compensated(s)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    for it in range(4):
        grads, _ = pool.gradients(params)
        out = it in (1, 3)
        agg, _ = run_exchange(s, it, grads, members=[0, 1, 2] if out else None)
        if out:
            keep_undelivered(s, [3])
            torch.testing.assert_close(s.memory.residuals[3], had[3], rtol=0, atol=0)
        assert float((had[0] - s.memory.residuals[0]).norm()) > 0  # the members did send
        params = params - 0.05 * agg


# Federated mode (nodes/federated.py): two slots, three clients drawn in turn, so each client
# comes back in another slot after another client used its old one.
FED_ROUNDS = [(0, 1), (2, 0), (1, 2), (0, 1), (2, 0)]


@pytest.mark.parametrize("method", WITH_MEMORY)
def test_federated_clients_keep_their_memory_and_the_invariant_holds(method, pool_and_shapes):
    """Every memory of the scheme a client had at the end of its last round is what its next
    round starts from, in whatever slot; over each round's clients what they had equals what
    the aggregate credited plus what they keep."""
    from nodes.compression.memory import memories
    from nodes.federated import ClientMemories

    model, pool, shapes = pool_and_shapes
    s = build_scheme(method, options(method), n_workers=2, shapes=shapes, payload_bytes=PAYLOAD, seed=3)
    clients = ClientMemories()
    had = record_compensated(s)
    ends = {}   # client -> its memories' tensors when its last round ended
    state = lambda slot: [t.clone() if t is not None else None
                          for m in memories(s) for t in m.snapshot(slot).values()]
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    came_back = 0
    for it, drawn in enumerate(FED_ROUNDS):
        grads, _ = pool.gradients(params)
        for slot, c in enumerate(drawn):
            clients.load(s, slot, c)
            now = state(slot)
            if c in ends:
                came_back += 1
                for a, b in zip(now, ends[c]):
                    assert (a is None) == (b is None)
                    if a is not None:
                        torch.testing.assert_close(a, b, rtol=0, atol=0)
            else:
                assert all(t is None for t in now), "a first-timer starts with no memory"
        agg, _ = run_exchange(s, it, grads[:2])
        kept = torch.stack([s.memory.residuals[w] for w in range(2)]).mean(0)
        orig = torch.stack([had[w] for w in range(2)]).mean(0)
        scale = float(orig.abs().max())
        assert torch.allclose(orig, agg + kept, atol=1e-5 * scale, rtol=0), method
        for slot, c in enumerate(drawn):
            clients.save(s, slot, c)
            ends[c] = state(slot)
        params = params - 0.05 * agg
    assert came_back == 7   # 10 draws, 3 of them first-timers
    assert any(float(t.abs().sum()) > 0 for snaps in ends.values() for t in snaps if t is not None)


@pytest.mark.parametrize("method", ["topk", "signsgd"])
def test_the_exported_check_runs_on_random_gradients(method):
    """What a plugin author calls: the same invariant on seeded random gradients."""
    check_error_feedback(method, options(method))


def test_the_exported_check_fails_a_memory_that_forgets():
    """A memory that drops what was not sent breaks the invariant, and the check says so."""
    s = build_scheme("topk", {"ratio": 0.1, "downlink": "f32"}, n_workers=2, shapes=[(200,)],
                     payload_bytes=PAYLOAD)
    had = record_compensated(s)
    update = s.memory.update_sparse
    s.memory.update_sparse = lambda w, p, i, v, *a, **k: (update(w, p, i, v, *a, **k),
                                                          s.memory.residuals[w].zero_())
    g = torch.Generator().manual_seed(1)
    with pytest.raises(AssertionError, match="differs from aggregate"):
        assert_error_feedback(s, had, 0, [torch.randn(200, generator=g) for _ in range(2)])
