"""Faults and bad input from outside, as docs/reliability.md promises them: a user's mistake is
one line and exit 2 with the store untouched, a bug stays a traceback, kill -9 leaves a whole
store whose run is marked failed, SIGTERM stops a run like Ctrl-C (status stopped, exit 143).

Signals need a real process: those tests start `python -m testbed.cli run` with a budget too big
to finish and act once the store shows rows; the rest call the CLI's boundary in process.
"""
import ctypes
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.records.store import Store

ROOT = Path(__file__).resolve().parents[2]


def cli(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def start_run(path, db, *extra, env=None):
    return subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(path), "--store", str(db),
                             "--quiet", *extra], cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_rows(db, proc, n=10, limit_s=60.0) -> int:
    """Committed iteration rows of run 1 once there are at least `n` (read-only, like a reader)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            try:
                with Store(db, readonly=True) as r:
                    got = len(r.iterations(1))
            except Exception:  # tables not made yet
                got = 0
            if got >= n:
                return got
        time.sleep(0.2)
    raise AssertionError("the run did not get going")


# ------------------------------------------------------------------ signals
def test_kill_minus_9_mid_run_leaves_a_whole_store_and_a_failed_run(tiny_experiment, tmp_path):
    path = tiny_experiment(iterations=100000, method="none", compression="")
    db = tmp_path / "s.db"
    proc = start_run(path, db, "--set", "run.flush_every=3")
    try:
        seen = wait_for_rows(db, proc, 12)
    finally:
        proc.kill()
        proc.wait()
    with Store(db) as store:  # opening it finds the writer dead and says so
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        run = store.run(1)
        assert run["status"] == "failed" and "killed or crashed" in run["error"]
        its = [r["iteration"] for r in store.iterations(1)]
        # whole batches of 3, contiguous, at least what a reader saw before the kill
        assert its == list(range(len(its))) and len(its) >= seen and len(its) % 3 == 0
        assert run["last_iteration"] == its[-1]
        assert {r["iteration"] for r in store.node_iterations(1)} == set(its)


def test_sigterm_stops_a_run_like_ctrl_c(tiny_experiment, tmp_path):
    path = tiny_experiment(iterations=100000, method="none", compression="")
    db = tmp_path / "s.db"
    proc = start_run(path, db, "--set", "run.flush_every=1000")  # rows reach disk only on stop
    try:
        # with flush_every = 1000 nothing is committed before the stop; wait for the run row
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if db.exists():
                try:
                    with Store(db, readonly=True) as r:
                        if r.runs():
                            break
                except Exception:
                    pass
            time.sleep(0.2)
        time.sleep(1.0)  # some iterations queued, none committed
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "testbed: stopped (SIGTERM)"
    with Store(db) as store:
        run = store.run(1)
        assert run["status"] == "stopped"
        its = [r["iteration"] for r in store.iterations(1)]
        assert its and its == list(range(len(its)))  # the queued rows were flushed on the way out
        assert run["last_iteration"] == its[-1]


# ------------------------------------------------------------------ bad stores
def _not_sqlite(tmp_path):
    p = tmp_path / "random.db"
    p.write_bytes(bytes(range(256)) * 20)
    return p, "not a SQLite database"


def _directory(tmp_path):
    p = tmp_path / "folder.db"
    p.mkdir()
    return p, "is a directory"


def _under_a_file(tmp_path):
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain" / "runs.db", "is a file, not a folder"


def _foreign(tmp_path):
    p = tmp_path / "other.db"
    with sqlite3.connect(p) as db:
        db.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    return p, "another program"


def _missing(tmp_path):
    return tmp_path / "none.db", "no such file"


BAD_STORES = {"not_sqlite": _not_sqlite, "directory": _directory, "under_a_file": _under_a_file,
              "foreign": _foreign}


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("command", ["run", "runs", "export"])
@pytest.mark.parametrize("kind", [*BAD_STORES, "missing"])
def test_a_bad_store_is_one_line_exit_2_and_left_untouched(tiny_experiment, tmp_path, capsys, command, kind):
    if kind == "missing" and command == "run":
        pytest.skip("`run` makes a new store")
    path = tiny_experiment(iterations=2)
    store, words = {**BAD_STORES, "missing": _missing}[kind](tmp_path)
    before = _snapshot(tmp_path)
    argv = {"run": ["run", path], "runs": ["runs"], "export": ["export", "1"]}[command]
    code, out, err = cli([*argv, "--store", store], capsys)
    line = one_line(err)
    assert code == 2
    assert line.startswith(f"testbed: error: --store {store}: ") and words in line, line
    assert "allowed:" in line
    assert _snapshot(tmp_path) == before  # nothing written, no -wal/-shm made


def _drop_file_permission_override():
    """In the child, before exec: root loses CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH from its
    bounding set, so file modes bind it as they bind any user (prctl PR_CAPBSET_DROP)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            os._exit(99)


