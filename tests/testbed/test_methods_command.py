"""Issue 23: `testbed methods [NAME]` lists what `[compression]` accepts, and options renamed
since an older release (LGC's density, warmup_iters, ae_iters) are still read, with one
deprecation line each."""
from pathlib import Path

import pytest

from nodes.compression.registry import METHODS, SCHEMES, names
from testbed.cli import main
from testbed.configuration.loading import load_config
from testbed.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def cli(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_listing_names_every_method_with_its_collectives_and_options(capsys):
    code, out, err = cli(["methods"], capsys)
    assert code == 0 and not err
    lines = out.splitlines()
    for name in names():
        row = next(line for line in lines if line.split()[0] == name)
        assert ", ".join(SCHEMES[name].collectives) in row
        options = lines[lines.index(row) + 1]
        assert options.split("options: ")[1].split(", ") == [k for k in METHODS[name] if k != "collective"] or \
            options.endswith("options: -")


@pytest.mark.parametrize("name", names())
def test_a_method_lists_each_option_with_type_default_and_bounds(name, capsys):
    code, out, err = cli(["methods", name], capsys)
    assert code == 0 and not err
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert set(rows) == set(METHODS[name])
    for key, field in METHODS[name].items():
        assert f"default {field.default!r}" in rows[key] and field.allowed() in rows[key]
    assert out.splitlines()[1].startswith(f"collectives: {SCHEMES[name].collectives[0]} (default")


def test_randomk_shows_what_its_docstring_says(capsys):
    # randomk.py: "the default ratio is 0.1 ... train it with momentum <= 0.5"
    out = cli(["methods", "randomk"], capsys)[1]
    ratio = next(line for line in out.splitlines() if line.split()[:1] == ["ratio"])
    assert "float" in ratio and "default 0.1 " in ratio and "[1e-06, 1]" in ratio
    assert "optim.momentum = 0.5" in out.splitlines()[-1]


def test_an_unknown_method_is_one_line_exit_2_with_a_close_match(capsys):
    code, out, err = cli(["methods", "lgc_rr"], capsys)
    assert code == 2 and not out and err.count("\n") == 1 and "did you mean 'lgc_rar'?" in err


def test_old_option_names_are_read_with_one_deprecation_line_each(tmp_path, capsys):
    new = (ROOT / "experiments" / "lgc_ps_digits.toml").read_text()
    assert "ae_iterations = 30" in new and "warmup_iterations = " in new and "\nratio = " in new
    old = tmp_path / "old.toml"
    old.write_text(new.replace("ae_iterations =", "ae_iters =").replace("warmup_iterations =", "warmup_iters =")
                   .replace("\nratio =", "\ndensity ="))
    capsys.readouterr()
    got = load_config(old)
    notes = capsys.readouterr().err.splitlines()
    assert sorted(n.split()[1] for n in notes) == ["compression.ae_iters", "compression.density",
                                                    "compression.warmup_iters"]
    assert all("deprecated" in n for n in notes)
    assert got.compression == load_config(ROOT / "experiments" / "lgc_ps_digits.toml").compression
    # a file switched to another method sets an old name aside like a current one
    switched = load_config(old, ["compression.method=topk"])
    assert "ae_iters" in switched.compression.set_aside
    with pytest.raises(ConfigError, match="compression.ae_iters and compression.ae_iterations are the old"):
        load_config(old, ["compression.ae_iterations=5"])


def test_the_listing_and_every_method_speak_without_code_names(capsys):
    """No module.Class of the source (a docstring's "templates.DenseScheme") in what users read."""
    import re

    outs = [cli(["methods"], capsys)[1]] + [cli(["methods", n], capsys)[1] for n in names()]
    text = "\n".join(outs)
    assert re.findall(r"\b[a-z_]+\.[A-Z]\w+", text) == []
    assert "uncompressed fp32 gradients, dense: the reference rate (by PS, all-gather" in text
