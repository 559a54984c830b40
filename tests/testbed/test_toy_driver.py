"""Adding a driver is one class (docs/architecture.md, "where to add things"): a toy driver,
written here, that trains nothing and brings its own evaluations (as a Flower strategy's
rounds do) runs in the world built from `[network]` + `[run]` alone, and the one loop stops,
records, and finishes it. Expected figures by hand: each worker sends PACKETS packets of
PAYLOAD bytes per round over a reliable link, so its bits up are 8 x PACKETS x PAYLOAD."""
from __future__ import annotations

from nodes.compression import phases as ph
from nodes.compression.base import Message
from nodes.compression.transport import carry_all
from testbed.configuration.loading import load_config
from testbed.records.store import Store
from testbed.run.loop import Loop
from testbed.run.rounds import Round
from testbed.run.setup import build_world

PACKETS, PAYLOAD = 3, 200


class ToyDriver:
    """`made` rounds, each one uplink of fixed bytes from every worker; a reported accuracy
    every other round; no evaluation of its own."""

    def __init__(self, world, made: int):
        self.world, self.made, self.rounds_made = world, made, []
        self.transport = world.emulated_transport()

    def budget(self) -> int:
        return 5

    def rounds(self, first: int):
        world = self.world
        for it in range(first, first + self.made):
            t = world.clock
            self.rounds_made.append(it)
            self.transport.begin(it, t, {w: t for w in world.workers})
            carry_all([ph.Uplink({r: Message([bytes(PAYLOAD)] * PACKETS)
                                  for r in range(len(world.workers))})], self.transport)
            report = self.transport.end()
            world.clock = report.clock
            yield Round(it, t, report, [0.5], {w: t for w in world.workers}, list(world.workers),
                        evaluations=[{"test_loss": 1.0, "test_accuracy": it / 10}] if it % 2 else [])

    def evaluate(self):
        return None

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def toy_run(tiny_experiment, tmp_path, made: int, stop_after: int | None = None):
    cfg = load_config(tiny_experiment(iterations=5, workers=3), ["run.eval_every=1"])
    store = Store(tmp_path / "toy.db")
    world = build_world(cfg, store)
    driver = ToyDriver(world, made)
    done = []
    loop = Loop(world, driver, progress=done.append,
                should_stop=lambda: stop_after is not None and len(done) >= stop_after)
    return store, loop.run(), driver


def test_a_toy_driver_runs_in_the_one_loop(tiny_experiment, tmp_path):
    store, rid, driver = toy_run(tiny_experiment, tmp_path, made=3)
    with store:
        run, rows, nodes, evals = store.run(rid), store.iterations(rid), store.node_iterations(rid), store.evals(rid)
    assert run["status"] == "completed"        # its rounds ended before the budget: complete
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert all(r["bits_up"] == 3 * 8 * PACKETS * PAYLOAD for r in rows)
    assert {n["bits_up"] for n in nodes} == {8 * PACKETS * PAYLOAD}
    times = [r["virtual_time_s"] for r in rows]
    assert all(b > a for a, b in zip([0.0] + times, times))   # each round took time
    assert all(r["stage"] is None and r["participants"] is None for r in rows)
    # evaluate() is None: only the round's own evaluation rows, at the clock after the round
    assert [(e["iteration"], e["test_accuracy"]) for e in evals] == [(1, 0.1)]
    assert evals[0]["virtual_time_s"] == times[1]


def test_the_loop_advances_a_driver_only_for_rounds_it_records(tiny_experiment, tmp_path):
    store, rid, driver = toy_run(tiny_experiment, tmp_path, made=5, stop_after=2)
    with store:
        assert store.run(rid)["status"] == "stopped"
        assert [r["iteration"] for r in store.iterations(rid)] == [0, 1]
    assert driver.rounds_made == [0, 1]


def test_drivers_reach_the_link_layer_only_through_the_transport():
    """No module of testbed/ but the transports calls `carry` (drivers use begin, drive,
    carry_all and end); no class but the Loop has a `_loop`; no class of the run's modules (the
    loop, its drivers, the set-up, the torchrun parts) has two bases."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "testbed"
    transports = {root / "emulation" / "transport.py", root / "distributed" / "transport.py"}
    run_modules = ({root / "experiment.py"} | set((root / "run").glob("*.py"))
                   | set((root / "drivers").glob("*.py")) | set((root / "distributed").glob("*.py")))
    assert all(p.exists() for p in transports) and len(run_modules) > 10
    carries, loops, diamonds = [], [], []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (path not in transports and isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute) and node.func.attr == "carry"):
                carries.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.ClassDef):
                if len(node.bases) > 1 and path in run_modules:
                    diamonds.append(node.name)
                if node.name != "Loop" and any(isinstance(f, ast.FunctionDef) and f.name == "_loop"
                                               for f in node.body):
                    loops.append(node.name)
    assert (carries, loops, diamonds) == ([], [], [])


def test_the_loop_hides_what_it_found_from_the_collector_and_gives_it_back(tiny_experiment, tmp_path):
    """During the rounds the objects alive before them are out of the collector's full passes
    (testbed/processes/heap.py); after the run none is, so a process running several runs
    keeps nothing of an earlier one."""
    import gc
    cfg = load_config(tiny_experiment(iterations=5, workers=3), ["run.eval_every=1"])
    frozen = []
    with Store(tmp_path / "toy.db") as store:
        world = build_world(cfg, store)
        Loop(world, ToyDriver(world, 3), progress=lambda p: frozen.append(gc.get_freeze_count())).run()
    assert len(frozen) == 3 and min(frozen) > 10_000   # torch alone makes 100,000s of objects
    assert gc.get_freeze_count() == 0
