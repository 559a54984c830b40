"""Every mistake in an experiment file is one line naming the key path, the value and what is
allowed, and the CLI exits with code 2."""
import textwrap

import pytest

from testbed.cli import main
from testbed.configuration.loading import load_config
from testbed.configuration.overrides import parse_override
from testbed.configuration.schema import DATA_KEYS, FEDERATED_KEYS, OPTIM_KEYS, RUN_KEYS
from testbed.configuration.sections import validate
from testbed.errors import ConfigError

GOOD = """
[run]
seed = 1
iterations = 5
[data]
dataset = "digits"
[model]
name = "cnn"
[compression]
method = "topk"
ratio = 0.01
[network]
topology = "star"
workers = 2
[network.link]
bandwidth_mbps = 10.0
delay_ms = 1.0
"""

# (what to replace in GOOD or append, fragments the one-line message must contain)
BAD = [
    ("[run]", "[rnu]", ["unknown key 'rnu'", "did you mean 'run'"]),
    ("iterations = 5", "iteratons = 5", ["run.iteratons", "did you mean 'run.iterations'"]),
    ("iterations = 5", "iterations = -5", ["run.iterations = -5", ">= 1"]),
    ("iterations = 5", "iterations = 5\ndevice = \"tpu\"", ["run.device = 'tpu'", "'auto', 'cpu', 'cuda'"]),
    ("iterations = 5", "iterations = 5\nepochs = 2", ["run.epochs", "not both"]),
    ('dataset = "digits"', 'dataset = "digits"\npartition = "random"', ["data.partition = 'random'", "'iid'"]),
    ('dataset = "digits"', 'dataset = "digits"\nbatch_size = "32"', ["data.batch_size = '32'", "an integer"]),
    ('dataset = "digits"', 'dataset = "imagenet"', ["data.dataset = 'imagenet'", "'digits'"]),
    ('name = "cnn"', 'name = "vgg"', ["model.name = 'vgg'", "'cnn'"]),
    ('method = "topk"', 'method = "topkk"', ["compression.method = 'topkk'", "did you mean 'topk'"]),
    ("ratio = 0.01", "ratio = 2.0", ["compression.ratio = 2.0"]),
    ("ratio = 0.01", "ratoi = 0.01", ["compression.ratoi", "did you mean 'compression.ratio'"]),
    ("[network]", "[optim]\nlr = 0\n[network]", ["optim.lr = 0", "> 0"]),
    ("bandwidth_mbps = 10.0", "bandwidth_mbps = -1.0", ["network.link.bandwidth_mbps", "-1"]),
    ('topology = "star"', 'topology = "hexagon"', ["network.topology", "hexagon", "star"]),
    ("delay_ms = 1.0", 'delay_ms = 1.0\nloss = { model = "bernoulli", p = 1.5 }', ["network.link.loss.p", "1.5"]),
    ("iterations = 5", "iterations = = 5", ["not valid TOML"]),
]


