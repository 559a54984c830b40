"""Subcommands of the `testbed` CLI, one module each with `register(subparsers)`."""
from __future__ import annotations

import sys

DEFAULT_STORE = "runs.db"


def add_store_arg(parser) -> None:
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="PATH",
                        help=f"SQLite store file (default: {DEFAULT_STORE} in the working directory)")


def fail(message: str, code: int = 1) -> int:
    print(f"testbed: error: {message}", file=sys.stderr)
    return code
