"""The methods of the result tables: a label, the registry's method name and its options.

Every method gets the same seed, data split, model, optimizer and iteration budget; only
`[compression]` differs. Sparse methods keep 1% of the coordinates (DGC and LGC after their
sparsity warm-up); LGC's stages scale with the budget (harness.stage_lengths).
"""
from __future__ import annotations

from nodes.compression.registry import SCHEMES, load_all, names

DENSITY = 0.01

LABELS = ["fp32", "fp16", "topk", "dgc", "qsgd", "signsgd_ef", "powersgd", "lgc_ablation", "lgc_ps",
          "lgc_rar", "scalecom"]

# A method runs on a ring (no parameter server) when it declares a collective other than "ps"
# (ring_collective); the table scripts try every method on the ring and print the testbed's
# refusal for the others.


def options(label: str, warmup: int, ae_iters: int) -> dict:
    """`[compression]` table for one method at the given stage lengths."""
    lgc = {"ratio": DENSITY, "warmup_iterations": warmup, "ae_iterations": ae_iters, "ae_steps": 25,
           "ae_channels": "16,16,16", "ae_kernel": 5, "latent_ratio": 0.125,
           "latent_dtype": "f16"}
    table = {
        "fp32": {"method": "none"},
        "fp16": {"method": "fp16"},
        "topk": {"method": "topk", "ratio": DENSITY},
        "dgc": {"method": "dgc", "ratio": DENSITY, "warmup_iterations": warmup},
        "qsgd": {"method": "qsgd", "levels": 16, "bucket": 512},
        "signsgd_ef": {"method": "signsgd"},
        "powersgd": {"method": "powersgd", "rank": 2},
        # LGC-PS's protocol with the leader's f16 values instead of the latent: what the AE adds
        "lgc_ablation": {"method": "lgc_ablation", "ratio": DENSITY, "warmup_iterations": warmup,
                         "ae_iterations": ae_iters, "innovation_ratio": 0.01},
        "lgc_ps": {"method": "lgc_ps", **lgc, "innovation_ratio": 0.01},
        "lgc_rar": {"method": "lgc_rar", **lgc},
        "scalecom": {"method": "scalecom", "ratio": DENSITY},
    }
    if label not in table and label in names():  # any registered method, with its defaults
        return {"method": label}
    if label not in table:
        raise KeyError(f"method label {label!r}: must be one of {', '.join(LABELS + names())}")
    if table[label]["method"] not in names():
        raise KeyError(f"method label {label!r}: {table[label]['method']!r} is not registered")
    return table[label]


def overrides(label: str, warmup: int, ae_iters: int) -> list[str]:
    """The same as `--set compression.KEY=VALUE` items (strings quoted as TOML strings)."""
    out = []
    for key, value in options(label, warmup, ae_iters).items():
        out.append(f'compression.{key}="{value}"' if isinstance(value, str) else f"compression.{key}={value}")
    return out


def uses_warmup(label: str) -> bool:
    return label in ("dgc", "lgc_ablation", "lgc_ps", "lgc_rar")


def collectives(label: str) -> tuple[str, ...]:
    """The collectives a method declares, its natural one (the default) first."""
    load_all()
    return tuple(SCHEMES[options(label, 1, 1)["method"]].collectives)


def ring_collective(label: str) -> str | None:
    """The collective a method uses where there is no server: its natural one unless that is
    "ps", else the first other one it declares; None when it only knows the server."""
    others = [c for c in collectives(label) if c != "ps"]
    return others[0] if others else None
