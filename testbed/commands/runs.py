"""`testbed runs`: list the store's runs."""
from __future__ import annotations

from testbed.commands import add_store_arg, open_store
from testbed.records.summary import (
    ITERATION_UNITS,
    federated_tables,
    final_accuracies,
    megabytes,
    participants,
    percent,
    plural,
)


def register(sub) -> None:
    p = sub.add_parser("runs", help="list the runs in a store")
    add_store_arg(p)
    p.set_defaults(func=main)


def format_table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    cells = [[h for _, h in columns]] + [[_fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(columns))) for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def main(args) -> int:
    with open_store(args.store) as store:
        rows = store.runs()
        final = final_accuracies(store.db)
        federated = federated_tables(store.db)
    if not rows:
        print(f"{args.store}: no runs yet")
        return 0
    for r in rows:
        fed = federated.get(r["id"])
        n = None if r["last_iteration"] is None else r["last_iteration"] + 1
        unit = ITERATION_UNITS.get((fed or {}).get("mode", "sync")) if fed else None
        r["iterations"] = f"{plural(n, unit)}" if unit and n is not None else n
        if fed:  # the population, not the processes that played it
            r["workers"] = participants(r, fed)
        r["final_accuracy"] = _pct(final.get(r["id"]))
        r["best_accuracy"] = _pct(r["best_accuracy"])
        r["total_mb"] = None if r["total_bits"] is None else megabytes(r["total_bits"]).removesuffix(" MB")
    print(format_table(rows, [("id", "id"), ("name", "name"), ("method", "method"),
                              ("topology", "topology"), ("workers", "workers"),
                              ("bandwidth_mbps", "Mbit/s"), ("status", "status"),
                              ("iterations", "iterations"), ("final_accuracy", "final acc %"),
                              ("best_accuracy", "best acc %"), ("total_mb", "MB on the wire"),
                              ("virtual_time_s", "virtual s")]))
    return 0


def _pct(accuracy: float | None) -> str | None:
    return None if accuracy is None else percent(accuracy).removesuffix("%")
