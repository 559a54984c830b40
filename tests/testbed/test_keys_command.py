"""`testbed keys`: every key of the schema, one line each, or one key whole."""
from __future__ import annotations

import pytest

from testbed.cli import main
from testbed.configuration.keys import catalog


def run(capsys, *argv):
    code = main(["keys", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_key_is_listed_once_per_scope_beginning_its_line(capsys):
    code, out, _ = run(capsys)
    assert code == 0
    starts = [line.split()[0] for line in out.splitlines() if line.strip()]
    for key in catalog():
        assert key.name in starts, key.name
    assert "network.link.bandwidth_mbps" in starts and "compression.ratio" in starts


def test_one_key_whole(capsys):
    code, out, _ = run(capsys, "network.link.rto_margin_ms")
    assert code == 0
    assert out.splitlines()[:5] == [
        "network.link.rto_margin_ms", "  type: float", "  default: 1.0",
        "  allowed: a number >= 0",
        "  help: reliable delivery: a packet is resent when its acknowledgement has not come "
        "back within the round trip plus this margin, ms"]


def test_a_method_option_is_printed_for_every_method_that_has_it(capsys):
    from nodes.compression.registry import METHODS

    code, out, _ = run(capsys, "compression.ratio")
    assert code == 0
    having = [m for m, opts in METHODS.items() if "ratio" in opts]
    assert out.count("compression.ratio  [method") == len(having) >= 5


def test_a_section_lists_its_keys_and_the_sections_under_it(capsys):
    code, out, _ = run(capsys, "network.link")
    assert code == 0
    names = {line.split()[0] for line in out.splitlines()}
    assert "network.link.delay_ms" in names and "network.link.loss.p" in names
    assert not any(n.startswith("run.") or n.startswith("network.csma") for n in names)


@pytest.mark.parametrize("query", ["netwrk.link.bandwith_mbps", "run.iteratons"])
def test_an_unknown_name_is_one_line_with_the_closest(capsys, query):
    code, out, err = run(capsys, query)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert query in err and "closest:" in err
    assert ("network.link.bandwidth_mbps" in err) or ("run.iterations" in err)
