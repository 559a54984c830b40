"""Issue 16: `--set compression.method=X` and `sweep --grid compression.method=a,b` work on every
shipped experiment file, for every registered method.

Every pair (method x file): the file loads with the switch, the other methods' options are set
aside, the method's Scheme builds from the options that remain, and one real iteration runs in
process (tiny budget: run.iterations=1, 2 workers, the MLP on digits, whatever the file's model
and data). On a ring (no server) the method's collective is its first that a ring can carry
(issue 23); a method that only exchanges through a server is refused when the file loads, with
its one clear line, and a ring all-reduce method on a file with a deadline or a device trace is
refused by the experiment (they leave workers out): that is by design, and checked as such.
"""
from pathlib import Path

import pytest

from nodes.compression.registry import SCHEMES, build_scheme, names
from testbed.cli import main
from testbed.configuration.loading import load_config, load_raw
from testbed.errors import ConfigError
from testbed.experiment import Experiment
from testbed.records.store import Store

FILES = sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.toml"))
METHODS = names()
TINY = ["run.iterations=1", "run.eval_every=1", "run.device=cpu", "model.name=mlp",
        "data.dataset=digits", "network.workers=2"]


def test_every_file_and_method_is_found():
    assert len(FILES) >= 7 and {"none", "topk", "dgc", "lgc_ps", "lgc_rar"} <= set(METHODS)


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_every_method_switches_on_every_file(path, capsys):
    on_ring = load_config(path).network["topology"] == "ring"
    for method in METHODS:
        if on_ring and SCHEMES[method].collectives == ("ps",):   # refused: test_one_iteration_runs
            continue
        cfg = load_config(path, [f"compression.method={method}"])
        assert cfg.compression.method == method
        s = build_scheme(method, cfg.compression.options, n_workers=2, shapes=[(64, 16), (16,)],
                         payload_bytes=1400)
        assert s.name == method
        for key in cfg.compression.set_aside:   # set aside: another method's, never this one's
            assert key not in s.options and key not in cfg.compression.options
    notes = [line for line in capsys.readouterr().err.splitlines() if line]
    assert all((line.startswith("note: compression.") and "set aside" in line)
               or "known-good value" in line for line in notes), notes


def _run_once(path, method, tmp_path):
    sets = [f"compression.method={method}", *TINY]
    if "federated" in load_raw(path):   # one client per worker node of an exchange
        sets += [f"federated.{k}=2" for k in ("clients_per_round", "concurrency", "buffer_size")]
    cfg = load_config(path, sets)
    store = Store(tmp_path / f"{path.stem}-{method}.db")
    run_id = Experiment(cfg, store).run()
    return store.iterations(run_id)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_one_iteration_runs(path, method, tmp_path):
    cfg = load_config(path)
    on_ring = cfg.network["topology"] == "ring"
    serverless = [c for c in SCHEMES[method].collectives if c != "ps"]
    if on_ring and not serverless:
        with pytest.raises(ConfigError, match="only exchanges through a server"):
            _run_once(path, method, tmp_path)
        return
    if on_ring:   # the method's first collective a ring can carry, with nothing else set
        switched = load_config(path, [f"compression.method={method}"])
        assert switched.compression.options["collective"] == serverless[0]
    rows = _run_once(path, method, tmp_path)
    assert len(rows) == 1 and rows[0]["bits_up"] > 0


def test_sweep_grid_over_methods_on_a_file_written_for_topk(tmp_path, capsys):
    quick = next(f for f in FILES if f.stem == "quickstart")
    code = main(["sweep", str(quick), "--store", str(tmp_path / "sweep.db"), "--quiet",
                 "--grid", "compression.method=none,dgc,lgc_ps", *sum((["--set", s] for s in TINY), [])])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "sweep done: 3 of 3 runs completed" in out.out
    assert "note: compression.ratio = 0.01 set aside" in out.err
