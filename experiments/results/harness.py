"""Run the testbed's real loop for the result tables and time its pieces from outside.

`timed_experiment` is `testbed.experiment.Experiment` given a timer: the loop reports the
wall seconds of worker gradients and the optimizer step (compute), the scheme's `exchange()`
steps and ring sums (compression), the link layer (emulation) and evaluation; the store is
timed by wrapping its writes. It changes nothing the run computes. `run_many` runs a list of
`RunSpec`s through the sweep engine (testbed/sweeps.py: one at a time in this process, `jobs`
at once in processes of their own, or on Ray) and returns one `RunResult` per spec, with what the
tables need: accuracy, bits per iteration, virtual time, wall-clock split. With a `store`, every
run lands in it as it ends, and the same table run again skips the runs that completed there
(their RunResult is read back from the store, without the wall-clock split).

Wall-clock figures are this machine's (shared, 2 cores); virtual time is the emulated network's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from experiments.results.provenance import provenance
from testbed.configuration.loading import load_config
from testbed.errors import ExperimentError, NoServerError
from testbed.experiment import Experiment
from testbed.records.store import Store
from testbed.sweeps import Outcome, Point, run_sweep

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
DOCS_RESULTS = ROOT / "docs" / "results"

TIMER_NAMES = ("compute", "compression", "emulation", "store", "eval")


@dataclass
class RunSpec:
    """One run: an experiment file, `--set` style overrides and a label for the tables."""
    label: str
    config: str                       # path, relative to the repository root or absolute
    overrides: list[str] = field(default_factory=list)
    tags: dict = field(default_factory=dict)   # free columns the table script groups by


@dataclass
class RunResult:
    spec: RunSpec
    status: str                       # completed | n/a (the testbed refused the combination) | failed
    note: str = ""
    method: str = ""
    device: str = ""
    iterations: int = 0
    evals: list[dict] = field(default_factory=list)      # iteration, virtual_time_s, test_accuracy
    bits: list[int] = field(default_factory=list)        # per iteration, up + down, all nodes
    bits_up: list[int] = field(default_factory=list)     # per iteration, what the workers sent
    stages: list[str] = field(default_factory=list)
    virtual_time_s: float = 0.0                          # the clock at the end of the run
    virtual_s: list[float] = field(default_factory=list)  # per iteration: virtual seconds it took
    energy_j: list[float] = field(default_factory=list)   # per iteration: the workers' joules
    codec_s: list[float] = field(default_factory=list)   # wall s per iteration in exchange()
    timers: dict = field(default_factory=dict)           # wall s per piece, whole run
    wall_s: float = 0.0                                  # wall s of the training loop
    setup_s: float = 0.0
    packets: int = 0
    lost: int = 0
    packets_up: int = 0        # on links into the server (the workers' uplinks)
    lost_up: int = 0

    @property
    def final_accuracy(self) -> float | None:
        return self.evals[-1]["test_accuracy"] if self.evals else None

    @property
    def lost_fraction(self) -> float | None:
        return self.lost / self.packets if self.packets else None

    def mean_bits(self, start: int) -> float | None:
        window = self.bits[start:]
        return statistics.fmean(window) if window else None

    def mean_virtual_s(self, start: int) -> float | None:
        window = self.virtual_s[start:]
        return statistics.fmean(window) if window else None

    def mean_codec_ms(self, start: int) -> float | None:
        window = self.codec_s[start:]
        return 1000 * statistics.fmean(window) if window else None

    def time_to_accuracy(self, target: float) -> float | None:
        """Virtual seconds at the first evaluation with accuracy >= target (None: never)."""
        for e in self.evals:
            if e["test_accuracy"] >= target:
                return e["virtual_time_s"]
        return None


# ----------------------------------------------------------------------------- timing
class Timers:
    def __init__(self) -> None:
        self.total = {name: 0.0 for name in TIMER_NAMES}
        self.codec: dict[int, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.total[name] += seconds

    def observe(self, name: str, seconds: float, iteration: int) -> None:
        """The loop's timer: compression time is also kept per iteration."""
        self.add(name, seconds)
        if name == "compression":
            self.codec[iteration] = self.codec.get(iteration, 0.0) + seconds


def timed_store(path, timers: Timers):
    """A `Store` whose writes and control polls count as 'store' time."""
    class TimedStore(Store):
        pass

    def wrap(name):
        inner = getattr(Store, name)

        def method(self, *a, **kw):
            t = time.perf_counter()
            try:
                return inner(self, *a, **kw)
            finally:
                timers.add("store", time.perf_counter() - t)
        method.__name__ = name
        return method

    for name in ("create_run", "append_iteration", "append_eval", "append_event", "flush",
                 "finish_run", "pending_controls", "resolve_control"):
        setattr(TimedStore, name, wrap(name))
    return TimedStore(path)