@pytest.mark.parametrize("command", ["run", "runs"])
def test_a_read_only_store_is_one_line_exit_2(tiny_experiment, tmp_path, command):
    if not sys.platform.startswith("linux"):
        pytest.skip("simulates a read-only store with Linux file modes")
    path = tiny_experiment(iterations=2)
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "runs.db"
    with Store(db) as s:
        s.create_run("earlier", {}, method="none")
        s.finish_run(1, "completed")
    for p in folder.iterdir():
        p.chmod(0o444)
    folder.chmod(0o555)
    before = _snapshot(folder)
    argv = ["run", str(path)] if command == "run" else ["runs"]
    preexec = _drop_file_permission_override if os.geteuid() == 0 else None
    try:
        proc = subprocess.run([sys.executable, "-m", "testbed.cli", *argv, "--store", str(db)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120,
                              preexec_fn=preexec)
    finally:
        folder.chmod(0o755)
    if proc.returncode == 99:
        pytest.skip("cannot drop CAP_DAC_OVERRIDE here, so a read-only file binds nobody")
    line = one_line(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    assert line.startswith(f"testbed: error: --store {db}: cannot be written"), line
    assert _snapshot(folder) == before


# ------------------------------------------------------------------ other mistakes, and bugs
def test_export_of_an_unknown_run_is_exit_2(tmp_path, capsys):
    db = tmp_path / "s.db"
    with Store(db) as s:
        s.create_run("known", {}, method="none")
    code, _, err = cli(["export", "unknown", "--store", db], capsys)
    assert code == 2 and one_line(err) == f"testbed: error: no run 'unknown' in store {db}"


@pytest.mark.parametrize("argv,words", [
    (["run", "{dir}/absent.toml"], "no such experiment file"),
    (["run", "{file}", "--set", "run.iterations=0"], "run.iterations = 0: must be an integer >= 1"),
    (["run", "{file}", "--set", "nonsense"], "must be of the form key.path=value"),
    (["run", "{file}", "--set", "network.topology=\"ring\"", "--set", "compression.method=\"lgc_ps\""],
     "needs a parameter server, but network.topology 'ring' has no server node"),
    (["run", "{file}", "--set", "network.topology=\"ring\"", "--set", "compression.collective=\"ps\""],
     "needs a parameter server, but network.topology 'ring' has no server node"),
    (["run", "{file}", "--nproc", "3", "--launcher", "torchrun"], "--nproc = 3: must be 2, the file's number of workers"),
    (["dashboard", "--port", "70000"], "--port = 70000: must be in 1..65535"),
    (["run"], "the following arguments are required: file"),
])
def test_other_mistakes_are_one_line_exit_2_and_no_store_is_made(tiny_experiment, tmp_path, capsys,
                                                                 argv, words):
    path = tiny_experiment(iterations=2)
    db = tmp_path / "new.db"
    argv = [a.format(dir=tmp_path, file=path) for a in argv] + (["--store", db] if argv[0] == "run" and len(argv) > 1 else [])
    try:
        code, _, err = cli(argv, capsys)
    except SystemExit as e:  # argparse's own exit
        code, err = e.code, capsys.readouterr().err
    assert code == 2
    assert words in one_line(err), err
    assert not db.exists()  # a refused run leaves no store behind


# ------------------------------------------------------------------ a user's own objects
USER_OBJECTS = """
import torch
from torch import nn
NUMBER = 3
def text(input_shape, num_classes):
    return "not a module"
def uneven():
    return {"train": (torch.zeros(5, 4), torch.zeros(4, dtype=torch.long)),
            "test": (torch.zeros(2, 4), torch.zeros(2, dtype=torch.long)), "num_classes": 2}
def beyond():
    return {"train": (torch.zeros(3, 4), torch.tensor([0, 1, 12])),
            "test": (torch.zeros(2, 4), torch.zeros(2, dtype=torch.long)), "num_classes": 10}
"""


@pytest.mark.parametrize("sets,words", [
    (['model.name="absent_pkg.models:Net"'],
     "model.name = 'absent_pkg.models:Net': module 'absent_pkg.models' cannot be imported"),
    (['model.name="{dir}/user.py:NUMBER"'], "user.py:NUMBER': names a int, which is not callable"),
    (['model.name="{dir}/user.py:text"'], "the factory returned a str; expected a torch.nn.Module"),
    (['data.dataset="{dir}/user.py:uneven"'],
     "the train split has 5 inputs but 4 labels; expected as many labels as inputs"),
    (['data.dataset="{dir}/user.py:beyond"'],
     "a train label is 12; expected labels in 0..9 (num_classes = 10)"),
], ids=["factory-not-importable", "not-callable", "not-a-module", "splits-disagree", "label-out-of-range"])
def test_a_users_model_or_loader_that_does_not_fit_is_one_line_exit_2(tiny_experiment, tmp_path,
                                                                     capsys, sets, words):
    (tmp_path / "user.py").write_text(USER_OBJECTS)
    path, db = tiny_experiment(iterations=2), tmp_path / "new.db"
    argv = ["run", path, "--store", db, "--quiet"]
    for s in sets:
        argv += ["--set", s.format(dir=tmp_path)]
    code, _, err = cli(argv, capsys)
    assert code == 2 and words in one_line(err), err
    assert not db.exists()


PLUGIN = """
from nodes.compression.registry import register
from nodes.compression.templates import DenseScheme

@register({name!r}, wire_id={wire_id})
class Outside(DenseScheme):
    pass
"""


@pytest.fixture
def outside_methods(tmp_path, monkeypatch):
    """Install packages with `lgc_testbed.methods` entry points on sys.path (a dist-info
    folder is what pip leaves), the registry loading afresh and restored afterwards."""
    from nodes.compression import registry

    registry.load_all()
    tables = (registry.SCHEMES, registry.METHODS, registry.RULES, registry.WIRE_IDS,
              registry.KNOWN_GOOD, registry.ORIGINS)
    saved = [dict(t) for t in tables]
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "_load_error", None)
    made = []

    def install(dist: str, name: str, wire_id: int) -> None:
        module = f"{dist}_methods"
        (site / f"{module}.py").write_text(PLUGIN.format(name=name, wire_id=wire_id))
        info = site / f"{dist}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[lgc_testbed.methods]\n{name} = {module}\n")
        made.append(module)

    yield install
    for table, old in zip(tables, saved):
        table.clear()
        table.update(old)
    for module in made:
        sys.modules.pop(module, None)


