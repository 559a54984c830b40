"""One run's headline figures, worded once for every view that prints them: the CLI's summary
line and `testbed runs`, the dashboard's runs table and live message, and `testbed export`
(whose CSV layout, `write_csv`, the Python API's `Run.to_csv` shares).

- Bytes on the wire: every bit the run's iterations sent, up and down (the store's
  `runs.total_bits`, the sum of its iteration rows), in megabytes (10^6 bytes), three decimals.
- Accuracy: the *final* test accuracy (the last evaluation) and the *best* (the highest of any
  evaluation), always both and always labelled.
- Iterations in the run's own word: "iteration", or in a federated run "round" (sync) or
  "server step" (FedBuff); its participants: "workers", or the federated population's
  "clients".
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

# What one iteration of the store is in a federated run (testbed/drivers/federated.py), by its mode
ITERATION_UNITS = {"sync": "round", "fedbuff": "server step"}


def federated_mode(config: dict | None) -> str | None:
    """"sync" or "fedbuff" for a federated run's config (its `[federated] mode`), else None."""
    fed = (config or {}).get("federated")
    return fed.get("mode", "sync") if isinstance(fed, dict) else None


def iteration_unit(config: dict | None) -> str:
    """"iteration", or in a federated run "round" (sync) or "server step" (FedBuff)."""
    return ITERATION_UNITS.get(federated_mode(config), "iteration")


def plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def megabytes(bits: float | None) -> str:
    """Bits on the wire as every view prints them: "14.360 MB" (10^6 bytes)."""
    return "n/a" if bits is None else f"{bits / 8e6:.3f} MB"


def percent(accuracy: float | None) -> str:
    return "n/a" if accuracy is None else f"{100 * accuracy:.2f}%"


def participants(run: dict, fed: dict | None = None) -> str:
    """"4 workers", or for a federated run (its config, or its `[federated]` table `fed`) its
    population: "100 clients (10 per round)"."""
    fed = fed if fed is not None else (run.get("config") or {}).get("federated")
    if isinstance(fed, dict):
        clients = fed.get("clients", 100)
        per = (fed.get("concurrency", 20) if fed.get("mode") == "fedbuff"
               else fed.get("clients_per_round", 10))
        each = "in flight" if fed.get("mode") == "fedbuff" else "per round"
        return f"{clients} clients ({per} {each})"
    return "-" if run.get("workers") is None else plural(run["workers"], "worker")


def federated_tables(db) -> dict[int, dict]:
    """{run id: its config's [federated] table} of the federated runs (one query)."""
    rows = db.execute("SELECT id, json_extract(config_json, '$.federated') FROM runs "
                      "WHERE json_extract(config_json, '$.federated') IS NOT NULL").fetchall()
    return {int(r[0]): json.loads(r[1]) for r in rows}


def final_accuracies(db, run_ids=None) -> dict[int, float | None]:
    """{run id: test accuracy of its last evaluation} (one query for all runs)."""
    rows = db.execute(
        "SELECT e.run_id, e.test_accuracy FROM evals e JOIN (SELECT run_id, MAX(iteration) AS it "
        "FROM evals WHERE test_accuracy IS NOT NULL GROUP BY run_id) m "
        "ON e.run_id = m.run_id AND e.iteration = m.it").fetchall()
    out = {int(r[0]): r[1] for r in rows}
    return out if run_ids is None else {i: out.get(i) for i in run_ids}


def run_summary(store, ref) -> dict:
    """The headline figures of one run (by id or name), from its rows in `store`."""
    run = store.run(ref)
    rid = run["id"]
    evals = [e["test_accuracy"] for e in store.evals(rid) if e["test_accuracy"] is not None]
    row = store.db.execute("SELECT COUNT(*), COALESCE(SUM(bits_up + bits_down), 0), "
                           "MAX(virtual_time_s) FROM iterations WHERE run_id=?", (rid,)).fetchone()
    return {"id": rid, "name": run["name"], "status": run["status"],
            "iterations": int(row[0]), "unit": iteration_unit(run.get("config")),
            "participants": participants(run),
            "final_accuracy": evals[-1] if evals else None,
            "best_accuracy": max(evals) if evals else None,
            "bits": int(row[1]), "megabytes": megabytes(int(row[1])),
            "virtual_time_s": row[2] or 0.0}


def public_export(store, ref) -> dict:
    """A run and all its rows with its headline figures: what `testbed export --format json`
    prints and what the Python API's `Run.export()` returns (one shape for both)."""
    data = store.export(ref)
    data["summary"] = run_summary(store, data["run"]["id"])
    return data


def summary_text(s: dict) -> str:
    """"10 rounds, test accuracy final 90.00% (best 91.00%), virtual time 1.23 s, 0.123 MB on
    the wire" for a `run_summary`."""
    return (f"{plural(s['iterations'], s['unit'])}, test accuracy final {percent(s['final_accuracy'])} "
            f"(best {percent(s['best_accuracy'])}), virtual time {s['virtual_time_s']:.2f} s, "
            f"{s['megabytes']} on the wire")


CSV_TABLES = ("iterations", "evals", "nodes", "links", "events")


def csv_paths(out: Path) -> dict[str, Path]:
    """Where each table goes: `out` a folder -> out/TABLE.csv; `out` named *.csv -> that file
    for the iterations and STEM.TABLE.csv beside it for the others."""
    if out.suffix.lower() != ".csv":
        return {t: out / f"{t}.csv" for t in CSV_TABLES}
    return {t: out if t == "iterations" else out.with_name(f"{out.stem}.{t}.csv") for t in CSV_TABLES}


def write_csv(data: dict, out: Path) -> list[Path]:
    written = []
    for table, path in csv_paths(out).items():
        rows = data[table]
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            if rows:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                for r in rows:
                    w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v
                                for k, v in r.items()})
        written.append(path)
    return written