def timed_experiment(cfg, store, timers: Timers):
    """The loop with `timers` as its timer; the federated driver for a file with
    [federated]."""
    return Experiment(cfg, store, timer=timers.observe)


# ----------------------------------------------------------------------------- running
def execute(spec: RunSpec, store_path: str | None = None) -> RunResult:
    """Run one spec through the loop; never raises for a refused or failed run."""
    config = Path(spec.config)
    if not config.is_absolute():
        config = ROOT / config
    try:
        cfg = load_config(config, ["run.threads=1", *spec.overrides])
    except NoServerError as e:            # a parameter-server method on a ring
        method = next((o.split("=", 1)[1].strip('"') for o in spec.overrides
                       if o.startswith("compression.method=")), "")
        return RunResult(spec=spec, status="n/a", method=method, note=str(e))
    cfg.run.name = spec.label
    result = RunResult(spec=spec, status="failed", method=cfg.compression.method)
    tmp = None
    if store_path is None:
        tmp = tempfile.TemporaryDirectory(prefix="results-")
        store_path = os.path.join(tmp.name, "runs.db")
    timers = Timers()
    store = timed_store(store_path, timers)
    try:
        t0 = time.perf_counter()
        try:
            exp = timed_experiment(cfg, store, timers)
        except ExperimentError as e:      # e.g. a parameter-server method on a ring
            result.status, result.note = "n/a", str(e)
            return result
        result.setup_s = time.perf_counter() - t0
        result.device = str(exp.world.device)
        for name in timers.total:         # setup's own store writes do not count
            timers.total[name] = 0.0
        t1 = time.perf_counter()
        try:
            run_id = exp.run()
        except Exception as e:            # the run is marked failed in the store too
            result.note = f"{type(e).__name__}: {e}"
            run_id = exp.run_id
        else:
            result.status = "completed"
        result.wall_s = time.perf_counter() - t1
        _collect(result, store, run_id, timers)
        return result
    finally:
        store.close()
        if tmp is not None:
            tmp.cleanup()


def _collect(result: RunResult, store, run_id, timers: Timers) -> None:
    if run_id is None:
        return
    its = store.iterations(run_id)
    result.iterations = len(its)
    result.bits = [int(r["bits_up"] or 0) + int(r["bits_down"] or 0) for r in its]
    result.bits_up = [int(r["bits_up"] or 0) for r in its]
    result.stages = [r["stage"] for r in its]
    result.virtual_time_s = float(its[-1]["virtual_time_s"]) if its else 0.0
    ends = [float(r["virtual_time_s"]) for r in its]
    result.virtual_s = [b - a for a, b in zip([0.0] + ends[:-1], ends)]
    result.energy_j = [float(r["energy_j"] or 0.0) for r in its]
    result.evals = [{"iteration": e["iteration"], "virtual_time_s": e["virtual_time_s"],
                     "test_accuracy": e["test_accuracy"]} for e in store.evals(run_id)]
    result.codec_s = [timers.codec.get(r["iteration"], 0.0) for r in its]
    result.timers = dict(timers.total)
    links = store.links(run_id)
    result.packets = sum(int(l["packets"] or 0) for l in links)
    result.lost = sum(int(l["lost"] or 0) for l in links)
    up = [l for l in links if l["dst"] == "server"]
    result.packets_up = sum(int(l["packets"] or 0) for l in up)
    result.lost_up = sum(int(l["lost"] or 0) for l in up)


