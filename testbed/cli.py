"""`testbed` command line: one subcommand per module under testbed/commands/."""
from __future__ import annotations

import argparse
import importlib
import sys

# Each module exposes `register(subparsers)`; missing optional ones are skipped so one
# unfinished room never breaks the whole CLI.
COMMANDS = ["run", "runs", "export", "sweep", "demo", "probe", "dashboard", "control"]


# The CLI is the one place that imports dashboards/ (house rule: nothing else depends on the
# dashboard); subcommands reach it through these two functions, imported only when used.
def serve_dashboard(store: str, host: str, port: int) -> None:
    from dashboards.app import serve

    serve(store, host=host, port=port)


def export_figures(store, run_ref, path, fmt: str):
    """Write a run's dashboard figures as `fmt` ("html" or "png") to `path`."""
    from dashboards import export

    writer = {"html": export.export_html, "png": export.export_png}[fmt]
    return writer(store, run_ref, path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="testbed",
        description="Emulated edge training: workers exchange compressed gradients over an "
                    "emulated wireless link layer; results go to a SQLite store.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"testbed.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"testbed.commands.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