@pytest.mark.parametrize("plugins,words", [
    ([("reuser", "topk", 150)], "method 'topk' of reuser 0.1 (entry point topk = reuser_methods): "
                                "compression.method = 'topk' is taken by built-in"),
    ([("squatter", "squat", 7)], "wire_id = 7 (held by 'signsgd'); expected a free integer in "
                                 "128..254, the range for methods of other packages"),
    ([("first", "one", 150), ("second", "two", 150)], "method 'two' of second 0.1 (entry point two "
                                                      "= second_methods): wire_id = 150 (held by 'one')"),
], ids=["name-taken", "wire-id-ours", "wire-id-of-another-package"])
def test_an_outside_method_that_clashes_is_one_line_exit_2(tiny_experiment, tmp_path, capsys,
                                                           outside_methods, plugins, words):
    for dist, name, wire_id in plugins:
        outside_methods(dist, name, wire_id)
    path, db = tiny_experiment(iterations=2), tmp_path / "new.db"
    code, _, err = cli(["run", path, "--store", db, "--quiet"], capsys)
    assert code == 2 and words in one_line(err), err
    assert not db.exists()
    code, _, err = cli(["methods"], capsys)   # said again, not half a listing
    assert code == 2 and words in one_line(err), err


def test_a_fresh_process_refuses_an_outside_method_named_like_a_built_in_one(outside_methods,
                                                                              tmp_path):
    """A run imports only the method it names; the entry points are still all read, and a
    plugin's name is checked against the built-in file of that name (not imported before)."""
    outside_methods("reuser", "dgc", 150)
    probe = ("import sys; from nodes.compression import registry as r\n"
             "try:\n    r.find('topk')\nexcept r.PluginMethodError as e:\n    print(e)\n"
             "print(sorted(m for m in sys.modules if m.startswith('nodes.compression.lgc')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path])}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                         timeout=120)
    said, lgc = out.stdout.strip().splitlines()[-2:]
    assert "method 'dgc' of reuser 0.1 (entry point dgc = reuser_methods): compression.method = " \
           "'dgc' is taken by built-in (nodes/compression/dgc.py)" in said, out.stderr
    assert lgc == "[]"   # the other built-in methods stay unimported


def test_an_outside_method_in_its_range_is_listed_with_its_origin(outside_methods, capsys):
    outside_methods("fine", "fine_dense", 131)
    code, out, _ = cli(["methods"], capsys)
    assert code == 0
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("fine_dense "))
    assert lines[row + 2].split() == ["from:", "fine", "0.1", "(entry", "point", "fine_dense", "=",
                                      "fine_methods)"]
    assert lines[row - 1].split()[0] == "from:"   # listed after ours, in wire-id order


