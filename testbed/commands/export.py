"""`testbed export RUN --format csv|json|html|png|tensorboard`: a run's rows for other tools."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from testbed.cli import export_figures
from testbed.commands import add_store_arg, open_store
from testbed.errors import UserError
from testbed.records.summary import public_export, write_csv
from testbed.records.tensorboard_export import write_tensorboard


def register(sub) -> None:
    p = sub.add_parser("export", help="export one run (by name or id)")
    p.add_argument("run", help="run name (newest of that name) or id")
    add_store_arg(p)
    p.add_argument("--format", choices=["json", "csv", "html", "png", "tensorboard"], default="json")
    p.add_argument("--out", help="output file (json/html/png); csv: a folder of one file per table, "
                                 "or a name ending in .csv: that file holds the iterations and the "
                                 "other tables go beside it (NAME.evals.csv, ...); tensorboard: the "
                                 "--logdir (the run gets a folder in it); json defaults to stdout; "
                                 "missing folders are made")
    p.set_defaults(func=main)


def main(args) -> int:
    with open_store(args.store) as store:
        data = public_export(store, args.run)
        name = data["run"]["name"]
        if args.format == "json":
            text = json.dumps(data, indent=1, default=str)
            if args.out:
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
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
