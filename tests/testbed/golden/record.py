"""Record the golden rows: what the orchestrator wrote before it was rebuilt around one loop.

Run this ON THE CODE THE FIXTURES STAND FOR (main at 5b737c3, the orchestrator before the one
loop), never on a later tree: the fixtures are the reference the rebuilt code is compared with
(tests/testbed/test_golden.py). From a checkout of that commit:

    PYTHONPATH=$PWD python tests/testbed/golden/record.py OUT_FOLDER

It writes, into OUT_FOLDER, one `NAME.json.xz` per run (the run's `testbed export --format
json`, wall-clock fields dropped: iterations.wall_time_s, run.started_at, run.ended_at) and, for
each resumed run, the store and checkpoint of the run as stopped (`NAME.stopped.db.xz`,
`NAME.stopped.pt.xz`), which the rebuilt code must open and resume. `record.py OUT NAME...`
records only the runs named. Each run is its own process,
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

from compare import without_wall  # this folder's: what a fixture keeps of an export

ROOT = Path(__file__).resolve().parents[3]

E2E = ROOT / "tests" / "e2e"
# The torchrun equivalence tests' files, which they run in process as the reference
# (tests/e2e/test_torchrun.py `write_file`, tests/e2e/test_federated_torchrun.py `write`)
DP_RUNS = [("topk", 2), ("dgc", 4), ("lgc_ps", 2), ("lgc_rar", 2), ("scalecom", 2),
           ("topk:allgather", 2), ("lgc_ablation", 2)]
FED_RUNS = [("topk", "sync"), ("none", "sync"), ("topk", "fedbuff")]


def e2e_files():
    """The two test modules' file writers (imported from the checkout being recorded)."""
    sys.path.insert(0, str(E2E))
    import test_federated_torchrun
    import test_torchrun
    return test_torchrun.write_file, test_federated_torchrun.write


# A run stopped on request after STOP iterations, then `testbed resume`d from its checkpoint
STOPPER = textwrap.dedent("""
    import sys
    from testbed.configuration.loading import load_config
    from testbed.drivers.federated import experiment_class   # the code before the loop
    from testbed.records.store import Store

    done = []
    cfg = load_config(sys.argv[1], [])
    with Store(sys.argv[2]) as store:
        exp = experiment_class(cfg)(cfg, store, progress=done.append,
                                    should_stop=lambda: len(done) >= int(sys.argv[3]))
        exp.run()
""")
GE = '{ model = "gilbert_elliott", p_good_to_bad = 0.1, p_bad_to_good = 0.4, loss_good = 0.02, loss_bad = 0.5 }'


def resumed_files(folder: Path) -> dict:
    """name: (file, stop after). Top-k over 2 workers with Gilbert-Elliott loss, a checkpoint
    every 4 iterations, stopped after 6; FedBuff (fp32, MLP), a checkpoint every 2 server steps,
    stopped after 5: both resume after iteration 3."""
    write_dp, write_fed = e2e_files()
    dp = write_dp(folder, "topk", 2).read_text().replace(
        "flush_every = 1", "flush_every = 1\ncheckpoint_every = 4").replace(
        '{ model = "bernoulli", p = 0.05 }', GE).replace('name = "topk-2"', 'name = "resume-topk"')
    fed = write_fed(folder, "none", "fedbuff").read_text().replace(
        "flush_every = 1", "flush_every = 1\ncheckpoint_every = 2\nthreads = 1").replace(
        'name = "cnn"', 'name = "mlp"').replace('name = "fed-none-fedbuff"', 'name = "resume-fedbuff"')
    return {"resume_topk": (dp, 6), "resume_fedbuff": (fed, 5)}


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


def record_run(name: str, file: Path, sets: list[str], out: Path, tmp: Path) -> None:
    if ONLY and name not in ONLY:
        return
    db = tmp / f"{name}.db"
    cli("run", str(file), "--store", str(db), "--quiet", *[a for s in sets for a in ("--set", s)])
    export(db, out / f"{name}.json.xz")
    print("recorded", name, flush=True)


def main(out: Path, only: set[str]) -> None:
    global ONLY
    ONLY = only
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="golden-"))
    try:
        record_run("quickstart", ROOT / "experiments/quickstart.toml", [], out, tmp)
        fed = ROOT / "experiments/fed_fashion.toml"
        record_run("fed_fashion_sync", fed, ["run.iterations=5"], out, tmp)
        record_run("fed_fashion_fedbuff", fed, ["run.iterations=5", "federated.mode=fedbuff"], out, tmp)
        record_run("torchrun_quickstart_2", ROOT / "experiments/quickstart.toml",
                   ["network.workers=2", "run.device=cpu"], out, tmp)
        write_dp, write_fed = e2e_files()
        for method, workers in DP_RUNS:
            path = write_dp(tmp, method, workers)
            record_run(f"torchrun_{path.stem}", path, [], out, tmp)
        for method, mode in FED_RUNS:
            path = write_fed(tmp, method, mode)
            record_run(f"torchrun_{path.stem}", path, [], out, tmp)
        for name, (text, stop) in resumed_files(tmp).items():
            if ONLY and name not in ONLY:
                continue
            path, db = tmp / f"{name}.toml", tmp / f"{name}.db"
            path.write_text(text)
            subprocess.run([sys.executable, "-c", STOPPER, str(path), str(db), str(stop)],
                           cwd=ROOT, env=env(), check=True)
            (out / f"{name}.stopped.db.xz").write_bytes(lzma.compress(db.read_bytes(), preset=9))
            (out / f"{name}.stopped.pt.xz").write_bytes(lzma.compress(
                (Path(f"{db}.checkpoints") / "run-1.pt").read_bytes(), preset=9 | lzma.PRESET_EXTREME))
            cli("resume", "1", "--store", str(db), "--quiet")
            export(db, out / f"{name}.json.xz")
            print("recorded", name, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), set(sys.argv[2:]))
