"""A Flower app over the emulated edge against Flower's own simulation, side by side in one run.

The example app (experiments/flower_app: an MLP on digits, 10 nodes, FedAdam, 5 nodes trained
and 3 evaluated per server round) under, in this order:
  ours      `testbed flower run`'s path in this process: every message serialized as Flower
            does, framed and carried over the default 802.11 (CSMA) cell, each ClientApp
            call's FLOPs (counted once per node, call kind and model, then reused), the rows
            written by the loop into a store;
  plain     the plain in-process grid (no network, no FLOP counting): the floor;
  flower    Flower's `run_simulation` runtime (Ray, one CPU per actor), the same app objects and
            run config; Ray's start-up and actors count, as a user waits for them.
Each in a fresh process (as a user starts it: imports, data, Ray included), one after the other.
Per row: wall seconds from the start of the process's work to the end of the app, per round (a
send_and_receive), and the final centralized accuracy (ours and plain take the same
arithmetic; Flower's node ids, so its sampled nodes, differ). Then ours split: the ClientApp
calls (with FLOP counting), the emulation (link-layer calls and the transport), Flower's
serialization, and the per-message cost of emulation + serialization as a share of ours' wall
time. Targets: ours' steady round <= 1.15x the plain grid's and <= 0.1x Flower's.

Then the 100-node round (every node trains) where its ClientApps run: serially in this process,
in 2 forked worker processes (`run.threads=2`, one CPU each: the default pool), and on 2 Ray
actors of one CPU each on a local Ray of 2 CPUs (`init-args-num-cpus=2`), each in a fresh
process: the start-up (the work's start to the end of the first round, less a steady round) and
the steady round, against serial's and the forked pool's. Target: the forked pool >= 1.6x
serial.
Run: `python -m benchmarks flower` (3 server rounds) or `--full` (6).
"""
from __future__ import annotations

import gc
import importlib.util
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from flwr.app import Context, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.simulation.run_simulation import _run_simulation
from flwr.supercore.constant import NOOP_FEDERATION_ID
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from testbed.flower.app import load_app
from testbed.flower.driver import (
    FlowerDriver,
    flower_identity,
    seed_everything,
    strategy_tap,
)
from testbed.flower.grid import LocalGrid
from testbed.flower.pool import ProcessPool
from testbed.flower.ray_pool import RayPool
from testbed.flower.world import flower_config, flower_world
from testbed.records.store import Store
from testbed.run.loop import Loop

APP = Path(__file__).resolve().parents[1] / "experiments" / "flower_app"


def _accuracy(records: list) -> float | None:
    central = [r for k, _, r in records if k == "centralized" and r is not None]
    return float(central[-1]["accuracy"]) if central else None


def ours(rounds: int, folder: Path, nodes: int = 10, threads: int = 0, ray: bool = False
         ) -> dict:
    """`threads` > 0: the 100-node comparison's run (every node trains, nobody evaluates),
    ClientApps in `threads` worker processes of one CPU each (1: serial), or (`ray`) on as many
    Ray actors of one CPU each on a local Ray of `threads` CPUs."""
    t = time.perf_counter()
    config = [f"num-server-rounds={rounds}"]
    if threads:
        config += ["fraction-train=1.0", "fraction-evaluate=0.0"]
    federation = [f"num-supernodes={nodes}"] + (
        [f"init-args-num-cpus={threads} client-resources-num-cpus=1"] if ray else [])
    app = load_app(APP, config, federation_config=federation)
    cfg = flower_config(None, [f"run.threads={threads}"] if threads else [], app.num_nodes,
                        name="bench")
    if ray:
        pool = RayPool(app)
    else:
        pool = ProcessPool(APP, 1, threads, 1) if threads > 1 else None
    with Store(folder / f"ours{nodes}_{threads}.db") as store:
        world = flower_world(cfg, store, app.num_nodes)
        driver = FlowerDriver(app, world, pool=pool)
        loop = Loop(world, driver)
        loop.start()
        loop.run()
        acc = store.evals(world.run_id)[-1]["test_accuracy"]
    wall = time.perf_counter() - t
    g = driver.grid
    return {"wall": wall, "rounds": g.index, "acc": acc, "parts": dict(g.wall),
            "messages": g.messages, "counted": g.flops.counted if g.flops else 0,
            "calls": g.client_calls}


