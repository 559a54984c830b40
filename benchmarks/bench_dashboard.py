"""Dashboard responsiveness: every callback's latency on a big store.

The store holds 50 runs of 5,000 iterations (4 workers on a star: 4 node rows and 8 link rows
per iteration, an eval every 20 iterations), written with the Store's own API. Each callback is
timed as the server runs it, including turning its output into the JSON the browser receives.
Target: every callback under 200 ms.

    python -m benchmarks dashboard          (or: python benchmarks/bench_dashboard.py)
"""
from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from plotly.io.json import to_json_plotly

from dashboards.callbacks import Dashboard
from testbed.records.store import Store

TARGET_MS = 200.0


def star_graph(workers: int, bandwidth_mbps: float) -> dict:
    nodes = [{"id": "server", "role": "server", "pos": [0.0, 0.0]}]
    nodes += [{"id": f"w{i}", "role": "worker",
               "pos": [math.cos(2 * math.pi * i / workers), math.sin(2 * math.pi * i / workers)]}
              for i in range(workers)]
    edges = [{"source": f"w{i}", "target": "server", "bandwidth_mbps": bandwidth_mbps, "delay_ms": 2.0}
             for i in range(workers)]
    return {"nodes": nodes, "edges": edges}


def write_run(store, name: str, method: str, iterations: int, workers: int = 4,
              status: str = "completed", eval_every: int = 20, bits_per_worker: int = 80_000) -> int:
    """A synthetic run with the shapes and sizes the loop writes."""
    bw = 20.0
    rid = store.create_run(name, {"run": {"name": name}}, method=method, topology="star",
                           workers=workers, bandwidth_mbps=bw, graph=star_graph(workers, bw))
    clock = 0.0
    for it in range(iterations):
        up = bits_per_worker * workers
        uplink = up / (bw * 1e6)
        downlink = bits_per_worker / (bw * 1e6)
        clock += 0.01 + uplink + 0.001 + downlink
        store.append_iteration(
            rid, {"iteration": it, "stage": "dense", "virtual_time_s": clock, "wall_time_s": it * 0.01,
                  "train_loss": 2.3 / (1 + it / 100), "bits_up": up, "bits_down": bits_per_worker * workers,
                  "compute_s": 0.01, "uplink_s": uplink, "aggregation_s": 0.001, "downlink_s": downlink},
            nodes=[{"iteration": it, "node": f"w{w}", "bits_up": bits_per_worker,
                    "bits_down": bits_per_worker, "compute_s": 0.01, "uplink_done_s": clock}
                   for w in range(workers)],
            links=[{"iteration": it, "src": s, "dst": d, "bytes": bits_per_worker // 8, "packets": 7,
                    "lost": (it + w) % 3 == 0, "retransmitted": (it + w) % 3 == 0, "busy_s": uplink}
                   for w in range(workers) for s, d in ((f"w{w}", "server"), ("server", f"w{w}"))])
        if (it + 1) % eval_every == 0:
            store.append_eval(rid, {"iteration": it, "virtual_time_s": clock, "test_loss": 2.3 / (1 + it / 100),
                                    "test_accuracy": 1 - 0.9 * math.exp(-it / 1000)})
        if (it + 1) % 500 == 0:
            store.flush()
    store.flush()
    if status != "running":
        store.finish_run(rid, status)
    return rid


def build_store(path: Path, runs: int, iterations: int) -> None:
    methods = ["none", "topk", "lgc", "dgc", "powersgd"]
    with Store(path) as store:
        for i in range(runs):
            write_run(store, f"run{i:02d}", methods[i % len(methods)], iterations,
                      bits_per_worker=80_000 if i % 5 == 0 else 2_000)


def _json_ms(output) -> float:
    """Serialise a callback's output the way Dash does before it goes to the browser."""
    t0 = time.perf_counter()
    to_json_plotly(output)
    return 1e3 * (time.perf_counter() - t0)