CERTAIN_LOSS = '{ model = "bernoulli", p = 1.0 }'


@pytest.mark.parametrize("delivery,loss,sets,words", [
    ("best_effort", CERTAIN_LOSS, ["run.iterations=60"],
     "no packet got through in 50 iterations in a row (up to iteration 49;"),
    ("best_effort", CERTAIN_LOSS, ['compression.collective="allgather"'],
     "still missed packets at w1 after 50 resends"),
    ("reliable", CERTAIN_LOSS, [], "reliable delivery"),
    ("reliable", '{ model = "fading" }', ["network.topology=\"ring\"", "network.workers=4",
                                          "network.engine=\"fast\""], "network.engine = 'fast'"),
], ids=["best_effort-100%", "best_effort-100%-allgather", "reliable-100%",
        "fast-engine-multi-hop-fading"])
def test_a_setting_the_link_cannot_carry_fails_the_run_in_one_line_exit_1(
        tiny_experiment, tmp_path, capsys, delivery, loss, sets, words):
    """Issue 23: 100% Bernoulli loss on every link. Reliable delivery gives up after its retry
    limit; best-effort loses every update and every aggregate (not resent on a server's
    downlink), so with nothing through for 50 iterations in a row the run fails; an
    all-gather, resent until whole, never is. And the fast engine asked for a relayed
    all-gather over fading links, which only the first call shows. Each: one line, exit 1, the
    run `failed` with that line's reason."""
    path = tiny_experiment(iterations=3, delivery=delivery, loss=loss)
    db = tmp_path / "lossy.db"
    code, _, err = cli(["run", path, "--store", db, "--quiet", *sum((["--set", s] for s in sets), [])],
                       capsys)
    # best effort with a model update still made whole says so first (a note, not an error)
    line = one_line("\n".join(x for x in err.splitlines() if not x.startswith("note: ")))
    assert code == 1 and line.startswith("testbed: error: run 1 failed: ") and words in line, err
    with Store(db, readonly=True) as s:
        run = s.run(1)
    assert run["status"] == "failed" and run["error"].split(": ", 1)[1] in line


def test_a_bug_stays_a_traceback(tmp_path, monkeypatch):
    import testbed.commands.runs as runs_cmd

    with Store(tmp_path / "s.db") as s:
        s.create_run("r", {}, method="none")

    def broken(*a, **k):
        raise TypeError("a bug in the table code")
    monkeypatch.setattr(runs_cmd, "format_table", broken)
    with pytest.raises(TypeError, match="a bug"):
        main(["runs", "--store", str(tmp_path / "s.db")])
