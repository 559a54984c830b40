"""Run the testbed's real loop for the result tables, through the sweep engine, and time its pieces.

A table asks for `TableRun`s (an experiment file, `--set` overrides, a label and tags). `run_many`
hands them to the sweep engine (testbed/sweeps.py: one at a time in this process, `jobs` at once
in processes of their own, or on Ray) as points of one sweep: each runs through
`testbed.api.run_spec`, as `testbed run` and `testbed sweep` run theirs, with the label as the
run's name and the tags as its sweep parameters. A point asks for its wall seconds by piece
(`Point.timed`: the loop's timer hook, testbed/run/wall_split.py): worker gradients and the
optimizer step (compute), the scheme's `exchange()` steps and ring sums (compression), the link
layer (emulation), evaluation and the store's writes. Everything else a table reads (accuracy,
bits per iteration, virtual time, packets) comes back from the store, so a run that completed in
an earlier call of the same table reads back the same `RunResult` (without the wall split).

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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from experiments.results.provenance import provenance
from testbed import api
from testbed.sweeps import Outcome, Point, run_sweep

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
DOCS_RESULTS = ROOT / "docs" / "results"


@dataclass
class TableRun:
    """One run a table asks for: its row's label (the run's name), an experiment file, `--set`
    overrides, and tags (the columns the table groups by; stored as the run's sweep parameters)."""
    label: str
    config: str                       # path, relative to the repository root or absolute
    overrides: list[str] = field(default_factory=list)
    tags: dict = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return Path(self.config) if Path(self.config).is_absolute() else ROOT / self.config


@dataclass
class RunResult:
    spec: TableRun
    status: str                       # completed | refused (the testbed refused the combination) | failed
    note: str = ""
    method: str = ""
    device: str = ""                                     # run.device as the run was configured
    iterations: int = 0
    evals: list[dict] = field(default_factory=list)      # iteration, virtual_time_s, test_accuracy
    bits: list[int] = field(default_factory=list)        # per iteration, up + down, all nodes
    bits_up: list[int] = field(default_factory=list)     # per iteration, what the workers sent
    stages: list[str] = field(default_factory=list)
    virtual_time_s: float = 0.0                          # the clock at the end of the run
    virtual_s: list[float] = field(default_factory=list)  # per iteration: virtual seconds it took
    energy_j: list[float] = field(default_factory=list)   # per iteration: the workers' joules
    codec_s: list[float] = field(default_factory=list)   # wall s per iteration in exchange()
    timers: dict = field(default_factory=dict)           # wall s per piece (wall_split.PIECES), whole run
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


# ----------------------------------------------------------------------------- running
def _read_run(result: RunResult, store: str, run_id: int) -> None:
    """What the tables read of a run, from the store it landed in."""
    run = api.open_run(store, run_id)
    config = run.config
    result.method = config["compression"]["method"]
    result.device = str(config["run"].get("device", ""))
    its = run.rows("iterations")
    result.iterations = len(its)
    result.bits = [int(r["bits_up"] or 0) + int(r["bits_down"] or 0) for r in its]
    result.bits_up = [int(r["bits_up"] or 0) for r in its]
    result.stages = [r["stage"] for r in its]
    result.virtual_time_s = float(its[-1]["virtual_time_s"]) if its else 0.0
    ends = [float(r["virtual_time_s"]) for r in its]
    result.virtual_s = [b - a for a, b in zip([0.0] + ends[:-1], ends)]
    result.energy_j = [float(r["energy_j"] or 0.0) for r in its]
    result.evals = [{"iteration": e["iteration"], "virtual_time_s": e["virtual_time_s"],
                     "test_accuracy": e["test_accuracy"]} for e in run.rows("evals")]
    links = run.rows("links")
    result.packets = sum(int(l["packets"] or 0) for l in links)
    result.lost = sum(int(l["lost"] or 0) for l in links)
    up = [l for l in links if l["dst"] == "server"]
    result.packets_up = sum(int(l["packets"] or 0) for l in up)
    result.lost_up = sum(int(l["lost"] or 0) for l in up)


def _method_asked(spec: TableRun) -> str:
    """The method a refused run's overrides name (it has no stored configuration)."""
    return next((o.split("=", 1)[1].strip('"') for o in spec.overrides
                 if o.startswith("compression.method=")), "")


def result_of_outcome(spec: TableRun, outcome: Outcome, store: str) -> RunResult:
    """The RunResult of a point the sweep engine ran (or found completed before) into `store`."""
    before = outcome.status == "skipped"
    status = "completed" if before else outcome.status
    result = RunResult(spec=spec, status=status, method=_method_asked(spec),
                       note="completed before; read from the store" if before else
                       ("" if status == "completed" else outcome.line))
    if outcome.run_id is not None:
        _read_run(result, store, outcome.run_id)
    wall = outcome.result.get("wall")
    if wall:
        result.timers, result.setup_s, result.wall_s = dict(wall["pieces"]), wall["setup_s"], wall["run_s"]
        by_it = wall["compression_by_iteration"]
        result.codec_s = [by_it.get(str(i), 0.0) for i in range(result.iterations)]
    return result


def result_of(row: dict) -> RunResult:
    """A RunResult from its JSON form (`asdict`); the word "n/a" of older run files is "refused"."""
    row = dict(row)
    row.pop("final_accuracy", None)
    row["spec"] = TableRun(**row["spec"])
    if row.get("status") == "n/a":
        row["status"] = "refused"
    return RunResult(**row)


def points_of(specs: list[TableRun]) -> list[Point]:
    return [Point(index=i, name=spec.label, file=str(spec.path),
                  overrides=["run.threads=1", *spec.overrides],
                  params={k: str(v) for k, v in spec.tags.items()}, threads=1, timed=True)
            for i, spec in enumerate(specs, 1)]


def key_of(specs: list[TableRun]) -> str:
    """The identity of a list of runs: their specs and their files' content."""
    files = {str(s.path): hashlib.sha256(s.path.read_bytes()).hexdigest()
             for s in specs if s.path.exists()}
    text = json.dumps([[asdict(s) for s in specs], files], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_many(specs: list[TableRun], *, jobs: int = 1, store: str | None = None,
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
        r = results[o.point.index] = result_of_outcome(specs[o.point.index - 1], o, store)
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
                results[o.point.index] = result_of_outcome(specs[o.point.index - 1], o, store)
                log(f"[{o.point.index}/{len(specs)}] {o.point.name}: completed before (from {store})")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return [results[i] for i in range(1, len(specs) + 1)]


def run_one(spec: TableRun, store: str | None = None) -> RunResult:
    """One spec through `run_many`, in this process (a temporary store unless `store`)."""
    return run_many([spec], store=store, log=lambda _line: None)[0]


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


def run_missing(specs: list[TableRun], path: str | Path, argv, *, description: str,
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
