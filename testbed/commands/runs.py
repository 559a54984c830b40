"""`testbed runs`: list the store's runs."""
from __future__ import annotations

from testbed.commands import add_store_arg, open_store


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
    if not rows:
        print(f"{args.store}: no runs yet")
        return 0
    for r in rows:
        r["best_accuracy"] = None if r["best_accuracy"] is None else round(100 * r["best_accuracy"], 2)
        r["total_mb"] = None if r["total_bits"] is None else r["total_bits"] / 8e6
        r["iterations"] = None if r["last_iteration"] is None else r["last_iteration"] + 1
    print(format_table(rows, [("id", "id"), ("name", "name"), ("method", "method"),
                              ("topology", "topology"), ("workers", "workers"),
                              ("bandwidth_mbps", "Mbit/s"), ("status", "status"),
                              ("iterations", "iters"), ("best_accuracy", "best acc %"),
                              ("total_mb", "MB on wire"), ("virtual_time_s", "virtual s")]))
    return 0
