"""A Flower run's rounds into the store: the run, one iteration (with its node and link rows)
per round, the round's evaluation rows and the strategy's MetricRecords as `flower_metrics`
events. The row shapes are the data-parallel runs' (testbed/experiment.py), so the
dashboard, export and TensorBoard read a Flower run like any other.
"""
from __future__ import annotations

import time

from testbed.graph_json import graph_to_json
from testbed.rounds import Round


def start_run(store, world, app, name: str, method: str) -> int:
    cfg = world.cfg
    link = cfg.network.get("link", {})
    config = {**cfg.as_dict(), "flower": {"app": str(app.app_dir), "run_config": app.run_config,
                                          "num_nodes": app.num_nodes}}
    run_id = store.create_run(name, config, method=method, topology=cfg.network.get("topology"),
                              workers=len(world.workers), bandwidth_mbps=link.get("bandwidth_mbps"),
                              graph=graph_to_json(world.net.graph))
    store.append_event(run_id, "start", {"flower_app": str(app.app_dir), "nodes": app.num_nodes,
                                         "run_config": app.run_config},
                       iteration=0, virtual_time_s=0.0)
    store.flush()
    return run_id


def write_round(store, run_id: int, world, rnd: Round, wall_s: float) -> None:
    """One round's rows; flushed."""
    r, t = rnd.report, rnd.start
    traffic, left = r.traffic, r.left_out
    compute = getattr(rnd, "compute_s", {})
    energy = {w: world.node_energy(w, r.clock - t, compute.get(w, 0.0), w not in rnd.taking_part,
                                   traffic.radio) for w in world.workers}
    bits_up, bits_down = sum(traffic.bits_up.values()), sum(traffic.bits_down.values())
    store.append_iteration(
        run_id,
        {"iteration": rnd.index, "stage": getattr(rnd, "kind", None), "virtual_time_s": r.clock,
         "wall_time_s": wall_s, "train_loss": rnd.train_loss, "bits_up": bits_up,
         "bits_down": bits_down, "left_out": len(left), "participants": rnd.participants,
         "energy_j": sum(e["energy_j"] for e in energy.values()), **vars(r.timing)},
        nodes=[{"iteration": rnd.index, "node": w, "bits_up": traffic.bits_up.get(w, 0),
                "bits_down": traffic.bits_down.get(w, 0), "compute_s": compute.get(w, 0.0),
                "uplink_done_s": traffic.uplink_done.get(w), "left_out": left.get(w), **energy[w]}
               for w in world.workers],
        links=[{"iteration": rnd.index, "src": u, "dst": v, **row} for (u, v), row in traffic.links.items()])
    for row in rnd.evaluations:
        store.append_eval(run_id, row)
    for entry in getattr(rnd, "flower_metrics", []):
        store.append_event(run_id, "flower_metrics", entry, iteration=rnd.index,
                           virtual_time_s=r.clock)
    store.flush()


def record(store, run_id: int, driver, progress=None) -> int:
    """Every round of `driver` into the store; the run's status set. Returns the rounds."""
    wall0, n = time.perf_counter(), 0
    try:
        for entry in driver.initial:
            store.append_event(run_id, "flower_metrics", entry, iteration=0, virtual_time_s=0.0)
        for rnd in driver.rounds(0):
            for entry in driver.initial:
                store.append_event(run_id, "flower_metrics", entry, iteration=0, virtual_time_s=0.0)
            driver.initial = []
            write_round(store, run_id, driver.world, rnd, time.perf_counter() - wall0)
            n += 1
            if progress is not None:
                progress(rnd)
    except KeyboardInterrupt as e:
        how = f"stopped by {e.args[0]}" if e.args else "interrupted by the user (SIGINT)"
        store.finish_run(run_id, "stopped", how)
        raise
    except BaseException as e:
        store.append_event(run_id, "error", {"error": f"{type(e).__name__}: {e}"},
                           virtual_time_s=driver.grid.clock)
        store.finish_run(run_id, "failed", f"{type(e).__name__}: {e}")
        raise
    store.finish_run(run_id, "completed")
    return n