def plain(rounds: int) -> dict:
    t = time.perf_counter()
    app = load_app(APP, [f"num-server-rounds={rounds}"])
    grid = LocalGrid(app.client_app, app.num_nodes, app.run_config)
    records = []
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                      run_config=dict(app.run_config))
    seed_everything(0)
    with flower_identity(1), strategy_tap(lambda k, r, m: records.append((k, r, m))):
        app.server_app(grid, context)
    return {"wall": time.perf_counter() - t, "rounds": grid.calls, "acc": _accuracy(records)}


def flower(rounds: int) -> dict:
    t = time.perf_counter()
    app = load_app(APP, [f"num-server-rounds={rounds}"])
    records = []
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                      run_config=dict(app.run_config))
    run = Run.create_empty(1)
    run.override_config = {"num-server-rounds": rounds}
    run.primary_task_id, run.federation_id = 1, NOOP_FEDERATION_ID   # as run_simulation sets
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, SUPERLINK_NODE_ID
    seed_everything(0)
    with strategy_tap(lambda k, r, m: records.append((k, r, m))):
        _run_simulation(app.num_nodes, exit_event=None, client_app=app.client_app,
                        server_app=app.server_app, backend_name="ray",
                        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}},
                        server_app_context=context, app_dir=str(APP), run=run, is_app=True)
    calls = 2 * rounds   # a train and an evaluate send_and_receive per server round
    return {"wall": time.perf_counter() - t, "rounds": calls, "acc": _accuracy(records)}


def child(kind: str, rounds: int, folder: str) -> None:
    """One grid's run in this (fresh) process; its figures as one JSON line on stdout. `steady`:
    wall seconds per round between the strategy's first and last aggregate (start-up out). The
    plain grid and Flower's driver freeze what their first round left alive from the garbage
    collector's full passes (pauses of 10-280 ms, at random), as our loop does."""
    torch.set_num_threads(1)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    run = {"ours": lambda: ours(rounds, Path(folder)), "plain": lambda: plain(rounds),
           "flower": lambda: flower(rounds),
           "serial100": lambda: ours(rounds, Path(folder), 100, 1),
           "pool100": lambda: ours(rounds, Path(folder), 100, 2),
           "ray100": lambda: ours(rounds, Path(folder), 100, 2, ray=True)}[kind]
    stamps, start = [], time.perf_counter()

    def tap(kind, *_):
        if kind == "centralized":
            return
        if not stamps and kind in ("plain", "flower"):   # as our loop does: processes/heap.py
            gc.freeze()
        stamps.append(time.perf_counter())
    with strategy_tap(tap):
        out = run()
    out["steady"] = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else None
    out["first"] = stamps[0] - start if stamps else None   # work start to the first aggregate
    print("RESULT " + json.dumps(out), flush=True)


def _in_child(kind: str, rounds: int, folder: str) -> dict | None:
    code = f"from benchmarks.bench_flower import child; child({kind!r}, {rounds}, {folder!r})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    print(f"{kind}: failed ({tail})")
    return None


def main(quick: bool = True) -> dict:
    """Prints the tables; returns their figures (`python -m benchmarks flower --out FILE`)."""
    rounds = 3 if quick else 6
    kinds = ["ours", "plain", "flower"]
    if importlib.util.find_spec("ray") is None:   # flwr without its simulation extra
        print("Flower's simulation is not installed (no ray): pip install 'flwr[simulation]'")
        kinds = ["ours", "plain"]
    with tempfile.TemporaryDirectory() as tmp:
        return report(rounds, kinds, tmp)


# the 100-node round: serially, in 2 forked worker processes, on 2 Ray actors of a local Ray
POOLS = {"serial100": "serial", "pool100": "forked, 2 processes",
         "ray100": "Ray, 2 actors (local)"}


