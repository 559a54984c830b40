"""What made a stored run: the code's commit, whether the tree was clean, the effective options,
the seeds and the library versions. Every run file the result scripts write carries
`provenance(spec)` under the key "provenance"; the tables print each row's commit and mark rows
made by other code than the current commit (`marks`).

The commit and `clean` are read once per process, when its first run starts (the code a
process runs is what it loaded then). `clean` looks at the code only: a run file that another run of the same grid has just written
(docs/) does not make the tree dirty.
"""
from __future__ import annotations

import functools
import importlib.metadata
import platform
import subprocess
from pathlib import Path

from lgc_schema import defaults
from testbed.config import load_config

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("torch", "numpy", "scipy", "simpy", "networkx")
OUTPUTS = ("docs",)   # where runs are written: not part of the code a run is made by


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                             timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


@functools.lru_cache(maxsize=1)
def code_state() -> dict:
    """The commit (None outside a git checkout) and whether the code differs from it."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--", ".", *(f":(exclude){o}" for o in OUTPUTS))
    return {"commit": commit, "clean": None if status is None else status == ""}


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    out = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            out[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            out[lib] = None
    return out


def effective(config: str | Path, overrides: list[str]) -> dict:
    """The run's seed, budget and compression options as the testbed reads them: old option
    names mapped to the current ones, every default filled in."""
    from nodes.compression.registry import methods
    path = Path(config)
    cfg = load_config(path if path.is_absolute() else ROOT / path, list(overrides))
    method = cfg.compression.method
    net = dict(cfg.network)
    link = net.get("link") or {}
    return {"seed": cfg.run.seed, "iterations": cfg.run.iterations, "method": method,
            "options": {**defaults(methods()[method]), **cfg.compression.options},
            "network": {**{k: net.get(k) for k in ("workers", "medium", "sharing")},
                        **{k: link.get(k) for k in ("bandwidth_mbps", "delivery", "loss")}}}


def provenance(spec) -> dict:
    """What a run file records of how its run was made (spec: a harness.RunSpec)."""
    out = {**code_state(), "versions": versions(), "config": str(spec.config),
           "overrides": list(spec.overrides)}
    try:
        out["effective"] = effective(spec.config, ["run.threads=1", *spec.overrides])
    except Exception as e:   # a refused configuration is recorded as such, the run file still written
        out["effective"] = {"error": f"{type(e).__name__}: {e}"}
    return out


# what a run is made by: a row made at another commit whose files here are the same is current
CODE = ("channels", "nodes", "testbed", "lgc_schema", "experiments")


def same_code(commit: str, current: str) -> bool:
    """Whether `commit` and `current` hold the same code (CODE, run files under docs/ aside)."""
    if commit == current:
        return True
    out = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", commit, current, "--", *CODE],
                         capture_output=True, timeout=30)
    return out.returncode == 0


def marks(prov: dict | None, current: str | None = None) -> str:
    """A row's provenance as the tables print it: the short commit, '+dirty' if the tree was
    not clean, 'older code' if the code differs from the current commit's (a commit that
    changed only documents or run files keeps a row current), 'unrecorded' if it has none."""
    if not prov or not prov.get("commit"):
        return "unrecorded (older code)"
    current = current if current is not None else code_state()["commit"]
    text = prov["commit"][:7] + ("" if prov.get("clean") else "+dirty")
    return text if current and same_code(prov["commit"], current) else text + " (older code)"
