"""The project installed (pip, not editable) beside PyPI's `schema` (a popular data-validation
library): `import schema` is still PyPI's, and the installed testbed works. The install goes
into a folder of its own that comes first on sys.path, so a top-level name of ours that clashed
with an installed distribution's would shadow it here. Also: none of our top-level import
names is the import name of an installed distribution other than ours."""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
OURS = ("testbed", "channels", "nodes", "dashboards", "lgc_schema")


def test_pypi_schema_is_there_and_is_not_ours():
    schema = pytest.importorskip("schema", reason="PyPI's schema (the test extra) is not installed")
    assert hasattr(schema, "Schema") and hasattr(schema, "SchemaError")
    # PyPI's distribution (in site-packages, wherever the venv lives), not a folder of ours
    assert "site-packages" in Path(schema.__file__).resolve().parts
    assert importlib.metadata.packages_distributions().get("schema") == ["schema"]
    assert not (ROOT / "schema").exists()


def test_no_top_level_name_of_ours_is_another_installed_distributions():
    owners = importlib.metadata.packages_distributions()
    clashes = {name: [d for d in owners.get(name, []) if d != "lgc-testbed"] for name in OURS}
    assert not {k: v for k, v in clashes.items() if v}, clashes


def test_the_installed_testbed_works_beside_pypi_schema(tmp_path):
    pytest.importorskip("schema", reason="PyPI's schema (the test extra) is not installed")
    source = tmp_path / "src"   # a copy: pip builds in the source folder
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "tests", "*.db*", "__pycache__", "*.egg-info", "build", "docs", "benchmarks",
        "validation", "examples"))
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                          "--quiet", "--disable-pip-version-check", "--target", str(site), str(source)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    assert {p.name for p in site.iterdir() if (p / "__init__.py").exists()} == set(OURS)
    probe = ("import schema, testbed.configuration.sections, nodes.models, channels.config\n"
             "assert schema.Schema(int).validate(3) == 3\n"
             f"assert all(m.__file__.startswith({str(site)!r}) for m in (testbed.configuration.sections, nodes.models, channels.config))\n"
             "from testbed.cli import main\n"
             "raise SystemExit(main(['methods', 'topk']))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("topk: ")
