"""Checks for authors of compression methods, ours and other packages' alike.

Error feedback as an invariant (as in epfml/powersgd's reference test, `orig.allclose(avg +
buffer)`): over the workers, what they had (gradient plus memory, as the memory compensated it)
equals what the aggregate credited them with plus what they keep. A method with an
`ErrorMemory` at `scheme.memory` is checked with:

    from nodes.compression.testing import check_error_feedback
    check_error_feedback("my_method", {"ratio": 0.1, "downlink": "f32"})

or, with gradients of one's own, exchange by exchange:

    had = record_compensated(scheme)
    for it in range(4):
        agg = assert_error_feedback(scheme, had, it, grads)

The aggregate must reach the workers exactly as credited: run a method with a lossless broadcast
(`downlink = "f32"` where it has that option). Plain asserts, no test framework needed.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from nodes.compression.ideal import run_exchange
from nodes.compression.memory import ErrorMemory
from nodes.compression.registry import build_scheme


def record_compensated(scheme) -> dict:
    """Wrap `scheme.memory.compensate` so that the returned dict holds, per worker, the
    compensated gradient (gradient plus memory) of its latest call, cloned: the memory may
    change that tensor in place afterwards."""
    memory = getattr(scheme, "memory", None)
    if not isinstance(memory, ErrorMemory):
        raise TypeError(f"{type(scheme).__name__} has no ErrorMemory at .memory: error feedback "
                        f"cannot be checked")
    had: dict = {}
    compensate = memory.compensate

    def spy(worker, grad):
        out = compensate(worker, grad)
        had[worker] = out.clone()
        return out

    memory.compensate = spy
    return had


def assert_error_feedback(scheme, had: dict, iteration: int, grads: Sequence[torch.Tensor], *,
                          members: Sequence[int] | None = None, atol: float = 1e-5) -> torch.Tensor:
    """One exchange of `grads` with ideal delivery, then the invariant over its members:
    mean(had) == aggregate + mean(kept), to `atol` times the largest |had|. `had`: what
    `record_compensated(scheme)` returned. Returns the aggregate."""
    agg, _ = run_exchange(scheme, iteration, list(grads), members=members)
    workers = list(range(len(grads))) if members is None else list(members)
    kept = torch.stack([scheme.memory.residuals[w] for w in workers]).mean(0)
    orig = torch.stack([had[w] for w in workers]).mean(0)
    scale = float(orig.abs().max())
    assert scale > 0, "the workers had nothing: the check would be vacuous"
    gap = float((orig - (agg + kept)).abs().max())
    assert gap <= atol * scale, (f"{scheme.name}: iteration {iteration}: what the workers had "
                                 f"differs from aggregate + kept by {gap:.3g} "
                                 f"(allowed {atol * scale:.3g})")
    assert float((orig - kept).norm()) > 0, f"{scheme.name}: nothing was sent"
    return agg


def check_error_feedback(method: str, options: dict | None = None, *, n_workers: int = 4,
                         shapes: Sequence[tuple[int, ...]] = ((64, 8), (8,)),
                         iterations: int = 4, payload_bytes: int = 1400, seed: int = 0,
                         atol: float = 1e-5) -> None:
    """The invariant for registered `method` over `iterations` exchanges of seeded random
    gradients (each iteration's scaled so that the memory is never empty nor dominant)."""
    scheme = build_scheme(method, dict(options or {}), n_workers=n_workers, shapes=list(shapes),
                          payload_bytes=payload_bytes, seed=seed)
    had = record_compensated(scheme)
    numel = sum(int(torch.Size(s).numel()) for s in shapes)
    g = torch.Generator().manual_seed(seed)
    for it in range(iterations):
        grads = [torch.randn(numel, generator=g) * (1 + w) / (1 + it) for w in range(n_workers)]
        assert_error_feedback(scheme, had, it, grads, atol=atol)
