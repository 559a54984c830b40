"""The reference pages against the code they describe (docs/reference/, `python -m testbed.reference`).

Each page must be what the generator writes today (a page edited by hand, or code changed
without `make docs`, fails), and, read as a user reads it, must name every key, method, command,
flag and column there is and nothing that no longer exists: checked from the page's text against
the code's own tables, not against the generator.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from testbed import reference
from testbed.configuration.keys import LINK_ENTRY, NODE, SECTIONS, catalog

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "reference"


def page(name: str) -> str:
    return (PAGES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_the_committed_page_is_what_the_code_generates(name):
    assert page(name) == reference.PAGES[name](), (
        f"docs/reference/{name} is stale: run `make docs` (or python -m testbed.reference)")


def first_column(text: str) -> list[str]:
    """The backticked first cell of every table row of a page."""
    return re.findall(r"^\| `([^`]+)` \|", text, re.M)


def test_every_key_is_on_the_configuration_page_and_every_key_there_exists():
    keys = catalog()
    listed = first_column(page("configuration.md"))
    assert {k.name for k in keys} == set(listed)
    assert len(keys) > 250   # every section and every method's options, not a handful


def test_every_method_and_its_options_are_on_the_configuration_page():
    from nodes.compression.registry import METHODS, names

    text = page("configuration.md")
    rows = [r for r in text.splitlines() if r.startswith("| `compression.")]
    for method in names():
        assert f"'{method}'" in text, f"{method} missing from compression.method's choices"
        for option in METHODS[method]:
            assert any(r.startswith(f"| `compression.{option}` |") and re.search(
                rf"\| [^|]*\b{method}\b[^|]* \| [^|]*\|$", r) for r in rows), (method, option)


def test_every_section_has_a_heading():
    text = page("configuration.md")
    for section in SECTIONS:
        heading = "`[[network.links]]`" if section == LINK_ENTRY else f"`[{section}]`"
        assert f"## {heading}" in text
    assert NODE in text


def test_every_key_has_help():
    assert [k.name for k in catalog() if not k.field.help.strip()] == []


def test_every_command_and_flag_is_on_the_cli_page_and_nothing_else():
    from testbed.cli import COMMANDS, build_parser

    text = page("cli.md")
    headed = re.findall(r"^## `(testbed [a-z ]+)`$", text, re.M)
    parser = build_parser()
    wanted = []
    for name, sub, _ in reference.commands(parser):
        if reference._subcommands(sub) is None or reference.flags(sub):
            wanted.append(name)
    assert sorted(headed) == sorted(wanted)
    assert {h.split()[1] for h in headed} == set(COMMANDS)
    for name, sub, _ in reference.commands(parser):
        if name not in headed:
            continue
        section = text.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        for action in reference.flags(sub):
            for flag in action.option_strings or [action.metavar or action.dest]:
                assert flag in section, (name, flag)
        for flag in re.findall(r"^\| `(--[a-z-]+)", section, re.M):
            assert any(flag in a.option_strings for a in reference.flags(sub)), (name, flag)


def test_every_column_of_a_new_store_is_on_the_store_page_and_nothing_else(tmp_path):
    from testbed.records.store import TABLES, Store

    text = page("store.md")
    with Store(str(tmp_path / "s.db")) as store:
        for table in TABLES:
            section = text.split(f"## `{table}`", 1)[1].split("\n## ", 1)[0]
            real = [r[1] for r in store.db.execute(f"pragma table_info({table})")]
            assert first_column(section) == real, table
            info = list(store.db.execute(f"pragma table_info({table})"))
            assert re.findall(r"^\| `[^`]+` \| `(\w+)", section, re.M) == [r[2] for r in info], table
            key = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
            stated = re.findall(r"Key: `\(([^)]*)\)`", section)
            assert stated == ([", ".join(key)] if len(key) > 1 else []), table
    assert set(re.findall(r"^## `([a-z_]+)`$", text, re.M)) == set(TABLES)


def test_the_api_page_documents_the_calls_a_user_makes():
    from testbed import api

    text = page("api.md")
    assert "::: testbed.api" in text
    members = re.findall(r"^        - (\w+)$", text, re.M)
    assert set(members) == {"load", "run", "open_run", "Run", "TABLES"}
    for name in members:
        assert hasattr(api, name)
    for fn in (api.load, api.run, api.open_run, api.Run.rows, api.Run.column):
        assert "Args:" in fn.__doc__ and ("Returns:" in fn.__doc__), fn.__name__


def test_every_table_that_validates_files_is_on_the_configuration_page():
    """Read the validating tables directly (not through testbed.configuration.keys): a table the catalog
    forgot fails here."""
    from channels import config as net
    from nodes.data import DATASETS
    from testbed.configuration import schema as cfg

    listed = set(first_column(page("configuration.md")))
    tables = {"run": cfg.RUN_KEYS, "data": cfg.DATA_KEYS, "model": cfg.MODEL_KEYS,
              "optim": cfg.OPTIM_KEYS, "federated": cfg.FEDERATED_KEYS,
              "network.link": {k: f for k, f in net.LINK_KEYS.items() if k != "loss"},
              "network.csma": net.CSMA_KEYS, "network.mobility": net.MOBILITY_KEYS,
              "network.nodes.NAME": net.NODE_EXTRA_KEYS,
              "network": {k: f for k, f in net.NETWORK_KEYS.items()
                          if k not in ("link", "csma", "nodes", "links", "mobility")},
              **{"network.link.loss": dict(kv for m in net.LOSS_KEYS.values() for kv in m.items())},
              **{"data": {**cfg.DATA_KEYS, **{k: f for d in DATASETS.values() for k, f in d.items()}}}}
    missing = [f"{section}.{key}" for section, fields in tables.items() for key in fields
               if f"{section}.{key}" not in listed]
    assert missing == []


def test_the_contracts_docstrings_are_linted():
    """`make test`'s ruff holds the contracts (the Python API, the driver, link-layer and Scheme
    contracts) to Google-style docstrings: pyproject.toml exempts every other file from the D
    rules by one negated pattern, so each file it names must exist (a moved contract would
    silently leave the check), and ruff passes them."""
    import shutil
    import subprocess
    import sys
    import tomllib

    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    exempt = [p for p, rules in lint["per-file-ignores"].items() if "D" in rules]
    assert len(exempt) == 1 and exempt[0].startswith("!{"), exempt
    contracts = exempt[0][2:-1].split(",")
    assert sorted(contracts) == ["channels/link_layer.py", "nodes/compression/base.py",
                                 "testbed/api.py", "testbed/run/rounds.py"]
    assert all((ROOT / c).is_file() for c in contracts)
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (the `test` extra)")
    out = subprocess.run([ruff, "check", "--output-format", "concise", *contracts], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
