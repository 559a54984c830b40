"""Record the golden rows: what the orchestrator wrote before it was rebuilt around one loop.

Run this ON THE CODE THE FIXTURES STAND FOR (main at 5b737c3, the orchestrator before the one
loop), never on a later tree: the fixtures are the reference the rebuilt code is compared with
(tests/testbed/test_golden.py). From a checkout of that commit:

    PYTHONPATH=$PWD python tests/testbed/golden/record.py OUT_FOLDER

It writes, into OUT_FOLDER, one `NAME.json.xz` per run (the run's `testbed export --format
json`, wall-clock fields dropped: iterations.wall_time_s, run.started_at, run.ended_at) and, for
each resumed run, the store and checkpoint of the run as stopped (`NAME.stopped.db`,
`NAME.stopped.pt`), which the rebuilt code must open and resume. Each run is its own process,
as a user's `testbed run` is.
"""
from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
WALL = {"iterations": ("wall_time_s",), "run": ("started_at", "ended_at")}

# The data-parallel files the torchrun equivalence test runs in process (tests/e2e/test_torchrun.py)
DP = """
[run]
name = "{name}"
seed = 3
iterations = 12
eval_every = 4
flush_every = 1
threads = 1
device = "cpu"
[data]
dataset = "digits"
batch_size = 16
[model]
name = "mlp"
[optim]
lr = 0.05
[compression]
method = "{method}"
{options}
[network]
topology = "star"
workers = {workers}
[network.link]
bandwidth_mbps = 10.0
delay_ms = 1.0
delivery = "best_effort"
loss = {{ model = "bernoulli", p = 0.05 }}
"""
LGC = "ratio = 0.05\nwarmup_iterations = 3\nae_iterations = 3\nae_steps = 5"
DP_RUNS = {"topk_2": ("topk", "ratio = 0.05", 2),
           "dgc_4": ("dgc", "ratio = 0.05\nwarmup_iterations = 4", 4),
           "lgc_ps_2": ("lgc_ps", LGC, 2), "lgc_rar_2": ("lgc_rar", LGC, 2),
           "scalecom_2": ("scalecom", "ratio = 0.05", 2),
           "topk_allgather_2": ("topk", 'ratio = 0.05\ncollective = "allgather"', 2),
           "lgc_ablation_2": ("lgc_ablation", "ratio = 0.05\nwarmup_iterations = 3\nae_iterations = 3", 2)}

# The federated files of tests/e2e/test_federated_torchrun.py
FED = """
[run]
name = "fed-{name}"
seed = 5
iterations = {rounds}
eval_every = 3
flush_every = 1
{extra}
device = "cpu"
[data]
dataset = "digits"
batch_size = 16
partition = "dirichlet"
alpha = 0.5
[model]
name = "{model}"
[optim]
lr = 0.05
[compression]
method = "{method}"
{options}
[federated]
clients = 8
clients_per_round = 4
local_steps = 2
mode = "{mode}"
concurrency = 4
buffer_size = 2
[network]
topology = "star"
medium = "shared"
[network.link]
bandwidth_mbps = 10.0
delay_ms = 1.0
delivery = "best_effort"
loss = {{ model = "bernoulli", p = 0.05 }}
"""
FED_RUNS = {"fed_topk_sync": ("topk", "ratio = 0.05", "sync"), "fed_none_sync": ("none", "", "sync"),
            "fed_topk_fedbuff": ("topk", "ratio = 0.05", "fedbuff")}

