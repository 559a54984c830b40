"""Subcommands of the `testbed` CLI, one module each with `register(subparsers)`.

Commands raise errors rather than print them: testbed/cli.py is the one boundary that turns an
error into one line and an exit code (testbed/errors.py says which kind is which).
"""
from __future__ import annotations

from testbed.store import Store

DEFAULT_STORE = "runs.db"


def add_store_arg(parser) -> None:
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="PATH",
                        help=f"SQLite store file (default: {DEFAULT_STORE} in the working directory)")


def open_store(path: str):
    """An existing store (StoreError naming the path if there is none or it is not one)."""
    return Store(path, create=False)
