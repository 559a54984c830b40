"""A federated run stopped and resumed at full scale: `python -m validation.federated_resume OUT [MODE ...]`.

experiments/fed_fashion.toml (100 clients, 10 per round or FedBuff 10 of 20 in flight, the
139k-weight CNN) with top-k 1%, 24 rounds, one torch thread: once uninterrupted, once stopped
by request before round 20 (checkpoints after rounds 7 and 15) and resumed with `testbed resume`.
Prints the checkpoint's size and what it holds (clients with an error memory, clients in
flight) and whether every table's rows (all columns but wall time) equal the uninterrupted
run's. tests/testbed/test_resume.py checks the same on small runs.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from testbed.cli import main
from testbed.configuration.loading import load_config
from testbed.experiment import Experiment
from testbed.records.store import Store
from testbed.run import checkpoint

FILE = Path(__file__).resolve().parents[1] / "experiments" / "fed_fashion.toml"
ROUNDS, EVERY, STOP = 24, 8, 20
TABLES = ("iterations", "nodes", "links", "evals")
MODES = ("sync", "fedbuff")


def rows(store: Store, rid: int) -> dict:
    data = store.export(rid)
    out = {t: [{k: v for k, v in r.items() if k != "wall_time_s"} for r in data[t]] for t in TABLES}
    run = store.run(rid)
    out["summary"] = {k: run[k] for k in ("last_iteration", "virtual_time_s", "total_bits", "best_accuracy")}
    return out


def compare(out: Path, mode: str) -> dict:
    sets = [f"run.iterations={ROUNDS}", "run.eval_every=8", "run.threads=1", "run.device=cpu",
            "compression.method=topk", "compression.ratio=0.01", f"federated.mode={mode}"]
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with Store(out / f"ref-{mode}.db") as s:
        cfg = load_config(FILE, sets + ["run.checkpoint_every=0"])
        ref = rows(s, Experiment(cfg, s).run())
    db = out / f"stopped-{mode}.db"
    calls = iter(range(ROUNDS))
    with Store(db) as s:
        cfg = load_config(FILE, sets + [f"run.checkpoint_every={EVERY}"])
        Experiment(cfg, s, should_stop=lambda: next(calls) == STOP).run()
        stopped = s.run(1)
    path = checkpoint.path_for(db, 1)
    state = checkpoint.load(path)["driver"]["federated"]
    if main(["resume", "1", "--store", str(db), "--quiet"]) != 0:
        raise SystemExit("testbed resume failed")
    with Store(db) as s:
        got = rows(s, 1)
    return {"mode": mode, "stopped": f"{stopped['status']} after {stopped['last_iteration']}",
            "checkpoint_bytes": path.stat().st_size, "clients_with_memory": len(state["memory"]),
            "in_flight": len(state["flight"] or {}), "equal": {t: got[t] == ref[t] for t in got},
            "accuracy": ref["summary"]["best_accuracy"], "wall_s": round(time.perf_counter() - t0, 1)}


def cli(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m validation.federated_resume",
                                 description=__doc__.splitlines()[0].split(": `")[0])
    ap.add_argument("out", type=Path, help="folder for the stores and checkpoints (one sub-folder per mode)")
    ap.add_argument("modes", nargs="*", metavar="MODE",
                    help="federated.mode values to compare: sync, fedbuff (default both)")
    args = ap.parse_args(argv)
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        ap.exit(2, f"MODE {bad[0]!r}: must be one of {', '.join(MODES)}\n")
    for mode in args.modes or MODES:
        print(compare(args.out / mode, mode), flush=True)


if __name__ == "__main__":
    cli(sys.argv[1:])
