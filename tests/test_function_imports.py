"""Imports of our own modules inside a function body stay few and declared.

A function-level import hides a dependency from the top of the module (and from a reader), so
the ones that stay are those that keep a heavy package (torch, numba, dash, ...) off a path that
must start without it. Each carries a comment on its line or the line before, `# deferred: WHY`,
and there are at most LIMIT of them over the product's packages, experiments/, benchmarks/ and
validation/. (tests/test_arrows.py checks that each one is listed in its LAZY and keeps a heavy
package away.) To count them: `python tests/test_function_imports.py`.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("lgc_schema", "channels", "nodes", "testbed", "dashboards", "experiments", "benchmarks",
           "validation")
OURS = set(FOLDERS)
LIMIT = 20
MARK = "# deferred:"


def _ours(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in OURS
    return any(a.name.split(".")[0] in OURS for a in node.names)


def function_imports() -> list[tuple[str, int, str]]:
    """(file, line, the import statement) of each import of ours inside a function body."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for fn in ast.walk(ast.parse(path.read_text(), rel)):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    continue
                body = fn.body if isinstance(fn.body, list) else [fn.body]
                for node in (n for stmt in body for n in ast.walk(stmt)):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and _ours(node):
                        found.append((rel, node.lineno, ast.unparse(node)))
    return sorted(set(found))   # a nested function's imports are walked from each enclosing one


def declared(path: str, line: int) -> bool:
    """A `# deferred: WHY` comment on the import's line or alone on the line before."""
    lines = (ROOT / path).read_text().splitlines()
    own, before = lines[line - 1], lines[line - 2].strip() if line > 1 else ""
    return any(MARK in text and text.split(MARK, 1)[1].strip()
               for text in (own[own.find("#"):] if "#" in own else "",
                            before if before.startswith("#") else ""))


def test_few_function_level_imports_of_our_modules():
    found = function_imports()
    listing = "\n".join(f"{f}:{n}: {s}" for f, n, s in found)
    assert len(found) <= LIMIT, (f"{len(found)} function-level imports of our modules (at most "
                                 f"{LIMIT}; move one to the top of its module):\n{listing}")


def test_each_function_level_import_says_why_it_is_deferred():
    bare = [f"{f}:{n}: {s}" for f, n, s in function_imports() if not declared(f, n)]
    assert not bare, (f"function-level imports without a `{MARK} WHY` comment on their line or "
                      "the line before (or move them to the top):\n" + "\n".join(bare))


if __name__ == "__main__":
    rows = function_imports()
    for f, n, s in rows:
        print(f"{f}:{n}: {s}{'' if declared(f, n) else '   <- undeclared'}")
    print(f"{len(rows)} function-level imports of our modules (limit {LIMIT})")
    sys.exit(0 if len(rows) <= LIMIT else 1)
