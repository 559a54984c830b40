"""Print a table, and write it as CSV (every column, raw numbers) and Markdown (formatted)."""
from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.results.harness import DOCS_RESULTS


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    fmt: str | Callable[[Any], str] = "{}"

    def show(self, value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if callable(self.fmt):
            return self.fmt(value)
        return self.fmt.format(value) if not isinstance(value, str) else value


def format_text(rows: list[dict], columns: list[Column]) -> str:
    cells = [[c.header for c in columns]] + [[c.show(r.get(c.key)) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_markdown(rows: list[dict], columns: list[Column]) -> str:
    head = "| " + " | ".join(c.header for c in columns) + " |"
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"
    body = ["| " + " | ".join(c.show(r.get(c.key)).replace("|", "/") for c in columns) + " |"
            for r in rows]
    return "\n".join([head, rule, *body])


def write_csv(path: Path, rows: list[dict]) -> Path:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: _raw(r.get(k)) for k in keys})
    return path


def _raw(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return repr(round(v, 6))
    return v


def emit(rows: list[dict], columns: list[Column], *, title: str, notes: list[str],
         out: Path | None, stem: str) -> list[Path]:
    """Print the table; when `out` is a folder, write `stem`.csv and `stem`.md there."""
    print(f"\n{title}")
    print(format_text(rows, columns))
    for n in notes:
        print(f"  {n}")
    if out is None:
        return []
    out = Path(out)
    csv_path = write_csv(out / f"{stem}.csv", rows)
    md = out / f"{stem}.md"
    md.write_text(f"{title}\n\n{format_markdown(rows, columns)}\n\n"
                  + "".join(f"- {n}\n" for n in notes))
    print(f"wrote {csv_path} and {md}")
    return [csv_path, md]


def common_args(parser: argparse.ArgumentParser, *, methods: list[str] | None = None) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="reduced budget (what `make bench` runs)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="iteration budget (overrides the default of --quick or the full table)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1,2")
    if methods:
        parser.add_argument("--methods", default=None,
                            help=f"comma-separated subset of: {', '.join(methods)}")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (one process each)")
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="run each run as a Ray task: alone, on a Ray started here with --jobs "
                             "CPUs; 'auto' or an address: on that cluster")
    parser.add_argument("--out", default=None,
                        help=f"folder for CSV/Markdown (default {DOCS_RESULTS.relative_to(DOCS_RESULTS.parents[1])}; "
                             "--quick writes nothing unless given)")
    parser.add_argument("--store", default=None,
                        help="SQLite store to keep every run in (default: a temporary one per run)")


def out_dir(args) -> Path | None:
    if args.out:
        return Path(args.out)
    return None if args.quick else DOCS_RESULTS


def pick(names: str | None, allowed: list[str], what: str) -> list[str]:
    if not names:
        return list(allowed)
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    bad = [n for n in chosen if n not in allowed]
    if bad:
        raise SystemExit(f"--{what} {bad[0]!r}: must be one of {', '.join(allowed)}")
    return chosen


def seeds_of(text: str | None, default: list[int]) -> list[int]:
    if not text:
        return default
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--seeds {text!r}: must be comma-separated integers, e.g. 0,1,2") from None
