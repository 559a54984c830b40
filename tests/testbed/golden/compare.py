"""How a run made again is compared with its golden fixture, on any CPU.

A run is a trajectory: each iteration's gradients decide which coordinates a method sends,
and those decisions decide the sizes, times and energies that follow. Torch picks its CPU
kernels at run time (AVX-512, AVX2 or the default ones; ATEN_CPU_CAPABILITY forces one), and
they sum float32 products in different orders, so the 7th digit of a loss differs from one CPU
to another. The comparison is exact wherever that rounding cannot reach:

Exact, before the trajectories part (no float reduction over tensors feeds them):
- integers (bits, bytes, packets, losses on the link, retransmissions, counts): message sizes
  follow from which coordinates each method selects and from its wire format;
- virtual times, energies and staleness: the link emulation's arithmetic on those sizes, the
  model's FLOP counts and the seeded channel generator, in Python floats;
- accuracies: a count of correct predictions; a 7th-digit difference moves an argmax only
  where two logits tie that closely;
- strings, configurations, statuses and the order and number of rows.

Within TOLERANCE (relative, per column), always before the parting: REDUCED, the losses,
norms, the fitted scalar and the coder's errors, which are sums over many float32 products.

The parting: a selection whose top candidates tie within rounding goes one way on one CPU and
the other way on another; from that iteration on (the first whose sizes or accuracy differ)
the two runs are different, equally valid trajectories. Rows from there on are compared by
shape (same rows, same names) and the run by its totals within BANDS. A parting is accepted
only where the rerun rounds differently: if every reduced value up to it is bit-identical to
the fixture's, the same arithmetic gave other sizes, which is a change in the code.

TOLERANCE and BANDS come from the spread measured across kernel paths (spread.py;
docs/development.md gives the figures): the largest difference seen, rounded up to a power of
ten, times ten (the LGC figures as one group; the final accuracy as said at BANDS).
"""
from __future__ import annotations

import json
import lzma
import math
from pathlib import Path

# largest relative difference measured before the parting, default/AVX2/AVX-512 kernels and
# the fixture, every fixture (spread.py, 2026-12-05): losses 2.5e-5, drift_norm 6.5e-4, the
# LGC figures 4.7e-7
TOLERANCE = {"train_loss": 1e-3, "test_loss": 1e-3, "drift_norm": 1e-2,
             "lgc_beta": 1e-5, "lgc_scalar_error": 1e-5, "lgc_coder_error": 1e-5}
REDUCED = frozenset(TOLERANCE)
# after the parting, the run's totals, relative; measured: bits 1.7e-4, virtual time 1.6e-3,
# energy 3.0e-4. The final accuracy in absolute points of 1: measured 0.0028 (one image of the
# digits' 360 flipped); the band allows three
BANDS = {"bits_up": 1e-2, "bits_down": 1e-2, "virtual_time_s": 1e-2, "energy_j": 1e-2,
         "test_accuracy": 0.01}
TABLES = ("iterations", "nodes", "evals", "links", "events", "controls")