def measure(path: Path, repeat: int = 5) -> list[dict]:
    board = Dashboard(path)
    with board.store() as store:
        runs = store.runs()
    live_id = runs[-1]["id"]
    chosen = [r["id"] for r in runs[:5]]
    with board.store() as store:
        store.db.execute("UPDATE runs SET status='running', pid=? WHERE id=?", (os.getpid(), live_id))
        store.db.commit()

    cases = {
        "runs table refresh": lambda state: board.runs_view(None),
        "live: open a 5,000-iteration run": lambda state: board.live_view(live_id, "iteration", None),
        "live: tick, nothing new": lambda state: board.live_view(live_id, "iteration", state),
        "live: switch x to virtual time": lambda state: board.live_view(live_id, "virtual_time_s", state),
        "controls list": lambda state: board.controls_view(live_id),
        "compare 5 runs": lambda state: board.compare_view(chosen, 0.8, "virtual_time_s"),
        "steer: validate + request": lambda state: board.submit_control(live_id, "*", 5.0, None, None),
    }
    _, state, *_ = board.live_view(live_id, "iteration", None)
    message, level = board.submit_control(live_id, "*", 5.0, None, None)
    assert level == "ok", message  # the steering case below must time a real request
    rows = []
    for name, fn in cases.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = fn(state)
            ms = 1e3 * (time.perf_counter() - t0)
            times.append(ms + _json_ms(out))
        rows.append({"callback": name, "median_ms": statistics.median(times), "max_ms": max(times)})
    # A tick that finds new rows: append one bin of iterations to the live run, then read them.
    times = []
    with Store(path) as writer:
        nxt = writer.runs()[-1]["last_iteration"] + 1
        for k in range(repeat):
            _, state, *_ = board.live_view(live_id, "iteration", None)
            stride = state["stride"]
            first = -(-nxt // stride) * stride  # the next bin's start
            nxt = first + stride
            for it in range(first, nxt):
                writer.append_iteration(live_id, {"iteration": it, "virtual_time_s": it * 0.1, "train_loss": 0.1,
                                                  "bits_up": 1, "bits_down": 1, "compute_s": 0.01, "uplink_s": 0.01,
                                                  "aggregation_s": 0.0, "downlink_s": 0.01},
                                        nodes=[{"iteration": it, "node": "w0", "bits_up": 1, "bits_down": 1}],
                                        links=[{"iteration": it, "src": "w0", "dst": "server", "bytes": 1,
                                                "packets": 1, "lost": 0, "retransmitted": 0}])
            writer.flush()
            t0 = time.perf_counter()
            out = board.live_view(live_id, "iteration", state)
            times.append(1e3 * (time.perf_counter() - t0) + _json_ms(out))
    rows.insert(3, {"callback": "live: tick, one new bin of iterations", "median_ms": statistics.median(times),
                    "max_ms": max(times)})
    board.close()
    return rows


def print_table(rows: list[dict], title: str) -> None:
    print(title)
    width = max(len(r["callback"]) for r in rows)
    print(f"{'callback':<{width}}  {'median ms':>9}  {'max ms':>7}  target {TARGET_MS:.0f} ms")
    for r in rows:
        ok = "ok" if r["max_ms"] < TARGET_MS else "SLOW"
        print(f"{r['callback']:<{width}}  {r['median_ms']:9.1f}  {r['max_ms']:7.1f}  {ok}")


def run(quick: bool = True, path: str | os.PathLike | None = None) -> list[dict]:
    runs, iterations = 50, 5000
    tmp = None
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "bench.db"
    path = Path(path)
    try:
        if not path.exists():
            t0 = time.perf_counter()
            build_store(path, runs, iterations)
            print(f"generated {runs} runs x {iterations} iterations in {time.perf_counter() - t0:.1f} s "
                  f"({path.stat().st_size / 1e6:.0f} MB)")
        rows = measure(path, repeat=3 if quick else 10)
        print_table(rows, f"dashboard callbacks, store of {runs} runs x {iterations} iterations")
        return rows
    finally:
        if tmp is not None:
            tmp.cleanup()


def main(quick: bool = True) -> list[dict]:
    return run(quick=quick, path=os.environ.get("BENCH_DASHBOARD_STORE"))


if __name__ == "__main__":
    main()