def _execute_safe(spec: RunSpec, store_path: str | None) -> RunResult:
    try:
        return execute(spec, store_path)
    except Exception as e:                # a config mistake: report it, keep the others
        return RunResult(spec=spec, status="failed",
                         note=f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")


def run_point(point: Point, store: str, quiet: bool = True) -> dict:
    """The sweep engine's runner for a table's run: `execute` (the loop with its
    timers) into the point's store; the RunResult travels back as JSON."""
    r = _execute_safe(RunSpec(**point.extra["spec"]), store)
    status = {"completed": "completed", "n/a": "refused"}.get(r.status, "failed")
    return {"status": status, "line": (r.note.splitlines() or [r.status])[0],
            "result": json.loads(json.dumps(asdict(r), default=str))}


def result_of(row: dict) -> RunResult:
    """A RunResult from its JSON form (`asdict`)."""
    row = dict(row)
    row.pop("final_accuracy", None)
    row["spec"] = RunSpec(**row["spec"])
    return RunResult(**row)


def _config_path(spec: RunSpec) -> Path:
    config = Path(spec.config)
    return config if config.is_absolute() else ROOT / config


def points_of(specs: list[RunSpec]) -> list[Point]:
    return [Point(index=i, name=spec.label, file=str(_config_path(spec)),
                  overrides=["run.threads=1", *spec.overrides],
                  params={k: str(v) for k, v in spec.tags.items()}, threads=1,
                  runner="experiments.results.harness:run_point", extra={"spec": asdict(spec)})
            for i, spec in enumerate(specs, 1)]


def key_of(specs: list[RunSpec]) -> str:
    """The identity of a list of runs: their specs and their files' content."""
    files = {str(_config_path(s)): hashlib.sha256(_config_path(s).read_bytes()).hexdigest()
             for s in specs if _config_path(s).exists()}
    text = json.dumps([[asdict(s) for s in specs], files], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _from_store(spec: RunSpec, store_path: str, run_id: int) -> RunResult:
    """The RunResult of a run that completed in an earlier call (no wall-clock split)."""
    with Store(store_path, readonly=True) as store:
        result = RunResult(spec=spec, status="completed", method=store.run(run_id)["method"] or "",
                           note="completed before; read from the store")
        _collect(result, store, run_id, Timers())
    return result


def run_many(specs: list[RunSpec], *, jobs: int = 1, store: str | None = None,
             log=print, sink=None, ray: str | None = None, sweep: str = "results") -> list[RunResult]:
    """Every spec through the sweep engine, as sweep `sweep`: `jobs` at once (one process each;
    1: in this process), or as Ray tasks with `ray` ("local", "auto" or an address). With a
    `store`, each run is kept there and specs that completed there before are not run again.
    `sink(result)` is called as each run finishes (e.g. `jsonl_sink`)."""
    tmp = None
    if store is None:
        tmp = tempfile.TemporaryDirectory(prefix="results-")
        store = os.path.join(tmp.name, "runs.db")
    results: dict[int, RunResult] = {}

    def landed(o: Outcome) -> None:
        if o.result.get("result"):
            r = result_of(o.result["result"])
        else:               # its process ended without a result (killed, crashed)
            r = RunResult(spec=specs[o.point.index - 1], status="failed", note=o.line)
        results[o.point.index] = r
        if sink is not None:
            sink(r)
        acc = r.final_accuracy
        log(f"[{len(results)}/{len(specs)}] {r.spec.label}: {r.status}"
            + (f", acc {acc:.4f}" if acc is not None else "")
            + (f", {r.iterations} it in {r.wall_s:.1f} s wall" if r.iterations else "")
            + (f" ({r.note.splitlines()[0]})" if r.note and r.status != "completed" else ""))

    try:
        outcomes = run_sweep(points_of(specs), store, sweep=sweep, key=key_of(specs),
                             spec={"runs": [asdict(s) for s in specs]}, jobs=jobs, ray=ray,
                             quiet=True, log=lambda _line: None, each=landed)
        for o in outcomes:
            if o.status == "skipped":
                results[o.point.index] = _from_store(specs[o.point.index - 1], store, o.run_id)
                log(f"[{o.point.index}/{len(specs)}] {o.point.name}: completed before (from {store})")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return [results[i] for i in range(1, len(specs) + 1)]


def jsonl_sink(path: str | Path):
    """A `run_many` sink appending one JSON line per finished run to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(r: RunResult) -> None:
        row = asdict(r)
        row["final_accuracy"] = r.final_accuracy
        row["provenance"] = provenance(r.spec)
        with open(path, "a") as f:
            f.write(json.dumps(row, default=str) + "\n")
    return write


def read_runs(path: str | Path) -> list[RunResult]:
    """The RunResults a `jsonl_sink` wrote (lines that are not JSON objects are skipped)."""
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or "spec" not in row:
            continue
        row.pop("provenance", None)
        out.append(result_of(row))
    return out


def run_missing(specs: list[RunSpec], path: str | Path, argv, *, description: str,
                report: str) -> list[RunResult]:
    """The command line of a script whose runs a `jsonl_sink` keeps at `path`: `--jobs N` runs
    the specs whose label is not there yet, N at once, each written as it finishes; `--report`
    (its help: `report`) runs nothing. Every run the file then holds."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--jobs", type=int, default=1, help="runs at once (worker processes; default 1)")
    p.add_argument("--report", action="store_true", help=report)
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs {args.jobs}: must be at least 1")
    done = {r.spec.label for r in read_runs(path)} if Path(path).exists() else set()
    todo = [s for s in specs if s.label not in done]
    if todo and not args.report:
        run_many(todo, jobs=args.jobs, sink=jsonl_sink(path))
    return read_runs(path)


# ----------------------------------------------------------------------------- figures
def mean_spread(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (0 for one value); None for none."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def stage_lengths(iterations: int) -> tuple[int, int]:
    """(warm-up, autoencoder training) iterations for DGC/LGC at a budget: 1/4 and 1/8 of it."""
    return max(1, round(iterations / 4)), max(1, round(iterations / 8))