def close(a: float, b: float, rel: float) -> bool:
    """Equal, or within `rel` of the larger magnitude (NaN equals NaN: a round without a loss)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def differences(a, b, where: str = "", key: str = "", scale: float = 1.0) -> list[str]:
    """Every place where `b` differs from the fixture `a`: REDUCED columns beyond their
    TOLERANCE (times `scale`), all else by value and type."""
    if isinstance(a, float) and isinstance(b, float):
        same = (close(a, b, TOLERANCE[key] * scale) if key in REDUCED
                else a == b or (math.isnan(a) and math.isnan(b)))
        return [] if same else [f"{where}: {a!r}, now {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{where}.{k}", k, scale)]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} rows, now {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b))
                for d in differences(x, y, f"{where}[{i}]", key, scale)]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r}, now {b!r}"]


def _decides(key: str, value) -> bool:
    """A column that a selection decides: an integer (sizes, counts) or an accuracy."""
    return (isinstance(value, int) and not isinstance(value, bool)) or key == "test_accuracy"


def parting(ref: dict, got: dict) -> int | None:
    """The first iteration at which a size, a count or an accuracy differs (None: none does)."""
    first = None
    for table in TABLES:
        for x, y in zip(ref.get(table) or [], got.get(table) or []):
            if any(_decides(k, v) and y.get(k) != v for k, v in x.items()):
                first = x["iteration"] if first is None else min(first, x["iteration"])
    return first


def _totals(doc: dict) -> dict:
    it, evals = doc["iterations"], doc["evals"]
    return {"bits_up": sum(r["bits_up"] for r in it), "bits_down": sum(r["bits_down"] for r in it),
            "virtual_time_s": it[-1]["virtual_time_s"] if it else 0.0,
            "energy_j": doc["run"].get("energy_j") or 0.0,
            "test_accuracy": evals[-1]["test_accuracy"] if evals else 0.0}


def mismatches(ref: dict, got: dict) -> list[str]:
    """What makes `got` not the fixture `ref`'s run, on this CPU (see the module's docstring)."""
    part = parting(ref, got)
    if part is None:
        return differences(ref, got)
    out, rounded = [], False
    for table in TABLES:
        rows, now = ref.get(table) or [], got.get(table) or []
        if len(rows) != len(now):
            out.append(f".{table}: {len(rows)} rows, now {len(now)}")
            continue
        for i, (x, y) in enumerate(zip(rows, now)):
            where = f".{table}[{i}]"
            if x["iteration"] < part:
                out += differences(x, y, where)
            else:   # another trajectory: the same row, named the same
                out += [f"{where}.{k}: {v!r}, now {y.get(k)!r}" for k, v in x.items()
                        if isinstance(v, str | None | bool) and y.get(k) != v]
                out += [f"{where}: columns {sorted(x)}, now {sorted(y)}"] if set(x) != set(y) else []
            if x["iteration"] <= part:
                rounded |= any(k in REDUCED and isinstance(v, float) and y.get(k) != v
                               and not (math.isnan(v) and math.isnan(y.get(k)))
                               for k, v in x.items())
    run_ref = {k: v for k, v in ref["run"].items() if k != "energy_j"}
    out += differences(run_ref, {k: v for k, v in got["run"].items() if k != "energy_j"}, ".run")
    if not rounded:
        first = [d for t in TABLES for i, (x, y) in enumerate(zip(ref.get(t) or [], got.get(t) or []))
                 if x["iteration"] == part for d in differences(x, y, f".{t}[{i}]")]
        return out + [f"the rows part at iteration {part} although every reduced value up to it "
                      f"is bit-identical: the same arithmetic gave other sizes"] + first
    a, b = _totals(ref), _totals(got)
    for key, band in BANDS.items():
        off = abs(a[key] - b[key]) if key == "test_accuracy" else abs(a[key] - b[key]) / max(abs(a[key]), 1e-300)
        if off > band:
            out.append(f"after the rows part at iteration {part}: {key} {a[key]!r}, now {b[key]!r} "
                       f"(beyond {band:g})")
    return out


def relative_spread(a, b, key: str = "", out: dict | None = None) -> dict:
    """The largest relative difference per REDUCED column between two exports of one run."""
    out = {} if out is None else out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in set(a) & set(b):
            relative_spread(a[k], b[k], k, out)
    elif isinstance(a, list) and isinstance(b, list):
        for x, y in zip(a, b):
            relative_spread(x, y, key, out)
    elif key in REDUCED and isinstance(a, float) and isinstance(b, float) and not (
            math.isnan(a) or math.isnan(b)):
        d = abs(a - b) / max(abs(a), abs(b), 1e-300)
        out[key] = max(out.get(key, 0.0), d)
    return out


def as_exported(doc: dict) -> dict:
    """A document as `testbed export --format json` writes it (JSON types)."""
    return json.loads(json.dumps(doc, indent=1, default=str))


# ---------------------------------------------------------------- making a fixture's run again
# options added since the fixtures were recorded, at defaults that keep the old behaviour: the
# stored configuration of a new run names them, the rows must not change
ADDED_AT_DEFAULT = {("network", "csma", "preamble_detection"): False}
# columns added since, NULL in runs of the fixtures' kinds (a Flower run's reply counts): a row
# that holds them NULL is the fixture's row
ADDED_NULL = {"iterations": ("replies_ok", "replies_failed", "replies_lost", "replies_late")}
ROWS = Path(__file__).parent / "rows"
WALL = {"iterations": ("wall_time_s",), "run": ("started_at", "ended_at")}
# a resumed fixture: (iterations the old code ran before it was stopped, the last checkpointed)
RESUMED = {"resume_topk": (6, 3), "resume_fedbuff": (5, 3)}


def fixture(name: str) -> dict:
    return json.loads(lzma.decompress((ROWS / f"{name}.json.xz").read_bytes()))


def without_wall(data: dict) -> dict:
    """An export less its wall-clock fields (the fixtures do not keep them)."""
    data["run"] = {k: v for k, v in data["run"].items() if k not in WALL["run"]}
    data["iterations"] = [{k: v for k, v in r.items() if k not in WALL["iterations"]}
                          for r in data["iterations"]]
    return data


def without_added(config: dict) -> dict:
    """A stored configuration less the ADDED_AT_DEFAULT keys that hold their default."""
    config = json.loads(json.dumps(config))
    for path, default in ADDED_AT_DEFAULT.items():
        table = config
        for key in path[:-1]:
            table = table.get(key) if isinstance(table, dict) else None
        if isinstance(table, dict) and table.get(path[-1], default) == default:
            table.pop(path[-1], None)
    return config


def exported(store, run_id: int) -> dict:
    """`testbed export --format json`'s document, wall clock and the ADDED_NULL columns that
    are NULL dropped as in the fixtures."""
    data = without_wall(as_exported(store.export(run_id)))
    for table, columns in ADDED_NULL.items():
        data[table] = [{k: v for k, v in row.items() if not (k in columns and v is None)}
                       for row in data[table]]
    return data


def rerun(name: str, folder: Path) -> dict:
    """The fixture's run made again in this process from the configuration it stored (as
    `testbed resume` rebuilds a run); `run.device = "auto"` (the quickstart's) on the CPU, where
    the fixture ran, so that a machine with a GPU compares like with like."""
    from testbed.configuration.loading import config_from_stored
    from testbed.experiment import Experiment
    from testbed.records.store import Store
    ref = fixture(name)
    stored = json.loads(json.dumps(ref["run"]["config"]))
    stored["run"]["device"] = "cpu"
    cfg = config_from_stored(stored, source=f"golden {name}")
    with Store(folder / f"{name}.db") as store:
        got = exported(store, Experiment(cfg, store).run())
    got["run"]["config"]["run"]["device"] = ref["run"]["config"]["run"]["device"]
    got["run"]["config"] = without_added(got["run"]["config"])
    return got


def stopped_store(name: str, folder: Path) -> Path:
    """The store and checkpoint the old code left when it stopped `name`, laid out in `folder`."""
    from testbed.run import checkpoint
    db = folder / f"{name}.old.db"
    db.write_bytes(lzma.decompress((ROWS / f"{name}.stopped.db.xz").read_bytes()))
    saved = checkpoint.path_for(db, 1)
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_bytes(lzma.decompress((ROWS / f"{name}.stopped.pt.xz").read_bytes()))
    return db