def pool_table(rows: dict, rounds: int, load: float) -> dict:
    """The 100-node round where the ClientApps run: start-up (from the work's start to the end
    of the first round, less a steady round: imports, data, the pool's start, the first round's
    FLOP counting), steady seconds per round, and the steady round against serial's and the
    forked pool's; returns the ratios."""
    serial, forked = rows.get("serial100"), rows.get("pool100")
    print(f"100 nodes, every node trains, {rounds} server rounds, one run each; load {load}")
    print(f"{'ClientApps':<24}{'start-up s':>11}{'steady s/round':>16}{'vs serial':>11}"
          f"{'vs forked':>11}")
    out = {}
    for kind, r in rows.items():
        startup = r["first"] - r["steady"]
        vs = [f"{r['steady'] / b['steady']:.2f}x" if b else "-" for b in (serial, forked)]
        print(f"{POOLS[kind]:<24}{startup:>11.2f}{r['steady']:>16.3f}{vs[0]:>11}{vs[1]:>11}")
        out[f"{kind}_startup_s"], out[f"{kind}_steady_s"] = startup, r["steady"]
    if serial and forked:
        out["pool_speedup"] = serial["steady"] / forked["steady"]
        print(f"forked pool: {out['pool_speedup']:.2f}x serial's steady round (target >= 1.6x)")
    if "ray100" in rows and forked:
        out["ray_over_forked_steady"] = rows["ray100"]["steady"] / forked["steady"]
        out["ray_startup_extra_s"] = out["ray100_startup_s"] - out["pool100_startup_s"]
    return out


def _load() -> float:
    return float(open("/proc/loadavg").read().split()[0])


def report(rounds: int, kinds: list[str], tmp: str) -> dict:
    rows = {k: r for k in kinds if (r := _in_child(k, rounds, tmp)) is not None}
    figures = {"server_rounds": rounds, "load_before_pool": _load(), "rows": rows}
    print(f"example app, 10 nodes, FedAdam, {rounds} server rounds; load {figures['load_before_pool']}")
    print(f"{'grid':<8}{'wall s':>9}{'rounds':>8}{'s/round':>10}{'steady s/round':>16}{'accuracy':>10}")
    for name, r in rows.items():
        acc = "-" if r["acc"] is None else f"{r['acc']:.4f}"
        steady = "-" if r["steady"] is None else f"{r['steady']:.3f}"
        print(f"{name:<8}{r['wall']:>9.2f}{r['rounds']:>8}{r['wall'] / r['rounds']:>10.3f}"
              f"{steady:>16}{acc:>10}")
    if "ours" not in rows:
        return figures
    o = rows["ours"]
    if "plain" in rows and o["steady"] and rows["plain"]["steady"]:
        figures["ours_over_plain_steady"] = o["steady"] / rows["plain"]["steady"]
        print(f"ours / plain steady round: {figures['ours_over_plain_steady']:.3f}x (target <= 1.15x)")
    if "flower" in rows:
        f = rows["flower"]
        figures["ours_over_flower_per_round"] = (o["wall"] / o["rounds"]) / (f["wall"] / f["rounds"])
        figures["ours_over_flower_steady"] = o["steady"] / f["steady"]
        print(f"ours / flower per round: {figures['ours_over_flower_per_round']:.3f}x with start-up, "
              f"{figures['ours_over_flower_steady']:.3f}x steady (target <= 0.1x)")
    pool_rows = {k: r for k in POOLS if (k != "ray100" or "flower" in kinds)
                 and (r := _in_child(k, rounds, tmp)) is not None}
    figures["pool_rows"], figures["load_after_pool"] = pool_rows, _load()
    if len(pool_rows) >= 2:
        figures.update(pool_table(pool_rows, rounds, figures["load_after_pool"]))
    p = o["parts"]
    per_round = o["wall"] / o["rounds"]
    print(f"ours per round: {per_round * 1e3:.1f} ms; ClientApp calls (FLOPs counted "
          f"{o['counted']} of {o['calls']} calls) "
          f"{p['client'] / o['rounds'] * 1e3:.1f} ms, emulation {p['emulation'] / o['rounds'] * 1e3:.1f} ms, "
          f"serialization {p['serde'] / o['rounds'] * 1e3:.1f} ms")
    per_msg = (p["emulation"] + p["serde"]) / o["messages"]
    print(f"per message (emulation + serialization): {per_msg * 1e3:.2f} ms over {o['messages']} "
          f"messages; {100 * (p['emulation'] + p['serde']) / o['wall']:.1f}% of ours' wall time")
    return figures


if __name__ == "__main__":
    main()