# A run stopped on request after STOP iterations, then `testbed resume`d from its checkpoint
STOPPER = textwrap.dedent("""
    import sys
    from testbed.config import load_config
    from testbed.federated import experiment_class
    from testbed.store import Store

    done = []
    cfg = load_config(sys.argv[1], [])
    with Store(sys.argv[2]) as store:
        exp = experiment_class(cfg)(cfg, store, progress=done.append,
                                    should_stop=lambda: len(done) >= int(sys.argv[3]))
        exp.run()
""")
GE = '{ model = "gilbert_elliott", p_good_to_bad = 0.1, p_bad_to_good = 0.4, loss_good = 0.02, loss_bad = 0.5 }'
RESUMED = {  # name: (file, stop after); checkpoints after iterations 3 (dp) / 1 and 3 (fedbuff)
    "resume_topk": (DP.replace("threads = 1", "threads = 1\ncheckpoint_every = 4").replace(
        '{ model = "bernoulli", p = 0.05 }', GE).format(
        name="resume-topk", method="topk", options="ratio = 0.05", workers=2), 6),
    "resume_fedbuff": (FED.format(name="resume-fedbuff", rounds=6, extra="checkpoint_every = 2\nthreads = 1",
                                  model="mlp", method="none", options="", mode="fedbuff"), 5),
}


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "testbed.cli", *args], cwd=ROOT, env=env(), check=True,
                   stdout=subprocess.DEVNULL)


def export(db: Path, out: Path) -> None:
    """`testbed export 1 --format json` of `db`, wall clock dropped, into `out` (xz)."""
    proc = subprocess.run([sys.executable, "-m", "testbed.cli", "export", "1", "--store", str(db),
                           "--format", "json"], cwd=ROOT, env=env(), check=True,
                          capture_output=True, text=True)
    out.write_bytes(lzma.compress(json.dumps(without_wall(json.loads(proc.stdout))).encode(),
                                  preset=9 | lzma.PRESET_EXTREME))


def without_wall(data: dict) -> dict:
    data["run"] = {k: v for k, v in data["run"].items() if k not in WALL["run"]}
    data["iterations"] = [{k: v for k, v in r.items() if k not in WALL["iterations"]}
                          for r in data["iterations"]]
    return data


def record_run(name: str, file: Path, sets: list[str], out: Path, tmp: Path) -> None:
    if ONLY and name not in ONLY:
        return
    db = tmp / f"{name}.db"
    cli("run", str(file), "--store", str(db), "--quiet", *[a for s in sets for a in ("--set", s)])
    export(db, out / f"{name}.json.xz")
    print("recorded", name, flush=True)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="golden-"))
    try:
        record_run("quickstart", ROOT / "experiments/quickstart.toml", [], out, tmp)
        fed = ROOT / "experiments/fed_fashion.toml"
        record_run("fed_fashion_sync", fed, ["run.iterations=5"], out, tmp)
        record_run("fed_fashion_fedbuff", fed, ["run.iterations=5", "federated.mode=fedbuff"], out, tmp)
        record_run("torchrun_quickstart_2", ROOT / "experiments/quickstart.toml",
                   ["network.workers=2", "run.device=cpu"], out, tmp)
        for name, (method, options, workers) in DP_RUNS.items():
            path = tmp / f"{name}.toml"
            path.write_text(DP.format(name=name, method=method, options=options, workers=workers))
            record_run(f"torchrun_{name}", path, [], out, tmp)
        for name, (method, options, mode) in FED_RUNS.items():
            path = tmp / f"{name}.toml"
            path.write_text(FED.format(name=name, rounds=6, extra="", model="cnn", method=method,
                                       options=options, mode=mode))
            record_run(f"torchrun_{name}", path, [], out, tmp)
        for name, (text, stop) in RESUMED.items():
            if ONLY and name not in ONLY:
                continue
            path, db = tmp / f"{name}.toml", tmp / f"{name}.db"
            path.write_text(text)
            subprocess.run([sys.executable, "-c", STOPPER, str(path), str(db), str(stop)],
                           cwd=ROOT, env=env(), check=True)
            shutil.copy(db, out / f"{name}.stopped.db")
            (out / f"{name}.stopped.pt.xz").write_bytes(lzma.compress(
                (Path(f"{db}.checkpoints") / "run-1.pt").read_bytes(), preset=9 | lzma.PRESET_EXTREME))
            cli("resume", "1", "--store", str(db), "--quiet")
            export(db, out / f"{name}.json.xz")
            print("recorded", name, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ONLY = set(sys.argv[2:])

if __name__ == "__main__":
    main(Path(sys.argv[1]))
