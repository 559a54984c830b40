"""What made a stored run: the code's commit, whether the tree was clean, the effective options,
the seeds, the library versions and the project's source files the run imported. Every run file
the result scripts write carries `provenance(spec)` under the key "provenance"; the tables print
each row's commit and mark rows that the current code would not make the same way (`marks`).

A row made at another commit is current when the files its run imported are the same at both
commits, comments, docstrings and option help texts aside (older run files, which do not list them: every file of
RUN_CODE), and its experiment file reads the same there, overrides applied (comments and layout
aside). Report code, documents
and other experiment files can change without rerunning anything.

The commit and `clean` are read once per process, when its first run starts (the code a
process runs is what it loaded then). `clean` looks at the code only: a run file that another run of the same grid has just written
(docs/) does not make the tree dirty.
"""
from __future__ import annotations

import ast
import copy
import functools
import importlib.metadata
import platform
import subprocess
import sys
import tomllib
from pathlib import Path

from lgc_schema import defaults
from testbed.configuration.loading import load_config
from testbed.configuration.overrides import apply_overrides

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
    # deferred: torch (the methods' modules), only when a run file is written
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


def loaded_files() -> list[str]:
    """The project's source files imported by this process, relative to the repository: what a
    run made in it was made by (the report's own modules, REPORT, aside)."""
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        try:
            rel = Path(path).resolve().relative_to(ROOT).as_posix()
        except ValueError:
            continue
        if rel.split("/")[0] in CODE_ROOTS and not (rel.startswith(REPORT) and rel not in RUN_CODE):
            out.add(rel)
    return sorted(out)


def provenance(spec) -> dict:
    """What a run file records of how its run was made (spec: a harness.TableRun), called when
    the run has ended in this process (the sweep engine's one-at-a-time mode)."""
    out = {**code_state(), "versions": versions(), "config": str(spec.config),
           "overrides": list(spec.overrides), "files": loaded_files()}
    try:
        out["effective"] = effective(spec.config, ["run.threads=1", *spec.overrides])
    except Exception as e:   # a refused configuration is recorded as such, the run file still written
        out["effective"] = {"error": f"{type(e).__name__}: {e}"}
    return out


# what a run is made by, for run files that do not list the files their run imported
RUN_CODE = ("channels", "nodes", "testbed", "lgc_schema", "experiments/__init__.py",
            "experiments/results/harness.py")
CODE_ROOTS = ("channels", "nodes", "testbed", "lgc_schema", "experiments")
REPORT = "experiments/results/"   # tabulates runs and makes none (harness.py, which runs them, aside)


def same_code(commit: str, current: str, files=RUN_CODE) -> bool:
    """Whether `commit` and `current` hold the same `files` (paths or folders), comments and
    docstrings aside: a Python file that changed only in those reads the same."""
    if commit == current:
        return True
    out = subprocess.run(["git", "-C", str(ROOT), "diff", "--name-only", commit, current, "--", *files],
                         capture_output=True, text=True, timeout=30)
    if out.returncode:
        return False
    return all(path.endswith(".py") and _code_at(commit, path) is not None
               and _code_at(commit, path) == _code_at(current, path)
               for path in out.stdout.split())


@functools.lru_cache(maxsize=1024)
def _code_at(commit: str, path: str) -> str | None:
    """A Python file's code at `commit` (None: absent there)."""
    out = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                         capture_output=True, text=True, timeout=30)
    return None if out.returncode else code_of(out.stdout)


def code_of(source: str) -> str:
    """Python source as its syntax tree without docstrings and without the `help=` texts of
    option Fields: what runs (comments never reach it; help is what `testbed keys` prints)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == "Field":
            node.keywords = [k for k in node.keywords if k.arg != "help"]
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _called(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def settings(text: str, overrides) -> dict:
    """An experiment file's tables with the run's overrides applied: what the file says,
    whatever its comments and layout."""
    return apply_overrides(copy.deepcopy(tomllib.loads(text)), list(overrides))


@functools.lru_cache(maxsize=256)
def _settings_at(commit: str, config: str, overrides: tuple) -> str | None:
    out = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{config}"],
                         capture_output=True, text=True, timeout=30)
    return None if out.returncode else repr(settings(out.stdout, overrides))


def same_settings(prov: dict, current: str) -> bool:
    """Whether the run's experiment file reads the same at its commit and at `current`."""
    config = prov.get("config")
    if not config or prov["commit"] == current:
        return True
    overrides = tuple(prov.get("overrides") or ())
    before = _settings_at(prov["commit"], config, overrides)
    return before is not None and before == _settings_at(current, config, overrides)


def marks(prov: dict | None, current: str | None = None) -> str:
    """A row's provenance as the tables print it: the short commit, '+dirty' if the tree was
    not clean, 'older code' if the files its run imported or its experiment file's settings
    differ at the current commit (changes to report code, documents or run files keep a row
    current), 'unrecorded' if it has none."""
    if not prov or not prov.get("commit"):
        return "unrecorded (older code)"
    current = current if current is not None else code_state()["commit"]
    text = prov["commit"][:7] + ("" if prov.get("clean") else "+dirty")
    same = current and same_code(prov["commit"], current, prov.get("files") or RUN_CODE) \
        and same_settings(prov, current)
    return text if same else text + " (older code)"