def write(tmp_path, text, name="exp.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_file_loads_with_defaults(tmp_path):
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.run.name == "exp" and cfg.run.iterations == 5 and cfg.run.eval_every == 20
    assert cfg.compression.method == "topk" and cfg.compression.options["ratio"] == 0.01
    assert cfg.data.partition == "iid" and cfg.optim.momentum == 0.9
    assert cfg.as_dict()["run"]["seed"] == 1


def test_the_sections_fields_are_their_tables_keys(tmp_path):
    """The section objects are generated from the Field tables: what the store records lists
    each table's keys, in the table's order."""
    cfg = load_config(write(tmp_path, GOOD + "[federated]\nclients = 4\nclients_per_round = 2\n"),
                      ["network.workers=2"])
    stored = cfg.as_dict()
    for section, keys in (("run", RUN_KEYS), ("data", DATA_KEYS), ("optim", OPTIM_KEYS),
                          ("federated", FEDERATED_KEYS)):
        assert list(stored[section]) == list(keys), section
    assert cfg.federated.slots == 2 and cfg.data.options == {} and cfg.model.options == {}


def test_validation_returns_its_notes_and_the_loader_prints_them(tmp_path, capsys):
    """validate() prints nothing (its notes go to the caller's list); a load prints them, also
    when a later check fails."""
    notes = []
    cfg = validate({"compression": {"method": "none", "ratio": 0.01}}, notes=notes)
    assert cfg.compression.set_aside == {"ratio": 0.01} and not capsys.readouterr().err
    assert len(notes) == 1 and notes[0].startswith("note: compression.ratio = 0.01 set aside")
    path = write(tmp_path, GOOD)
    with pytest.raises(ConfigError, match="run.device_trace"):
        load_config(path, ["compression.method=none", "run.device_trace='nope.json'"])
    assert capsys.readouterr().err.strip() == notes[0]


@pytest.mark.parametrize("old,new,fragments", BAD, ids=[b[1].splitlines()[-1][:30] for b in BAD])
def test_bad_file_gives_one_line_naming_key_value_and_allowed(tmp_path, capsys, old, new, fragments):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for frag in fragments:
        assert frag in message, (frag, message)
    # The CLI prints that same line and exits with 2.
    assert main(["run", str(path), "--store", str(tmp_path / "s.db"), "--quiet"]) == 2
    err_text = capsys.readouterr().err.strip()
    assert err_text.count("\n") == 0 and fragments[0] in err_text


def test_overrides_are_typed_and_validated(tmp_path):
    path = write(tmp_path, GOOD)
    cfg = load_config(path, ["network.link.bandwidth_mbps=5", "compression.ratio=0.05",
                             "run.name=sweep-a"])
    assert cfg.network["link"]["bandwidth_mbps"] == 5 and cfg.compression.options["ratio"] == 0.05
    assert cfg.run.name == "sweep-a"
    assert parse_override("a.b=[1, 2]") == (["a", "b"], [1, 2])
    with pytest.raises(ConfigError, match="run.iterations = 0"):
        load_config(path, ["run.iterations=0"])
    with pytest.raises(ConfigError, match="key.path=value"):
        load_config(path, ["no-equals-sign"])


def test_switching_method_sets_other_methods_options_aside(tmp_path, capsys):
    """Issue 16: top-k's `ratio` on a file switched to fp32 waits, with a one-line note."""
    path = write(tmp_path, GOOD)
    cfg = load_config(path, ["compression.method=none"])
    assert cfg.compression.method == "none" and cfg.compression.options == {}
    assert cfg.compression.set_aside == {"ratio": 0.01}
    note = capsys.readouterr().err.strip()
    assert note.count("\n") == 0 and "compression.ratio = 0.01 set aside" in note and "'topk'" in note
    # a key that no registered method knows is still an error, with a close match
    with pytest.raises(ConfigError, match="unknown key 'compression.downlnk'.*did you mean 'compression.downlink'"):
        load_config(path, ["compression.method=none", "compression.downlnk='f16'"])


def test_switching_to_randomk_takes_its_known_good_values(tmp_path, capsys):
    """Issue 23: randomk's docstring says ratio 0.1 and momentum <= 0.5; a top-k file's 0.01 and
    the optimizer's default 0.9 are replaced on the switch, one note each, unless the command
    line names them; a file written for randomk keeps what it says."""
    path = write(tmp_path, GOOD)
    cfg = load_config(path, ["compression.method=randomk"])
    assert cfg.compression.options["ratio"] == 0.1 and cfg.optim.momentum == 0.5
    notes = capsys.readouterr().err.strip().splitlines()
    assert [n.split()[1] for n in notes] == ["compression.ratio", "optim.momentum"]
    assert "= 0.01 (the file's, written for 'topk') replaced by 0.1" in notes[0]
    cfg = load_config(path, ["compression.method=randomk", "optim.momentum=0.3"])
    assert cfg.optim.momentum == 0.3 and cfg.compression.options["ratio"] == 0.1
    assert capsys.readouterr().err.count("note:") == 1
    own = write(tmp_path, GOOD.replace('method = "topk"', 'method = "randomk"'), "own.toml")
    cfg = load_config(own)
    assert cfg.compression.options["ratio"] == 0.01 and cfg.optim.momentum == 0.9
    assert not capsys.readouterr().err


def test_the_collective_is_the_first_the_topology_can_carry(tmp_path):
    ring = write(tmp_path, GOOD.replace('topology = "star"', 'topology = "ring"'))
    assert load_config(ring).compression.options["collective"] == "allgather"   # topk: ps, allgather
    assert "collective" not in load_config(write(tmp_path, GOOD, "star.toml")).compression.options
    assert load_config(ring, ["compression.method=randomk"]).compression.options["collective"] == "allreduce"
    with pytest.raises(ConfigError, match="'lgc_ps' only exchanges through a server"):
        load_config(ring, ["compression.method=lgc_ps"])
    with pytest.raises(ConfigError, match="compression.collective 'ps' .* needs a parameter server"):
        load_config(ring, ["compression.collective='ps'"])


def test_missing_file_is_named(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.toml"), "--quiet"]) == 2
    assert "nope.toml: no such experiment file" in capsys.readouterr().err
