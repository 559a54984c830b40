"""No dead code in the product: every module-level name (function, class, constant) and every
method of a module-level class in channels, nodes, testbed, dashboards and lgc_schema is
referenced somewhere, or is listed in ALLOWED with the reason nothing here calls it.

Read from the source (ast), by name, which is conservative: a definition counts as referenced
when its name is used anywhere in this repository's Python (the product, and experiments,
benchmarks, validation, examples and tests: a name only they use is still used), as
  - a name or an attribute that is read (`f()`, `mod.CONST`, `obj.method`), or imported;
  - a string that is a name or a dotted path (`getattr(obj, "name")`, "module:Class", `__all__`),
    docstrings excepted;
  - a decorator call that registers it (`@register("topk", ...)`, `@app.callback(...)`).
Dunder methods are the language's. So a dead method whose name another class's live method
shares is not found; a name found here is certainly unused.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("channels", "nodes", "testbed", "dashboards", "lgc_schema")
USERS = ("experiments", "benchmarks", "validation", "examples", "tests")
# Definitions nothing in this repository calls, which stay (file:qualified name: why). Each must
# still be defined and still be unreferenced (an entry cannot go stale).
ALLOWED = {
    "testbed/api.py:Run.to_json": "the Python API (testbed.api, docs/reference/api.md): a user's call",
    "testbed/api.py:Run.to_csv": "the Python API (testbed.api, docs/reference/api.md): a user's call",
    "testbed/flower/grid.py:LocalGrid.set_run": "flwr's Grid interface: Flower's ServerApp calls it",
    "testbed/flower/grid.py:LocalGrid.create_message":
        "flwr's Grid interface: a ServerApp's strategy calls it",
    "dashboards/app.py:QuietHandler.log_request": "werkzeug's request handler hook (silenced)",
    "nodes/flops.py:_TotalMode._should_skip_dynamo":
        "torch's dispatch-mode hook: keeps torch._dynamo from loading on the first op",
}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PATH = re.compile(r"[A-Za-z_][\w.:]*")   # a string naming something: "name", "pkg.mod:Class"


def _sources(packages: tuple[str, ...]):
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            yield rel, ast.parse(path.read_text(encoding="utf-8"), rel)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, kinds) and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}


def names_used(tree: ast.AST) -> set[str]:
    """Every name the module reads, imports or names in a string (module doc)."""
    docs, used = _docstrings(tree), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store):
            used.add(n.id)
        elif isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Store):
            used.add(n.attr)
        elif isinstance(n, ast.alias):
            used.add(n.name.rsplit(".", 1)[-1])
        elif (isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
              and PATH.fullmatch(n.value)):
            used.update(NAME.findall(n.value))
    return used


def _registered(node) -> bool:
    """Decorated by a call, which registers it (a plain `@property`, `@cache` does not)."""
    return any(isinstance(d, ast.Call) for d in node.decorator_list)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def definitions(rel: str, tree: ast.Module) -> dict[str, str]:
    """{"file:name" or "file:Class.method": "file:line"} of the module's definitions."""
    out = {}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, (*functions, ast.ClassDef)) and not _registered(node):
            out[f"{rel}:{node.name}"] = f"{rel}:{node.lineno}"
        if isinstance(node, ast.ClassDef):
            out.update({f"{rel}:{node.name}.{m.name}": f"{rel}:{m.lineno}" for m in node.body
                        if isinstance(m, functions) and not _dunder(m.name) and not _registered(m)})
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update({f"{rel}:{n.id}": f"{rel}:{node.lineno}" for t in targets
                        for n in ast.walk(t) if isinstance(n, ast.Name) and not _dunder(n.id)})
    return out


def _name(key: str) -> str:
    """The name a definition is referenced by: "f.py:Class.method" -> "method"."""
    return key.split(":", 1)[1].rsplit(".", 1)[-1]


def unreferenced() -> dict[str, str]:
    """{"file:qualified name": "file:line"} of the product's definitions no code names."""
    used, defined = set(), {}
    for rel, tree in _sources(PRODUCT + USERS):
        used |= names_used(tree)
        if rel.split("/", 1)[0] in PRODUCT:
            defined.update(definitions(rel, tree))
    return {key: where for key, where in defined.items() if _name(key) not in used}


def test_every_definition_of_the_product_is_referenced():
    dead = {k: w for k, w in unreferenced().items() if k not in ALLOWED}
    assert not dead, ("defined and never referenced (remove it, or list it in ALLOWED with the "
                      "reason it stays):\n" + "\n".join(f"{w}: {k.split(':')[1]}"
                                                       for k, w in sorted(dead.items())))


def test_every_allowed_name_is_still_defined_and_unreferenced():
    assert sorted(set(ALLOWED) - set(unreferenced())) == []


def test_the_check_finds_an_unused_function_and_not_a_used_one():
    tree = ast.parse("import os\n\nLIMIT = 3\n\n\ndef used():\n    return LIMIT\n\n\n"
                     "def unused():\n    '''used'''\n    return os.sep\n\n\nclass K:\n"
                     "    def m(self):\n        return used()\n\n    def __len__(self):\n"
                     "        return getattr(self, 'm')()\n")
    names = names_used(tree)
    defined = definitions("x.py", tree)
    assert sorted(k for k in defined if _name(k) not in names) == [
        "x.py:K", "x.py:unused"]
