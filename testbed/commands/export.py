"""`testbed export RUN --format csv|json|html|png|tensorboard`: a run's rows for other tools."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from testbed.cli import export_figures
from testbed.commands import add_store_arg, open_store
from testbed.errors import UserError
from testbed.tensorboard_export import write_tensorboard


def register(sub) -> None:
    p = sub.add_parser("export", help="export one run (by name or id)")
    p.add_argument("run", help="run name (newest of that name) or id")
    add_store_arg(p)
    p.add_argument("--format", choices=["json", "csv", "html", "png", "tensorboard"], default="json")
    p.add_argument("--out", help="output file (json/html/png) or folder (csv, tensorboard: the "
                                 "--logdir; the run gets a folder in it); json defaults to stdout")
    p.set_defaults(func=main)


def write_csv(data: dict, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for table in ("iterations", "evals", "nodes", "links", "events"):
        rows = data[table]
        path = folder / f"{table}.csv"
        with path.open("w", newline="") as f:
            if rows:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                for r in rows:
                    w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v
                                for k, v in r.items()})
        written.append(path)
    return written


def main(args) -> int:
    with open_store(args.store) as store:
        data = store.export(args.run)
        name = data["run"]["name"]
        if args.format == "json":
            text = json.dumps(data, indent=1, default=str)
            if args.out:
                Path(args.out).write_text(text)
                print(f"wrote {args.out}", file=sys.stderr)
            else:
                print(text)
        elif args.format == "csv":
            folder = Path(args.out or f"export_{name}_{data['run']['id']}")
            for path in write_csv(data, folder):
                print(f"wrote {path}", file=sys.stderr)
        elif args.format == "tensorboard":
            logdir = Path(args.out or "tensorboard")
            try:
                folder = write_tensorboard(data, logdir)
            except RuntimeError as e:  # the optional tensorboard package is not installed
                raise UserError(f"--format tensorboard: {e}") from e
            print(f"wrote {folder} (open with: tensorboard --logdir {logdir})", file=sys.stderr)
        else:
            out = Path(args.out or f"{name}_{data['run']['id']}.{args.format}")
            export_figures(store, data["run"]["id"], out, args.format)
            print(f"wrote {out}", file=sys.stderr)
    return 0
